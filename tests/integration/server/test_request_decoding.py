"""The agent server's request decoder is strict (issue 26): a wrong type in
a body is a 422 naming the field, over real HTTP on loopback, never a 500
from inside the run nor a ``null`` read as the text ``"None"``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from server_support import server_for, serving


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"messages": [None]}, "@ messages[0]"),
        (
            {"messages": [{"type": "UserMessage", "content": [{"type": "TextPart", "text": None}]}]},
            "expected a string, got null @ messages[0].content[0].text",
        ),
        # a non-boolean ``is_error`` is refused, never coerced (schemathesis'
        # negative_data_rejection check runs on it now)
        *(
            (
                {
                    "messages": [
                        {"type": "ToolResult", "call_id": "c", "name": "t", "content": "x", "is_error": bad}
                    ]
                },
                "expected a boolean, got " + kind + " @ messages[0].is_error",
            )
            for bad, kind in [
                ("yes", "a string ('yes')"),
                (1, "an integer (1)"),
                (0, "an integer (0)"),
                (None, "null"),
            ]
        ),
    ],
)
def test_a_wrong_type_in_a_body_is_a_422_naming_the_field(body: Any, named: str) -> None:
    with serving(server_for().app()) as base, httpx.Client(base_url=base) as client:
        response = client.post("/agents/assistant/runs", json=body)

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "bad_input"
    assert named in error["message"]
