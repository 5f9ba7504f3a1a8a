"""The worker's side of the boundary: ctx seeds, posture, redaction.

A client sends only data: the agent's name, the input and a JSON ctx seed.
The worker rebuilds the user ctx from the seed with a factory it registered
(a bad seed fails the run before any model call), and its own posture —
never the caller's — decides and scrubs every tool call before the result
is recorded in the history.
"""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from temporal_agents import ByTurnModel, Counts

from helikon import (
    ConfigError,
    LlmAgent,
    PermissionDenied,
    RunContext,
    ToolContext,
    ToolOutputItem,
    collect,
    tool,
)
from helikon.governance import Allow, Deny, DenyRule, GuardRule
from helikon.interpreters import LiveInterpreter
from helikon.temporal import TemporalAgentWorker, TemporalRunner, WorkerPosture
from helikon.testing import call_tools, say

pytestmark = pytest.mark.integration

QUEUE = "helikon-posture"


@attrs.frozen
class Tenant:
    name: str
    admin: bool = False


def tenant_from_seed(seed: Any) -> Tenant:
    """The worker's ctx factory: a seed must name a tenant."""
    if not isinstance(seed, dict) or not isinstance(seed.get("tenant"), str):
        raise ValueError(f"a seed needs a 'tenant' name, got {seed!r}")
    return Tenant(seed["tenant"], bool(seed.get("admin", False)))


def concierge(counts: Counts) -> LlmAgent[Any]:
    """Dynamic instructions and a tool, both reading the user ctx."""

    @tool
    async def whoami(ctx: ToolContext[Tenant]) -> str:
        """Who the run is for."""
        counts.tool("whoami")
        return f"tenant {ctx.user_ctx.name}"

    def instructions(ctx: RunContext[Tenant]) -> str:
        return f"You serve tenant {ctx.user_ctx.name}."

    scripts = [call_tools(("whoami", {})), say("You are acme.")]
    return LlmAgent(
        name="concierge", model=ByTurnModel(scripts, counts), instructions=instructions, tools=[whoami]
    )


def run_on_worker(
    temporal: Any, agent: LlmAgent[Any], *, posture: WorkerPosture | None = None, **run: Any
) -> Any:
    """Serve ``agent`` (the concierge with the tenant factory) and run it once.

    Returns ``(result, history)``, or the exception the run raised.
    """
    factory = tenant_from_seed if agent.name == "concierge" else None

    async def body(env: Any) -> Any:
        worker = TemporalAgentWorker(env.client, task_queue=QUEUE, posture=posture)
        async with worker.register(agent, ctx_factory=factory):
            runner = TemporalRunner(env.client, task_queue=QUEUE)
            try:
                started = await runner.start(run.pop("name", agent.name), "hello", **run)
                return await started.result(), await started.handle.fetch_history()
            except Exception as exc:
                return exc

    return temporal(body)


def test_the_ctx_seed_builds_the_user_ctx_on_the_worker(temporal: Any) -> None:
    counts = Counts()
    agent = concierge(counts)

    result, _ = run_on_worker(temporal, agent, ctx_seed={"tenant": "acme"}, run_id="run-seed")

    outputs = [e.item.content for e in result.events if type(e) is ToolOutputItem]
    assert outputs == ["tenant acme"]
    assert agent.model.requests[0].instructions == "You serve tenant acme."  # type: ignore[attr-defined]

    async def live() -> Any:
        ctx = RunContext.ephemeral(Tenant("acme"))
        return await collect(concierge(Counts()).run(ctx, "hello", interpreter=LiveInterpreter("run-seed")))

    assert result.events == anyio.run(live, backend="asyncio").events


def test_a_bad_seed_fails_the_run_before_any_model_call(temporal: Any) -> None:
    counts = Counts()

    error = run_on_worker(temporal, concierge(counts), ctx_seed={"user": "x"})

    assert isinstance(error, ConfigError)
    assert "rejected by its ctx factory" in str(error) and "needs a 'tenant'" in str(error)
    assert counts.turns == {} and counts.tools == {}


def test_a_seed_for_an_agent_without_a_factory_is_refused(temporal: Any) -> None:
    counts = Counts()
    agent: LlmAgent[Any] = LlmAgent(name="plain", model=ByTurnModel([say("hi")], counts))

    error = run_on_worker(temporal, agent, ctx_seed={"tenant": "acme"})

    assert isinstance(error, ConfigError) and "takes no ctx seed" in str(error)
    assert counts.turns == {}


