"""Ready-made tools confined to a sandbox: Read, Write, Edit, Glob, Grep and Bash.

A :class:`Sandbox` is a directory opened as a capability; the file tools
resolve every path beneath it and refuse what leaves it. ``Bash`` runs
through an :class:`ExecutionBackend`: :class:`HostBackend` (no containment,
says so) or :class:`OsSandboxBackend` (Landlock + seccomp, fail-closed),
optionally with network forced through an :class:`EgressProxy`.

>>> import tempfile
>>> from helikon.tools import ReadTool, Sandbox
>>> ReadTool(Sandbox.open(tempfile.mkdtemp())).name
'Read'

Everything here is also importable from :mod:`helikon.tools` (loaded lazily).
"""

from __future__ import annotations

from helikon.tools.sandbox._backend import (
    ExecResult,
    ExecutionBackend,
    Isolation,
    ResourceLimits,
    SandboxGuarantees,
)
from helikon.tools.sandbox._bash import BashTool
from helikon.tools.sandbox._egress import EgressDecision, EgressPolicy, EgressProxy
from helikon.tools.sandbox._files import EditTool, ReadTool, WriteTool
from helikon.tools.sandbox._host import DEFAULT_ENV_ALLOWLIST, HostBackend
from helikon.tools.sandbox._os import (
    DEFAULT_READ_PATHS,
    OsSandboxBackend,
    OsSandboxError,
    kernel_support,
)
from helikon.tools.sandbox._sandbox import Sandbox
from helikon.tools.sandbox._search import GlobTool, GrepTool

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "DEFAULT_READ_PATHS",
    "BashTool",
    "EditTool",
    "EgressDecision",
    "EgressPolicy",
    "EgressProxy",
    "ExecResult",
    "ExecutionBackend",
    "GlobTool",
    "GrepTool",
    "HostBackend",
    "Isolation",
    "OsSandboxBackend",
    "OsSandboxError",
    "ReadTool",
    "ResourceLimits",
    "Sandbox",
    "SandboxGuarantees",
    "WriteTool",
    "kernel_support",
]
