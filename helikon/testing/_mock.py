"""A scripted model for tests: one list of model events per call."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, final

import attrs
import msgspec

from helikon._json import JsonValue
from helikon.cancel import CancellationToken
from helikon.errors import ConfigError, ModelError
from helikon.ids import RunId
from helikon.items import (
    AssistantMessage,
    Item,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    text_of,
)
from helikon.loop import FINALIZE_PROMPT, REPAIR_PROMPT, aggregate
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


@attrs.frozen
class Pause:
    """A scripted wait of ``seconds`` inside a turn (to test cancellation)."""

    seconds: float


#: One scripted element: an event to stream, a pause, or an error to raise.
ScriptItem = ModelEvent | Pause | ModelError


class RecordingModel:
    """What the test models share: an id, capabilities, the count of calls
    and the latest ``keep_requests`` requests (every one for ``None``)."""

    def __init__(
        self, model_id: str, capabilities: ModelCapabilities | None, keep_requests: int | None
    ) -> None:
        if keep_requests is not None and keep_requests < 0:
            raise ValueError("keep_requests must be None or at least 0")
        self._calls = 0
        self.keep_requests = keep_requests
        self.requests: list[ModelRequest] = []
        self._model_id = model_id
        self._capabilities = capabilities or ModelCapabilities.all()

    @property
    def capabilities(self) -> ModelCapabilities:
        return self._capabilities

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def calls(self) -> int:
        """How many times the model was invoked."""
        return self._calls


@final
class MockModel(RecordingModel):
    """A model that plays back scripts: the n-th model turn streams ``scripts[n]``.

    Running out of scripts raises a :class:`~helikon.errors.ModelError`
    (never loops). A :class:`~helikon.errors.ModelError` inside a script is
    raised at that point of the stream; a :class:`Pause` sleeps (and stops
    early when the run is cancelled). The latest ``keep_requests`` requests
    (100 by default; ``None`` keeps every one) are kept in :attr:`requests`
    for assertions, so a long run holds no quadratic memory; :attr:`calls`
    counts every call.

    **Its position survives a fresh process.** Which script a call plays is
    not only a counter kept in the object: the model also reads the request.
    Every turn it played in the current run (the messages after the run's
    input) is in the conversation, its text and tool calls; the scripts
    already played are the ones found there, in order, and the call plays
    the first script after them — or the next by its own count of calls when
    that is further (a model shared by several runs, or by a parent and a
    sub-agent). So a run saved with :func:`~helikon.dump_state` and driven on
    in another process (one effect per process, say) with a new
    ``MockModel`` of the same scripts continues at the right reply, as it
    would in one process. Turns no script made (another agent's before a
    handoff) are skipped. What the request cannot tell is in
    ``docs/testing.md``: a scripted :class:`~helikon.errors.ModelError`
    leaves no turn, so a fresh process retrying it plays it again.

    **Token usage.** With ``estimate_usage=True`` (what the ``helikon`` CLI's
    ``provider = "mock"`` uses), a script that reports no
    :class:`~helikon.model.Usage` of its own gets an estimate, added just
    before its ``Finish``: about one token per four characters
    (:func:`estimate_tokens`) of what was sent — every message's text, tool
    calls' names and arguments, tool results, and each tool's name,
    description and JSON Schema — and of what the script streams (text,
    reasoning, tool calls' names and arguments). A script's own ``Usage``
    events are reported as they are. Off by default, so scripted usage in
    tests and golden traces stays exactly what the script says.

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
        estimate_usage: bool = False,
        keep_requests: int | None = 100,
    ) -> None:
        super().__init__(model_id, capabilities, keep_requests)
        self._scripts: list[Sequence[ScriptItem]] = list(scripts)
        self.estimate_usage = estimate_usage
        self._next = 0
        self._turns: dict[int, _Turn | None] = {}
        self._readers: list[_Reader] = []

    @property
    def provider(self) -> str:
        return "mock"

    @property
    def scripts(self) -> tuple[Sequence[ScriptItem], ...]:
        """Every script, played or not."""
        return tuple(self._scripts)

    @property
    def remaining(self) -> list[Sequence[ScriptItem]]:
        """The scripts not played yet (a copy)."""
        return self._scripts[self._next :]

    def add(self, *scripts: Sequence[ScriptItem]) -> MockModel:
        """Append more scripts; returns the model for chaining."""
        self._scripts.extend(scripts)
        self._readers.clear()  # a turn no script explained may match a new one
        return self

    @classmethod
    def from_script_file(
        cls,
        source: str | os.PathLike[str] | ScriptFile,
        case_id: str | None = None,
        *,
        model_id: str = "mock-model",
        estimate_usage: bool = False,
    ) -> MockModel:
        """A model playing the scripts a :class:`ScriptFile` holds for ``case_id``.

        ``source`` is a script file's path or an already loaded
        :class:`ScriptFile`; the case's own scripts are used when the file
        has them, else its ``default`` scripts.

        Raises:
            ScriptFileError: the file is not a valid script file.
        """
        scripts = source if isinstance(source, ScriptFile) else ScriptFile.load(source)
        return cls(scripts.scripts_for(case_id), model_id=model_id, estimate_usage=estimate_usage)

    def position(self, request: ModelRequest) -> int:
        """The index of the script a call with ``request`` plays (see the class docs).

        O(1) amortised over a run: the model remembers how far it read each
        of the last few conversations it saw and reads only the items a
        request adds to one of them (a conversation that does not continue
        one it saw, say in a fresh process, is read whole once).
        """
        turns, played = self._reader(request.messages).position(self)
        if turns <= self._next:  # cannot have played more than it counted
            return self._next
        return max(self._next, played)

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        self._calls += 1
        keep(self.requests, request, self.keep_requests)
        index = self.position(request)
        if index >= len(self._scripts):
            raise ModelError.other(f"MockModel has no script left for call {index + 1}")
        self._next = index + 1
        script = self._scripts[index]
        if self.estimate_usage and not any(isinstance(item, Usage) for item in script):
            script = _with_usage(script, request)
        return _play(script, cancel)

    def _reader(self, messages: Sequence[Item]) -> _Reader:
        """The reader of a conversation ``messages`` continues, brought up to
        date; a new one (replacing the oldest) when it continues none."""
        for n, reader in enumerate(self._readers):
            if reader.continued_by(messages):
                if n:
                    self._readers.insert(0, self._readers.pop(n))
                break
        else:
            reader = _Reader()
            self._readers.insert(0, reader)
            del self._readers[_READERS:]
        reader.read(messages, self)
        return reader

    def _advance(self, played: int, turn: _Turn) -> int:
        """``played`` after one more turn of the conversation (see :meth:`_played`)."""
        index = played
        while index < len(self._scripts):
            expected = self._turn_of(index)
            if expected == turn:
                return index + 1
            if expected is not None:  # a visible script that is not this turn
                return played
            index += 1
        return played

    def _played(self, turns: Sequence[_Turn]) -> int:
        """How many scripts, in order, left their turn in ``turns``.

        A turn no script explains is skipped; scripts that leave no turn
        (they fail, or say nothing) may be stepped over to reach one that
        matches.
        """
        played = 0
        for turn in turns:
            played = self._advance(played, turn)
        return played

    def _turn_of(self, index: int) -> _Turn | None:
        if index not in self._turns:
            self._turns[index] = _script_turn(self._scripts[index])
        return self._turns[index]


