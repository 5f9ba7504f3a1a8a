"""helikon: agents as a pure state machine with swappable interpreters.

Everything a user needs is importable from here::

    from helikon import LlmAgent, RunContext, AgentInput, collect, tool

Model adapters live in ``helikon.providers.*``, testing helpers in
``helikon.testing``, the pure machine in ``helikon.loop``.
"""

from helikon._version import __version__
from helikon.agent import LlmAgent
from helikon.cancel import CancellationToken
from helikon.config import PermissionMode, RunConfig
from helikon.context import RunContext, SessionState, ToolContext
from helikon.errors import (
    AgentError,
    ConfigError,
    HelikonError,
    ModelError,
    RunError,
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
from helikon.items import AgentInput, AssistantMessage, Item, SystemMessage, ToolCall, ToolResult, UserMessage
from helikon.model import ModelCapabilities, ModelRequest, ModelSettings, ToolEffect, Usage
from helikon.protocols import Model, Session, Tool
from helikon.results import RunResult, collect, collect_typed, run_sync
from helikon.snapshots import dump_state, load_state
from helikon.steps import advance, perform, start
from helikon.tools import FunctionTool, tool, tools
from helikon.trace import Trace
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

__all__ = [
    "Agent",
    "AgentAsTool",
    "AgentError",
    "AgentEvent",
    "AgentInput",
    "AgentUpdated",
    "ApprovalRequested",
    "AssistantMessage",
    "CancellationToken",
    "ConfigError",
    "FunctionTool",
    "GraphAgent",
    "GraphBuildError",
    "GuardrailTriggered",
    "Handoff",
    "HandoffItem",
    "HelikonError",
    "Item",
    "LlmAgent",
    "LoopAgent",
    "MessageOutput",
    "Model",
    "ModelCapabilities",
    "ModelError",
    "ModelRequest",
    "ModelSettings",
    "ParallelAgent",
    "PermissionDenied",
    "PermissionMode",
    "ReasoningDelta",
    "RepairStarted",
    "RunCompleted",
    "RunConfig",
    "RunContext",
    "RunError",
    "RunFailed",
    "RunResult",
    "RunStarted",
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
    "tools",
    "__version__",
]
