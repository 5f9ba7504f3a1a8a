"""Message content is off by default and opt-in; whatever the setting, no
secret the run knows reaches a span: not through content, tool arguments,
tool results, error descriptions or span events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from otel_support import Pipeline, agent, attributes, named, one, run

from helikon import RunContext, collect, tool
from helikon.context import TracerHandle
from helikon.errors import ToolError
from helikon.governance import Allow, Deny
from helikon.model import Usage
from helikon.observability import Telemetry
from helikon.testing import call_tools, say

SECRET = "sk-live-7f3a9c2e81d4b6"


@tool
async def read_config(name: str) -> str:
    """Read a configuration file.

    Args:
        name: the file's name.
    """
    return f"region=eu\nAPI_KEY={SECRET}\nnote: the key is {SECRET}"


@tool
async def read_settings(name: str) -> dict[str, str]:
    """Read settings as data.

    Args:
        name: the settings' name.
    """
    return {"name": name, "token": SECRET}


@tool
async def rotate_key(key: str) -> str:
    """Rotate a key.

    Args:
        key: the key to rotate.
    """
    raise ToolError(f"cannot rotate {key}: it is still in use")


@tool
async def drop_table(name: str) -> str:
    """Drop a table.

    Args:
        name: the table.
    """
    return "dropped"


def leaky_agent() -> Any:
    return agent(
        "ops",
        call_tools(
            ("read_config", {"name": "prod.env"}),
            ("read_settings", {"name": "prod"}),
            ("rotate_key", {"key": SECRET}),
            ("drop_table", {"name": SECRET}),
            usage=Usage(12, 3),
        ),
        say(f"Done. By the way the key was {SECRET}."),
        instructions=f"You are the ops agent. Never print {SECRET}.",
        tools=[read_config, read_settings, rotate_key, drop_table],
    )


def secret_ctx() -> RunContext[None]:
    def no_drops(ctx: Any, tool: str, args: Any) -> Any:
        return Deny(f"no dropping {args.get('name')}") if tool == "drop_table" else Allow()

    ctx = RunContext.ephemeral(None).with_extra_secrets([SECRET]).with_permission_policy(no_drops)
    return ctx.with_tracer(TracerHandle(session_id="s-1"))


def texts(span: ReadableSpan) -> Iterator[str]:
    """Every text a span carries: name, attribute values, status, events."""
    yield span.name
    yield span.status.description or ""
    for value in attributes(span).values():
        yield from (str(v) for v in value) if isinstance(value, tuple) else (str(value),)
    for event in span.events:
        yield event.name
        yield from (str(v) for v in dict(event.attributes or {}).values())


def assert_no_secret(otel: Pipeline) -> None:
    spans = otel.finished()
    assert spans
    leaks = [(s.name, t) for s in spans for t in texts(s) if SECRET in t]
    assert leaks == []


def test_content_is_not_recorded_by_default_and_no_secret_leaks_anyway(otel: Pipeline) -> None:
    run(lambda: collect(leaky_agent().run(secret_ctx(), f"Rotate {SECRET}", interpreter=otel.observer())))

    spans = otel.finished()
    content = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    assert all(not content & set(attributes(s)) for s in spans)
    rotate = one(spans, "execute_tool rotate_key")
    assert rotate.status.status_code.name == "ERROR"
    assert rotate.status.description == "cannot rotate ***: it is still in use"
    assert_no_secret(otel)


def test_content_is_recorded_on_request_in_the_conventions_shapes_with_secrets_scrubbed(
    otel: Pipeline,
) -> None:
    observer = otel.observer(capture_content=True)

    run(lambda: collect(leaky_agent().run(secret_ctx(), f"Rotate {SECRET}", interpreter=observer)))

    spans = otel.finished()
    first, second = named(spans, "chat ops-model")
    assert json.loads(str(attributes(first)["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "You are the ops agent. Never print ***."}
    ]
    assert json.loads(str(attributes(first)["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "Rotate ***"}]}
    ]
    (output,) = json.loads(str(attributes(first)["gen_ai.output.messages"]))
    assert output["role"] == "assistant" and output["finish_reason"] == "tool_call"
    assert [(p["type"], p["name"]) for p in output["parts"]] == [
        ("tool_call", "read_config"),
        ("tool_call", "read_settings"),
        ("tool_call", "rotate_key"),
        ("tool_call", "drop_table"),
    ]
    assert output["parts"][2]["arguments"] == {"key": "***"}
    history = json.loads(str(attributes(second)["gen_ai.input.messages"]))
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "tool", "tool", "tool"]
    assert history[2]["parts"][0]["type"] == "tool_call_response"
    (answer,) = json.loads(str(attributes(second)["gen_ai.output.messages"]))
    assert answer["parts"] == [{"type": "text", "content": "Done. By the way the key was ***."}]

    config = one(spans, "execute_tool read_config")
    assert json.loads(str(attributes(config)["gen_ai.tool.call.arguments"])) == {"name": "prod.env"}
    assert attributes(config)["gen_ai.tool.call.result"] == "region=eu\nAPI_KEY=***\nnote: the key is ***"
    settings = one(spans, "execute_tool read_settings")
    assert json.loads(str(attributes(settings)["gen_ai.tool.call.result"])) == {
        "name": "prod",
        "token": "***",
    }
    rotate = one(spans, "execute_tool rotate_key")
    assert json.loads(str(attributes(rotate)["gen_ai.tool.call.arguments"])) == {"key": "***"}
    assert "gen_ai.tool.call.result" not in attributes(rotate)  # a failed call has no result
    # The denied call ran no tool: no span, but the denial is an event on its turn.
    assert not named(spans, "execute_tool drop_table")
    (denied,) = [e for s in named(spans, "agent.turn") for e in s.events]
    assert denied.name == "helikon.permission_denied"
    assert dict(denied.attributes or {})["gen_ai.tool.name"] == "drop_table"
    assert_no_secret(otel)


@pytest.mark.parametrize("capture", [False, True])
def test_a_handoff_targets_and_tool_runs_sub_agents_leak_no_secret_either(
    otel: Pipeline, capture: bool
) -> None:
    from helikon import AgentAsTool, Handoff

    inner = agent("inner", say(f"The key is {SECRET}."))
    target = agent(
        "target",
        call_tools(("read_config", {"name": "x"}), ("inner", {"input": f"tell {SECRET}"})),
        say(f"ok {SECRET}"),
        tools=[read_config, AgentAsTool(inner)],
    )
    front = agent("front", call_tools(("transfer_to_target", {})), handoffs=[Handoff.to(target)])
    handle = TracerHandle(Telemetry(otel.tracer_provider, otel.meter_provider, capture_content=capture))
    ctx = secret_ctx().with_tracer(handle)

    run(lambda: collect(front.run(ctx, f"Go {SECRET}")))

    assert named(otel.finished(), "invoke_agent inner")
    assert_no_secret(otel)