@attrs.frozen
class _Turn:
    """What a model turn leaves in the conversation, as compared here."""

    text: str
    calls: tuple[tuple[str, JsonValue], ...]


def keep(requests: list[ModelRequest], request: ModelRequest, most: int | None) -> None:
    """Append ``request``, keeping the latest ``most`` (every one for None)."""
    if most is None or most > 0:
        requests.append(request)
        if most is not None and len(requests) > most:
            del requests[0]


#: How many conversations a model follows at once (runs sharing it, a
#: parent and its sub-agents).
_READERS = 8


class _Reader:
    """The model turns of one conversation, read item by item as it grows.

    The same fold as :func:`_this_run` then :func:`_conversation_turns` then
    :meth:`MockModel._played`, kept between calls: ``turns`` and ``played``
    count the closed turns of the current run, ``text``/``calls`` the turn
    still open at the end. A conversation continues the one read so far when
    it is at least as long and holds the same first item, the same item
    object where the run began and where the reading stopped (items are
    immutable and the loop passes them on, so a continued conversation
    shares them).
    """

    __slots__ = (
        "calls",
        "first",
        "last",
        "played",
        "previous_is_turn",
        "seen",
        "start",
        "start_at",
        "text",
        "turns",
    )

    def __init__(self) -> None:
        self.seen = 0
        self.first: Item | None = None
        self.last: Item | None = None
        self.start: Item | None = None
        self.start_at = -1
        self._reset()

    def _reset(self) -> None:
        self.turns = 0
        self.played = 0
        self.text: str | None = None
        self.calls: list[tuple[str, JsonValue]] = []
        self.previous_is_turn = False

    def continued_by(self, messages: Sequence[Item]) -> bool:
        seen = self.seen
        if not seen or len(messages) < seen or messages[seen - 1] is not self.last:
            return False
        if self.start_at >= 0 and messages[self.start_at] is not self.start:
            return False
        return bool(messages[0] == self.first)

    def read(self, messages: Sequence[Item], model: MockModel) -> None:
        """Fold the items after the ones already read."""
        for at in range(self.seen, len(messages)):
            item = messages[at]
            if isinstance(item, AssistantMessage):
                self._close(model)
                self.text = text_of(item.content)
                self.previous_is_turn = True
            elif isinstance(item, ToolCall):
                if not self.previous_is_turn:
                    self._close(model)
                self.calls.append((item.name, _arguments(item.arguments)))
                self.previous_is_turn = True
            else:
                self.previous_is_turn = False
                if isinstance(item, UserMessage) and not _loop_prompt(text_of(item.content)):
                    self._reset()  # a new run's input: only what follows counts
                    self.start, self.start_at = item, at
        if len(messages) > self.seen:
            self.seen = len(messages)
            self.first, self.last = messages[0], messages[-1]

    def _close(self, model: MockModel) -> None:
        if self.text is not None or self.calls:
            self.played = model._advance(self.played, _Turn(self.text or "", tuple(self.calls)))
            self.turns += 1
        self.text, self.calls = None, []

    def position(self, model: MockModel) -> tuple[int, int]:
        """``(turns, played)`` of the run so far, the open turn included."""
        if self.text is None and not self.calls:
            return self.turns, self.played
        return self.turns + 1, model._advance(self.played, _Turn(self.text or "", tuple(self.calls)))


