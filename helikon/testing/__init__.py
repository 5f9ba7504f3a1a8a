"""Helpers for testing agents: a scripted model, a model from a function,
turn builders, an in-memory interpreter, golden traces. Hypothesis strategies
live in :mod:`helikon.testing.strategies` (import it explicitly; it needs the
``hypothesis`` package)."""

from helikon.interpreters._scripted import ScriptedRun, Step, TestInterpreter
from helikon.testing._function import FunctionModel, ModelFunction, ModelReply
from helikon.testing._golden import GoldenMismatch, GoldenTraceMissing, GoldenTraces
from helikon.testing._mock import (
    MockModel,
    Pause,
    Script,
    ScriptFile,
    ScriptFileError,
    ScriptItem,
    call_tools,
    estimate_tokens,
    say,
)

__all__ = [
    "FunctionModel",
    "GoldenMismatch",
    "GoldenTraceMissing",
    "GoldenTraces",
    "MockModel",
    "ModelFunction",
    "ModelReply",
    "Pause",
    "Script",
    "ScriptFile",
    "ScriptFileError",
    "ScriptItem",
    "ScriptedRun",
    "Step",
    "TestInterpreter",
    "call_tools",
    "estimate_tokens",
    "say",
]
