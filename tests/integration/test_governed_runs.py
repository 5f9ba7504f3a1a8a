"""Governance in real runs: permissions, approvals (and suspension), hooks,
guardrails and redaction, performed by the live interpreter."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from helikon import (
    Allow,
    AllowRule,
    ApprovalRequested,
    AskUser,
    ConfigError,
    Deny,
    DenyRule,
    GuardrailTriggered,
    HookRegistry,
    InjectSystemMessage,
    LlmAgent,
    PermissionDenied,
    PermissionMode,
    PreToolUse,
    ReplaceInput,
    ReplaceOutput,
    RunCompleted,
    RunContext,
    RunFailed,
    RunSuspended,
    SystemMessage,
    ToolEffect,
    ToolOutputItem,
    Tripwire,
    advance,
    dump_state,
    load_state,
    pending,
    perform,
    start,
    tool,
)
from helikon.effects import ApprovalDecision, ApprovalsGiven, AwaitApproval, ExecuteTools, Terminate
from helikon.errors import GuardrailTripped, OtherError
from helikon.governance import InputPolicy, OnRunStart, OutputPolicy
from helikon.items import text_of
from helikon.testing import MockModel, call_tools, say
from helikon.tools import GrepTool, Sandbox

BACKENDS = ["trio", "asyncio"]

ran: list[str] = []


@tool
async def transfer(amount: int) -> str:
    """Move money.

    Args:
        amount: dollars.
    """
    ran.append(f"transfer {amount}")
    return f"moved ${amount}"


@tool(effect=ToolEffect.READ_ONLY)
async def balance() -> str:
    """Read the balance."""
    ran.append("balance")
    return "balance: $100 (API_TOKEN=sk-live-1234567890abcdef)"


def make_agent(*scripts: Any, **kw: Any) -> LlmAgent[Any]:
    return LlmAgent(name="bank", model=MockModel(list(scripts)), tools=[transfer, balance], **kw)


def events_of(agent: LlmAgent[Any], ctx: RunContext[Any], backend: str = "trio") -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in agent.run(ctx, "go")]

    return anyio.run(go, backend=backend)


def outputs(events: list[Any]) -> list[str]:
    return [e.item.content for e in events if type(e) is ToolOutputItem]


@pytest.fixture(autouse=True)
def reset() -> None:
    ran.clear()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deny_rule_blocks_the_call_and_the_model_is_told(backend: str) -> None:
    agent = make_agent(call_tools(("transfer", {"amount": 5})), say("I may not."))
    ctx = RunContext.ephemeral(None).with_deny_rules([DenyRule.tool("transfer")])

    events = events_of(agent, ctx, backend)

    assert ran == []
    denied = [e for e in events if type(e) is PermissionDenied]
    assert len(denied) == 1 and denied[0].tool == "transfer"
    assert outputs(events)[0].startswith("denied:")
    assert type(events[-1]) is RunCompleted


def test_plan_mode_allows_read_only_tools_only() -> None:
    agent = make_agent(call_tools(("balance", {}), ("transfer", {"amount": 1})), say("ok"))
    ctx = RunContext.ephemeral(None).with_permission_mode(PermissionMode.PLAN)

    events = events_of(agent, ctx)

    assert ran == ["balance"]
    assert outputs(events)[1].startswith("denied:")


def test_the_policy_can_ask_and_the_approval_handler_decides() -> None:
    asked: list[Any] = []

    def policy(ctx: RunContext[Any], tool_name: str, args: Any) -> Any:
        return AskUser(f"Move ${args['amount']}?") if tool_name == "transfer" else Allow()

    async def approve(request: Any) -> Any:
        asked.append(request)
        return Allow() if request.tool == "transfer" else Deny("no")

    agent = make_agent(call_tools(("transfer", {"amount": 7})), say("done"))
    ctx = RunContext.ephemeral(None).with_permission_policy(policy).with_approval_handler(approve)

    events = events_of(agent, ctx)

    assert ran == ["transfer 7"]
    assert [r.prompt for r in asked] == ["Move $7?"]
    assert any(type(e) is ApprovalRequested and e.tool == "transfer" for e in events)


def test_ask_without_a_handler_is_a_denial() -> None:
    agent = make_agent(call_tools(("transfer", {"amount": 7})), say("done"))
    ctx = RunContext.ephemeral(None).with_permission_policy(lambda c, t, a: AskUser("sure?"))

    events = events_of(agent, ctx)

    assert ran == [] and outputs(events)[0].startswith("denied:")


def test_allow_rules_permit_under_dont_ask() -> None:
    agent = make_agent(call_tools(("balance", {}), ("transfer", {"amount": 1})), say("ok"))
    ctx = (
        RunContext.ephemeral(None)
        .with_permission_mode(PermissionMode.DONT_ASK)
        .with_allow_rules([AllowRule.tool("balance")])
    )

    events_of(agent, ctx)

    assert ran == ["balance"]


def test_the_mode_only_tightens() -> None:
    ctx = RunContext.ephemeral(None).with_permission_mode(PermissionMode.BYPASS)
    with pytest.raises(ConfigError, match="cannot change"):
        ctx.with_permission_mode(PermissionMode.DEFAULT)
    assert ctx.with_permission_mode(PermissionMode.DONT_ASK).permission_mode is PermissionMode.DONT_ASK


def test_a_run_suspends_for_approval_and_resumes_with_the_decision() -> None:
    agent = make_agent(call_tools(("transfer", {"amount": 9})), say("moved it"))
    ctx = (
        RunContext.ephemeral(None)
        .with_permission_policy(lambda c, t, a: AskUser("Move $9?"))
        .with_suspend_on_approval()
    )

    async def first_half() -> bytes:
        outcome = start(agent, "pay", run_id="r1", ctx=ctx)
        while not isinstance(outcome.effect, AwaitApproval):
            _, result = await perform(agent, outcome.effect, ctx, run_id="r1")
            outcome = advance(agent, outcome.state, result, ctx=ctx)
        assert isinstance(outcome.events[-1], ApprovalRequested)
        return dump_state(outcome.state)

    saved = anyio.run(first_half)
    assert ran == []

    state = load_state(saved)
    (request,) = pending(agent, state, ctx=ctx).requests  # type: ignore[union-attr]
    answer = ApprovalsGiven((ApprovalDecision(request.call_id, approved=True),))

    async def second_half() -> list[Any]:
        return [e async for e in agent.resume(ctx, state, answer)]

    events = anyio.run(second_half)
    assert ran == ["transfer 9"]
    assert outputs(events) == ["moved $9"] and type(events[-1]) is RunCompleted


def suspending() -> RunContext[None]:
    """A context whose policy asks about every call, with no approval handler."""
    ctx = RunContext.ephemeral(None).with_permission_policy(lambda c, t, a: AskUser("?"))
    return ctx.with_suspend_on_approval()


def test_a_denied_suspension_tells_the_model() -> None:
    agent = make_agent(call_tools(("transfer", {"amount": 9})), say("ok, not moving it"))
    ctx = (
        RunContext.ephemeral(None)
        .with_permission_policy(lambda c, t, a: AskUser("?"))
        .with_suspend_on_approval()
    )
    outcome = start(agent, "pay", run_id="r1", ctx=ctx)
    while not isinstance(outcome.effect, AwaitApproval | Terminate):
        _, result = anyio.run(lambda effect=outcome.effect: perform(agent, effect, ctx, run_id="r1"))
        outcome = advance(agent, outcome.state, result, ctx=ctx)
    (request,) = outcome.effect.requests  # type: ignore[union-attr]

    no = ApprovalsGiven((ApprovalDecision(request.call_id, False, "too much"),))
    nxt = advance(agent, outcome.state, no, ctx=ctx)

    assert not isinstance(nxt.effect, ExecuteTools)
    assert [e.item.content for e in nxt.events if type(e) is ToolOutputItem] == ["denied: too much"]


def test_agent_run_raises_run_suspended_when_a_call_waits() -> None:
    agent = make_agent(call_tools(("transfer", {"amount": 9})), say("ok"))
    ctx = (
        RunContext.ephemeral(None)
        .with_permission_policy(lambda c, t, a: AskUser("?"))
        .with_suspend_on_approval()
    )

    with pytest.raises(RunSuspended):
        events_of(agent, ctx)


def test_pre_tool_use_hooks_rewrite_arguments_and_inject_messages() -> None:
    def cap(ctx: RunContext[Any], event: Any) -> Any:
        if isinstance(event, PreToolUse) and event.tool == "transfer":
            return ReplaceInput({"amount": min(event.args["amount"], 10)})
        return None

    def remind(ctx: RunContext[Any], event: Any) -> Any:
        return InjectSystemMessage("Transfers are capped at $10.") if isinstance(event, PreToolUse) else None

    model = MockModel([call_tools(("transfer", {"amount": 500})), say("done")])
    agent = LlmAgent(name="bank", model=model, tools=[transfer], hooks=[cap])
    ctx = RunContext.ephemeral(None).with_hooks(HookRegistry(hooks=[remind]))

    events = events_of(agent, ctx)

    assert ran == ["transfer 10"]
    second = model.requests[1].messages
    assert any(type(m) is SystemMessage and "capped" in text_of(m.content) for m in second)
    assert type(events[-1]) is RunCompleted


def test_hooks_can_deny_a_call_and_replace_its_output() -> None:
    def guard(ctx: RunContext[Any], event: Any) -> Any:
        if isinstance(event, PreToolUse) and event.args.get("amount", 0) > 100:
            return Deny("over the limit")
        if type(event).__name__ == "PostToolUse":
            return ReplaceOutput("[hidden]")
        return None

    agent = make_agent(
        call_tools(("transfer", {"amount": 500}), ("transfer", {"amount": 5})), say("ok"), hooks=[guard]
    )

    events = events_of(agent, RunContext.ephemeral(None))

    assert ran == ["transfer 5"]
    assert outputs(events) == ["denied: over the limit", "[hidden]"]


def test_turn_hooks_can_stop_the_run() -> None:
    def no_runs(ctx: RunContext[Any], event: Any) -> Any:
        return Deny("maintenance") if isinstance(event, OnRunStart) else None

    agent = make_agent(say("never"), hooks=[no_runs])

    events = events_of(agent, RunContext.ephemeral(None))

    assert type(events[-1]) is RunFailed
    assert isinstance(events[-1].error, OtherError) and "maintenance" in events[-1].error.message


def test_secrets_are_redacted_from_tool_output() -> None:
    agent = make_agent(call_tools(("balance", {})), say("ok"))

    redacted = outputs(events_of(agent, RunContext.ephemeral(None)))[0]
    kept = outputs(
        events_of(
            make_agent(call_tools(("balance", {})), say("ok")),
            RunContext.ephemeral(None).without_output_redaction(),
        )
    )[0]

    assert "sk-live-1234567890abcdef" not in redacted and "balance: $100" in redacted
    assert "sk-live-1234567890abcdef" in kept


def test_extra_secrets_are_redacted_anywhere() -> None:
    agent = make_agent(call_tools(("transfer", {"amount": 5})), say("ok"))
    ctx = RunContext.ephemeral(None).with_extra_secrets(["moved $5"])

    assert "moved $5" not in outputs(events_of(agent, ctx))[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_input_guardrail_tripwire_fails_the_run_before_the_model(backend: str) -> None:
    model = MockModel([say("never")])

    def no_ssn(ctx: RunContext[Any], text: Any) -> Any:
        return Tripwire(InputPolicy(), "looks like an SSN") if "123-45" in text.text else None

    agent = LlmAgent(name="bank", model=model, input_guardrails=[no_ssn])

    async def go() -> list[Any]:
        return [e async for e in agent.run(None, "my ssn is 123-45-6789")]

    events = anyio.run(go, backend=backend)

    assert model.calls == 0
    assert [type(e) for e in events][-2:] == [GuardrailTriggered, RunFailed]
    assert isinstance(events[-1].error, GuardrailTripped)


def test_an_output_guardrail_gates_the_final_answer_and_errors_trip() -> None:
    def polite(ctx: RunContext[Any], output: Any) -> Any:
        return Tripwire(OutputPolicy(), "rude") if "stupid" in output.text else None

    def broken(ctx: RunContext[Any], output: Any) -> Any:
        raise RuntimeError("guardrail down")

    rude = LlmAgent(name="a", model=MockModel([say("that is stupid")]), output_guardrails=[polite])
    nice = LlmAgent(name="a", model=MockModel([say("happy to help")]), output_guardrails=[polite])
    failing = LlmAgent(name="a", model=MockModel([say("hi")]), output_guardrails=[broken])

    assert type(events_of(rude, RunContext.ephemeral(None))[-1]) is RunFailed
    assert type(events_of(nice, RunContext.ephemeral(None))[-1]) is RunCompleted
    last = events_of(failing, RunContext.ephemeral(None))[-1]
    assert type(last) is RunFailed and isinstance(last.error, GuardrailTripped)
    assert "guardrail down" in last.error.kind + last.error.info


def test_secrets_are_redacted_from_tool_errors_too() -> None:
    @tool
    async def leaky() -> str:
        """Fail loudly."""
        raise RuntimeError("connect failed with DB_PASSWORD=hunter2hunter2")

    agent = LlmAgent(name="a", model=MockModel([call_tools(("leaky", {})), say("ok")]), tools=[leaky])

    (output,) = outputs(events_of(agent, RunContext.ephemeral(None)))

    assert "hunter2hunter2" not in output and "RuntimeError" in output


def test_observation_hooks_see_handoffs_sub_agents_and_the_end_of_the_run() -> None:
    from helikon import Handoff, OnHandoff, OnRunComplete, OnSubagentStop

    seen: list[object] = []

    def watch(ctx: RunContext[Any], event: Any) -> Any:
        if isinstance(event, OnHandoff | OnSubagentStop | OnRunComplete):
            seen.append(event)
            return Deny("ignored: observation hooks cannot stop anything")
        return None

    def broken(ctx: RunContext[Any], event: Any) -> Any:
        if isinstance(event, OnRunComplete):
            raise RuntimeError("a broken observer")
        return None

    expert = LlmAgent(name="expert", model=MockModel([say("answered")]), description="Knows.")
    triage = LlmAgent(
        name="triage",
        model=MockModel([call_tools(("transfer_to_expert", {}))]),
        handoffs=[Handoff.to(expert)],
    )
    ctx = RunContext.ephemeral(None).with_hooks(HookRegistry(hooks=[broken, watch]))

    async def go() -> list[Any]:
        return [e async for e in triage.run(ctx, "help")]

    events = anyio.run(go)

    assert type(events[-1]) is RunCompleted
    assert seen == [OnHandoff("triage", "expert"), OnSubagentStop("expert"), OnRunComplete()]


def test_the_hook_registry_grows_by_copies() -> None:
    def hook(ctx: RunContext[Any], event: Any) -> None:
        return None

    def guard(ctx: RunContext[Any], value: Any) -> None:
        return None

    empty = HookRegistry()
    full = empty.with_hook(hook).with_input_guardrail(guard).with_output_guardrail(guard)

    assert empty == HookRegistry()
    assert full == HookRegistry(hooks=[hook], input_guardrails=[guard], output_guardrails=[guard])


def test_a_read_rule_covers_searches_through_a_whole_run(tmp_path: Any) -> None:
    (tmp_path / ".env").write_text("API_KEY=from-the-env-file\n")
    (tmp_path / "app.py").write_text("API_KEY = os.environ['API_KEY']\n")
    with Sandbox.open(tmp_path) as box:
        agent = LlmAgent(
            name="coder",
            model=MockModel(
                [
                    call_tools(("Grep", {"pattern": "API_KEY", "output_mode": "content"})),
                    call_tools(("Grep", {"pattern": "API_KEY", "path": ".env"})),
                    say("done"),
                ]
            ),
            tools=[GrepTool(box)],
        )
        ctx = RunContext.ephemeral(None).with_deny_rules([DenyRule.read(".env")])
        searched, direct = outputs(events_of(agent, ctx))

    assert "app.py:1:API_KEY = os.environ" in searched
    assert "from-the-env-file" not in searched and "1 file(s) left out" in searched
    assert direct.startswith("denied:")  # the pipeline refuses the search of the file itself
