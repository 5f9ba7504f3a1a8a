"""helikon: agents as a pure state machine with swappable interpreters.

Everything a user needs is importable from here::

    from helikon import LlmAgent, RunContext, AgentInput, collect, tool

Model adapters live in ``helikon.providers.*``, testing helpers in
``helikon.testing``, the pure machine in ``helikon.loop``.

Names are imported lazily, on first use (PEP 562), so ``import helikon``
stays fast and loads only what a program touches. Where each public name
lives is written once, in ``_EXPORTS``; ``__all__`` and the lazy lookup are
derived from it. The ``TYPE_CHECKING`` imports repeat it for type checkers
(``X as X`` marks each as re-exported), and ``tests/unit/test_exports.py``
checks that the two agree.
"""

import importlib
import typing

from helikon import _plugins
from helikon._version import __version__

# One ``from m import (A as A, ...)`` per module (``as`` marks the re-export; isort would split them).
# isort: off
if typing.TYPE_CHECKING:
    from helikon._normal import (
        normal_form as normal_form,
    )
    from helikon.agent import (
        LlmAgent as LlmAgent,
    )
    from helikon.cancel import (
        CancellationToken as CancellationToken,
    )
    from helikon.config import (
        PermissionMode as PermissionMode,
        RunConfig as RunConfig,
        UsageLimits as UsageLimits,
    )
    from helikon.context import (
        HookRegistry as HookRegistry,
        RunContext as RunContext,
        SessionState as SessionState,
        ToolContext as ToolContext,
        TracerHandle as TracerHandle,
    )
    from helikon.errors import (
        AgentError as AgentError,
        ConfigError as ConfigError,
        HelikonError as HelikonError,
        ModelError as ModelError,
        NormalFormError as NormalFormError,
        RunError as RunError,
        RunSuspended as RunSuspended,
        StepError as StepError,
        ToolError as ToolError,
        UsageLimitExceeded as UsageLimitExceeded,
    )
    from helikon.events import (
        AgentEvent as AgentEvent,
        AgentUpdated as AgentUpdated,
        ApprovalRequested as ApprovalRequested,
        GuardrailTriggered as GuardrailTriggered,
        HandoffItem as HandoffItem,
        MessageOutput as MessageOutput,
        PermissionDenied as PermissionDenied,
        ReasoningDelta as ReasoningDelta,
        RepairStarted as RepairStarted,
        RunCompleted as RunCompleted,
        RunFailed as RunFailed,
        RunStarted as RunStarted,
        StructuredOutputFailed as StructuredOutputFailed,
        TokenDelta as TokenDelta,
        ToolCallDelta as ToolCallDelta,
        ToolCallItem as ToolCallItem,
        ToolOutputItem as ToolOutputItem,
        TurnStarted as TurnStarted,
    )
    from helikon.governance import (
        Allow as Allow,
        AllowRule as AllowRule,
        AskUser as AskUser,
        Deny as Deny,
        DenyRule as DenyRule,
        GuardAction as GuardAction,
        GuardRule as GuardRule,
        InjectSystemMessage as InjectSystemMessage,
        OnHandoff as OnHandoff,
        OnRunComplete as OnRunComplete,
        OnRunStart as OnRunStart,
        OnSubagentStop as OnSubagentStop,
        OnTurnStart as OnTurnStart,
        Pass as Pass,
        PostToolUse as PostToolUse,
        PreToolUse as PreToolUse,
        Replace as Replace,
        ReplaceInput as ReplaceInput,
        ReplaceOutput as ReplaceOutput,
        Tripwire as Tripwire,
    )
    from helikon.items import (
        AgentInput as AgentInput,
        AssistantMessage as AssistantMessage,
        Item as Item,
        SystemMessage as SystemMessage,
        ToolCall as ToolCall,
        ToolResult as ToolResult,
        UserMessage as UserMessage,
    )
    from helikon.model import (
        ModelCapabilities as ModelCapabilities,
        ModelRequest as ModelRequest,
        ModelSettings as ModelSettings,
        ToolEffect as ToolEffect,
        Usage as Usage,
    )
    from helikon.pricing import (
        ModelPrice as ModelPrice,
        PriceSource as PriceSource,
        PriceTable as PriceTable,
    )
    from helikon.protocols import (
        Model as Model,
        Session as Session,
        Tool as Tool,
        ToolSource as ToolSource,
    )
    from helikon.results import (
        RunResult as RunResult,
        collect as collect,
        collect_typed as collect_typed,
        run_sync as run_sync,
    )
    from helikon.sessions import (
        CompactingSession as CompactingSession,
        MemorySession as MemorySession,
    )
    from helikon.snapshots import (
        dump_state as dump_state,
        load_state as load_state,
    )
    from helikon.steps import (
        advance as advance,
        pending as pending,
        pending_effect as pending_effect,
        perform as perform,
        prepare as prepare,
        start as start,
    )
    from helikon.tools import (
        FunctionTool as FunctionTool,
        Reconciled as Reconciled,
        tool as tool,
    )
    from helikon.trace import (
        Trace as Trace,
    )
    from helikon.workflows import (
        Agent as Agent,
        AgentAsTool as AgentAsTool,
        GraphAgent as GraphAgent,
        GraphBuildError as GraphBuildError,
        Handoff as Handoff,
        LoopAgent as LoopAgent,
        ParallelAgent as ParallelAgent,
        SequentialAgent as SequentialAgent,
        SwarmAgent as SwarmAgent,
        SwarmBuildError as SwarmBuildError,
    )
