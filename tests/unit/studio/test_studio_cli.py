"""``helikon studio``: its options, and what ``--app module:attr`` may name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests_support_studio import agent_with

from helikon.cli import app
from helikon.server import AgentServer
from helikon.studio import agents_of
from helikon.testing import say


def test_the_command_is_listed_with_its_options() -> None:
    listing = CliRunner().invoke(app, ["--help"])
    assert "studio" in listing.output
    result = CliRunner().invoke(app, ["studio", "--help"])
    assert result.exit_code == 0
    for option in ("--agents", "--app", "--traces", "--port"):
        assert option in result.output
    assert "--host" not in result.output  # it listens on 127.0.0.1 only


def test_agents_and_app_together_are_refused() -> None:
    result = CliRunner().invoke(app, ["studio", "--agents", "agents.toml", "--app", "x:y"])
    assert result.exit_code == 2 and "not both" in result.output


def test_app_names_a_server_an_agent_or_a_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    desk = agent_with("desk", say("hi"))
    server = AgentServer(agents=[desk], context=None)
    assert agents_of(server) == ((desk,), None)
    assert agents_of(desk) == ((desk,), None)
    assert agents_of([desk]) == ((desk,), None)
    with pytest.raises(TypeError):
        agents_of(42)
    (tmp_path / "studio_app_module_i33.py").write_text("value = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(app, ["studio", "--app", "studio_app_module_i33:value"])
    assert result.exit_code == 2 and "not an agent server" in result.output
    result = CliRunner().invoke(app, ["studio", "--app", "studio_app_module_i33:missing"])
    assert result.exit_code == 2 and "cannot load" in result.output
    sys.modules.pop("studio_app_module_i33", None)
