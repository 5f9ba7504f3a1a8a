"""Tools: turn Python functions into tools the model can call, or use ready-made ones.

:func:`tool` decorates a function into a :class:`FunctionTool`; :func:`tools`
collects tools for an agent. :func:`type_schema`, :func:`convert` and
:func:`to_json` are the schema generator and the JSON converters the
decorator uses, public for structured output and hand-written tools.

The ready-made sandboxed tools (``Sandbox``, ``ReadTool``, ``WriteTool``,
``EditTool``, ``GlobTool``, ``GrepTool``, ``BashTool``, the execution
backends and the egress proxy) live in :mod:`helikon.tools.sandbox` and are
importable from here too, loaded on first use (PEP 562).
"""

from __future__ import annotations

import importlib
import typing

from helikon.tools._convert import convert, to_json
from helikon.tools._decorator import FunctionTool, tool, tools
from helikon.tools._schema import type_schema

if typing.TYPE_CHECKING:
    from helikon.tools.sandbox import (
        BashTool,
        EditTool,
        EgressPolicy,
        EgressProxy,
        ExecResult,
        ExecutionBackend,
        GlobTool,
        GrepTool,
        HostBackend,
        Isolation,
        OsSandboxBackend,
        OsSandboxError,
        ReadTool,
        ResourceLimits,
        Sandbox,
        SandboxGuarantees,
        WriteTool,
    )

#: The lazily loaded names and the module each comes from.
_LAZY: typing.Final = {
    name: "helikon.tools.sandbox"
    for name in (
        "BashTool",
        "EditTool",
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
    )
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'helikon.tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "BashTool",
    "EditTool",
    "EgressPolicy",
    "EgressProxy",
    "ExecResult",
    "ExecutionBackend",
    "FunctionTool",
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
    "convert",
    "to_json",
    "tool",
    "tools",
    "type_schema",
]