def _arguments(text: str) -> JsonValue:
    try:
        value: JsonValue = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text
    return value


def _script_turn(script: Sequence[ScriptItem]) -> _Turn | None:
    """The turn ``script`` leaves in the conversation (``None``: none)."""
    events: list[ModelEvent] = []
    for item in script:
        if isinstance(item, ModelError):
            return None
        if not isinstance(item, Pause):
            events.append(item)
    response = aggregate(tuple(events), RunId("mock"), 0)
    if not response.text and not response.calls:
        return None
    return _Turn(response.text, tuple((c.name, _arguments(c.arguments)) for c in response.calls))


def _prompt_pattern(template: str) -> re.Pattern[str]:
    pieces = re.split(r"\{[a-z_]+\}", template)
    return re.compile(".*".join(re.escape(piece) for piece in pieces), re.S)


#: The user messages the loop itself adds within a run (not a run's input).
_LOOP_PROMPTS = (_prompt_pattern(FINALIZE_PROMPT), _prompt_pattern(REPAIR_PROMPT))


def _loop_prompt(text: str) -> bool:
    return any(prompt.fullmatch(text) for prompt in _LOOP_PROMPTS)


def _this_run(messages: Sequence[Item]) -> Sequence[Item]:
    """The messages after the current run's input: after the last user
    message that is not one of the loop's own prompts."""
    for index in range(len(messages) - 1, -1, -1):
        item = messages[index]
        if isinstance(item, UserMessage) and not _loop_prompt(text_of(item.content)):
            return messages[index + 1 :]
    return messages


