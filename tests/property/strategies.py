"""Strategies and helpers shared by the property tests.

The reusable strategies live in :mod:`helikon.testing.strategies` (users
import them too); this module re-exports them and adds what only helikon's
own tests need: whole scripted runs, the phase and result types, and a way to
scale a test's example count to the loaded profile.
"""

from __future__ import annotations

import typing
import zlib
from collections.abc import Iterable
from typing import Any, Final

import attrs
import msgspec
from hypothesis import settings
from hypothesis import strategies as st

from helikon.config import PermissionMode
from helikon.effects import (
    AgentsRan,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalsGiven,
    AskPolicy,
    CallStep,
    EffectResult,
    ExecuteTools,
    FireHook,
    HandoffCompleted,
    HookAnswered,
    InstructionsRendered,
    InvokeTool,
    ModelCallFailed,
    ModelResponded,
    PolicyAnswered,
    ReconcileTool,
    RunInterrupted,
    StepResult,
    ToolRaised,
    ToolReturned,
    ToolsExecuted,
)
from helikon.errors import Cancelled, Denied, ModelError, Unavailable
from helikon.governance import (
    Allow,
    AllowRule,
    Deny,
    DenyRule,
    GuardAction,
    GuardRule,
    PermissionSettings,
    PostToolUse,
    PreToolUse,
)
from helikon.ids import CallId
from helikon.loop import AgentSpec, ApprovalRoute, Governance, LoopState
from helikon.model import ModelEvent, TextChunk, Usage
from helikon.testing.strategies import (
    CallKind,
    PlannedCall,
    ScriptedTool,
    TurnPlan,
    agent_inputs,
    agent_specs,
    arg_schemas,
    carriers,
    final_answers,
    handoff_lists,
    handoff_specs,
    hook_decisions,
    interruptions,
    malformed_json,
    matching_args,
    model_errors,
    model_failures,
    model_turns,
    non_matching_args,
    output_schemas,
    policy_decisions,
    run_configs,
    run_ids,
    step_results,
    tool_def_lists,
    tool_defs,
    tool_fns,
    tool_names,
    tool_outcomes,
    turn_plans,
    usages,
)

#: Every phase of the loop, in the book's order.
PHASES: Final[tuple[type, ...]] = typing.get_args(LoopState)

#: Every result an interpreter can feed back.
RESULTS: Final[tuple[type, ...]] = typing.get_args(EffectResult)

#: Call kinds, weighted towards calls that run (a repeated kind is drawn more often).
MOSTLY_VALID: Final[tuple[CallKind, ...]] = (CallKind.VALID, CallKind.VALID, CallKind.VALID, *CallKind)

#: One result of every type, for checking that terminal states refuse them all.
ONE_OF_EACH_RESULT: Final[tuple[EffectResult, ...]] = (
    InstructionsRendered("be brief"),
    ModelResponded((TextChunk("hello"),)),
    ModelCallFailed(Unavailable("down")),
    ToolsExecuted(()),
    HandoffCompleted("done", Usage()),
    AgentsRan(()),
    RunInterrupted(Cancelled()),
)


def scaled(fraction: float, **overrides: Any) -> settings:
    """Settings running ``fraction`` of the loaded profile's examples (at least 5).

    For tests parametrized many ways, so the whole suite keeps its budget.
    """
    loaded = settings.default
    assert loaded is not None
    return settings(max_examples=max(5, int(loaded.max_examples * fraction)), **overrides)


def per_path(events: Iterable[Any]) -> dict[tuple[str, ...], list[Any]]:
    """Each emitting path's events, in order. Waves are not lock-step, so
    branches interleave as their steps finish; what each member says, and in
    which order, does not depend on that."""
    found: dict[tuple[str, ...], list[Any]] = {}
    for event in events:
        found.setdefault(event.path, []).append(event)
    return found


def usage_of(events: Iterable[ModelEvent]) -> Usage:
    """The sum of the usage events among ``events``."""
    total = Usage()
    for event in events:
        if isinstance(event, Usage):
            total = total + event
    return total


def fed_usage(result: EffectResult) -> Usage:
    """The usage a result reports (model calls and handoffs)."""
    if isinstance(result, ModelResponded | ModelCallFailed):
        return usage_of(result.events)
    if isinstance(result, HandoffCompleted):
        return result.usage
    return Usage()


