"""A scripted model for tests: one list of model events per call."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import final

import attrs
import msgspec

from helikon._json import JsonValue
from helikon.cancel import CancellationToken
from helikon.errors import ModelError
from helikon.model import (
    Finish,
    FinishReason,
    ModelCapabilities,
    ModelEvent,
    ModelRequest,
    TextChunk,
    ToolCallChunk,
    Usage,
)


@attrs.frozen
class Pause:
    """A scripted wait of ``seconds`` inside a turn (to test cancellation)."""

    seconds: float


#: One scripted element: an event to stream, a pause, or an error to raise.
ScriptItem = ModelEvent | Pause | ModelError


@final
class MockModel:
    """A model that plays back scripts: the n-th call streams ``scripts[n]``.

    Running out of scripts raises a :class:`~helikon.errors.ModelError`
    (never loops). A :class:`~helikon.errors.ModelError` inside a script is
    raised at that point of the stream; a :class:`Pause` sleeps (and stops
    early when the run is cancelled). Every request is kept in
    :attr:`requests` for assertions.

    >>> model = MockModel([say("Hello!")])
    >>> len(model.remaining)
    1
    """

    def __init__(
        self,
        scripts: Iterable[Sequence[ScriptItem]] = (),
        *,
        model_id: str = "mock-model",
        capabilities: ModelCapabilities | None = None,
    ) -> None:
        self.remaining: list[Sequence[ScriptItem]] = list(scripts)
        self.requests: list[ModelRequest] = []
        self._model_id = model_id
        self._capabilities = capabilities or ModelCapabilities.all()

    @property
    def capabilities(self) -> ModelCapabilities:
        return self._capabilities

    @property
    def provider(self) -> str:
        return "mock"

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def calls(self) -> int:
        """How many times the model was invoked."""
        return len(self.requests)

    def add(self, *scripts: Sequence[ScriptItem]) -> MockModel:
        """Append more scripts; returns the model for chaining."""
        self.remaining.extend(scripts)
        return self

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if not self.remaining:
            raise ModelError.other(f"MockModel has no script left for call {len(self.requests)}")
        return _play(self.remaining.pop(0), cancel)


async def _play(script: Sequence[ScriptItem], cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
    for item in script:
        if cancel.cancelled:
            return
        if isinstance(item, Pause):
            import anyio

            with cancel.scope() as scope:
                await anyio.sleep(item.seconds)
            if scope.cancelled_caught:
                return
        elif isinstance(item, ModelError):
            raise item
        else:
            yield item


_WORDS = re.compile(r"\s*\S+\s*|\s+")


def say(text: str, *, usage: Usage | None = None, chunked: bool = True) -> list[ScriptItem]:
    """A turn that streams ``text`` (word by word) and finishes.

    >>> say("Hi there")[:2]
    [TextChunk(text='Hi '), TextChunk(text='there')]
    >>> say("Hi there")[-1].reason
    <FinishReason.STOP: 'stop'>
    """
    pieces = _WORDS.findall(text) if chunked else [text]
    events: list[ScriptItem] = [TextChunk(p) for p in pieces if p]
    if usage is not None:
        events.append(usage)
    events.append(Finish(FinishReason.STOP))
    return events


ToolCallSpec = tuple[str, JsonValue] | tuple[str, str, JsonValue]


def call_tools(*calls: ToolCallSpec, text: str = "", usage: Usage | None = None) -> list[ScriptItem]:
    """A turn that requests tool calls, each ``(name, args)`` or ``(call_id, name, args)``.

    ``args`` is JSON-encoded unless it is already a string (pass a string to
    script malformed arguments). Calls without an id get one from the loop.

    >>> call_tools(("add", {"a": 1}))[0]
    ToolCallChunk(index=0, call_id=None, name='add', arguments='{"a":1}')
    """
    events: list[ScriptItem] = [TextChunk(text)] if text else []
    for index, call in enumerate(calls):
        if len(call) == 3:
            call_id: str | None = call[0]
            name, args = call[1], call[2]
        else:
            call_id, name, args = None, call[0], call[1]
        arguments = args if isinstance(args, str) else msgspec.json.encode(args).decode()
        events.append(ToolCallChunk(index=index, call_id=call_id, name=name, arguments=arguments))
    if usage is not None:
        events.append(usage)
    events.append(Finish(FinishReason.TOOL_CALLS))
    return events


__all__ = ["MockModel", "Pause", "ScriptItem", "call_tools", "say"]
