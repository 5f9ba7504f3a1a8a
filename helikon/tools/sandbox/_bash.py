"""The ``Bash`` tool: a command line run through an :class:`ExecutionBackend`.

Rules:

- ``deny_commands`` and ``allow_commands`` read the command line with the
  governance Bash matcher (:mod:`helikon.governance`: sub-commands split on
  operators, wrappers such as ``sudo``/``env``/``timeout`` stripped,
  ``bash -c`` followed). A denied program anywhere in the line refuses the
  whole line (lenient, basename and case-insensitive matching: a deny errs
  safe). With an allow list, every sub-command's program must be on it, and
  a line the matcher cannot fully see (``"$(...)"`` in double quotes, deep
  ``bash -c``) is refused: allow lists fail closed.
- These lists are a convenience, not containment: ``python -c`` or ``make``
  can run anything. Containment is the backend's, and the tool description
  tells the model which tier it runs under.
- A refusal is ``denied: ...``; a non-zero exit, a timeout or a kill is a
  normal result the model can read and react to. Cancelling the run kills
  the command and everything it started.
"""

from __future__ import annotations

import signal as signals
from collections.abc import Iterable
from typing import Any, final

import attrs

from helikon._json import JsonObject, JsonValue
from helikon.context import ToolContext
from helikon.errors import ToolError
from helikon.governance import Verdict, check_runs, resolve, runs_only
from helikon.model import ToolEffect
from helikon.tools.sandbox._backend import ExecResult, ExecutionBackend, Isolation


def _optional_names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


_TIERS = {
    Isolation.NONE: "not contained (same access as the agent's own process)",
    Isolation.OS_KERNEL: "confined by the OS kernel",
    Isolation.VIRTUALIZED: "confined by a virtual machine",
    Isolation.PROXIED: "only through an egress proxy with a domain allow-list",
}


def render(result: ExecResult) -> str:
    """The result as the model reads it: output, then a bracketed status line.

    >>> render(ExecResult(exit_code=1, stdout="", stderr="boom\\n"))
    '[stderr]\\nboom\\n[exit code 1]'
    """
    parts = []
    if result.stdout:
        parts.append(result.stdout if result.stdout.endswith("\n") else result.stdout + "\n")
    if result.stderr:
        parts.append("[stderr]\n" + (result.stderr if result.stderr.endswith("\n") else result.stderr + "\n"))
    if result.truncated_bytes:
        parts.append(f"[output cut: {result.truncated_bytes} more bytes not shown]\n")
    if result.timed_out:
        parts.append("[timed out: the command and everything it started were killed]")
    elif result.signal is not None:
        parts.append(f"[killed by {_signal_name(result.signal)}]")
    else:
        parts.append(f"[exit code {result.exit_code}]")
    return "".join(parts)


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


@final
@attrs.frozen
class BashTool:
    """``Bash`` (SIDE_EFFECT): run a command line with the given backend.

    >>> import tempfile
    >>> from helikon.tools import HostBackend, Sandbox
    >>> bash = BashTool(HostBackend(Sandbox.open(tempfile.mkdtemp())), deny_commands=["rm"])
    >>> bash.name, bash.effect.value
    ('Bash', 'side_effect')
    >>> "host (no containment)" in bash.description
    True

    Args:
        backend: where commands run (:class:`~helikon.tools.HostBackend`,
            :class:`~helikon.tools.OsSandboxBackend`, or your own).
        allow_commands: when given, the only programs a line may run.
        deny_commands: programs a line may not run.
    """

    backend: ExecutionBackend
    allow_commands: tuple[str, ...] | None = attrs.field(
        default=None, converter=_optional_names, kw_only=True
    )
    deny_commands: tuple[str, ...] = attrs.field(default=(), converter=_names, kw_only=True)

    @property
    def name(self) -> str:
        return "Bash"

    @property
    def effect(self) -> ToolEffect:
        return ToolEffect.SIDE_EFFECT

    @property
    def output_schema(self) -> JsonObject | None:
        return {"type": "string"}

    @property
    def description(self) -> str:
        g = self.backend.guarantees()
        text = (
            "Run a shell command line (bash -c) with the working directory at the sandbox root. "
            f"Sandbox: {g.label}. Filesystem: {_TIERS[g.filesystem]}; network: {_TIERS[g.network]}; "
            f"system calls: {_TIERS[g.syscalls]}. "
            f"Commands are killed after {self.backend.timeout:g} s (pass a shorter timeout in seconds); "
            "output is capped. Returns stdout, stderr and the exit code."
        )
        if g.filesystem is not Isolation.NONE:
            text += " Files outside the sandbox root cannot be read or written."
        if g.network is Isolation.OS_KERNEL:
            text += " There is no network access."
        if self.allow_commands is not None:
            text += f" Only these programs may run: {', '.join(self.allow_commands)}."
        if self.deny_commands:
            text += f" These programs may not run: {', '.join(self.deny_commands)}."
        return text

    @property
    def parameters(self) -> JsonObject:
        return {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line to run."},
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": self.backend.timeout,
                    "description": "Seconds before the command is killed.",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        }

    def check(self, command: str) -> None:
        """Refuse ``command`` if the allow/deny lists say so.

        Raises:
            ToolError: ``denied: ...`` naming the program that is not allowed.
        """
        for program in self.deny_commands:
            verdict = check_runs(command, (program,))
            if verdict is Verdict.YES:
                raise ToolError.denied(f"the command runs {program!r}, which is not allowed here")
            if verdict is Verdict.UNKNOWN:
                reasons = "; ".join(resolve(command).reasons)
                raise ToolError.denied(
                    f"the command may run {program!r}, which is not allowed here, and part of it "
                    f"cannot be checked ({reasons})"
                )
        if self.allow_commands is not None and not runs_only(command, self.allow_commands):
            resolution = resolve(command)
            others = sorted({c.program for c in resolution.commands} - set(self.allow_commands))
            if others:
                raise ToolError.denied(
                    f"the command runs {', '.join(map(repr, others))}; only "
                    f"{', '.join(self.allow_commands)} may run here"
                )
            raise ToolError.denied(
                "the command has parts that cannot be checked against the allowed programs "
                "(an assignment, a wrapper such as sudo or env, or a part the matcher cannot read)"
            )

    async def invoke(self, ctx: ToolContext[Any] | None, args: JsonObject) -> JsonValue:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError.invalid_args("'command' must be a non-empty string")
        if "\0" in command:
            raise ToolError.invalid_args("'command' contains a NUL byte")
        timeout = args.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ToolError.invalid_args("'timeout' must be a positive number of seconds")
        self.check(command)
        wait = None if timeout is None else float(timeout)
        if ctx is None:
            return render(await self.backend.run(command, timeout=wait))
        with ctx.cancel.scope() as scope:
            result = await self.backend.run(command, timeout=wait)
        if scope.cancelled_caught:
            raise ToolError("cancelled: the command and everything it started were killed")
        return render(result)


__all__ = ["BashTool", "render"]
