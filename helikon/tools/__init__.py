"""Tools: turn Python functions into tools the model can call.

:func:`tool` decorates a function into a :class:`FunctionTool`; :func:`tools`
collects tools for an agent. :func:`type_schema`, :func:`convert` and
:func:`to_json` are the schema generator and the JSON converters the
decorator uses, public for structured output and hand-written tools.
"""

from __future__ import annotations

from helikon.tools._convert import convert, to_json
from helikon.tools._decorator import FunctionTool, tool, tools
from helikon.tools._schema import type_schema

__all__ = ["FunctionTool", "convert", "to_json", "tool", "tools", "type_schema"]
