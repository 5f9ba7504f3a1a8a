"""Interpreters: what performs the pure machine's effects.

- :class:`LiveInterpreter` — real models and tools, under trio or asyncio.
- :class:`TestInterpreter` — synchronous, scripted, in memory.
- :class:`RecordingInterpreter` — any interpreter, plus a trace of the run.
- :class:`ReplayInterpreter` — a recorded run again, with no IO.
- :class:`ForkInterpreter` — a recorded run continued from any step with an
  edited answer, replayed where it does not depend on it, else live.
- :func:`drive` and the :class:`Interpreter` protocol — write your own;
  :func:`plan_for` and :func:`callbacks_of` give the calls of user code an
  effect needs, :func:`run_sync`/:func:`run_async` perform them (the
  machine's answer table says what the answers mean).
"""

from helikon.interpreters._drive import RESULT_TYPES, Interpreter, drive, interruption
from helikon.interpreters._env import InstructionsFn, Limits, RunEnv, build_env, governance_of
from helikon.interpreters._fork import ForkInterpreter, StepMark
from helikon.interpreters._governed import tool_output_text
from helikon.interpreters._live import LiveInterpreter
from helikon.interpreters._perform import Call, Callbacks, Plan, plan_for, run_async, run_sync
from helikon.interpreters._recording import RecordingInterpreter
from helikon.interpreters._replay import ReplayDivergence, ReplayInterpreter
from helikon.interpreters._scripted import ScriptedRun, Step, TestInterpreter, ToolFn
from helikon.interpreters._steps import ask_approval, callbacks_of, perform_step

__all__ = [
    "RESULT_TYPES",
    "Call",
    "Callbacks",
    "Plan",
    "callbacks_of",
    "plan_for",
    "run_async",
    "run_sync",
    "InstructionsFn",
    "Interpreter",
    "ForkInterpreter",
    "Limits",
    "LiveInterpreter",
    "RecordingInterpreter",
    "ReplayDivergence",
    "ReplayInterpreter",
    "RunEnv",
    "ScriptedRun",
    "StepMark",
    "Step",
    "TestInterpreter",
    "ToolFn",
    "ask_approval",
    "build_env",
    "drive",
    "governance_of",
    "interruption",
    "perform_step",
    "tool_output_text",
]
