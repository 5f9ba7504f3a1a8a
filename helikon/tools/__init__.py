"""Tools: turn Python functions into tools the model can call.

:func:`tool` decorates a function into a :class:`FunctionTool`; :func:`tools`
collects tools for an agent. :func:`type_schema`, :func:`convert` and
:func:`to_json` are the schema generator and the JSON converters the
decorator uses, public for structured output and hand-written tools.

The ready-made sandboxed tools (``Sandbox``, ``ReadTool``, ``WriteTool``,
``EditTool``, ``GlobTool``, ``GrepTool``, ``BashTool``, the execution
backends and the egress proxy) live in :mod:`helikon.tools.sandbox`. The
network tools (the ``web`` extra: ``pip install 'paigasus-helikon[web]'``)
are :class:`WebFetchTool` and :class:`WebSearchTool` with its
:class:`SearchBackend` protocol, :class:`SearchResult` and the
:class:`BraveBackend` and :class:`TavilyBackend` backends. Both families are
importable from here and loaded on first use (PEP 562), so ``import
helikon.tools`` imports neither httpx nor the sandbox.
"""

from __future__ import annotations

import importlib
import typing

from helikon.effects import Reconciled
from helikon.tools._convert import convert, to_json
from helikon.tools._decorator import FunctionTool, tool, tools
from helikon.tools._schema import type_schema

if typing.TYPE_CHECKING:
    from helikon.tools._web_backends import BraveBackend, TavilyBackend
    from helikon.tools._web_fetch import WebFetchTool
    from helikon.tools._web_search import SearchBackend, SearchResult, WebSearchTool
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

_SANDBOX = (
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

#: Lazily imported names and the modules that define them.
_LAZY: typing.Final = {
    "BraveBackend": "helikon.tools._web_backends",
    "SearchBackend": "helikon.tools._web_search",
    "SearchResult": "helikon.tools._web_search",
    "TavilyBackend": "helikon.tools._web_backends",
    "WebFetchTool": "helikon.tools._web_fetch",
    "WebSearchTool": "helikon.tools._web_search",
    **{name: "helikon.tools.sandbox" for name in _SANDBOX},
}


def __getattr__(name: str) -> typing.Any:
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
    "BraveBackend",
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
    "Reconciled",
    "ResourceLimits",
    "Sandbox",
    "SandboxGuarantees",
    "SearchBackend",
    "SearchResult",
    "TavilyBackend",
    "WebFetchTool",
    "WebSearchTool",
    "WriteTool",
    "convert",
    "to_json",
    "tool",
    "tools",
    "type_schema",
]
