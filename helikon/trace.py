"""Traces: a run as data, in versioned JSON Lines.

A trace is everything needed to replay a run with no model, no tools and no
network: a header naming the agent and fingerprinting its definition, then
one line per effect with the result that was fed back and the events emitted
up to and including that effect's live deltas, then a closing line with the
last events. ``docs/traces.md`` is the format's specification.

Lines are msgspec-encoded JSON with sorted keys, so a trace is byte-stable.
Long strings (prompts, instructions, outputs) are written once each, on a
``text`` line of their own, and referred to by number everywhere they occur:
a one-word change to a prompt changes one line of a golden trace, not every
line that repeats the conversation.

A model request (format 5) is written whole only the first time an agent
path asks its model; each later request of that path records what is new
since the previous one: how many of its messages it keeps, the messages
after them, and the tools, settings or instructions only when they changed.
Reading rebuilds every request whole, so a trace grows by what a turn adds,
not by the whole conversation again.
"""

from __future__ import annotations

import gc
import hashlib
import sys
import typing
import warnings
from collections.abc import Iterable, Sequence
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from helikon import codec
from helikon._conversation import _SHIFT, CHUNK, Conversation
from helikon._normal import normal_form
from helikon._structure import Quick, exact, maker, quick, typed, typed_member
from helikon.agents import Member, TreeSpec, WorkflowSpec
from helikon.effects import AtPath, CallModel, Effect, EffectResult, PerformAll
from helikon.errors import HelikonError, NormalFormError
from helikon.events import AgentEvent
from helikon.items import Item, SystemMessage, TextPart
from helikon.loop import AgentSpec
from helikon.model import ModelRequest, ModelSettings, ToolDef

#: The format's name, in every header.
FORMAT: Final = "helikon-trace"
#: The format version this helikon writes (4: long strings on text lines;
#: 5: a model request records only what is new since its path's previous one).
VERSION: Final = 5
#: The versions this helikon reads (3 and 4 are read as they are; ``python
#: -m helikon.trace upgrade FILE...`` rewrites them as the current version).
READABLE: Final = (3, 4, 5)
#: Strings this long or longer are written on a text line of their own.
TEXT_MIN: Final = 24


class TraceFormatError(HelikonError):
    """A trace file could not be read: not a trace, truncated, malformed (a
    value of the wrong type is named by its line and field path: reading
    never coerces), or of a version this helikon cannot read; or a trace
    could not be written so that it reads back the same (NaN, a lone
    surrogate, a non-string key in a step)."""


class TraceVersionWarning(UserWarning):
    """A trace was written by a newer helikon, in a format version this one
    does not know: it is read as the current version, which may fail."""


def definition_of(spec: AgentSpec) -> dict[str, Any]:
    """The part of an agent's definition a trace fingerprints."""
    return {
        "name": spec.name,
        "instructions": spec.instructions,
        "dynamic_instructions": spec.dynamic_instructions,
        "model_id": spec.model_id,
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "output_schema": t.output_schema,
            }
            for t in spec.tools
        ],
        "output": None if spec.output is None else {"name": spec.output.name, "schema": spec.output.schema},
        "governance": governance_of(spec),
    }


def governance_of(spec: AgentSpec) -> dict[str, Any]:
    """The governance configuration a trace records: everything the machine
    reads but the secrets (their values must never be written down, and they
    differ from machine to machine)."""
    governance = spec.governance
    return {
        "permissions": codec.unstructure(governance.permissions),
        "hooks": list(governance.hooks),
        "approvals": governance.approvals.value,
        "redact": governance.redact,
        "input_guardrails": spec.input_guardrails,
        "output_guardrails": spec.output_guardrails,
    }


def member_definition(member: Member) -> dict[str, Any]:
    """What a trace records of an agent of a tree: an agent loop's definition,
    a workflow's shape, or that the agent is not a helikon machine."""
    spec = member.spec
    if isinstance(spec, AgentSpec):
        return {**definition_of(spec), "handoffs": member.handoffs}
    if isinstance(spec, WorkflowSpec):
        return {
            "name": spec.name,
            "kind": spec.kind.value,
            "nodes": [[n.key, n.agent] for n in spec.nodes],
            "edges": [list(e) for e in spec.edges],
            "max_iterations": spec.max_iterations,
        }
    return {"name": member.name, "opaque": True}


def tree_definition(spec: AgentSpec, tree: TreeSpec | None) -> dict[str, Any]:
    """A run's definition: its agent's, plus, for an agent tree, every agent
    it can reach by name (so a change anywhere in the tree shows)."""
    definition = definition_of(spec)
    if tree is not None:
        definition["agents"] = {m.key: member_definition(m) for m in tree.members}
    return definition


def fingerprint(spec: AgentSpec, tree: TreeSpec | None = None) -> str:
    """A short hash of the run's definition: same definition, same value."""
    canonical = msgspec.json.encode(tree_definition(spec, tree), order="sorted")
    return "sha256:" + hashlib.sha256(canonical).hexdigest()[:32]


@attrs.frozen
class TraceHeader:
    """The first line of a trace."""

    agent: str
    run_id: str
    fingerprint: str
    input: tuple[Item, ...]
    definition: dict[str, Any] = attrs.field(factory=dict, eq=False)
    helikon: str = ""
    format: str = FORMAT
    version: int = VERSION
    #: The clock reading the run began with (a run with a timeout; see
    #: :mod:`helikon.loop._clock`), or None.
    started: float | None = None


