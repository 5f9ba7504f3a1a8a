"""Evals: run a dataset of cases through an agent, score each outcome, report.

- :class:`EvalDataset` / :class:`EvalCase`: cases from JSON Lines.
- :class:`Evaluator` (the protocol), :class:`Score` and the built-ins:
  :class:`ExactMatch`, :class:`ToolUseTrajectory` (exact, in order, any
  order), :class:`JsonSchemaEvaluator`, :class:`LlmJudge`.
- :class:`ScriptFile` (and ``MockModel.from_script_file``): scripted models
  for a whole dataset from one JSON file.
- :class:`EvalRun`: the run (fresh agent per case, concurrency, interpreter
  choice, every case recorded as a trace); re-score a saved run offline or
  replay it against a changed agent.
- :class:`EvalReport`: ``passed()``, statistics, ``render_table()``, JSON,
  a self-contained HTML report, ``save``/``load``.
- Trace sinks: :class:`SqliteTraceSink`, :class:`ParquetTraceSink` (the
  ``parquet`` extra).

``docs/evals.md`` is the guide.
"""

from helikon.evals._dataset import DatasetError, EvalCase, EvalDataset
from helikon.evals._evaluators import ExactMatch, JsonSchemaEvaluator, ToolUseTrajectory, TrajectoryMatch
from helikon.evals._judge import JudgeVerdict, LlmJudge
from helikon.evals._parquet import ParquetTraceSink
from helikon.evals._report import EvalReport, ReportFormatError
from helikon.evals._results import CaseCounts, CaseResult, CaseStatus, Divergence, EvaluatorStats
from helikon.evals._run import EvalRun, TraceSink
from helikon.evals._scores import CaseOutcome, CaseScore, EvalError, Evaluator, Score, ScoreOutcome
from helikon.evals._sqlite import SqliteTraceSink
from helikon.testing._mock import ScriptFile, ScriptFileError

__all__ = [
    "CaseCounts",
    "CaseOutcome",
    "CaseResult",
    "CaseScore",
    "CaseStatus",
    "DatasetError",
    "Divergence",
    "EvalCase",
    "EvalDataset",
    "EvalError",
    "EvalReport",
    "EvalRun",
    "Evaluator",
    "EvaluatorStats",
    "ExactMatch",
    "JsonSchemaEvaluator",
    "JudgeVerdict",
    "LlmJudge",
    "ParquetTraceSink",
    "ReportFormatError",
    "Score",
    "ScoreOutcome",
    "ScriptFile",
    "ScriptFileError",
    "SqliteTraceSink",
    "ToolUseTrajectory",
    "TraceSink",
    "TrajectoryMatch",
]
