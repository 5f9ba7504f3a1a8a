""":class:`HostBackend`: run commands on the host, pinned to the sandbox root.

It is *not* a security boundary, and says so (:data:`HOST_GUARANTEES`):
the working directory starts at the root, the environment is scrubbed to an
allowlist, ``setrlimit`` caps and a timeout bound the resources, and the
whole process group is killed at the end; but the command can read and write
whatever this process can, and reach the network. Gate it with approval
(a ``PermissionPolicy`` or ``DenyRule.tool("Bash")``), or use
:class:`~helikon.tools.OsSandboxBackend`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Final, final

import attrs

from helikon.errors import ConfigError
from helikon.tools.sandbox._backend import HOST_GUARANTEES, ExecResult, ResourceLimits, SandboxGuarantees
from helikon.tools.sandbox._process import execute, scrub_env
from helikon.tools.sandbox._sandbox import Sandbox

#: The variables a command sees by default (when this process has them).
DEFAULT_ENV_ALLOWLIST: Final = (
    "HOME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "USER",
)


def default_shell() -> tuple[str, ...]:
    """``/bin/bash -c`` where there is one, else ``/bin/sh -c``."""
    return ("/bin/bash", "-c") if os.path.exists("/bin/bash") else ("/bin/sh", "-c")


def _frozen_env(value: Mapping[str, str] | tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    pairs = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), str(v)) for k, v in pairs))


def check_common(timeout: float, output_limit: int) -> None:
    """Reject settings no backend can honour."""
    if not timeout > 0:
        raise ConfigError(f"timeout must be positive, got {timeout!r}")
    if output_limit < 1:
        raise ConfigError(f"output_limit must be at least 1 byte, got {output_limit!r}")


def strings(values: Iterable[str]) -> tuple[str, ...]:
    """A tuple of the given strings (a typed attrs converter)."""
    return tuple(values)


@attrs.frozen
class CommandSettings:
    """The settings the host and the OS sandbox backends share (their
    fields, in this order, then each backend's own); checked by
    :func:`check_common`."""

    sandbox: Sandbox
    timeout: float = attrs.field(default=120.0, kw_only=True)
    env_allowlist: tuple[str, ...] = attrs.field(
        default=DEFAULT_ENV_ALLOWLIST, converter=strings, kw_only=True
    )
    env: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_frozen_env, kw_only=True)
    output_limit: int = attrs.field(default=64 * 1024, kw_only=True)
    limits: ResourceLimits = attrs.field(factory=ResourceLimits, kw_only=True)
    shell: tuple[str, ...] = attrs.field(factory=default_shell, converter=strings, kw_only=True)

    def __attrs_post_init__(self) -> None:
        check_common(self.timeout, self.output_limit)


@final
@attrs.frozen
class HostBackend(CommandSettings):
    """Run a command with ``bash -c`` on the host, in the sandbox root.

    >>> import tempfile
    >>> backend = HostBackend(Sandbox.open(tempfile.mkdtemp()), timeout=10)
    >>> backend.guarantees().label
    'host (no containment)'

    Args:
        sandbox: the root the command starts in.
        timeout: default and largest timeout, seconds; the tool's ``timeout``
            argument may only shorten it.
        env_allowlist: variables passed through from this process.
        env: variables set for every command (after the allowlist).
        output_limit: bytes kept from each of stdout and stderr.
        limits: the ``setrlimit`` caps.
        shell: the argv prefix the command line is appended to.
    """


    def guarantees(self) -> SandboxGuarantees:
        """None on every axis: the command has this process's access."""
        return HOST_GUARANTEES

    async def run(self, command: str, *, timeout: float | None = None) -> ExecResult:
        """Run ``command``; kill it and its whole process group at the timeout or on cancellation."""
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        return await execute(
            [*self.shell, command],
            root_fd=self.sandbox.fileno(),
            cwd=self.sandbox.root,
            env=scrub_env(self.env_allowlist, dict(self.env)),
            plan={"limits": self.limits.as_plan(), "confine": None},
            timeout=limit,
            output_limit=self.output_limit,
        )


__all__ = ["DEFAULT_ENV_ALLOWLIST", "HostBackend"]