@attrs.frozen
class TraceStep:
    """One effect, the result fed back, and the events emitted with it.

    ``events`` are the events emitted since the previous step (the machine's
    events, then the live events the effect streamed); ``live`` are the
    latter alone (a child agent's forwarded events are replayed from it).
    """

    index: int
    effect: Effect
    result: EffectResult
    events: tuple[AgentEvent, ...]
    path: tuple[str | int, ...] = ()
    live: tuple[AgentEvent, ...] = ()
    #: The clock reading taken when the result came back (a run with a
    #: deadline), or None.
    now: float | None = None


def _reading(value: object) -> float | None:
    """A step's clock reading as recorded (a number, or absent)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"a clock reading must be a number, not {type(value).__name__}")
    return float(value)


@attrs.frozen
class Trace:
    """A recorded run."""

    header: TraceHeader
    steps: tuple[TraceStep, ...]
    final_events: tuple[AgentEvent, ...]

    @property
    def events(self) -> tuple[AgentEvent, ...]:
        """Every event of the run, in order."""
        every = list(chain.from_iterable(map(_EVENTS_OF, self.steps)))
        every += self.final_events
        return tuple(every)

    @property
    def pathless(self) -> bool:
        """Whether no event names the path that emitted it: a tree run
        recorded before events carried their path (format 4, or upgraded
        from it; an upgrade cannot invent paths). Replay compares such a
        recording's events with :func:`without_paths`."""
        return _pathless(self, self.events)

    def events_by_step(
        self,
    ) -> tuple[tuple[AgentEvent, ...], tuple[tuple[AgentEvent, ...], ...], tuple[AgentEvent, ...]]:
        """The events grouped by the step they belong to: ``(start, per_step, end)``.

        A step's ``events`` field holds what was emitted *before* its effect
        ran (the machine's events on the previous result) and then the live
        events its effect streamed. Here each step gets its own: its live
        events, then the machine's events on its result (recorded with the
        next step, or among the final events for the last one). ``start``
        is what came before the first effect (``RunStarted``, ...); ``end``
        the terminal event (``RunCompleted`` or ``RunFailed``).
        """
        machine = [step.events[: len(step.events) - len(step.live)] for step in self.steps]
        terminal = tuple(e for e in self.final_events if type(e).__name__ in ("RunCompleted", "RunFailed"))
        rest = tuple(e for e in self.final_events if e not in terminal)
        if not self.steps:
            return rest, (), terminal
        after = [*machine[1:], rest]
        per_step = tuple((*step.live, *after[n]) for n, step in enumerate(self.steps))
        return tuple(machine[0]), per_step, terminal

    def to_lines(self) -> list[bytes]:
        """The trace as JSON Lines (without newlines)."""
        texts = _Texts()
        header = codec.unstructure(self.header)
        if header.get("started") is None:
            header.pop("started", None)  # a run with no deadline reads no clock
        header["kind"] = "header"
        header["version"] = VERSION  # written in this version's format, whatever it was read from
        lines = [_encode(texts.intern(header))]
        requests = _Requests()
        records: list[dict[str, Any]] = [
            {
                "kind": "step",
                "index": step.index,
                "path": list(step.path),
                "effect": requests.written(step.effect, step.path),
                "result": codec.unstructure(step.result, EffectResult),
                "events": [codec.unstructure(e, AgentEvent) for e in step.events],
                "live": [codec.unstructure(e, AgentEvent) for e in step.live],
                **({} if step.now is None else {"now": step.now}),
            }
            for step in self.steps
        ]
        records.append(
            {"kind": "end", "events": [codec.unstructure(e, AgentEvent) for e in self.final_events]}
        )
        lines.extend(texts.flush())
        for record in records:
            where = f"step {record['index']}" if record["kind"] == "step" else "the end line"
            try:
                # What is written must read back the same: no NaN (msgspec
                # would write null), no lone surrogate, no non-string key.
                checked = normal_form(record, path=where)
            except NormalFormError as exc:
                raise TraceFormatError(f"the trace cannot be written: {exc}") from None
            interned = texts.intern(checked)
            lines.extend(texts.flush())
            lines.append(_encode(interned))
        return lines

    def to_bytes(self) -> bytes:
        return b"".join(line + b"\n" for line in self.to_lines())

    def dump(self, path: str | Path) -> None:
        """Write the trace to ``path`` (parent directories are created)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.to_bytes())

    @classmethod
    def from_lines(cls, lines: Iterable[bytes | str], source: str = "<trace>") -> Trace:
        """Read a trace from its JSON Lines.

        Raises:
            TraceFormatError: not a trace, an unknown version, a malformed or
                truncated file; the message names ``source`` and the line.
        """
        # Reading makes tens of thousands of containers and no cycle: the
        # cyclic collector would only re-scan them (a third of the time).
        collecting = gc.isenabled()
        gc.disable()
        try:
            return cls._read(lines, source)
        finally:
            if collecting:
                gc.enable()

    @classmethod
    def _read(cls, lines: Iterable[bytes | str], source: str) -> Trace:
        records: list[tuple[int, Any]] = []
        plain: set[int] = set()  # the lines that refer to no text line (most do not)
        #: A step line of a trace of this version that refers to no text line
        #: is decoded as one (checked by msgspec), and kept to read again the
        #: general way if building it fails.
        step_lines: dict[int, bytes] = {}
        step_decoder: msgspec.json.Decoder[Any] | None = None
        for number, line in enumerate(lines, 1):
            if isinstance(line, str):
                line = line.encode()
            if not line.strip():
                continue
            if b"$" not in line or _REF_START not in line:  # a byte is looked for at memchr speed
                plain.add(number)
                if step_decoder is not None and line.startswith(_STEP_START):
                    try:
                        records.append((number, step_decoder.decode(line)))
                        step_lines[number] = line
                        continue
                    except msgspec.DecodeError:
                        pass  # not a step line this way: the general way says why
            try:
                records.append((number, _decoder.decode(line)))
            except msgspec.DecodeError as exc:
                raise TraceFormatError(
                    f"{source}:{number}: not JSON ({exc}); is the file truncated?"
                ) from None
            if len(records) == 1:
                first = records[0][1]
                if type(first) is dict and first.get("kind") == "header" and first.get("version") == VERSION:
                    step_decoder = _step_types().decoder
        if not records or not isinstance(records[0][1], dict) or records[0][1].get("kind") != "header":
            raise TraceFormatError(f"{source}:1: not a helikon trace (no header line)")
        head = records[0][1]
        if head.get("format") != FORMAT:
            raise TraceFormatError(f"{source}:1: format {head.get('format')!r} is not {FORMAT!r}")
        version = head.get("version")
        if isinstance(version, int) and version > VERSION:
            warnings.warn(
                f"{source} was written by a newer helikon ({head.get('helikon') or 'unknown'}, trace "
                f"version {version}); this helikon reads versions up to {VERSION}: upgrade helikon",
                TraceVersionWarning,
                stacklevel=3,
            )
        elif version not in READABLE:
            raise TraceFormatError(
                f"{source}:1: trace version {version!r} is not supported "
                f"(this helikon reads versions {', '.join(map(str, READABLE))}); re-record the trace"
            )
        last_number, last = records[-1]
        if len(records) < 2 or not isinstance(last, dict) or last.get("kind") != "end":
            raise TraceFormatError(
                f"{source}:{last_number}: the trace ends without its end line: it is truncated "
                "(a run that crashed while recording, or a partial copy); re-record it"
            )
        texts: dict[int, str] = {}
        if version != 3:
            for number, record in records:
                if isinstance(record, dict) and record.get("kind") == "text":
                    if not isinstance(record.get("id"), int) or not isinstance(record.get("text"), str):
                        raise TraceFormatError(f"{source}:{number}: malformed text line")
                    texts[record["id"]] = record["text"]
        steps: list[TraceStep] = []
        requests = _Requests()
        fast = version == VERSION
        final: tuple[AgentEvent, ...] = ()
        header: TraceHeader | None = None
        number = 1

        def read(value: Any, as_type: Any, field: str) -> Any:
            """A field of the line, strictly: a wrong type is named by its path."""
            try:
                return codec.structure(value, as_type)
            except Exception as exc:
                why = codec.structure_error(exc, field)
                raise TraceFormatError(f"{source}:{number}: malformed trace line: {why}") from exc

        def step_of(record: dict[str, Any], read: Any) -> TraceStep:
            # Read in the order a malformed line's first fault is named.
            path = read(record.get("path", []), _PATH, "path")
            index = read(record["index"], int, "index")
            effect = requests.read(record["effect"], path, read)
            result = read(record["result"], EffectResult, "result")
            events = read(record["events"], _EVENTS, "events")
            raw_live = record.get("live", [])
            # The live events close the step's events: read once, they are
            # that tail (compared as JSON: ``==`` would take ``true`` for ``1``).
            tail = len(raw_live) if type(raw_live) is list else -1
            if 0 < tail <= len(events) and _plain.encode(raw_live) == _plain.encode(record["events"][-tail:]):
                live = events[-tail:]
            else:
                live = read(raw_live, _EVENTS, "live")
            return TraceStep(index, effect, result, events, path, live, _reading(record.get("now")))

        try:
            for number, raw in records:  # ``number`` names the line in an error
                if number in step_lines:
                    step = _typed_step(raw, requests.last)
                    if step is not None:
                        steps.append(step)
                        continue
                    raw = _decoder.decode(step_lines[number])
                if not isinstance(raw, dict):
                    raise ValueError("a line must be a JSON object")
                kind = raw.get("kind")
                if kind == "text":
                    continue
                record = raw if version == 3 or number in plain else _resolve(raw, texts)
                if kind == "header":
                    if header is not None:
                        raise ValueError("a second header line")
                    header = read({k: v for k, v in record.items() if k != "kind"}, TraceHeader, "header")
                    if version in (3, 4):
                        requests.legacy = header.definition
                elif kind == "step":
                    # The quickest way first (a line of this version's
                    # usual shape), then the quick way; a line neither
                    # takes is read again the strict way, which names what
                    # is wrong.
                    step = _fast_step(record, requests.last) if fast else None
                    if step is None:
                        before = dict(requests.last)
                        try:
                            step = step_of(record, _quick_read)
                        except Exception:
                            requests.last = before
                            step = step_of(record, read)
                    steps.append(step)
                elif kind == "end":
                    final = read(record["events"], tuple[AgentEvent, ...], "events")
                else:
                    raise ValueError(f"unknown line kind {kind!r}")
        except TraceFormatError:
            raise
        except Exception as exc:
            raise TraceFormatError(
                f"{source}:{number}: malformed trace line: {codec.structure_error(exc)}"
            ) from exc
        assert header is not None
        return cls(header, tuple(steps), final)

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<trace>") -> Trace:
        # With no carriage return a line ends only at a line feed, and a
        # split there is ``splitlines`` (but for a last empty line, which
        # is skipped as blank) at a fraction of its cost.
        return cls.from_lines(data.split(b"\n") if b"\r" not in data else data.splitlines(), source)

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read the trace at ``path``."""
        return cls.from_bytes(Path(path).read_bytes(), str(path))


