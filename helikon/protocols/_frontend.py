"""Tools a client declares and runs itself (AG-UI's front-end tools).

A front-end tool is a question to the client: the permission policy the
run gets asks about every call of one (``AskUser``), so the call waits
through the approval machinery (:mod:`helikon.protocols._parked`) until
the client answers with the tool's result; the tool then returns that
result, and the run records it as the tool's output like any other.
"""

from __future__ import annotations

from typing import Any, final

from helikon._json import JsonObject, JsonValue
from helikon.context import ToolContext
from helikon.errors import ToolError
from helikon.governance import Allow, AskUser
from helikon.model import ToolEffect
from helikon.protocols._calls import call

#: The prompt of a front-end tool's question (how a reader tells it apart).
FRONTEND_PROMPT = "run this front-end tool in the client"


@final
class FrontendTool:
    """A tool the client runs: its result comes from :attr:`results`."""

    def __init__(self, name: str, description: str, parameters: JsonObject, results: dict[str, str]) -> None:
        self._name = name
        self._description = description
        self._parameters = parameters or {"type": "object", "properties": {}}
        self.results = results

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def parameters(self) -> JsonObject:
        return self._parameters

    @property
    def output_schema(self) -> JsonObject | None:
        return None

    @property
    def effect(self) -> ToolEffect:
        return ToolEffect.SIDE_EFFECT

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        result = self.results.pop(str(ctx.call_id), None)
        if result is None:
            raise ToolError(f"the client did not run front-end tool {self._name!r}")
        return result


def asking_policy(names: frozenset[str], policy: Any) -> Any:
    """A permission policy that asks about every call of a tool in
    ``names`` and leaves the others to ``policy`` (none: allow, as the
    pipeline does with no policy)."""

    async def decide(ctx: Any, tool: str, args: Any) -> Any:
        if tool in names:
            return AskUser(FRONTEND_PROMPT)
        if policy is None:
            return Allow()
        return await call(policy, ctx, tool, args)

    return decide


__all__ = ["FRONTEND_PROMPT", "FrontendTool", "asking_policy"]
