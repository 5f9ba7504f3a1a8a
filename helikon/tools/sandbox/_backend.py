"""What an execution backend is, and what it promises.

:class:`ExecutionBackend` is the protocol the ``Bash`` tool runs commands
through; :class:`SandboxGuarantees` is what a backend says it enforces, one
:class:`Isolation` tier per axis (filesystem, network, syscalls), plus a
label the tool shows the model. :class:`ResourceLimits` are the
``setrlimit`` caps, a third axis independent of containment and approval.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Protocol, final, runtime_checkable

import attrs


class Isolation(enum.Enum):
    """How one axis of a command's access is enforced."""

    #: Not at all: the command has the parent process's access on this axis.
    NONE = "none"
    #: By an OS kernel mechanism (Landlock, seccomp-bpf); a violation is an OS error.
    OS_KERNEL = "os_kernel"
    #: By a virtual machine boundary (not shipped here; for microVM backends).
    VIRTUALIZED = "virtualized"
    #: Egress goes through the :class:`~helikon.tools.EgressProxy`'s domain policy.
    PROXIED = "proxied"


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(names)


@final
@attrs.frozen
class SandboxGuarantees:
    """The tier a backend enforces on each axis.

    >>> HOST_GUARANTEES.label
    'host (no containment)'
    >>> HOST_GUARANTEES.describe()
    'host (no containment): filesystem none, network none, syscalls none'
    """

    filesystem: Isolation
    network: Isolation
    syscalls: Isolation
    #: A short human-readable name, shown to the model in the tool description.
    label: str
    #: What the backend found to hold on this system, one name each (for
    #: :class:`~helikon.tools.OsSandboxBackend`, e.g. ``"network-namespace"``,
    #: ``"unprivileged-uid"``, ``"process-tree-kill"``; see ``docs/tools.md``).
    confinement: tuple[str, ...] = attrs.field(default=(), converter=_names, kw_only=True)

    def describe(self) -> str:
        """One line: the label and each axis's tier."""
        return (
            f"{self.label}: filesystem {self.filesystem.value}, network {self.network.value}, "
            f"syscalls {self.syscalls.value}"
        )


#: What :class:`~helikon.tools.HostBackend` guarantees: nothing.
HOST_GUARANTEES = SandboxGuarantees(Isolation.NONE, Isolation.NONE, Isolation.NONE, "host (no containment)")

_GIB = 1 << 30


@final
@attrs.frozen(kw_only=True)
class ResourceLimits:
    """``setrlimit`` caps applied to a command before it runs (``None``: leave as is).

    A process over ``cpu_seconds`` gets ``SIGXCPU``; one writing past
    ``file_size_bytes`` gets ``SIGXFSZ``; allocations past
    ``address_space_bytes`` fail (some runtimes, e.g. the JVM or V8, reserve
    much more virtual memory than they use: raise it for them). ``processes``
    is ``RLIMIT_NPROC``, which Linux counts per *user* across the machine (and
    does not apply to root): set it only when commands run as a dedicated user.
    """

    cpu_seconds: int | None = 300
    file_size_bytes: int | None = 1 * _GIB
    address_space_bytes: int | None = 8 * _GIB
    processes: int | None = None

    def as_plan(self) -> dict[str, int | None]:
        """The launcher's form (core dumps always off).

        >>> ResourceLimits(cpu_seconds=5, address_space_bytes=None).as_plan()["cpu"]
        5
        """
        return {
            "cpu": self.cpu_seconds,
            "fsize": self.file_size_bytes,
            "as": self.address_space_bytes,
            "nproc": self.processes,
            "core": 0,
        }


@final
@attrs.frozen
class ExecResult:
    """How a command ended and what it printed (each stream capped)."""

    #: The exit status; ``None`` when it was killed by a signal or timed out.
    exit_code: int | None
    stdout: str
    stderr: str
    #: The signal that ended it (``SIGKILL`` after a timeout), if any.
    signal: int | None = None
    timed_out: bool = False
    #: Bytes of output left out because of the output cap (both streams).
    truncated_bytes: int = 0

    @property
    def ok(self) -> bool:
        """Exit status 0."""
        return self.exit_code == 0


@runtime_checkable
class ExecutionBackend(Protocol):
    """Where and how the ``Bash`` tool runs a command line.

    ``run`` must kill the command and everything it started when it times
    out or when the awaiting task is cancelled, and must never run a command
    with weaker containment than :meth:`guarantees` states.
    """

    @property
    def timeout(self) -> float:
        """The default (and largest) timeout, in seconds."""
        ...

    def guarantees(self) -> SandboxGuarantees: ...

    async def run(self, command: str, *, timeout: float | None = None) -> ExecResult:
        """Run ``command`` with ``bash -c`` in the sandbox root.

        Raises:
            ToolError: the command could not be started in the promised sandbox.
        """
        ...


__all__ = [
    "HOST_GUARANTEES",
    "ExecResult",
    "ExecutionBackend",
    "Isolation",
    "ResourceLimits",
    "SandboxGuarantees",
]
