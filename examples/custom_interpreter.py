"""A synchronous interpreter written against the step API, in a page.

helikon's core never performs anything: ``start`` and ``advance`` return the
next effect as data, and whoever drives the run performs it. This one runs
an agent with no event loop at all: a scripted "model" and plain functions
as tools. Swap ``call_model`` for a blocking HTTP call and it is a real one.
"""

from __future__ import annotations

from helikon import advance, start
from helikon.effects import (
    CallModel,
    ExecuteTools,
    InvokeTool,
    ModelResponded,
    Terminate,
    ToolReturned,
    ToolsExecuted,
)
from helikon.loop import AgentSpec
from helikon.model import Finish, FinishReason, TextChunk, ToolCallChunk, ToolDef

ADD = ToolDef(
    "add",
    "Add two integers.",
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
SPEC = AgentSpec("calculator", instructions="Use the add tool.", tools=(ADD,))
TOOLS = {"add": lambda args: args["a"] + args["b"]}


def call_model(effect: CallModel) -> ModelResponded:
    """A stand-in model: ask for add(2, 3) once, then report the result."""
    last = effect.request.messages[-1]
    if getattr(last, "name", None) == "add":
        return ModelResponded((TextChunk(f"2 + 3 = {last.content}"), Finish(FinishReason.STOP)))
    return ModelResponded(
        (ToolCallChunk(0, "c1", "add", '{"a": 2, "b": 3}'), Finish(FinishReason.TOOL_CALLS))
    )


def run(question: str) -> None:
    outcome = start(SPEC, question, run_id="run-1")
    while True:
        for event in outcome.events:
            print(" ", event)
        match outcome.effect:
            case Terminate():
                return
            case CallModel() as effect:
                result = call_model(effect)
            case ExecuteTools(steps=steps):
                # Governance (hooks, permissions, redaction) is the machine's;
                # with no hooks or policy every step is a tool to run.
                result = ToolsExecuted(
                    tuple(
                        ToolReturned(s.call_id, TOOLS[s.tool](s.args))
                        for s in steps
                        if isinstance(s, InvokeTool)
                    )
                )
            case other:
                raise NotImplementedError(f"this interpreter does not perform {type(other).__name__}")
        outcome = advance(SPEC, outcome.state, result)


if __name__ == "__main__":
    run("What is 2 + 3?")
