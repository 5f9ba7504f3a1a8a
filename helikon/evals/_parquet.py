"""``ParquetTraceSink``: eval runs as two Parquet files, for offline analysis.

Needs the ``parquet`` extra (pyarrow). For run ``R`` it writes, in its
directory:

- ``R-events.parquet``: one row per session event of every case, in dataset
  order then log order: ``run_id``, ``case_index``, ``case_id``,
  ``agent_run_id``, ``sequence``, ``kind`` (the session-event tag),
  ``payload`` (the event's sorted-key JSON, as sessions store it) and ``at``
  (a UTC timestamp in milliseconds).
- ``R-scores.parquet``: one row per (case, evaluator) in dataset then
  evaluator order: ``run_id``, ``case_index``, ``case_id``, ``status``,
  ``evaluator``, ``outcome``, ``value`` (null for a skip), ``reason``,
  ``error``, ``final_output``, ``duration_ms``. A case no evaluator scored
  (its run failed, or it diverged) has one row with a null evaluator.

Characters of the run id other than letters, digits, ``.``, ``_`` and ``-``
become ``_`` in the file names. Each file is written to a temporary name
and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, final

from helikon.evals._report import EvalReport
from helikon.evals._scores import ScoreOutcome
from helikon.sessions import encode_event
from helikon.sessions._events import event_tag


def file_stem(run_id: str) -> str:
    """The run id as it appears in file names.

    >>> file_stem("eval-1/nightly run")
    'eval-1_nightly_run'
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", run_id)


@final
class ParquetTraceSink:
    """Writes each finished run as ``<run_id>-events.parquet`` and ``<run_id>-scores.parquet``.

    Raises (on construction):
        ImportError: pyarrow is missing (install the ``parquet`` extra).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "ParquetTraceSink needs pyarrow: pip install 'paigasus-helikon[parquet]'"
            ) from exc
        self.directory = Path(directory)

    def paths(self, run_id: str) -> tuple[Path, Path]:
        """Where run ``run_id``'s events and scores files go."""
        stem = file_stem(run_id)
        return self.directory / f"{stem}-events.parquet", self.directory / f"{stem}-scores.parquet"

    def record(self, report: EvalReport) -> None:
        import pyarrow as pa

        events_path, scores_path = self.paths(report.run_id)
        self.directory.mkdir(parents=True, exist_ok=True)
        events = pa.table(_event_columns(report), schema=events_schema())
        scores = pa.table(_score_columns(report), schema=scores_schema())
        _write(events, events_path)
        _write(scores, scores_path)


def events_schema() -> Any:
    """The events file's Arrow schema (built on use: pyarrow is optional)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("run_id", pa.string()),
            ("case_index", pa.int32()),
            ("case_id", pa.string()),
            ("agent_run_id", pa.string()),
            ("sequence", pa.int32()),
            ("kind", pa.string()),
            ("payload", pa.string()),
            ("at", pa.timestamp("ms", tz="UTC")),
        ]
    )


def scores_schema() -> Any:
    """The scores file's Arrow schema."""
    import pyarrow as pa

    return pa.schema(
        [
            ("run_id", pa.string()),
            ("case_index", pa.int32()),
            ("case_id", pa.string()),
            ("status", pa.string()),
            ("evaluator", pa.string()),
            ("outcome", pa.string()),
            ("value", pa.float64()),
            ("reason", pa.string()),
            ("error", pa.string()),
            ("final_output", pa.string()),
            ("duration_ms", pa.float64()),
        ]
    )


def _event_columns(report: EvalReport) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {name: [] for name in events_schema().names}
    for case in report.cases:
        for sequence, event in enumerate(case.events):
            columns["run_id"].append(report.run_id)
            columns["case_index"].append(case.index)
            columns["case_id"].append(case.case.id)
            columns["agent_run_id"].append(case.run_id)
            columns["sequence"].append(sequence)
            columns["kind"].append(event_tag(event))
            columns["payload"].append(encode_event(event).decode())
            columns["at"].append(event.at)
    return columns


def _score_columns(report: EvalReport) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {name: [] for name in scores_schema().names}
    for case in report.cases:
        error = (
            case.error
            if case.divergence is None
            else f"diverged at step {case.divergence.step}: " + (case.divergence.headline)
        )
        rows: list[tuple[str | None, str | None, float | None, str]] = [
            (
                s.evaluator,
                s.score.outcome.value,
                None if s.score.outcome is ScoreOutcome.SKIPPED else s.score.value,
                s.score.reason,
            )
            for s in case.scores
        ] or [(None, None, None, "")]
        for evaluator, outcome, value, reason in rows:
            columns["run_id"].append(report.run_id)
            columns["case_index"].append(case.index)
            columns["case_id"].append(case.case.id)
            columns["status"].append(case.status.value)
            columns["evaluator"].append(evaluator)
            columns["outcome"].append(outcome)
            columns["value"].append(value)
            columns["reason"].append(reason)
            columns["error"].append(error)
            columns["final_output"].append(case.final_output)
            columns["duration_ms"].append(case.duration_ms)
    return columns


def _write(table: Any, path: Path) -> None:
    import pyarrow.parquet as pq

    partial = path.with_name(path.name + ".partial")
    pq.write_table(table, partial)
    partial.replace(path)


__all__ = ["ParquetTraceSink", "events_schema", "file_stem", "scores_schema"]
