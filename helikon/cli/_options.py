"""Options and helpers the CLI's commands share."""

from __future__ import annotations

from pathlib import Path

import click

from helikon.cli._sidecar import Sidecar

AGENTS_OPTION = click.option(
    "--agents",
    "agents_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("agents.toml"),
    show_default=True,
    help="The agents.toml sidecar.",
)


class Failed(click.ClickException):
    """The command ran and its answer is no: exit code 1, the message on stderr
    (an empty message when the command already said why)."""

    exit_code = 1


def agent_name_of(sidecar: Sidecar, name: str | None) -> str:
    """``name`` if the sidecar has it (else an error listing the agents); the default agent for None."""
    if name is None:
        return sidecar.default_agent
    sidecar.agent(name)
    return name


__all__ = ["AGENTS_OPTION", "Failed", "agent_name_of"]