# -- JSON key order ------------------------------------------------------------
@st.composite
def scripts(draw: st.DrawFn, spec: AgentSpec, max_turns: int | None = None) -> list[list[object]]:
    """Model scripts for a whole run of ``spec``: turns with and without tool
    calls, final answers when it has an output schema, now and then a model
    error part-way through a turn."""
    count = max_turns if max_turns is not None else spec.config.max_turns + 2
    calling = 1 if spec.tools else 0
    plans = turn_plans(spec.tools, min_calls=calling, kinds=MOSTLY_VALID)
    turn = plans.map(lambda plan: list(plan.events))
    kinds = [turn, turn_plans(spec.tools, max_calls=0).map(lambda plan: list(plan.events))]
    if spec.output is not None:
        kinds.append(
            turn_plans(text=final_answers(spec.output.schema), max_calls=0).map(lambda p: list(p.events))
        )
    result: list[list[object]] = []
    for _ in range(draw(st.integers(1, count))):
        events: list[object] = list(draw(st.one_of(kinds)))
        # Not ``== 0``: Hypothesis favours the bounds, and a script should mostly run.
        if draw(st.integers(0, 9)) == 5:
            events.insert(draw(st.integers(0, len(events))), draw(model_errors()))
        result.append(events)
    return result


@st.composite
def governances(draw: st.DrawFn, tools: tuple[str, ...] = ()) -> Governance:
    """Governance for an agent with tools named ``tools``: a policy or not,
    any mode (mostly the default), any approval route, up to two tool hooks,
    redaction of a known secret, and now and then a deny, guard or allow
    rule naming one of the tools (so it matches). Now and then the default,
    under which calls just run.

    Counts are drawn from lists of options (``sampled_from``) rather than
    ranges, so the rules that decide a call before anyone is asked stay rare
    and calls reach the policy, the humans and the tool."""
    if not draw(st.sampled_from(range(5))):
        return Governance()
    names = st.sampled_from(tools) if tools else tool_names()

    def some(rule: st.SearchStrategy[Any], weights: tuple[int, ...]) -> tuple[Any, ...]:
        return tuple(draw(rule) for _ in range(draw(st.sampled_from(weights))))

    guard = st.builds(
        GuardRule.tool,
        names,
        st.sampled_from([GuardAction.ASK] * 3 + [GuardAction.DENY]),
        st.text(max_size=8),
    )
    modes = [PermissionMode.DEFAULT] * 4 + list(PermissionMode)
    permissions = PermissionSettings(
        mode=draw(st.sampled_from(modes)),
        deny_rules=some(names.map(DenyRule.tool), (0, 0, 0, 1)),
        guard_rules=some(guard, (0, 1, 1, 2)),
        allow_rules=some(names.map(AllowRule.tool), (0, 0, 0, 1)),
        has_policy=draw(st.booleans()),
    )
    return Governance(
        permissions=permissions,
        hooks=("audit", "lint")[: draw(st.sampled_from((0, 0, 1, 2)))],
        approvals=draw(st.sampled_from(ApprovalRoute)),
        redact=draw(st.booleans()),
        secrets=some(st.text("abc", min_size=8, max_size=10), (0, 1)),
    )


def governed(specs: st.SearchStrategy[AgentSpec]) -> st.SearchStrategy[AgentSpec]:
    """``specs`` with :func:`governances` over their own tools."""
    return specs.flatmap(
        lambda spec: governances(tuple(t.name for t in spec.tools)).map(
            lambda governance: attrs.evolve(spec, governance=governance)
        )
    )


def steps_answered(effect: ExecuteTools) -> st.SearchStrategy[ToolsExecuted]:
    """A result for every step of ``effect``, in order."""
    return st.tuples(*map(step_results, effect.steps)).map(ToolsExecuted)


def approvals_for(requests: Iterable[ApprovalRequest]) -> st.SearchStrategy[ApprovalsGiven]:
    """A yes or no for every one of ``requests``."""
    decisions = [
        st.builds(ApprovalDecision, st.just(r.call_id), st.booleans(), st.text(max_size=8)) for r in requests
    ]
    return st.tuples(*decisions).map(ApprovalsGiven)


@attrs.frozen
class Scripted:
    """A deterministic hook, permission policy or approval handler for
    :class:`~helikon.interpreters.TestInterpreter`: a checksum of the question's
    canonical JSON picks one of ``answers`` (an exception answer is raised),
    so two runs asked the same questions answer alike, before and after a
    reload."""

    answers: tuple[Any, ...]

    def pick(self, question: object) -> Any:
        answer = self.answers[zlib.crc32(msgspec.json.encode(question, order="sorted")) % len(self.answers)]
        if isinstance(answer, Exception):
            raise answer
        return answer


@attrs.frozen
class ScriptedHook(Scripted):
    def __call__(self, ctx: object, event: PreToolUse | PostToolUse) -> Any:
        return self.pick(attrs.asdict(event))


@attrs.frozen
class ScriptedPolicy(Scripted):
    def __call__(self, ctx: object, tool: str, args: object) -> Any:
        return self.pick([tool, args])


