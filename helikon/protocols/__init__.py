"""The protocols user code implements: :class:`Model`, :class:`Tool`,
:class:`ToolSource`, :class:`Session`.

They are structural (``typing.Protocol``): any object with the right methods
fits, no base class needed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

from helikon._json import JsonObject, JsonValue
from helikon.cancel import CancellationToken
from helikon.context import ToolContext
from helikon.model import ModelCapabilities, ModelEvent, ModelRequest, ToolEffect
from helikon.sessions._protocol import Session


@runtime_checkable
class Model(Protocol):
    """An LLM behind one interface.

    ``invoke`` returns an async iterator of :data:`~helikon.model.ModelEvent`
    and raises :class:`~helikon.errors.ModelError` (before or during the
    stream) on failure. It should stop promptly when ``cancel`` fires.
    """

    @property
    def capabilities(self) -> ModelCapabilities: ...

    @property
    def provider(self) -> str:
        """GenAI ``gen_ai.provider.name``, e.g. ``"openai"``."""
        ...

    @property
    def model_id(self) -> str:
        """GenAI ``gen_ai.request.model``, e.g. ``"gpt-4o"``."""
        ...

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]: ...


@runtime_checkable
class Tool(Protocol):
    """A callable the model can invoke.

    ``invoke`` returns the tool's output (any JSON-compatible value; a string
    is passed to the model as is) and raises :class:`~helikon.errors.ToolError`
    on failure. Arguments have already been validated against ``parameters``.
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> JsonObject: ...

    @property
    def output_schema(self) -> JsonObject | None: ...

    @property
    def effect(self) -> ToolEffect: ...

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue: ...


@runtime_checkable
class ToolSource(Protocol):
    """Something that supplies tools when an agent is resolved: an MCP server
    (:class:`helikon.mcp.McpServerHandle`), a plugin registry, ...

    ``LlmAgent(..., tool_sources=[...])`` keeps the sources; ``await
    agent.resolved()`` (or the start of ``agent.run``) calls
    ``resolve_tools()`` on each, in order, and merges the tools with the
    agent's own. The tools then go through the same per-call pipeline (hooks,
    permissions, redaction) as local ones. A name used twice is a
    :class:`~helikon.errors.ConfigError`.
    """

    async def resolve_tools(self) -> Sequence[Tool]: ...


__all__ = ["Model", "Session", "Tool", "ToolSource"]
