"""Print the agent loop's phase table (markdown) for ``docs/architecture.md``.

The rows are ``helikon.loop.TABLE``: every (phase, result) pair the machine
accepts. The other columns come from running the machine, not from prose:
starting from a few small agents, it feeds every pending effect a fixed set
of sample results, breadth first, and records the phases each pair led to;
the pending effect of each phase is what :func:`helikon.loop.resume` derives
from the state. A phase no run reaches (a reserved one) is explored from a
bare state in that phase. A pair the exploration never exercised says so in
its row, so the table cannot silently claim more than the machine showed.

Usage::

    python docs/make_state_table.py            # print the table
    python docs/make_state_table.py --write    # replace it in docs/architecture.md
"""

from __future__ import annotations

import sys
import types
import typing
from collections import deque
from pathlib import Path
from typing import Any

import attrs
from returns.result import Success

from helikon.codec import to_json
from helikon.config import RunConfig
from helikon.effects import (
    ApprovalDecision,
    ApprovalsGiven,
    AskApprovals,
    AskPolicy,
    AwaitApproval,
    CallModel,
    CallStep,
    CheckGuardrails,
    Effect,
    EffectResult,
    ExecuteTools,
    FireHook,
    GuardrailsChecked,
    Handoff,
    HandoffCompleted,
    HookAnswered,
    HooksRan,
    InstructionsFailed,
    InstructionsRendered,
    InvokeTool,
    ModelCallFailed,
    ModelResponded,
    PolicyAnswered,
    RenderInstructions,
    RunHooks,
    RunInterrupted,
    StepResult,
    Terminate,
    ToolRaised,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import Cancelled, GuardrailTripped, InvalidArgs, OtherError, Unavailable
from helikon.governance import Allow, AskUser, Deny, PermissionSettings
from helikon.ids import RunId
from helikon.items import AgentInput
from helikon.loop import (
    TABLE,
    AgentSpec,
    ApprovalRoute,
    Governance,
    HandoffSpec,
    LoopState,
    Outcome,
    OutputSchema,
    RunState,
    resume,
    start,
    transition,
)
from helikon.model import ToolDef, Usage
from helikon.testing import call_tools, say

DOC = Path(__file__).with_name("architecture.md")
BEGIN, END = "<!-- state-table:begin -->", "<!-- state-table:end -->"

#: The phases in the order the book lists them.
PHASES: tuple[type, ...] = typing.get_args(LoopState)

ECHO = ToolDef(
    "echo", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
)
VERDICT = OutputSchema(
    "verdict", {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
)
AGENTS = (
    AgentSpec("plain", tools=(ECHO,), config=RunConfig(max_turns=3)),
    AgentSpec(
        "everything",
        tools=(ECHO,),
        dynamic_instructions=True,
        output=VERDICT,
        handoffs=(HandoffSpec("transfer_to_expert", "expert", "An expert."),),
        config=RunConfig(max_turns=2),
    ),
    AgentSpec(
        "governed",
        tools=(ECHO,),
        input_guardrails=True,
        output_guardrails=True,
        hooks=True,
        config=RunConfig(max_turns=2),
        governance=Governance(
            PermissionSettings(has_policy=True), hooks=("audit",), approvals=ApprovalRoute.SUSPEND
        ),
    ),
    AgentSpec(
        "asking",
        tools=(ECHO,),
        config=RunConfig(max_turns=2),
        governance=Governance(PermissionSettings(has_policy=True), approvals=ApprovalRoute.HANDLER),
    ),
    AgentSpec("structured", output=VERDICT),
)

MODEL_ANSWERS: tuple[EffectResult, ...] = (
    ModelResponded(tuple(say("Hello."))),
    ModelResponded(tuple(say('{"ok": true}'))),
    ModelResponded(tuple(call_tools(("echo", {"text": "hi"})))),
    ModelResponded(tuple(call_tools(("echo", "{")))),
    ModelResponded(tuple(call_tools(("nope", {})))),
    ModelResponded(tuple(call_tools(("transfer_to_expert", {})))),
    ModelCallFailed(Unavailable("down")),
)


def answers(effect: Effect) -> list[EffectResult]:
    """The sample results fed to ``effect`` (an interruption always among them)."""
    results: list[EffectResult] = [RunInterrupted(Cancelled())]
    match effect:
        case RenderInstructions():
            results.append(InstructionsRendered("Be brief."))
            results.append(InstructionsFailed("KeyError: 'user'"))
        case CallModel():
            results.extend(MODEL_ANSWERS)
        case ExecuteTools(steps=steps):
            results.append(ToolsExecuted(tuple(_answer(s, "ok") for s in steps)))
            results.append(ToolsExecuted(tuple(_answer(s, "ask") for s in steps)))
            results.append(ToolsExecuted(tuple(_answer(s, "bad") for s in steps)))
        case CheckGuardrails():
            results.append(GuardrailsChecked())
            results.append(GuardrailsChecked(GuardrailTripped("input", "blocked")))
        case RunHooks():
            results.append(HooksRan())
            results.append(HooksRan(injected=("Be careful.",)))
            results.append(HooksRan(denied="not today"))
        case AwaitApproval(requests=requests) | AskApprovals(requests=requests):
            results.append(ApprovalsGiven(tuple(ApprovalDecision(r.call_id, True) for r in requests)))
            results.append(ApprovalsGiven(tuple(ApprovalDecision(r.call_id, False, "no") for r in requests)))
        case Handoff():
            results.append(HandoffCompleted("Done by the expert.", Usage()))
            results.append(HandoffCompleted("", Usage(), OtherError("the expert failed")))
    return results


def _answer(step: CallStep, how: str) -> StepResult:
    """A sample result of one step: fine, asking a human, or failing."""
    match step:
        case InvokeTool(call_id=cid):
            return ToolRaised(cid, InvalidArgs(("bad",))) if how == "bad" else ToolReturned(cid, "ok")
        case AskPolicy(call_id=cid):
            return PolicyAnswered(cid, AskUser("Run it?") if how == "ask" else Allow())
        case FireHook(call_id=cid):
            return HookAnswered(cid, Deny("no") if how == "bad" else Allow())


def minimal(tp: Any) -> Any:
    """The simplest value of a carrier type: zeros, empty strings and tuples, None."""
    if tp is type(None) or (
        typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)
    ):
        return None
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return minimal(typing.get_args(tp)[0])
    if typing.get_origin(tp) is tuple:
        return ()
    if isinstance(tp, type) and attrs.has(tp):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: minimal(hints[f.name]) for f in attrs.fields(tp) if f.default is attrs.NOTHING})
    return {int: 1, float: 1.0, str: "", bool: False}.get(getattr(tp, "__supertype__", tp), {})