@attrs.frozen
class ScriptedApprover(Scripted):
    def __call__(self, request: ApprovalRequest) -> Any:
        return self.pick([request.call_id, request.tool, request.prompt])


def _scripted(kind: type[Scripted], answers: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    raises = st.builds(RuntimeError, st.text(max_size=6))
    return st.lists(answers | raises, min_size=1, max_size=3).map(lambda a: kind(tuple(a)))


def callbacks_for(spec: AgentSpec) -> st.SearchStrategy[dict[str, Any]]:
    """The hooks, policy and approval handler ``spec``'s governance names, as
    :class:`TestInterpreter` keyword arguments."""
    governance = spec.governance
    hook = _scripted(ScriptedHook, hook_decisions())
    return st.fixed_dictionaries(
        {
            "hooks": st.tuples(*(hook for _ in governance.hooks)),
            "policy": _scripted(ScriptedPolicy, policy_decisions())
            if governance.permissions.has_policy
            else st.none(),
            "approval_handler": _scripted(
                ScriptedApprover, st.just(Allow()) | st.builds(Deny, st.text(max_size=6))
            )
            if governance.approvals is ApprovalRoute.HANDLER
            else st.none(),
        }
    )


def wrong_kinds(step: CallStep) -> tuple[StepResult, ...]:
    """Results of the wrong kind for ``step`` (right call id)."""
    cid = step.call_id
    hook, policy = HookAnswered(cid, Allow()), PolicyAnswered(cid, Allow())
    returned, raised = ToolReturned(cid, "ok"), ToolRaised(cid, Denied("no"))
    match step:
        case FireHook():
            return policy, returned, raised
        case AskPolicy():
            return hook, returned, raised
        case InvokeTool() | ReconcileTool():
            # A started call also takes its reconcile step's answers (the
            # state cannot tell a resumed run from a first one).
            return hook, policy


@st.composite
def wrong_step_results(draw: st.DrawFn, steps: tuple[CallStep, ...]) -> ToolsExecuted:
    """Results that answer no step, answer one twice, add one, answer the
    wrong call id, or answer a step with a result of the wrong kind. (Some
    steps missing is a partial answer, which the loop accepts: the rest stay
    pending.)"""
    results: list[StepResult] = [draw(step_results(s)) for s in steps]
    how = draw(st.sampled_from(["none", "twice", "extra", "wrong_id", "wrong_kind"]))
    i = draw(st.integers(0, len(results) - 1))
    if how == "none":
        results = []
    elif how == "twice":
        results.insert(draw(st.integers(0, len(results))), results[i])
    elif how == "extra":
        stranger = CallId(max((s.call_id for s in steps), key=len) + "?")
        results.insert(draw(st.integers(0, len(results))), ToolReturned(stranger, "surprise"))
    elif how == "wrong_id":
        results[i] = ToolRaised(CallId("not-" + steps[i].call_id), draw(carriers(ToolRaised)).failure)
    else:
        results[i] = draw(st.sampled_from(wrong_kinds(steps[i])))
    return ToolsExecuted(tuple(results))


def tools_for(spec: AgentSpec, raises: bool = True) -> st.SearchStrategy[dict[str, ScriptedTool]]:
    """A scripted function for every tool of ``spec``."""
    return st.fixed_dictionaries({t.name: tool_fns(raises) for t in spec.tools})


def instructions_fn(turn: int) -> str:
    """Dynamic instructions that differ per turn."""
    return f"You are on turn {turn}."


__all__ = [
    "MOSTLY_VALID",
    "ONE_OF_EACH_RESULT",
    "PHASES",
    "RESULTS",
    "CallKind",
    "ModelError",
    "PlannedCall",
    "Scripted",
    "ScriptedApprover",
    "ScriptedHook",
    "ScriptedPolicy",
    "ScriptedTool",
    "TurnPlan",
    "agent_inputs",
    "agent_specs",
    "approvals_for",
    "arg_schemas",
    "callbacks_for",
    "carriers",
    "fed_usage",
    "final_answers",
    "governances",
    "governed",
    "handoff_lists",
    "handoff_specs",
    "hook_decisions",
    "instructions_fn",
    "interruptions",
    "malformed_json",
    "matching_args",
    "model_errors",
    "model_failures",
    "model_turns",
    "non_matching_args",
    "output_schemas",
    "policy_decisions",
    "run_configs",
    "run_ids",
    "scaled",
    "scripts",
    "step_results",
    "steps_answered",
    "tool_def_lists",
    "tool_defs",
    "tool_fns",
    "tool_outcomes",
    "tools_for",
    "turn_plans",
    "per_path",
    "usage_of",
    "usages",
    "wrong_kinds",
    "wrong_step_results",
]
