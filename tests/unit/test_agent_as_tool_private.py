"""An agent used as a tool runs a private sub-run (issue 27, defect 1).

Its turns never reach the caller's stream, session or conversation: only
the call and its result do; what it spent is added to the caller's usage.
"""

from __future__ import annotations

from typing import Any

import trio

from helikon import AgentAsTool, LlmAgent, RunContext, Usage, collect, tool
from helikon.events import MessageOutput, ToolCallItem, ToolOutputItem
from helikon.items import ToolCall, ToolResult
from helikon.sessions import MemorySession
from helikon.testing import MockModel, call_tools, say


@tool
async def lookup(q: str) -> str:
    """Look up.

    Args:
        q: query.
    """
    return "facts"


def caller() -> tuple[LlmAgent[Any], MockModel]:
    summarizer = LlmAgent(
        name="summarizer",
        model=MockModel([call_tools(("s1", "lookup", {"q": "x"})), say("SUMMARY", usage=Usage(1000, 500))]),
        tools=[lookup],
    )
    model = MockModel(
        [
            call_tools(("c1", "summarize", {"input": "text"}), usage=Usage(10, 5)),
            say("final", usage=Usage(10, 5)),
        ]
    )
    main = LlmAgent(
        name="main", model=model, tools=[AgentAsTool(summarizer, name="summarize", description="Summarize.")]
    )
    return main, model


def test_the_sub_run_stays_out_of_the_callers_stream_session_and_conversation() -> None:
    main, model = caller()
    session = MemorySession()

    async def go() -> Any:
        result = await collect(main.run(RunContext.ephemeral(None).with_session(session), "hi"))
        return result, await session.snapshot()

    result, history = trio.run(go)
    assert result.final_output == "final"
    calls = [e.item.call_id for e in result.events if isinstance(e, ToolCallItem)]
    outputs = [e.item for e in result.events if isinstance(e, ToolOutputItem)]
    speakers = [e.item.agent for e in result.events if isinstance(e, MessageOutput)]
    assert calls == ["c1"]
    assert [(o.call_id, o.content) for o in outputs] == [("c1", "SUMMARY")]
    assert speakers == ["main"]
    assert all(getattr(e, "text", None) != "SUMMARY" for e in result.events)  # no sub-run deltas
    assert result.usage == Usage(1020, 510)
    # The session: the user's message, the call, its real result, the answer.
    kinds = [(type(i).__name__, getattr(i, "call_id", None)) for i in history]
    assert kinds == [
        ("UserMessage", None),
        ("ToolCall", "c1"),
        ("ToolResult", "c1"),
        ("AssistantMessage", None),
    ]
    assert isinstance(history[2], ToolResult) and history[2].content == "SUMMARY"
    # The caller's second model call saw only its own call and result.
    second = model.requests[1].messages
    seen = [(type(m).__name__, m.call_id) for m in second if isinstance(m, ToolCall | ToolResult)]
    assert seen == [("ToolCall", "c1"), ("ToolResult", "c1")]