def explore(
    seeds: list[tuple[AgentSpec, Outcome]],
) -> tuple[dict[tuple[type, type], set[type]], dict[type, set[str]]]:
    """Breadth-first from ``seeds``: the phases each (phase, result) pair led
    to, and the pending effects seen in each phase."""
    led_to: dict[tuple[type, type], set[type]] = {}
    effects: dict[type, set[str]] = {}
    queue = deque(seeds)
    seen: set[bytes] = set()
    while queue:
        spec, outcome = queue.popleft()
        key = to_json(outcome.state) + spec.name.encode()
        if key in seen:
            continue
        seen.add(key)
        phase = type(outcome.state.phase)
        pending = resume(outcome.state, spec)
        effects.setdefault(phase, set()).add(
            type(pending.unwrap().effect).__name__ if isinstance(pending, Success) else ""
        )
        for result in answers(outcome.effect):
            step = transition(outcome.state, result, spec)
            if isinstance(step, Success):
                nxt = step.unwrap()
                led_to.setdefault((phase, type(result)), set()).add(type(nxt.state.phase))
                queue.append((spec, nxt))
    return led_to, effects


def seeds() -> list[tuple[AgentSpec, Outcome]]:
    """Every agent's first outcome, plus a bare state in each phase no run reached."""
    found = [(spec, start(spec, AgentInput.from_user_text("Hi"), RunId("r"))) for spec in AGENTS]
    _, reached = explore(found)
    for phase in PHASES:
        if phase not in reached:
            state = RunState(RunId("r"), AGENTS[0].name, minimal(phase))
            pending = resume(state, AGENTS[0])
            effect = pending.unwrap().effect if isinstance(pending, Success) else Terminate()
            found.append((AGENTS[0], Outcome(state, (), effect)))
    return found


def names(types: set[type], order: tuple[type, ...]) -> str:
    return ", ".join(f"`{t.__name__}`" for t in order if t in types)


def render() -> str:
    """The markdown table."""
    led_to, effects = explore(seeds())
    lines = [
        "| phase | pending effect | accepts | next phases |",
        "|---|---|---|---|",
    ]
    for phase in PHASES:
        pending = ", ".join(f"`{e}`" for e in sorted(effects.get(phase, set())) if e) or "none yet (reserved)"
        accepted = [r for p, r in TABLE if p is phase]
        if not accepted:
            lines.append(f"| `{phase.__name__}` | {pending} | nothing (terminal) | |")
        for result in accepted:
            reached = led_to.get((phase, result))
            nxt = names(reached, PHASES) if reached else "not reached by the exploration: add a sample result"
            lines.append(f"| `{phase.__name__}` | {pending} | `{result.__name__}` | {nxt} |")
    return "\n".join(lines) + "\n"


def write(doc: Path = DOC) -> None:
    """Replace the table between the markers of ``doc``."""
    text = doc.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{render()}{END}{tail}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        sys.stdout.write(render())
