"""Issue 30, redaction: a known secret holding a newline, a quote or a backslash,
returned inside a structured tool result, reaches neither the model, the
events, the session nor the spans (its JSON-escaped form is scanned, and the
value is redacted before it is encoded)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from otel_support import Pipeline, agent, run

from helikon import RunContext, collect, tool
from helikon.codec import unstructure
from helikon.sessions import MemorySession
from helikon.testing import call_tools, say

SECRETS = [
    "multi-line\nsecret-7f3a9c2e81d4",  # the issue's: a newline
    'say "hello" to sk-9b1e77c0aa',  # a quote
    "C:\\Users\\svc\\token-44e1a9b7",  # backslashes
    "tab\tand\u00e9-accent-5d0c9e1f",  # a control character and non-ASCII
    'mixed"\\\n\r-all-of-them-81aa',
]


def _forms(secret: str) -> list[str]:
    return [secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]]


@pytest.mark.parametrize("secret", SECRETS)
def test_a_structured_result_hides_an_escaped_secret_everywhere(otel: Pipeline, secret: str) -> None:
    @tool
    async def read_vault(name: str) -> dict[str, Any]:
        """Read a vault entry.

        Args:
            name: the entry.
        """
        return {"name": name, "entry": {"value": secret, "list": [f"prefix {secret} suffix"]}}

    model_agent = agent("vault", call_tools(("read_vault", {"name": "db"})), say("ok"), tools=[read_vault])
    session = MemorySession()
    ctx = RunContext.ephemeral(None).with_extra_secrets([secret]).with_session(session)

    result = run(lambda: collect(model_agent.run(ctx, "go", interpreter=otel.observer(capture_content=True))))

    seen = {
        "model": json.dumps([unstructure(r) for r in model_agent.model.requests]),  # type: ignore[attr-defined]
        "events": json.dumps([unstructure(e) for e in result.events], default=str),
        "session": json.dumps([unstructure(e) for e in anyio.run(session.events)], default=str),
        "spans": json.dumps([s.to_json() for s in otel.finished()]),
    }
    for where, text in seen.items():
        for form in _forms(secret):
            assert form not in text, (where, form)
            assert json.dumps(form)[1:-1] not in text, (where, form)
    assert "***" in seen["model"]