def _conversation_turns(messages: Sequence[Item]) -> list[_Turn]:
    """The model turns in ``messages``: an assistant message with the tool
    calls right after it, or tool calls alone."""
    turns: list[_Turn] = []
    text: str | None = None
    calls: list[tuple[str, JsonValue]] = []
    previous_is_turn = False
    for item in messages:
        if isinstance(item, AssistantMessage) or (isinstance(item, ToolCall) and not previous_is_turn):
            if text is not None or calls:
                turns.append(_Turn(text or "", tuple(calls)))
            text, calls = None, []
        if isinstance(item, AssistantMessage):
            text = text_of(item.content)
            previous_is_turn = True
        elif isinstance(item, ToolCall):
            calls.append((item.name, _arguments(item.arguments)))
            previous_is_turn = True
        else:
            previous_is_turn = False
    if text is not None or calls:
        turns.append(_Turn(text or "", tuple(calls)))
    return turns


def estimate_tokens(text: str) -> int:
    """A token count for ``text``: one per four characters, rounded up (0 for no text).

    >>> estimate_tokens(""), estimate_tokens("Hi"), estimate_tokens("Hello, world")
    (0, 1, 3)
    """
    return -(-len(text) // 4)


def _item_text(item: Item) -> str:
    match item:
        case ToolCall(name=name, arguments=arguments):
            return name + arguments
        case ToolResult(content=content):
            return content
        case UserMessage(content=parts) | AssistantMessage(content=parts) | SystemMessage(content=parts):
            return text_of(parts)
        case _:
            return ""


def _request_text(request: ModelRequest) -> str:
    tools = (
        tool.name + tool.description + msgspec.json.encode(tool.parameters).decode() for tool in request.tools
    )
    instructions = request.instructions or ""
    return instructions + "".join(_item_text(item) for item in request.messages) + "".join(tools)


def _with_usage(script: Sequence[ScriptItem], request: ModelRequest) -> list[ScriptItem]:
    """``script`` with an estimated :class:`Usage` before its ``Finish`` (or at its end)."""
    out = "".join(
        item.text
        if isinstance(item, TextChunk | ReasoningChunk)
        else (item.name or "") + item.arguments
        if isinstance(item, ToolCallChunk)
        else ""
        for item in script
    )
    usage = Usage(estimate_tokens(_request_text(request)), estimate_tokens(out))
    at = next((n for n, item in enumerate(script) if isinstance(item, Finish)), len(script))
    return [*script[:at], usage, *script[at:]]


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


#: One scripted model call: the items it streams, in order.
Script = tuple[ScriptItem, ...]


class ScriptFileError(ConfigError):
    """A script file is not valid; the message names the place and the problem."""


@attrs.frozen
class ScriptFile:
    """Model scripts for a whole dataset, as one JSON file.

    The file is an object with ``default`` (a list of scripts, one per model
    call) and optionally ``cases`` (case id -> its own list of scripts); a
    case without its own scripts plays the defaults. A script is a list of
    events (``{"type": "text", "text": "Hi"}``, ``tool_call``, ``reasoning``,
    ``text_break``, ``usage``, ``finish``, ``pause``, ``error``) or a
    shorthand: ``{"say": "Hi"}`` or ``{"call": [{"name": "f", "arguments":
    {...}}]}``. ``docs/evals.md`` has the full format. Unknown keys are
    errors, so a typo does not silently change a script.

    >>> file = ScriptFile.from_json('{"default": [{"say": "Hi"}], "cases": {"c1": [{"say": "Yo"}]}}')
    >>> [e.text for e in file.scripts_for("c1")[0] if isinstance(e, TextChunk)]
    ['Yo']
    >>> len(file.scripts_for("other")), file.case_ids
    (1, ('c1',))
    """

    default: tuple[Script, ...] = ()
    cases: tuple[tuple[str, tuple[Script, ...]], ...] = ()
    source: str = attrs.field(default="<script file>", eq=False)

    @property
    def case_ids(self) -> tuple[str, ...]:
        """The ids of the cases that have their own scripts, in file order."""
        return tuple(case for case, _ in self.cases)

    def scripts_for(self, case_id: str | None = None) -> tuple[Script, ...]:
        """The case's own scripts when it has some, else the defaults."""
        for case, scripts in self.cases:
            if case == case_id:
                return scripts
        return self.default

    def model_for(self, case_id: str | None = None, *, model_id: str = "mock-model") -> MockModel:
        """A fresh :class:`MockModel` playing :meth:`scripts_for` ``case_id``."""
        return MockModel(self.scripts_for(case_id), model_id=model_id)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ScriptFile:
        """Read the script file at ``path``.

        Raises:
            ScriptFileError: it cannot be read or is not a valid script file.
        """
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ScriptFileError(f"{os.fspath(path)}: cannot read the script file: {exc}") from None
        return cls.from_json(data, source=os.fspath(path))

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "<script file>") -> ScriptFile:
        """Parse a script file's JSON text.

        Raises:
            ScriptFileError: it is not JSON or not a valid script file.
        """
        try:
            data = msgspec.json.decode(text)
        except msgspec.DecodeError as exc:
            raise ScriptFileError(f"{source}: not JSON: {exc}") from None
        return cls.from_data(data, source=source)

    @classmethod
    def from_data(cls, data: object, *, source: str = "<script file>") -> ScriptFile:
        """Build a script file from decoded JSON data (see the class docs)."""
        where = _Where(source)
        top = where.fields(data, "", required=(), optional=("default", "cases", "description"))
        default = _scripts(top.get("default", []), where, "default")
        cases: list[tuple[str, tuple[Script, ...]]] = []
        raw_cases = top.get("cases", {})
        if not isinstance(raw_cases, dict):
            raise where.error("cases", f"must be an object of case id -> scripts, not {_kind(raw_cases)}")
        for case_id, scripts in raw_cases.items():
            cases.append((case_id, _scripts(scripts, where, f"cases[{case_id!r}]")))
        return cls(default, tuple(cases), source)


