"""Traces: a run as data, in versioned JSON Lines.

A trace is everything needed to replay a run with no model, no tools and no
network: a header naming the agent and fingerprinting its definition, then
one line per effect with the result that was fed back and the events emitted
up to and including that effect's live deltas, then a closing line with the
last events. ``docs/traces.md`` is the format's specification.

Lines are msgspec-encoded JSON with sorted keys, so a trace is byte-stable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from helikon import codec
from helikon.agents import Member, TreeSpec, WorkflowSpec
from helikon.effects import CallModel, Effect, EffectResult
from helikon.errors import HelikonError
from helikon.events import AgentEvent
from helikon.items import Item
from helikon.loop import AgentSpec

#: The format's name, in every header.
FORMAT: Final = "helikon-trace"
#: The format version this helikon writes and reads.
VERSION: Final = 3


class TraceFormatError(HelikonError):
    """A trace file could not be read: not a trace, or an unknown version."""


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
        definition["agents"] = {m.name: member_definition(m) for m in tree.members}
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


@attrs.frozen
class Trace:
    """A recorded run."""

    header: TraceHeader
    steps: tuple[TraceStep, ...]
    final_events: tuple[AgentEvent, ...]

    @property
    def events(self) -> tuple[AgentEvent, ...]:
        """Every event of the run, in order."""
        return (*(e for step in self.steps for e in step.events), *self.final_events)

    def to_lines(self) -> list[bytes]:
        """The trace as JSON Lines (without newlines)."""
        header = codec.unstructure(self.header)
        header["kind"] = "header"
        lines = [_encode(header)]
        for step in self.steps:
            lines.append(
                _encode(
                    {
                        "kind": "step",
                        "index": step.index,
                        "path": list(step.path),
                        "effect": codec.unstructure(step.effect, Effect),
                        "result": codec.unstructure(step.result, EffectResult),
                        "events": [codec.unstructure(e, AgentEvent) for e in step.events],
                        "live": [codec.unstructure(e, AgentEvent) for e in step.live],
                    }
                )
            )
        lines.append(
            _encode({"kind": "end", "events": [codec.unstructure(e, AgentEvent) for e in self.final_events]})
        )
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
        """Read a trace from its JSON Lines."""
        records = []
        for number, line in enumerate(lines, 1):
            if isinstance(line, str):
                line = line.encode()
            if not line.strip():
                continue
            try:
                records.append(msgspec.json.decode(line))
            except msgspec.DecodeError as exc:
                raise TraceFormatError(f"{source}:{number}: not JSON: {exc}") from None
        if not records or not isinstance(records[0], dict) or records[0].get("kind") != "header":
            raise TraceFormatError(f"{source}: not a helikon trace (no header line)")
        head = records[0]
        if head.get("format") != FORMAT:
            raise TraceFormatError(f"{source}: format {head.get('format')!r} is not {FORMAT!r}")
        if head.get("version") != VERSION:
            raise TraceFormatError(
                f"{source}: trace version {head.get('version')!r} is not supported "
                f"(this helikon reads version {VERSION}); re-record the trace"
            )
        try:
            header = codec.structure({k: v for k, v in head.items() if k != "kind"}, TraceHeader)
            steps: list[TraceStep] = []
            final: tuple[AgentEvent, ...] = ()
            for record in records[1:]:
                if record.get("kind") == "step":
                    steps.append(
                        TraceStep(
                            record["index"],
                            _shared_prefix(codec.structure(record["effect"], Effect), steps),
                            codec.structure(record["result"], EffectResult),
                            tuple(codec.structure(e, AgentEvent) for e in record["events"]),
                            tuple(record.get("path", ())),
                            tuple(codec.structure(e, AgentEvent) for e in record.get("live", ())),
                        )
                    )
                elif record.get("kind") == "end":
                    final = tuple(codec.structure(e, AgentEvent) for e in record["events"])
        except Exception as exc:
            raise TraceFormatError(f"{source}: malformed trace: {exc}") from exc
        return cls(header, tuple(steps), final)

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<trace>") -> Trace:
        return cls.from_lines(data.splitlines(), source)

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read the trace at ``path``."""
        return cls.from_bytes(Path(path).read_bytes(), str(path))


def _shared_prefix(effect: Effect, earlier: list[TraceStep]) -> Effect:
    """Reuse the previous model request's message objects for the prefix the
    two requests share (a conversation only grows), so a replay can skip
    comparing, again and again, messages it has already compared once."""
    if not isinstance(effect, CallModel):
        return effect
    previous = next((s.effect for s in reversed(earlier) if isinstance(s.effect, CallModel)), None)
    if previous is None:
        return effect
    old, new = previous.request.messages, effect.request.messages
    shared = 0
    for before, after in zip(old, new, strict=False):
        if before != after:
            break
        shared += 1
    if shared == 0:
        return effect
    messages = (*old[:shared], *new[shared:])
    request = attrs.evolve(effect.request, messages=messages)
    return attrs.evolve(effect, request=request)


_encoder = msgspec.json.Encoder(order="sorted")


def _encode(value: object) -> bytes:
    return _encoder.encode(value)


__all__ = [
    "FORMAT",
    "VERSION",
    "Trace",
    "TraceFormatError",
    "TraceHeader",
    "TraceStep",
    "definition_of",
    "fingerprint",
    "governance_of",
    "member_definition",
    "tree_definition",
]