def upgrade(path: str | Path) -> bool:
    """Rewrite the trace at ``path`` in the current format version; returns
    whether the file changed. The steps are read and written back as they
    are, so an upgraded golden replays exactly as before."""
    target = Path(path)
    before = target.read_bytes()
    after = Trace.from_bytes(before, str(target)).to_bytes()
    if after == before:
        return False
    target.write_bytes(after)
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m helikon.trace upgrade FILE...``: migrate traces in place."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or args[0] != "upgrade":
        print("usage: python -m helikon.trace upgrade FILE...", file=sys.stderr)
        return 2
    for name in args[1:]:
        try:
            changed = upgrade(name)
        except (OSError, TraceFormatError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{name}: {'upgraded to version ' + str(VERSION) if changed else 'already current'}")
    return 0


#: The key of a model request that continues its path's previous one: how
#: many of the previous request's messages it keeps (a full request never
#: has it: its keys are the fields of :class:`~helikon.model.ModelRequest`).
_KEPT: Final = "kept"
#: The request fields a continuing request writes only when they changed, with their types.
_CARRIED: Final[dict[str, Any]] = {
    "tools": tuple[ToolDef, ...],
    "settings": ModelSettings,
    "instructions": str | None,
}
_AT: Any = tuple[str, ...]
_ITEMS: Any = tuple[Item, ...]
#: What a whole model request that leaves out its tools, settings or
#: instructions has (the class's defaults, as reading it the quick way gives).
_REQUEST_DEFAULTS: Final = tuple(getattr(attrs.fields(ModelRequest), n).default for n in _CARRIED)

#: Which agent asked: the step's path, and the path inside an agent tree's wave.
_Asker = tuple[tuple[str | int, ...], tuple[str, ...]]


class _Requests:
    """Each agent path's previous model request, while a trace is written or
    read: a request is written as what is new since its path's previous one,
    and rebuilt whole from it when read (sharing the previous request's
    message objects, so a replay compares the shared prefix by identity)."""

    def __init__(self) -> None:
        self.last: dict[_Asker, ModelRequest] = {}
        #: Reading a trace of format 3 or 4: its run's definition (their
        #: requests held the agent's instructions as their first message).
        self.legacy: dict[str, Any] | None = None

    def written(self, effect: Effect, path: tuple[str | int, ...]) -> dict[str, Any]:
        """``effect`` unstructured, its model requests as what is new."""
        if type(effect) is CallModel:
            return self._call(effect, (path, ()))
        if type(effect) is PerformAll and any(type(at.effect) is CallModel for at in effect.effects):
            return {
                "type": "PerformAll",
                "effects": [
                    {
                        "path": list(at.path),
                        "effect": self._call(at.effect, (path, at.path))
                        if type(at.effect) is CallModel
                        else codec.unstructure(at.effect, Effect),
                    }
                    for at in effect.effects
                ],
            }
        unstructured: dict[str, Any] = codec.unstructure(effect, Effect)
        return unstructured

    def _call(self, effect: CallModel, asker: _Asker) -> dict[str, Any]:
        request = effect.request
        previous = self.last.get(asker)
        self.last[asker] = request
        if previous is None:
            return {"type": "CallModel", "request": codec.unstructure(request), "turn": effect.turn}
        old, new = previous.messages, request.messages
        kept = 0
        for before, after in zip(old, new, strict=False):
            if before is not after and before != after:
                break
            kept += 1
        delta: dict[str, Any] = {
            _KEPT: kept,
            "messages": [codec.unstructure(m, Item) for m in new[kept:]],
        }
        for name, kind in _CARRIED.items():
            value = getattr(request, name)
            if value != getattr(previous, name):
                delta[name] = codec.unstructure(value, kind)
        return {"type": "CallModel", "request": delta, "turn": effect.turn}

    def read(self, raw: Any, path: tuple[str | int, ...], read: Any) -> Effect:
        """The effect recorded as ``raw``, its model requests rebuilt whole."""
        if type(raw) is dict and raw.get("type") == "CallModel":
            return self._read_call(raw, (path, ()), read, "effect")
        if type(raw) is dict and raw.get("type") == "PerformAll" and type(raw.get("effects")) is list:
            effects: list[AtPath] = []
            for n, at in enumerate(raw["effects"]):
                where = f"effect.effects[{n}]"
                inner = at.get("effect") if type(at) is dict else None
                if type(inner) is dict and inner.get("type") == "CallModel":
                    at_path = read(at.get("path"), _AT, f"{where}.path")
                    call = self._read_call(inner, (path, at_path), read, f"{where}.effect")
                    effects.append(AtPath(at_path, call))
                else:
                    effects.append(read(at, AtPath, where))
            return PerformAll(tuple(effects))
        effect: Effect = read(raw, Effect, "effect")
        return effect

    def _read_call(self, raw: dict[str, Any], asker: _Asker, read: Any, where: str) -> CallModel:
        turn = read(raw.get("turn"), int, f"{where}.turn")
        fields = raw.get("request")
        previous = self.last.get(asker)
        if type(fields) is dict and _KEPT in fields:
            kept = fields[_KEPT]
            if previous is None:
                raise ValueError(f"{where}: a model request that continues no earlier one of its agent")
            if type(kept) is not int or not 0 <= kept <= len(previous.messages):
                raise ValueError(f"{where}.request.kept: {kept!r} counts no prefix of the previous request")
            added = read(fields.get("messages"), _ITEMS, f"{where}.request.messages")
            messages = _continued(previous.messages, kept, added)
            if len(fields) == 2:  # ``kept`` and ``messages``: nothing else changed
                request = ModelRequest(messages, previous.tools, previous.settings, previous.instructions)
            else:
                carried = {
                    name: read(fields[name], kind, f"{where}.request.{name}")
                    if name in fields
                    else getattr(previous, name)
                    for name, kind in _CARRIED.items()
                }
                request = ModelRequest(messages, **carried)
        else:
            request = read(fields, ModelRequest, f"{where}.request")
            if self.legacy is not None:
                request = _lifted(request, _instructed(self.legacy, (*asker[0], *asker[1])))
            if previous is not None:
                request = _sharing(request, previous)
        self.last[asker] = request
        return CallModel(request, turn)


def _instructed(definition: dict[str, Any], path: tuple[str | int, ...]) -> bool:
    """Whether the agent at ``path`` (its last key names the member of an
    agent tree; the run's own agent at the root) has instructions, by the
    recorded definition; an agent the definition does not describe is taken
    to have them."""
    agent: Any = definition
    if path:
        agents = definition.get("agents")
        agent = agents.get(str(path[-1])) if isinstance(agents, dict) else None
    if not isinstance(agent, dict) or "instructions" not in agent:
        return True
    return agent.get("instructions") is not None or bool(agent.get("dynamic_instructions"))


def _lifted(request: ModelRequest, instructed: bool) -> ModelRequest:
    """A request of format 3 or 4 as this helikon asks it: the agent's
    instructions, which those formats' requests held as their first message
    (a system message of one text part), in ``instructions``. A replay of an
    old trace then compares like with like, and an upgrade writes them so."""
    if not instructed or request.instructions is not None or not request.messages:
        return request
    first = request.messages[0]
    if type(first) is not SystemMessage or len(first.content) != 1 or type(first.content[0]) is not TextPart:
        return request
    return attrs.evolve(request, messages=request.messages[1:], instructions=first.content[0].text)


def _sharing(request: ModelRequest, previous: ModelRequest) -> ModelRequest:
    """``request`` reusing the previous request's message objects for the
    prefix the two share (a full request of format 3 or 4, read back), so a
    replay can skip comparing messages it has already compared once."""
    old, new = previous.messages, request.messages
    shared = 0
    for before, after in zip(old, new, strict=False):
        if before != after:
            break
        shared += 1
    if shared == 0:
        return request
    return attrs.evolve(request, messages=(*old[:shared], *new[shared:]))


_PATH: Any = tuple[str | int, ...]
_EVENTS: Any = tuple[AgentEvent, ...]


class _Slow(Exception):
    """:func:`_fast_step` met a line it leaves to the general reader."""


def _fast_step(record: dict[str, Any], last: dict[_Asker, ModelRequest]) -> TraceStep | None:
    """A step line of the current version read the quickest way, or None
    for the general reader (a line it does not take: a wave, a malformed
    value, ...). It gives the step the general reader gives, and changes
    ``last`` (each path's previous request) only once the whole line is read."""
    try:
        quick_of = _fast_quick or _fast_setup()
        raw_path = record.get("path", _NONE)
        path: tuple[str | int, ...] = () if raw_path == [] else quick_of[0](raw_path)
        index = record["index"]
        if type(index) is not int:
            return None
        read = _fast_effect(record["effect"], path, last)
        if read is None:
            return None
        result = quick_of[5](record["result"])
        raw_events = record["events"]
        events = quick_of[1](raw_events)
        raw_live = record.get("live", _NONE)
        if raw_live == []:
            live: tuple[AgentEvent, ...] = ()
        else:
            tail = len(raw_live) if type(raw_live) is list else -1
            if 0 < tail <= len(events) and _plain.encode(raw_live) == _plain.encode(raw_events[-tail:]):
                live = events[-tail:]
            else:
                live = quick_of[1](raw_live)
        now = record.get("now")
        step = TraceStep(index, read[0], result, events, path, live, None if now is None else _reading(now))
    except Exception:
        return None
    if read[1] is not None:
        last[read[1]] = read[0].request  # type: ignore[union-attr]
    return step


def _typed_step(line: Any, last: dict[_Asker, ModelRequest]) -> TraceStep | None:
    """:func:`_fast_step` of a line msgspec decoded (and so checked) as a
    step (see :func:`_step_types`): its values are built with no check."""
    try:
        if line.kind != "step":
            return None
        path = line.path
        types = _made_types[0]
        effect = line.effect
        if type(effect) is types.call:
            read = _typed_call(effect.request, effect.turn, path, last)
            if read is None:
                return None
        else:
            read = types.build_effect[type(effect)](effect), None
        result = types.build_result(line.result)
        events = types.build_events(line.events)
        raw_live = line.live
        if not raw_live:
            live: tuple[AgentEvent, ...] = ()
        else:
            tail = len(raw_live)
            ending = line.events[-tail:]
            # Equal mirrors of classes whose equal values have the same JSON
            # are the same JSON: compared in C, not encoded twice.
            if tail <= len(events) and (
                (ending == raw_live and types.exact_events.issuperset(map(type, raw_live)))
                or _plain.encode(raw_live) == _plain.encode(ending)
            ):
                live = events[-tail:]
            else:
                live = types.build_events(raw_live)
        step: TraceStep = _made[0](line.index, read[0], result, events, path, live, line.now)
    except Exception:
        return None
    if read[1] is not None:
        last[read[1]] = read[0].request  # type: ignore[union-attr]
    return step


def _fast_effect(
    raw: Any, path: tuple[str | int, ...], last: dict[_Asker, ModelRequest]
) -> tuple[Effect, _Asker | None] | None:
    """A step's effect read the quickest way, and the asker of its model
    request (to remember once the line is read); None for the general
    reader (which raises what is wrong). ``last`` is left as it is."""
    if type(raw) is not dict:
        return None
    kind = raw.get("type")
    if kind == "PerformAll":
        return None  # an agent tree's wave: the general reader
    if kind != "CallModel":
        return (_fast_quick or _fast_setup())[4](raw), None
    return _fast_call(raw.get("request"), raw.get("turn"), path, last)


def _fast_call(
    fields: Any, turn: Any, path: tuple[str | int, ...], last: dict[_Asker, ModelRequest]
) -> tuple[Effect, _Asker | None] | None:
    """:func:`_fast_effect` of a model call (its request and turn as read)."""
    if type(turn) is not int or type(fields) is not dict:
        return None
    quick_of = _fast_quick or _fast_setup()
    _makers()
    asker = (path, ())
    previous = last.get(asker)
    request: ModelRequest
    if _KEPT in fields:
        kept = fields[_KEPT]
        if type(kept) is not int:
            return None
        unset = msgspec.UNSET
        carried = [quick(tp)(fields[name]) if name in fields else unset for name, tp in _CARRIED.items()]
        continued = _continuing(previous, kept, quick_of[2](fields.get("messages")), *carried)
        if continued is None:
            return None
        request = continued
    else:
        request = quick_of[3](fields)
        if previous is not None:
            request = _sharing(request, previous)
    return _made[1](request, turn), asker


@attrs.frozen
class _StepTypes:
    """The msgspec type a step line of the current version decodes as, and
    what builds its carriers from it (see :func:`_step_types`)."""

    #: The line: its result, events and effect as checked mirrors of their
    #: carriers (see :func:`~helikon._structure.typed`); a model call as :attr:`call`.
    line: Any
    build_result: Quick
    build_events: Quick
    #: The builder of an effect other than a model call, by mirror type.
    build_effect: dict[type, Quick]
    decoder: msgspec.json.Decoder[Any]
    #: A model call as a step line holds it (read by :func:`_typed_call`).
    call: Any
    #: The builders of a model request's messages, tools and settings (see :func:`_request_line`).
    build_request: tuple[Quick, ...]
    #: The event mirrors whose equal values have the same JSON.
    exact_events: frozenset[type]


def _step_types() -> _StepTypes:
    """The step line's types and builders (made once; a wave has no mirror:
    its line is read the general way)."""
    if not _made_types:
        events, build_events = typed(_EVENTS)
        result, build_result = typed(EffectResult)
        request, build_request = _request_line()
        # A model call as a step line holds it: its request is read by
        # :func:`_typed_call` (whole, or what is new since its path's previous one).
        call = msgspec.defstruct(
            "CallLine",
            [("request", request), ("turn", int)],
            tag="CallModel",
            tag_field="type",
            kw_only=True,
            gc=False,
        )
        effects: list[Any] = [call]
        build_effect: dict[type, Quick] = {}
        for member in typing.get_args(Effect):
            mirror, build = typed_member(member)
            if member is not CallModel and member is not PerformAll and mirror is not Any and build:
                effects.append(mirror)
                build_effect[mirror] = build
        line = msgspec.defstruct(
            "StepLine",
            [
                ("effect", typing.Union[tuple(effects)]),  # noqa: UP007 (a union of a list of types)
                ("events", events),
                ("index", int),
                ("kind", str),
                ("live", events, ()),
                ("now", float | None, None),
                ("path", tuple[str | int, ...], ()),
                ("result", result),
            ],
            kw_only=True,
            gc=False,
        )
        _makers()
        _made_types.append(
            _StepTypes(
                line,
                build_result or _same,
                build_events or _same,
                build_effect,
                msgspec.json.Decoder(line),
                call,
                build_request,
                frozenset(m for m in _members(events) if exact(m)),
            )
        )
    return _made_types[0]


def _same(value: Any) -> Any:
    return value


def _members(events: Any) -> tuple[Any, ...]:
    """The classes of the events mirror type ``events`` (a tuple of a union
    of mirrors), or none (a type :func:`typed` has no mirror for)."""
    args = typing.get_args(events)
    return typing.get_args(args[0]) if len(args) == 2 and args[1] is Ellipsis else ()


def _request_line() -> tuple[Any, tuple[Quick, ...]]:
    """The msgspec type of a step line's model request, whole or continuing
    its path's previous one (``kept`` and the new messages; the tools,
    settings or instructions only when they changed: absent, they are
    ``UNSET``), and the functions that build its messages, tools and
    settings (see :func:`_typed_call`)."""
    items, build_items = typed(_ITEMS)
    fields: list[tuple[str, Any, Any]] = [("kept", int | msgspec.UnsetType, msgspec.UNSET)]
    fields.append(("messages", items, msgspec.NODEFAULT))
    builds: list[Quick] = [build_items or _same]
    for name in ("tools", "settings"):
        mirror, build = typed(_CARRIED[name])
        fields.append((name, mirror if mirror is Any else mirror | msgspec.UnsetType, msgspec.UNSET))
        builds.append(build or _same)
    fields.append(("instructions", str | None | msgspec.UnsetType, msgspec.UNSET))
    line = msgspec.defstruct("RequestLine", fields, kw_only=True, gc=False)
    return line, tuple(builds)


def _typed_call(
    fields: Any, turn: int, path: tuple[str | int, ...], last: dict[_Asker, ModelRequest]
) -> tuple[Effect, _Asker | None] | None:
    """:func:`_fast_call` of a model call msgspec decoded (and so checked):
    its values are built with no check. An absent field is ``UNSET``: a
    whole request's takes :class:`~helikon.model.ModelRequest`'s default, a
    continuing one's its path's previous request's."""
    build = _made_types[0].build_request
    asker = (path, ())
    previous = last.get(asker)
    added = build[0](fields.messages)
    unset = msgspec.UNSET
    tools, settings, instructions = fields.tools, fields.settings, fields.instructions
    tools = tools if tools is unset else build[1](tools)
    settings = settings if settings is unset else build[2](settings)
    kept = fields.kept
    request: ModelRequest | None
    if kept is not unset:
        request = _continuing(previous, kept, added, tools, settings, instructions)
        if request is None:
            return None
    else:
        defaults = _REQUEST_DEFAULTS
        request = _made[2](
            added,
            defaults[0] if tools is unset else tools,
            defaults[1] if settings is unset else settings,
            defaults[2] if instructions is unset else instructions,
        )
        if previous is not None:
            request = _sharing(request, previous)
    return _made[1](request, turn), asker


def _continuing(
    previous: ModelRequest | None,
    kept: int,
    added: tuple[Item, ...],
    tools: Any,
    settings: Any,
    instructions: Any,
) -> ModelRequest | None:
    """The request a line that continues its path's ``previous`` request
    gives: ``kept`` of its messages, then ``added``; its tools, settings and
    instructions where the line leaves them out (``UNSET``). None when
    there is no previous request or it has fewer than ``kept`` messages."""
    if previous is None or not 0 <= kept <= len(previous.messages):
        return None
    unset = msgspec.UNSET
    return _made[2](  # type: ignore[no-any-return]
        _continued(previous.messages, kept, added),
        previous.tools if tools is unset else tools,
        previous.settings if settings is unset else settings,
        previous.instructions if instructions is unset else instructions,
    )


#: :func:`_step_types`'s record (made once).
_made_types: list[_StepTypes] = []
#: :func:`~helikon._structure.maker` of a step, a model call and a model request (made once).
_made: list[Any] = []


def _makers() -> None:
    """Fill :data:`_made` (once)."""
    if not _made:
        _made.extend(map(maker, (TraceStep, CallModel, ModelRequest)))


def _continued(before: Sequence[Item], kept: int, added: tuple[Item, ...]) -> Sequence[Item]:
    """The messages of a request that keeps ``kept`` of the previous one's
    ``before`` and adds ``added``: a conversation that shares the previous
    one's chunks when it keeps them all (as the run's own does), so that
    reading one costs what the turn added and a replay compares the shared
    prefix chunk by chunk."""
    if kept == len(before):
        if type(before) is Conversation:
            return before.append(added) if added else before
        return Conversation((*before, *added))
    return (*before[:kept], *added)


def _same_head(messages: Sequence[Item], previous: Sequence[Item], n: int) -> bool:
    """``messages[:n] == previous[:n]``; for two conversations that share
    their chunks (a run's successive requests, or a trace's read back) a
    check of the chunks' identity and of the previous open chunk, not of
    every message (an item's place fixes its chunk, so this is exact)."""
    if type(messages) is Conversation and type(previous) is Conversation and n == len(previous):
        chunks, before = messages._chunks, previous._chunks
        k = len(before)
        if len(chunks) < k or (k and chunks[:k] != before):
            return False
        tail = previous._tail
        if not tail:
            return True
        return (chunks[k] if len(chunks) > k else messages._tail)[: len(tail)] == tail
    return messages[:n] == previous[:n]


def _since(messages: Sequence[Item], start: int) -> Sequence[Item]:
    """``messages[start:]`` (of a conversation: its newest items, with no copy of the rest)."""
    if type(messages) is Conversation:
        base = len(messages._chunks) << _SHIFT
        if start >= base:
            return messages._tail[start - base :]
        if start >= base - CHUNK:
            return messages._chunks[-1][start - base + CHUNK :] + messages._tail
    return messages[start:]


def _fast_setup() -> list[Quick]:
    """The quick structure functions :func:`_fast_step` calls (built once)."""
    _fast_quick.extend(quick(tp) for tp in (_PATH, _EVENTS, _ITEMS, ModelRequest, Effect, EffectResult))
    return _fast_quick


_fast_quick: list[Quick] = []
#: An absent ``path`` or ``live`` of a step line (read as none).
_NONE: Final[list[Any]] = []


def _quick_read(value: Any, as_type: Any, field: str) -> Any:
    """A field of a line the quick way (:mod:`helikon._structure`): the same
    value as the strict way, or an exception that makes the caller read the
    line the strict way."""
    known = _known.get(id(as_type))
    if known is None:
        if not _known:
            # The types a trace reads, found by identity: hashing a union
            # of many classes (``EffectResult``) costs more than reading a value.
            for tp in (
                _PATH,
                _EVENTS,
                _AT,
                _ITEMS,
                int,
                EffectResult,
                Effect,
                ModelRequest,
                *_CARRIED.values(),
            ):
                _known[id(tp)] = quick(tp)
            return _quick_read(value, as_type, field)
        return quick(as_type)(value)
    return known(value)


#: :func:`quick` of the module's own (immortal) type constants, by identity.
_known: dict[int, Any] = {}


_encoder = msgspec.json.Encoder(order="sorted")
_decoder = msgspec.json.Decoder()
_plain = msgspec.json.Encoder()


def _encode(value: object) -> bytes:
    return _encoder.encode(value)


#: A reference to a text line, and the wrapper of a genuine object that
#: happens to use one of these two keys (so nothing is ever misread).
_TEXT_KEY: Final = "$text"
_LITERAL_KEY: Final = "$object"
#: How a reference (``{"$text":``) or a wrapper (``{"$object":``) starts on a
#: line: inside a JSON string a quote is escaped, so these bytes occur only
#: as an object with a ``$`` key; a line that has one and neither of the two
#: is read the general way, which gives the same value.
_REF_START: Final = b'{"$'
#: How a step line starts (its keys are sorted).
_STEP_START: Final = b'{"effect":'


class _Texts:
    """Interns long strings while a trace is written: each distinct one gets
    the next number (in order of first use) and is written once, on a
    ``text`` line just before the first line that refers to it."""

    def __init__(self) -> None:
        self.refs: dict[str, dict[str, int]] = {}  # text -> its (shared) reference
        self.fresh: list[tuple[int, str]] = []

    def intern(self, value: Any) -> Any:
        refs, fresh = self.refs, self.fresh

        def walk(item: Any) -> Any:
            kind = type(item)
            if kind is str:
                if len(item) < TEXT_MIN:
                    return item
                ref = refs.get(item)
                if ref is None:
                    ref = refs[item] = {_TEXT_KEY: len(refs)}
                    fresh.append((ref[_TEXT_KEY], item))
                return ref
            if kind is dict:
                # Sorted, as written: numbers follow the order a reader meets
                # texts in. Class tags (``"type"``: strings) stay in place,
                # readable; anything else under that key is walked like any
                # value (a payload's own ``"type"`` must read back the same).
                inner = {
                    k: v if k == "type" and type(v) is str else walk(v)
                    for k in sorted(item)
                    for v in (item[k],)
                }
                if _TEXT_KEY in item or _LITERAL_KEY in item:
                    return {_LITERAL_KEY: inner}
                return inner
            if kind is list:
                return [walk(v) for v in item]
            return item

        return walk(value)

    def flush(self) -> list[bytes]:
        lines = [_encode({"kind": "text", "id": n, "text": t}) for n, t in self.fresh]
        self.fresh = []
        return lines


def _resolve(value: Any, texts: dict[int, str]) -> Any:
    """A record read back: text references replaced by their texts."""

    def walk(item: Any) -> Any:
        kind = type(item)
        if kind is dict:
            if len(item) == 1:
                if _TEXT_KEY in item:
                    number = item[_TEXT_KEY]
                    if number not in texts:
                        raise ValueError(f"it refers to text {number!r}, which no text line defines")
                    return texts[number]
                if _LITERAL_KEY in item:
                    return {k: walk(v) for k, v in item[_LITERAL_KEY].items()}
            return {k: walk(v) for k, v in item.items()}
        if kind is list:
            return [walk(v) for v in item]
        return item

    return walk(value)


def _pathless(trace: Trace, events: tuple[AgentEvent, ...]) -> bool:
    """:attr:`Trace.pathless` of ``trace``, whose :attr:`~Trace.events` are ``events``."""
    return not any(map(_PATH_OF, events)) and not any(
        map(_PATH_OF, chain.from_iterable(map(_LIVE_OF, trace.steps)))
    )


_EVENTS_OF: Final = attrgetter("events")
_LIVE_OF: Final = attrgetter("live")
_PATH_OF: Final = attrgetter("path")


def without_paths(events: Iterable[AgentEvent]) -> tuple[AgentEvent, ...]:
    """``events`` with no emitting path (how a :attr:`Trace.pathless`
    recording shows them)."""
    events = tuple(events)
    if not any(map(_PATH_OF, events)):  # a run of one agent: none has a path
        return events
    return tuple(attrs.evolve(e, path=()) if e.path else e for e in events)


__all__ = [
    "FORMAT",
    "READABLE",
    "VERSION",
    "Trace",
    "TraceFormatError",
    "TraceHeader",
    "TraceStep",
    "TraceVersionWarning",
    "definition_of",
    "fingerprint",
    "governance_of",
    "member_definition",
    "tree_definition",
    "upgrade",
    "without_paths",
]

if __name__ == "__main__":
    raise SystemExit(main())