_FINISH_REASONS = {reason.value: reason for reason in FinishReason}
_EVENT_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # type: (required fields, optional fields)
    "text": (("text",), ()),
    "text_break": ((), ()),
    "reasoning": (("text",), ("signature",)),
    "tool_call": (("name",), ("arguments", "call_id", "index")),
    "usage": ((), ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")),
    "finish": (("reason",), ("response_id",)),
    "pause": (("seconds",), ()),
    "error": (("message",), ()),
}


@attrs.frozen
class _Where:
    """Error messages that name the file and the place in it."""

    source: str

    def error(self, path: str, problem: str) -> ScriptFileError:
        return ScriptFileError(f"{self.source}: {path or 'the file'}: {problem}")

    def fields(
        self, value: object, path: str, *, required: Sequence[str], optional: Sequence[str]
    ) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.error(path, f"must be a JSON object, not {_kind(value)}")
        for key in required:
            if key not in value:
                raise self.error(path, f"missing {key!r}")
        unknown = sorted(k for k in value if k not in required and k not in optional)
        if unknown:
            allowed = ", ".join(repr(k) for k in (*required, *optional))
            raise self.error(path, f"unknown key {unknown[0]!r} (allowed: {allowed})")
        return value

    def typed(self, value: object, kind: type | tuple[type, ...], path: str, what: str) -> Any:
        # bool is an int in Python; JSON keeps them apart and so do we.
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.error(path, f"must be {what}, not {_kind(value)}")
        return value


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _scripts(value: object, where: _Where, path: str) -> tuple[Script, ...]:
    if not isinstance(value, list):
        raise where.error(path, f"must be a list of scripts (one per model call), not {_kind(value)}")
    return tuple(_script(item, where, f"{path}[{n}]") for n, item in enumerate(value))


