"""Helpers for testing agents: a scripted model, turn builders, an in-memory
interpreter. Hypothesis strategies live in :mod:`helikon.testing.strategies`
(import it explicitly; it needs the ``hypothesis`` package)."""

from helikon.interpreters._scripted import ScriptedRun, Step, TestInterpreter
from helikon.testing._golden import GoldenMismatch, GoldenTraceMissing, GoldenTraces
from helikon.testing._mock import (
    MockModel,
    Pause,
    Script,
    ScriptFile,
    ScriptFileError,
    ScriptItem,
    call_tools,
    say,
)

__all__ = [
    "GoldenMismatch",
    "GoldenTraceMissing",
    "GoldenTraces",
    "MockModel",
    "Pause",
    "Script",
    "ScriptFile",
    "ScriptFileError",
    "ScriptItem",
    "ScriptedRun",
    "Step",
    "TestInterpreter",
    "call_tools",
    "say",
]
