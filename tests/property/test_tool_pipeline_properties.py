"""The per-call tool pipeline over random governance configurations.

For random permission modes, deny/allow/guard rules, policy answers, approval
answers and hook verdicts (rewrites included):

- a tool runs, with the arguments it runs with, exactly when the reference
  pipeline below (the book's order, built from the pure folds of
  :mod:`helikon.governance`) allows it;
- the event stream is the same whether an approval was given in-process (an
  approval handler) or after a suspension, the state dumped and reloaded at
  every step boundary;
- the event stream is the same under the live, scripted and replay
  interpreters.
"""

from __future__ import annotations

from typing import Any

import anyio
import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helikon import (
    Allow,
    AllowRule,
    AskUser,
    Deny,
    DenyRule,
    GuardRule,
    HookRegistry,
    LlmAgent,
    PermissionMode,
    RunContext,
    advance,
    dump_state,
    load_state,
    perform,
    prepare,
    start,
    tool,
)
from helikon.effects import ApprovalDecision, ApprovalsGiven, AwaitApproval, Terminate
from helikon.governance import (
    ApprovalNeeded,
    Decided,
    GuardAction,
    InjectSystemMessage,
    PolicyNeeded,
    PostToolUse,
    PreToolUse,
    Replace,
    ReplaceInput,
    ReplaceOutput,
    after_approval,
    after_policy,
    fold_hooks,
    fold_permissions,
    replaced_value,
    resolve_without_handler,
)
from helikon.interpreters import LiveInterpreter, RecordingInterpreter, ReplayInterpreter, TestInterpreter
from helikon.loop import schema_errors
from helikon.model import ToolEffect
from helikon.testing import MockModel, call_tools, say

# -- the agent ------------------------------------------------------------------------------

ran: list[tuple[str, Any]] = []


def _record(name: str, args: dict[str, Any]) -> str:
    ran.append((name, dict(args)))
    return f"{name} done"


@tool(name="Bash")
async def bash(command: str) -> str:
    """Run a command.

    Args:
        command: the command line.
    """
    return _record("Bash", {"command": command})


@tool(name="Read", effect=ToolEffect.READ_ONLY)
async def read(path: str) -> str:
    """Read a file.

    Args:
        path: the file.
    """
    return _record("Read", {"path": path})


@tool(name="Write", effect=ToolEffect.WRITE)
async def write(path: str) -> str:
    """Write a file.

    Args:
        path: the file.
    """
    return _record("Write", {"path": path})


TOOLS = {t.name: t for t in (bash, read, write)}
EFFECTS = {"Bash": ToolEffect.SIDE_EFFECT, "Read": ToolEffect.READ_ONLY, "Write": ToolEffect.WRITE}
COMMANDS = ["ls", "git status", "rm -rf /", "curl x | sh", "rm -rf ~ ; curl y", "echo hi > /etc/passwd"]
PATHS = ["src/a.py", ".env", ".git/config", "docs/x.md"]


def sync_tools() -> dict[str, Any]:
    return {
        "Bash": lambda a: _record("Bash", a),
        "Read": lambda a: _record("Read", a),
        "Write": lambda a: _record("Write", a),
    }


# -- a governance configuration ---------------------------------------------------------------


@attrs.frozen
class Config:
    mode: PermissionMode
    deny: tuple[Any, ...]
    allow: tuple[Any, ...]
    guards: tuple[Any, ...]
    default_guards: bool
    policy: dict[str, Any] | None
    approvals: tuple[bool, ...]
    hooks: tuple[dict[tuple[str, str], Any], ...]
    calls: tuple[tuple[str, dict[str, Any]], ...]

    def approve(self, call_id: str) -> bool:
        index = int(call_id.rsplit("_", 1)[-1])
        return self.approvals[index % len(self.approvals)]


def args_for(name: str) -> st.SearchStrategy[dict[str, Any]]:
    if name == "Bash":
        return st.sampled_from(COMMANDS).map(lambda c: {"command": c})
    return st.sampled_from(PATHS).map(lambda p: {"path": p})


calls = st.sampled_from(["Bash", "Read", "Write"]).flatmap(lambda n: args_for(n).map(lambda a: (n, a)))

rewrites = st.one_of(
    st.sampled_from(COMMANDS).map(lambda c: {"command": c}),
    st.sampled_from(PATHS).map(lambda p: {"path": p}),
    st.just({"command": 1}),  # breaks every schema
)

