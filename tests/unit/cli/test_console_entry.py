"""The console script without the ``cli`` extra: one line saying what to install."""

from __future__ import annotations

import pytest

from helikon import _console


def test_a_missing_dependency_is_named_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_console, "NEEDS", {**_console.NEEDS, "helikon_no_such_module": "no-such-dist"})

    assert _console.main() == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "helikon: the command line needs no-such-dist: pip install 'paigasus-helikon[cli]'"
    )


def test_with_the_extra_it_runs_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["helikon", "--help"])

    assert _console.main() == 0
    assert "Usage: helikon" in capsys.readouterr().out
