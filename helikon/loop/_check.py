"""Whether a stored state fits the agent that resumes it.

A state loaded from a snapshot is input: edited, truncated, or saved by
another agent, it could ask for a tool call the conversation never had. The
loop checks it before it resumes, and names what does not fit.
"""

from __future__ import annotations

from helikon.ids import CallId
from helikon.items import ToolCall, ToolResult
from helikon.loop._spec import AgentSpec
from helikon.loop._states import ExecutingTools, NeedsApproval, RunState


def state_problems(state: RunState, spec: AgentSpec) -> tuple[str, ...]:
    """What does not fit in ``state`` resumed by ``spec`` (empty: it fits).

    >>> from helikon.ids import RunId
    >>> from helikon.loop import Done
    >>> state_problems(RunState(RunId("r"), "a", Done("hi")), AgentSpec("b"))
    ("the state belongs to agent 'a', not 'b'",)
    """
    problems: list[str] = []
    if state.agent != spec.name:
        problems.append(f"the state belongs to agent {state.agent!r}, not {spec.name!r}")
    # Unanswered calls by id, counted: a model may reuse an id in a later
    # turn. (Results without their call are let be: a compacted history may
    # hold some.)
    open_calls: dict[CallId, int] = {}
    for item in state.conversation:
        if isinstance(item, ToolCall):
            open_calls[item.call_id] = open_calls.get(item.call_id, 0) + 1
        elif isinstance(item, ToolResult) and open_calls.get(item.call_id, 0) > 0:
            open_calls[item.call_id] -= 1
    match state.phase:
        case ExecutingTools(calls=round) | NeedsApproval(calls=round):
            known = {t.name for t in spec.model_tools}
            for index, pending in enumerate(round):
                call_id, name = pending.call.call_id, pending.call.name
                where = f"phase.calls[{index}]"
                if call_id not in open_calls:
                    problems.append(f"{where}: tool call {call_id!r} is not in the conversation")
                elif open_calls[call_id] == 0:
                    problems.append(
                        f"{where}: tool call {call_id!r} already has its result in the conversation"
                    )
                if not pending.settled and name not in known:
                    problems.append(f"{where}: the agent has no tool {name!r}")
        case _:
            pass
    return tuple(problems)


__all__ = ["state_problems"]