# isort: on

#: The public names, by the module that defines them.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "helikon._normal": ("normal_form",),
    "helikon.agent": ("LlmAgent",),
    "helikon.cancel": ("CancellationToken",),
    "helikon.config": ("PermissionMode", "RunConfig", "UsageLimits"),
    "helikon.context": ("HookRegistry", "RunContext", "SessionState", "ToolContext", "TracerHandle"),
    "helikon.errors": (
        "AgentError", "ConfigError", "HelikonError", "ModelError", "NormalFormError", "RunError",
        "RunSuspended", "StepError", "ToolError", "UsageLimitExceeded",
    ),
    "helikon.events": (
        "AgentEvent", "AgentUpdated", "ApprovalRequested", "GuardrailTriggered", "HandoffItem",
        "MessageOutput", "PermissionDenied", "ReasoningDelta", "RepairStarted", "RunCompleted", "RunFailed",
        "RunStarted", "StructuredOutputFailed", "TokenDelta", "ToolCallDelta", "ToolCallItem",
        "ToolOutputItem", "TurnStarted",
    ),
    "helikon.governance": (
        "Allow", "AllowRule", "AskUser", "Deny", "DenyRule", "GuardAction", "GuardRule",
        "InjectSystemMessage", "OnHandoff", "OnRunComplete", "OnRunStart", "OnSubagentStop", "OnTurnStart",
        "Pass", "PostToolUse", "PreToolUse", "Replace", "ReplaceInput", "ReplaceOutput", "Tripwire",
    ),
    "helikon.items": (
        "AgentInput", "AssistantMessage", "Item", "SystemMessage", "ToolCall", "ToolResult", "UserMessage",
    ),
    "helikon.model": ("ModelCapabilities", "ModelRequest", "ModelSettings", "ToolEffect", "Usage"),
    "helikon.pricing": ("ModelPrice", "PriceSource", "PriceTable"),
    "helikon.protocols": ("Model", "Session", "Tool", "ToolSource"),
    "helikon.results": ("RunResult", "collect", "collect_typed", "run_sync"),
    "helikon.sessions": ("CompactingSession", "MemorySession"),
    "helikon.snapshots": ("dump_state", "load_state"),
    "helikon.steps": ("advance", "pending", "pending_effect", "perform", "prepare", "start"),
    "helikon.tools": ("FunctionTool", "Reconciled", "tool"),
    "helikon.trace": ("Trace",),
    "helikon.workflows": (
        "Agent", "AgentAsTool", "GraphAgent", "GraphBuildError", "Handoff", "LoopAgent", "ParallelAgent",
        "SequentialAgent", "SwarmAgent", "SwarmBuildError",
    ),
}

#: Where each public name lives.
_LOCATIONS: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}


def _default_observer() -> typing.Any:
    """The observer of runs whose handle names no tracer: a ``Telemetry`` of
    the global OpenTelemetry providers (imported only when one is configured)."""
    from helikon.observability import Telemetry

    return Telemetry()


_plugins.default_observer = _default_observer


def __getattr__(name: str) -> typing.Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'helikon' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LOCATIONS})


__all__ = [*sorted(_LOCATIONS), "__version__"]