hook_answers = st.one_of(
    st.just(None),
    st.just(Allow()),
    st.builds(Deny, st.sampled_from(["no", "blocked"])),
    st.builds(InjectSystemMessage, st.sampled_from(["careful", "audited"])),
    rewrites.map(ReplaceInput),
    st.sampled_from(["[redacted]", {"ok": True}]).map(ReplaceOutput),
)

policy_answers = st.one_of(
    st.just(Allow()),
    st.builds(Deny, st.just("policy says no")),
    st.builds(AskUser, st.just("Allow it?")),
    rewrites.map(Replace),
)


@st.composite
def configs(draw: st.DrawFn) -> Config:
    keys = [(event, name) for event in ("PreToolUse", "PostToolUse") for name in TOOLS]
    hooks = draw(
        st.lists(st.fixed_dictionaries({k: hook_answers for k in keys}), max_size=2).map(tuple)
    )
    return Config(
        mode=draw(st.sampled_from(list(PermissionMode))),
        deny=tuple(
            draw(
                st.lists(
                    st.sampled_from(
                        [DenyRule.tool("Write"), DenyRule.bash_command("curl"), DenyRule.read(".env")]
                    ),
                    unique=True,
                    max_size=2,
                )
            )
        ),
        allow=tuple(
            draw(
                st.lists(
                    st.sampled_from(
                        [AllowRule.tool("Read"), AllowRule.bash_command("git"), AllowRule.edit("src/**")]
                    ),
                    unique=True,
                    max_size=2,
                )
            )
        ),
        guards=tuple(
            draw(
                st.lists(
                    st.sampled_from(
                        [
                            GuardRule.bash_command("curl", GuardAction.DENY, "no curl"),
                            GuardRule.bash_command("ls", GuardAction.ASK, "ls?"),
                        ]
                    ),
                    unique=True,
                    max_size=2,
                )
            )
        ),
        default_guards=draw(st.booleans()),
        policy=draw(st.none() | st.fixed_dictionaries({n: policy_answers for n in TOOLS})),
        approvals=tuple(draw(st.lists(st.booleans(), min_size=1, max_size=3))),
        hooks=hooks,
        calls=tuple(draw(st.lists(calls, min_size=1, max_size=3))),
    )


def make_hook(table: dict[tuple[str, str], Any]) -> Any:
    def hook(ctx: Any, event: Any) -> Any:
        if isinstance(event, PreToolUse | PostToolUse):
            return table[(type(event).__name__, event.tool)]
        return None

    return hook


def context(config: Config, *, suspend: bool) -> RunContext[None]:
    ctx = (
        RunContext.ephemeral(None)
        .with_deny_rules(config.deny)
        .with_allow_rules(config.allow)
        .with_guard_rules(config.guards)
        .with_hooks(HookRegistry(hooks=[make_hook(t) for t in config.hooks]))
    )
    if not config.default_guards:
        ctx = ctx.without_default_guards()
    if config.policy is not None:
        answers = config.policy
        ctx = ctx.with_permission_policy(lambda c, name, args: answers[name])
    if suspend:
        ctx = ctx.with_suspend_on_approval()
    else:
        ctx = ctx.with_approval_handler(lambda r: Allow() if config.approve(r.call_id) else Deny("no"))
    if config.mode is not PermissionMode.DEFAULT:
        ctx = ctx.with_permission_mode(config.mode)
    return ctx


def agent(config: Config) -> LlmAgent[None]:
    turns = [call_tools(*config.calls), say("done")]
    return LlmAgent(name="ops", model=MockModel(turns), tools=list(TOOLS.values()))


# -- the reference pipeline --------------------------------------------------------------------


def expected_runs(config: Config) -> list[tuple[str, Any]]:
    """Which tools run with which arguments, by the book's order for one call."""
    ctx = context(config, suspend=False)
    settings = prepare(agent(config), ctx).spec.governance.permissions
    runs: list[tuple[str, Any]] = []
    for index, (name, args) in enumerate(config.calls):
        verdict = fold_hooks(
            (t[("PreToolUse", name)] or Allow()) for t in config.hooks
        )
        if verdict.denied:
            continue
        args = replaced_value(verdict, args)  # type: ignore[assignment]
        if verdict.replacement is not None and schema_errors(args, TOOLS[name].parameters):
            continue
        step = fold_permissions(name, EFFECTS[name], args, settings)
        while True:
            match step:
                case PolicyNeeded():
                    assert config.policy is not None
                    step = after_policy(config.policy[name])
                case ApprovalNeeded():
                    if config.approvals[index % len(config.approvals)]:
                        step = after_approval(name, EFFECTS[name], args, settings, step, Allow())
                    else:
                        step = resolve_without_handler(step)
                case Decided(decision=Replace(args=new)):
                    if not schema_errors(new, TOOLS[name].parameters):
                        runs.append((name, new))
                    break
                case Decided(decision=Allow()):
                    runs.append((name, args))
                    break
                case Decided():
                    break
    return runs


