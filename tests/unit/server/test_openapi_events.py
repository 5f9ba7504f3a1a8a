"""The OpenAPI document's ``Event`` schema is what the server sends: one
variant per event type naming exactly that event's fields (so an event that
gains a field, as ``MessageOutput`` and ``ToolCallItem`` gained ``cost``,
fails here until the document names it), and the frames of a real run,
priced so that they carry a cost, validate against it."""

from __future__ import annotations

import typing
from decimal import Decimal
from typing import Any

import attrs
import jsonschema
from starlette.testclient import TestClient

from helikon import LlmAgent, ModelPrice, PriceTable, RunContext, Usage, tool
from helikon.events import AgentEvent, MessageOutput
from helikon.items import AssistantMessage, TextPart
from helikon.server import AgentServer
from helikon.server._openapi import openapi_document
from helikon.server._runs import event_frame, terminal_frame
from helikon.testing import MockModel, call_tools, say

#: Fields a frame has beside its event's own: the server's numbering and tag.
FRAME_FIELDS = {"type", "seq"}
#: Fields only the server writes: its own terminal frame says it is one.
SERVER_FIELDS = {"RunFailed": {"synthetic"}}


@tool
def ping(n: int) -> str:
    """Ping.

    Args:
        n: a number.
    """
    return "pong"


def _variants() -> dict[str, dict[str, Any]]:
    event = openapi_document("t")["components"]["schemas"]["Event"]
    return {variant["properties"]["type"]["const"]: variant for variant in event["oneOf"]}


def _validator(name: str) -> jsonschema.Draft202012Validator:
    """A validator of the document's schema ``name`` (its ``$ref``s resolved in the document)."""
    document = openapi_document("t")
    return jsonschema.Draft202012Validator({**document, "$ref": f"#/components/schemas/{name}"})


def test_each_event_type_has_a_variant_naming_exactly_its_fields() -> None:
    variants = _variants()
    events = typing.get_args(AgentEvent)
    assert set(variants) == {cls.__name__ for cls in events}
    for cls in events:
        fields = {field.name for field in attrs.fields(cls)}
        declared = set(variants[cls.__name__]["properties"])
        assert declared == fields | FRAME_FIELDS | SERVER_FIELDS.get(cls.__name__, set()), cls.__name__
        assert variants[cls.__name__]["additionalProperties"] is False
    assert variants["MessageOutput"]["properties"]["cost"] == variants["ToolCallItem"]["properties"]["cost"]


def test_an_undeclared_field_is_refused() -> None:
    event = _validator("Event")
    message = MessageOutput(AssistantMessage((TextPart("hi"),), "a"), cost=Decimal("1E-7"))
    frame = {**event_frame(message), "seq": 0}
    event.validate(frame)
    assert not event.is_valid({**frame, "price": "1"})
    assert not event.is_valid({**frame, "cost": 0.5})  # a cost is a decimal string, never a float
    event.validate({**terminal_frame("gone"), "seq": 3})


def test_a_priced_runs_frames_validate_against_the_document() -> None:
    scripts = [
        call_tools(("ping", {"n": 1}), text="checking", usage=Usage(1000, 100)),
        say("done", usage=Usage(3000, 500)),
    ]
    agent = LlmAgent(name="a", model=MockModel(scripts, model_id="m1"), tools=[ping])
    prices = PriceTable({"m1": ModelPrice(input=1, output=2)})
    server = AgentServer(agents=[agent], context=RunContext.ephemeral(None).with_prices(prices))
    with TestClient(server.app()) as client:
        result = client.post("/agents/a/runs", json={"input": "go"}).json()
        document = client.get("/openapi.json").json()
    assert document["components"]["schemas"]["Event"] == {"oneOf": list(_variants().values())}
    _validator("RunResult").validate(result)
    costs = {frame["type"]: frame.get("cost") for frame in result["events"] if "cost" in frame}
    assert costs == {"ToolCallItem": "0.0012", "MessageOutput": "0.004"}
