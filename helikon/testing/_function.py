"""A model that answers with a function of the request, for tests.

Where :class:`~helikon.testing.MockModel` plays a fixed list of turns,
:class:`FunctionModel` computes each turn from what it is asked: the
conversation so far, the tools it may call and the settings. The function
may be sync or async and answers in whichever form is handiest (see
:data:`ModelReply`).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import TypeAlias, final

from helikon.cancel import CancellationToken
from helikon.errors import ModelError
from helikon.loop import Response
from helikon.model import (
    Finish,
    FinishReason,
    ModelCapabilities,
    ModelEvent,
    ModelRequest,
    ReasoningChunk,
    TextBreak,
    TextChunk,
    ToolCallChunk,
    Usage,
)
from helikon.testing._mock import Pause, RecordingModel, ScriptItem, _play, keep, say

#: What a model function answers: text (streamed word by word, like
#: :func:`~helikon.testing.say`), a list of script items (what ``say`` and
#: ``call_tools`` build), an aggregated :class:`~helikon.loop.Response`, or
#: an async iterable of script items, lists of them (``say(...)``,
#: ``call_tools(...)``) or text chunks (streamed as they come).
#: A ``Finish`` is added when the answer has none.
ModelReply: TypeAlias = (
    str | Sequence[ScriptItem] | Response | AsyncIterable[ScriptItem | Sequence[ScriptItem] | str]
)

#: The function a :class:`FunctionModel` calls, sync or async (an async
#: generator function streams).
ModelFunction: TypeAlias = Callable[[ModelRequest], ModelReply | Awaitable[ModelReply]]


@final
class FunctionModel(RecordingModel):
    """A model whose every turn is ``function(request)``.

    The function receives the :class:`~helikon.model.ModelRequest` (its
    ``messages``, ``tools`` and ``settings``) and returns a :data:`ModelReply`.
    Raising a :class:`~helikon.errors.ModelError` fails the model call as a
    provider's error would; a :class:`~helikon.testing.Pause` in the answer
    waits, and an async function is awaited, until the run is cancelled or
    times out. The latest ``keep_requests`` requests (100 by default;
    ``None`` keeps every one) are kept in :attr:`requests`; :attr:`calls`
    counts every call. Unlike a :class:`~helikon.testing.MockModel`, it has
    no position of its own: a run resumed in a fresh process gets the same
    answers as long as the function depends on the request alone.

    >>> import anyio
    >>> from helikon.items import user_text
    >>> from helikon.testing import call_tools
    >>> def echo(request: ModelRequest) -> ModelReply:
    ...     if len(request.messages) == 1:
    ...         return call_tools(("lookup", {"q": "x"}))
    ...     return "done"
    >>> model = FunctionModel(echo)
    >>> async def first_turn() -> list[ModelEvent]:
    ...     request = ModelRequest((user_text("hi"),))
    ...     return [e async for e in model.invoke(request, CancellationToken())]
    >>> anyio.run(first_turn)[0]
    ToolCallChunk(index=0, call_id=None, name='lookup', arguments='{"q":"x"}')
    """

    def __init__(
        self,
        function: ModelFunction,
        *,
        model_id: str = "function-model",
        capabilities: ModelCapabilities | None = None,
        keep_requests: int | None = 100,
    ) -> None:
        super().__init__(model_id, capabilities, keep_requests)
        self._function = function

    @property
    def provider(self) -> str:
        return "function"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        self._calls += 1
        keep(self.requests, request, self.keep_requests)
        return self._answer(request, cancel)

    async def _answer(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        reply = self._function(request)
        if inspect.isawaitable(reply):
            answer = reply
            with cancel.scope() as scope:  # an async function is interrupted with the run
                reply = await answer
            if scope.cancelled_caught:
                return
        finished = False
        calls = False
        async for event in _stream(reply, cancel):
            finished = finished or isinstance(event, Finish)
            calls = calls or isinstance(event, ToolCallChunk)
            yield event
        if not finished and not cancel.cancelled:
            yield Finish(FinishReason.TOOL_CALLS if calls else FinishReason.STOP)


async def _stream(reply: object, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
    match reply:
        case str():
            items: Sequence[ScriptItem] = say(reply)
        case Response():
            items = response_events(reply)
        case AsyncIterable():
            async for item in _iterate(reply, cancel):
                yield item
            return
        case Sequence():
            items = [_checked(item) for item in reply]
        case _:
            raise TypeError(
                f"a FunctionModel's function returned {type(reply).__name__}: expected text, "
                "a list of script items (say(...), call_tools(...)), a Response or an async iterable"
            )
    async for event in _play(items, cancel):
        yield event


async def _iterate(items: AsyncIterable[object], cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
    async for item in items:
        if cancel.cancelled:
            return
        match item:
            case str():
                script: Sequence[ScriptItem] = [TextChunk(item)]
            case list() | tuple():  # what say(...) and call_tools(...) build
                script = [_checked(part) for part in item]
            case _:
                script = [_checked(item)]
        async for event in _play(script, cancel):
            yield event


_ITEM_TYPES = (TextChunk, TextBreak, ReasoningChunk, ToolCallChunk, Usage, Finish, Pause, ModelError)


def _checked(item: object) -> ScriptItem:
    if isinstance(item, _ITEM_TYPES):
        return item
    raise TypeError(
        f"a FunctionModel's answer holds {item!r}, which is not a model event, Pause or ModelError"
    )


def response_events(response: Response) -> list[ScriptItem]:
    """The model events that aggregate back to ``response``.

    >>> from helikon.items import ToolCall
    >>> from helikon.ids import CallId
    >>> response_events(Response("Hi", calls=(ToolCall(CallId("c1"), "f", "{}"),)))[-1]
    Finish(reason=<FinishReason.TOOL_CALLS: 'tool_calls'>, response_id=None, response_model=None)
    """
    events: list[ScriptItem] = [ReasoningChunk(part.text, part.signature) for part in response.reasoning]
    parts: Iterable[str] = response.text_parts or ((response.text,) if response.text else ())
    for index, part in enumerate(parts):
        if index:
            events.append(TextBreak())
        events.append(TextChunk(part))
    for index, call in enumerate(response.calls):
        events.append(ToolCallChunk(index, call.call_id, call.name, call.arguments))
    if response.usage != Usage():
        events.append(response.usage)
    reason = response.finish or (FinishReason.TOOL_CALLS if response.calls else FinishReason.STOP)
    events.append(Finish(reason, response.response_id, response.response_model))
    return events


__all__ = ["FunctionModel", "ModelFunction", "ModelReply", "response_events"]
