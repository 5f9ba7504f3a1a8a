"""helikon: agents as a pure state machine with swappable interpreters.

Everything a user needs is importable from here::

    from helikon import LlmAgent, RunContext, AgentInput, collect, tool

Model adapters live in ``helikon.providers.*``, testing helpers in
``helikon.testing``, the pure machine in ``helikon.loop``.

Names are imported lazily, on first use (PEP 562), so ``import helikon``
stays fast and loads only what a program touches.
"""

import importlib
import typing

from helikon._version import __version__

if typing.TYPE_CHECKING:
    from helikon.agent import (
        LlmAgent,
    )
    from helikon.cancel import (
        CancellationToken,
    )
    from helikon.config import (
        PermissionMode,
        RunConfig,
    )
    from helikon.context import (
        HookRegistry,
        RunContext,
        SessionState,
        ToolContext,
    )
    from helikon.errors import (
        AgentError,
        ConfigError,
        HelikonError,
        ModelError,
        RunError,
        RunSuspended,
        StepError,
        ToolError,
    )
    from helikon.events import (
        AgentEvent,
        AgentUpdated,
        ApprovalRequested,
        GuardrailTriggered,
        HandoffItem,
        MessageOutput,
        PermissionDenied,
        ReasoningDelta,
        RepairStarted,
        RunCompleted,
        RunFailed,
        RunStarted,
        StructuredOutputFailed,
        TokenDelta,
        ToolCallDelta,
        ToolCallItem,
        ToolOutputItem,
        TurnStarted,
    )
    from helikon.governance import (
        Allow,
        AllowRule,
        AskUser,
        Deny,
        DenyRule,
        GuardAction,
        GuardRule,
        InjectSystemMessage,
        OnHandoff,
        OnRunComplete,
        OnRunStart,
        OnSubagentStop,
        OnTurnStart,
        Pass,
        PostToolUse,
        PreToolUse,
        Replace,
        ReplaceInput,
        ReplaceOutput,
        Tripwire,
    )
    from helikon.items import (
        AgentInput,
        AssistantMessage,
        Item,
        SystemMessage,
        ToolCall,
        ToolResult,
        UserMessage,
    )
    from helikon.model import (
        ModelCapabilities,
        ModelRequest,
        ModelSettings,
        ToolEffect,
        Usage,
    )
    from helikon.protocols import (
        Model,
        Session,
        Tool,
    )
    from helikon.results import (
        RunResult,
        collect,
        collect_typed,
        run_sync,
    )
    from helikon.sessions import (
        CompactingSession,
        MemorySession,
    )
    from helikon.snapshots import (
        dump_state,
        load_state,
    )
    from helikon.steps import (
        advance,
        perform,
        start,
    )
    from helikon.tools import (
        FunctionTool,
        tool,
    )
    from helikon.trace import (
        Trace,
    )
    from helikon.workflows import (
        Agent,
        AgentAsTool,
        GraphAgent,
        GraphBuildError,
        Handoff,
        LoopAgent,
        ParallelAgent,
        SequentialAgent,
        SwarmAgent,
        SwarmBuildError,
    )