def test_an_unknown_agent_is_a_config_error(temporal: Any) -> None:
    agent: LlmAgent[Any] = LlmAgent(name="plain", model=ByTurnModel([say("hi")], Counts()))

    error = run_on_worker(temporal, agent, name="nobody")

    assert isinstance(error, ConfigError)
    assert "no agent named 'nobody'" in str(error) and "'plain'" in str(error)


def test_a_seed_that_is_not_json_is_refused_by_the_client(temporal: Any) -> None:
    agent: LlmAgent[Any] = LlmAgent(name="plain", model=ByTurnModel([say("hi")], Counts()))

    error = run_on_worker(temporal, agent, ctx_seed={"when": object()})

    assert isinstance(error, ConfigError) and "plain JSON" in str(error)


def secretive(counts: Counts) -> LlmAgent[Any]:
    @tool
    async def read_env() -> str:
        """Print the environment."""
        counts.tool("read_env")
        return "HOME=/home/app\nSTRIPE_API_KEY=sk-live-0123456789\nusing key pk-tenant-abcdefgh"

    @tool
    async def wipe() -> str:
        """Delete everything."""
        counts.tool("wipe")
        return "wiped"

    scripts = [call_tools(("read_env", {}), ("wipe", {})), say("done")]
    return LlmAgent(name="secretive", model=ByTurnModel(scripts, counts), tools=[read_env, wipe])


def test_the_workers_posture_denies_and_redacts_before_the_history_records(temporal: Any) -> None:
    counts = Counts()
    posture = WorkerPosture(deny_rules=(DenyRule.tool("wipe"),), extra_secrets=("pk-tenant-abcdefgh",))

    result, history = run_on_worker(temporal, secretive(counts), posture=posture)

    outputs = {e.item.name: e.item for e in result.events if type(e) is ToolOutputItem}
    assert outputs["read_env"].content == "HOME=/home/app\nSTRIPE_API_KEY=***\nusing key ***"
    assert outputs["wipe"].is_error and "denied by deny rule: tool 'wipe'" in outputs["wipe"].content
    assert counts.tools == {"read_env": 1}  # the denied tool never ran
    denied = [e for e in result.events if type(e) is PermissionDenied]
    assert denied == [PermissionDenied("wipe", "denied by deny rule: tool 'wipe'")]
    recorded = b"".join(event.SerializeToString() for event in history.events)  # payloads as stored
    assert b"STRIPE_API_KEY=***" in recorded
    assert b"sk-live-0123456789" not in recorded and b"pk-tenant-abcdefgh" not in recorded


class TenantPolicy:
    """A worker-side policy deciding per tenant (the seed's data, never its rules)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, ctx: RunContext[Tenant], tool: str, args: Any) -> Allow | Deny:
        self.asked.append((ctx.user_ctx.name, tool))
        return Allow() if ctx.user_ctx.admin else Deny(f"{ctx.user_ctx.name} may not call {tool}")


def test_a_worker_policy_decides_per_tenant_from_the_seed(temporal: Any) -> None:
    policy = TenantPolicy()
    posture = WorkerPosture(policy=policy)

    guest, _ = run_on_worker(temporal, concierge(Counts()), posture=posture, ctx_seed={"tenant": "guest"})
    admin, _ = run_on_worker(
        temporal, concierge(Counts()), posture=posture, ctx_seed={"tenant": "root", "admin": True}
    )

    guest_out = next(e.item for e in guest.events if type(e) is ToolOutputItem)
    admin_out = next(e.item for e in admin.events if type(e) is ToolOutputItem)
    assert guest_out.is_error and "guest may not call whoami" in guest_out.content
    assert admin_out.content == "tenant root"
    assert policy.asked == [("guest", "whoami"), ("root", "whoami")]


def test_a_posture_policy_must_be_callable() -> None:
    with pytest.raises(ConfigError, match="callable"):
        WorkerPosture(policy=object())


def test_the_posture_gives_the_events_a_live_run_under_the_same_context_gives(temporal: Any) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Allow:
        asked.append(request.tool)
        return Allow()

    posture = WorkerPosture(
        deny_rules=(DenyRule.tool("read_env"),),
        guard_rules=(GuardRule.tool("wipe"),),
        approval_handler=approve,
    )

    result, _ = run_on_worker(temporal, secretive(Counts()), posture=posture, run_id="run-approve")

    async def live() -> Any:
        agent = secretive(Counts())
        return await collect(
            agent.run(posture.run_context(None), "hello", interpreter=LiveInterpreter("run-approve"))
        )

    assert result.events == anyio.run(live, backend="asyncio").events
    kinds = [type(e).__name__ for e in result.events]
    assert "PermissionDenied" in kinds and "ApprovalRequested" in kinds
    assert asked == ["wipe", "wipe"]  # once on the worker, once in the live run