# -- the runs ----------------------------------------------------------------------------------


def live_run(config: Config, interpreter: Any) -> list[Any]:
    async def go() -> list[Any]:
        ctx = context(config, suspend=False)
        return [e async for e in agent(config).run(ctx, "go", interpreter=interpreter)]

    return anyio.run(go)


def suspended_run(config: Config) -> list[Any]:
    """Step by step, the state dumped and reloaded at every boundary; each
    suspension answered with the same decisions the handler gives."""
    the_agent = agent(config)
    ctx = context(config, suspend=True)

    async def go() -> list[Any]:
        outcome = start(the_agent, "go", run_id="r1", ctx=ctx)
        events = list(outcome.events)
        while not isinstance(outcome.effect, Terminate):
            state = load_state(dump_state(outcome.state))
            if isinstance(outcome.effect, AwaitApproval):
                result: Any = ApprovalsGiven(
                    tuple(
                        ApprovalDecision(r.call_id, True)
                        if config.approve(r.call_id)
                        else ApprovalDecision(r.call_id, False, "no")
                        for r in outcome.effect.requests
                    )
                )
                live: tuple[Any, ...] = ()
            else:
                live, result = await perform(the_agent, outcome.effect, ctx, run_id="r1")
            outcome = advance(the_agent, state, result, ctx=ctx)
            events += [*live, *outcome.events]
        return events

    return anyio.run(go)


def scripted_run(config: Config) -> list[Any]:
    ctx = context(config, suspend=False)
    spec = prepare(agent(config), ctx, run_id="r1").spec
    interpreter = TestInterpreter(
        [call_tools(*config.calls), say("done")],
        tools=sync_tools(),
        hooks=[make_hook(t) for t in config.hooks],
        policy=(lambda c, name, args: config.policy[name]) if config.policy is not None else None,  # type: ignore[index]
        approval_handler=lambda r: Allow() if config.approve(r.call_id) else Deny("no"),
        ctx=ctx,
    )
    return list(interpreter.run(spec, "go", run_id="r1").events)


def same_runs(actual: list[tuple[str, Any]], expected: list[tuple[str, Any]]) -> bool:
    """The same runs, in any order (concurrent tools finish in any order)."""
    return sorted(map(repr, actual)) == sorted(map(repr, expected))


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_the_tool_runs_iff_the_pipeline_allows_it_under_every_interpreter(config: Config) -> None:
    ran.clear()
    recorder = RecordingInterpreter(LiveInterpreter("r1"))
    live = live_run(config, recorder)
    assert same_runs(ran, expected_runs(config))

    ran.clear()
    assert suspended_run(config) == live
    assert same_runs(ran, expected_runs(config))

    ran.clear()
    assert scripted_run(config) == live
    assert same_runs(ran, expected_runs(config))

    ran.clear()
    assert live_run(config, ReplayInterpreter(recorder.trace)) == live
    assert ran == []  # a replay runs nothing


def test_the_configurations_explore_every_outcome() -> None:
    """The strategy reaches runs, denials, asks and rewrites (so the property
    above is not vacuous)."""
    seen: set[str] = set()

    @settings(max_examples=300, database=None)
    @given(configs())
    def look(config: Config) -> None:
        runs = expected_runs(config)
        if runs:
            seen.add("runs")
        if len(runs) < len(config.calls):
            seen.add("denied")
        if any(a != config.calls[i][1] for i, (_, a) in enumerate(runs) if i < len(config.calls)):
            seen.add("rewritten")
        events = live_run(config, LiveInterpreter("r1"))
        if any(type(e).__name__ == "ApprovalRequested" for e in events):
            seen.add("asked")

    look()
    assert seen == {"runs", "denied", "rewritten", "asked"}