#: Where each public name lives.
_LOCATIONS: dict[str, str] = {
    "Agent": "helikon.workflows",
    "AgentAsTool": "helikon.workflows",
    "AgentError": "helikon.errors",
    "AgentEvent": "helikon.events",
    "AgentInput": "helikon.items",
    "AgentUpdated": "helikon.events",
    "Allow": "helikon.governance",
    "AllowRule": "helikon.governance",
    "ApprovalRequested": "helikon.events",
    "AskUser": "helikon.governance",
    "AssistantMessage": "helikon.items",
    "CancellationToken": "helikon.cancel",
    "CompactingSession": "helikon.sessions",
    "ConfigError": "helikon.errors",
    "Deny": "helikon.governance",
    "DenyRule": "helikon.governance",
    "FunctionTool": "helikon.tools",
    "GraphAgent": "helikon.workflows",
    "GraphBuildError": "helikon.workflows",
    "GuardAction": "helikon.governance",
    "GuardRule": "helikon.governance",
    "GuardrailTriggered": "helikon.events",
    "Handoff": "helikon.workflows",
    "HandoffItem": "helikon.events",
    "HelikonError": "helikon.errors",
    "HookRegistry": "helikon.context",
    "InjectSystemMessage": "helikon.governance",
    "Item": "helikon.items",
    "LlmAgent": "helikon.agent",
    "LoopAgent": "helikon.workflows",
    "MemorySession": "helikon.sessions",
    "MessageOutput": "helikon.events",
    "Model": "helikon.protocols",
    "ModelCapabilities": "helikon.model",
    "ModelError": "helikon.errors",
    "ModelRequest": "helikon.model",
    "ModelSettings": "helikon.model",
    "OnHandoff": "helikon.governance",
    "OnRunComplete": "helikon.governance",
    "OnRunStart": "helikon.governance",
    "OnSubagentStop": "helikon.governance",
    "OnTurnStart": "helikon.governance",
    "ParallelAgent": "helikon.workflows",
    "Pass": "helikon.governance",
    "PermissionDenied": "helikon.events",
    "PermissionMode": "helikon.config",
    "PostToolUse": "helikon.governance",
    "PreToolUse": "helikon.governance",
    "ReasoningDelta": "helikon.events",
    "RepairStarted": "helikon.events",
    "Replace": "helikon.governance",
    "ReplaceInput": "helikon.governance",
    "ReplaceOutput": "helikon.governance",
    "RunCompleted": "helikon.events",
    "RunConfig": "helikon.config",
    "RunContext": "helikon.context",
    "RunError": "helikon.errors",
    "RunFailed": "helikon.events",
    "RunResult": "helikon.results",
    "RunStarted": "helikon.events",
    "RunSuspended": "helikon.errors",
    "SequentialAgent": "helikon.workflows",
    "Session": "helikon.protocols",
    "SessionState": "helikon.context",
    "StepError": "helikon.errors",
    "StructuredOutputFailed": "helikon.events",
    "SwarmAgent": "helikon.workflows",
    "SwarmBuildError": "helikon.workflows",
    "SystemMessage": "helikon.items",
    "TokenDelta": "helikon.events",
    "Tool": "helikon.protocols",
    "ToolCall": "helikon.items",
    "ToolCallDelta": "helikon.events",
    "ToolCallItem": "helikon.events",
    "ToolContext": "helikon.context",
    "ToolEffect": "helikon.model",
    "ToolError": "helikon.errors",
    "ToolOutputItem": "helikon.events",
    "ToolResult": "helikon.items",
    "Trace": "helikon.trace",
    "Tripwire": "helikon.governance",
    "TurnStarted": "helikon.events",
    "Usage": "helikon.model",
    "UserMessage": "helikon.items",
    "advance": "helikon.steps",
    "collect": "helikon.results",
    "collect_typed": "helikon.results",
    "dump_state": "helikon.snapshots",
    "load_state": "helikon.snapshots",
    "perform": "helikon.steps",
    "run_sync": "helikon.results",
    "start": "helikon.steps",
    "tool": "helikon.tools",
}


def __getattr__(name: str) -> typing.Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'helikon' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LOCATIONS})


__all__ = [
    "Agent",
    "AgentAsTool",
    "AgentError",
    "AgentEvent",
    "AgentInput",
    "AgentUpdated",
    "Allow",
    "AllowRule",
    "ApprovalRequested",
    "AskUser",
    "AssistantMessage",
    "CancellationToken",
    "CompactingSession",
    "ConfigError",
    "Deny",
    "DenyRule",
    "FunctionTool",
    "GraphAgent",
    "GraphBuildError",
    "GuardAction",
    "GuardRule",
    "GuardrailTriggered",
    "Handoff",
    "HandoffItem",
    "HelikonError",
    "HookRegistry",
    "InjectSystemMessage",
    "Item",
    "LlmAgent",
    "LoopAgent",
    "MemorySession",
    "MessageOutput",
    "Model",
    "ModelCapabilities",
    "ModelError",
    "ModelRequest",
    "ModelSettings",
    "OnHandoff",
    "OnRunComplete",
    "OnRunStart",
    "OnSubagentStop",
    "OnTurnStart",
    "ParallelAgent",
    "Pass",
    "PermissionDenied",
    "PermissionMode",
    "PostToolUse",
    "PreToolUse",
    "ReasoningDelta",
    "RepairStarted",
    "Replace",
    "ReplaceInput",
    "ReplaceOutput",
    "RunCompleted",
    "RunConfig",
    "RunContext",
    "RunError",
    "RunFailed",
    "RunResult",
    "RunStarted",
    "RunSuspended",
    "SequentialAgent",
    "Session",
    "SessionState",
    "StepError",
    "StructuredOutputFailed",
    "SwarmAgent",
    "SwarmBuildError",
    "SystemMessage",
    "TokenDelta",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallItem",
    "ToolContext",
    "ToolEffect",
    "ToolError",
    "ToolOutputItem",
    "ToolResult",
    "Trace",
    "Tripwire",
    "TurnStarted",
    "Usage",
    "UserMessage",
    "advance",
    "collect",
    "collect_typed",
    "dump_state",
    "load_state",
    "perform",
    "run_sync",
    "start",
    "tool",
    "__version__",
]