def _script(value: object, where: _Where, path: str) -> Script:
    if isinstance(value, list):
        items: list[ScriptItem] = []
        calls = 0
        for n, event in enumerate(value):
            item = _event(event, where, f"{path}[{n}]", calls)
            calls += isinstance(item, ToolCallChunk)
            items.append(item)
        return tuple(items)
    if isinstance(value, dict) and "say" in value:
        body = where.fields(value, path, required=("say",), optional=())
        return tuple(say(where.typed(body["say"], str, f"{path}.say", "a string")))
    if isinstance(value, dict) and "call" in value:
        body = where.fields(value, path, required=("call",), optional=("text",))
        text = where.typed(body.get("text", ""), str, f"{path}.text", "a string")
        raw_calls = where.typed(body["call"], list, f"{path}.call", "a list of tool calls")
        specs: list[ToolCallSpec] = []
        for n, raw in enumerate(raw_calls):
            at = f"{path}.call[{n}]"
            call = where.fields(raw, at, required=("name",), optional=("arguments", "call_id"))
            name = where.typed(call["name"], str, f"{at}.name", "a string")
            args = call.get("arguments", {})
            if "call_id" in call:
                specs.append((where.typed(call["call_id"], str, f"{at}.call_id", "a string"), name, args))
            else:
                specs.append((name, args))
        return tuple(call_tools(*specs, text=text))
    raise where.error(path, 'must be a list of events, {"say": ...} or {"call": [...]}')


def _event(value: object, where: _Where, path: str, calls_before: int) -> ScriptItem:
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise where.error(path, 'must be an event object with a "type"')
    kind = value["type"]
    if kind not in _EVENT_FIELDS:
        raise where.error(path, f"unknown event type {kind!r} (known: {', '.join(_EVENT_FIELDS)})")
    required, optional = _EVENT_FIELDS[kind]
    event = where.fields(value, path, required=("type", *required), optional=optional)

    def text(key: str) -> str:
        result: str = where.typed(event[key], str, f"{path}.{key}", "a string")
        return result

    def count(key: str) -> int:
        result: int = where.typed(event.get(key, 0), int, f"{path}.{key}", "an integer")
        return result

    match kind:
        case "text":
            return TextChunk(text("text"))
        case "text_break":
            return TextBreak()
        case "reasoning":
            signature = text("signature") if "signature" in event else None
            return ReasoningChunk(text("text"), signature)
        case "tool_call":
            args = event.get("arguments", {})
            arguments = args if isinstance(args, str) else msgspec.json.encode(args).decode()
            call_id = text("call_id") if "call_id" in event else None
            index = count("index") if "index" in event else calls_before
            return ToolCallChunk(index=index, call_id=call_id, name=text("name"), arguments=arguments)
        case "usage":
            return Usage(
                count("input_tokens"),
                count("output_tokens"),
                count("cached_input_tokens"),
                count("reasoning_tokens"),
            )
        case "finish":
            reason = text("reason")
            if reason not in _FINISH_REASONS:
                raise where.error(f"{path}.reason", f"unknown finish reason {reason!r}")
            response_id = text("response_id") if "response_id" in event else None
            return Finish(_FINISH_REASONS[reason], response_id)
        case "pause":
            seconds = where.typed(event["seconds"], (int, float), f"{path}.seconds", "a number")
            return Pause(float(seconds))
        case _:
            return ModelError.other(text("message"))


__all__ = [
    "MockModel",
    "Pause",
    "Script",
    "ScriptFile",
    "ScriptFileError",
    "ScriptItem",
    "call_tools",
    "estimate_tokens",
    "say",
]
