"""Trace sinks on real files: SQLite read back with ``sqlite3``, Parquet with ``pyarrow``, row by row."""

from __future__ import annotations

import datetime
import json
import sqlite3
import sys
from pathlib import Path

import msgspec
import pytest
import trio

from helikon.evals import (
    CaseStatus,
    EvalReport,
    EvalRun,
    ExactMatch,
    ParquetTraceSink,
    ReportFormatError,
    SqliteTraceSink,
    ToolUseTrajectory,
)
from helikon.sessions import decode_event
from helikon.sessions._events import event_tag

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "evals"))
from evals_support import agent_for, dataset

pytestmark = pytest.mark.integration

EVALUATORS = (ExactMatch(), ToolUseTrajectory.exact())
CLOCK_START = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def eval_run(*sinks: object, run_id: str = "nightly/1") -> EvalReport:
    ticks = iter(range(CLOCK_START, CLOCK_START + 10_000))
    evals = EvalRun(
        dataset(), EVALUATORS, agent_factory=agent_for, sinks=sinks, run_id=run_id, clock=lambda: next(ticks)
    )
    return trio.run(evals.run)  # type: ignore[arg-type]


def test_sqlite_rows_match_the_report_row_by_row(tmp_path: Path) -> None:
    path = tmp_path / "evals.db"
    report = eval_run(SqliteTraceSink(path))
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row

    (run,) = db.execute("SELECT * FROM eval_runs").fetchall()
    assert dict(run) == {
        "run_id": "nightly/1",
        "name": "",
        "mode": "run",
        "source_run": None,
        "started_at": report.started_at,
        "duration_ms": report.duration_ms,
        "evaluators": '["exact_match","tool_trajectory"]',
        "cases": 5,
        "passed": 0,
        "mean_score": report.mean,
    }

    cases = db.execute("SELECT * FROM eval_cases ORDER BY case_index").fetchall()
    assert len(cases) == len(report.cases)
    for row, result in zip(cases, report.cases, strict=True):
        assert row["run_id"] == "nightly/1" and row["case_index"] == result.index
        assert row["case_id"] == result.case.id and row["agent_run_id"] == f"nightly/1:{result.case.id}"
        assert row["input"] == result.case.input
        assert (None if row["expected"] is None else json.loads(row["expected"])) == result.case.expected
        tools = None if row["expected_tools"] is None else tuple(json.loads(row["expected_tools"]))
        assert tools == result.case.expected_tools
        assert row["status"] == result.status.value and row["final_output"] == result.final_output
        assert json.loads(row["tool_calls"]) == list(result.tool_calls)
        assert row["error"] is None and row["divergence"] is None
        scores = json.loads(row["scores"])
        assert [(s["evaluator"], s["outcome"], s["value"]) for s in scores] == [
            (s.evaluator, s.score.outcome.value, s.score.value) for s in result.scores
        ]
        assert result.trace is not None and row["trace"] == result.trace.to_bytes().decode()
        assert row["started_at"] == result.started_at and row["duration_ms"] == result.duration_ms

    events = db.execute("SELECT * FROM eval_events ORDER BY case_index, sequence").fetchall()
    expected = [(r.index, n, e) for r in report.cases for n, e in enumerate(r.events)]
    assert len(events) == len(expected) > 0
    for row, (index, sequence, event) in zip(events, expected, strict=True):
        assert (row["case_index"], row["sequence"]) == (index, sequence)
        assert row["kind"] == event_tag(event) and row["at"] == event.at
        assert decode_event(row["payload"]) == event  # the session-event form, as sessions store it
    shipped = [r["kind"] for r in events if r["case_index"] == 0]
    assert shipped == ["user_message", "tool_called", "tool_returned", "assistant_message"]
    db.close()


def test_sqlite_recording_a_run_again_replaces_it_and_runs_load_back(tmp_path: Path) -> None:
    sink = SqliteTraceSink(tmp_path / "evals.db")
    eval_run(sink)
    report = eval_run(sink)  # the same run id: replaced, not duplicated
    other = eval_run(sink, run_id="other")
    db = sqlite3.connect(tmp_path / "evals.db")
    counts = db.execute("SELECT run_id, COUNT(*) FROM eval_cases GROUP BY run_id ORDER BY run_id").fetchall()
    assert counts == [("nightly/1", 5), ("other", 5)]
    db.close()
    assert sink.run_ids() == ("nightly/1", "other")
    loaded = sink.load("nightly/1")
    assert loaded == report
    assert [c.trace for c in loaded.cases] == [c.trace for c in report.cases]
    assert sink.load("other") == other
    # a run stored in SQLite can be re-scored offline
    rescored = EvalRun(dataset(), EVALUATORS).rescore_sync(loaded)
    assert [c.scores for c in rescored.cases] == [c.scores for c in report.cases]
    with pytest.raises(ReportFormatError, match="no eval run 'missing'"):
        sink.load("missing")


def test_sqlite_refuses_a_database_from_a_newer_helikon(tmp_path: Path) -> None:
    path = tmp_path / "evals.db"
    eval_run(SqliteTraceSink(path))
    db = sqlite3.connect(path)
    db.execute("INSERT INTO helikon_eval_migrations (version, description) VALUES (99, 'future')")
    db.commit()
    db.close()
    with pytest.raises(ReportFormatError, match="eval schema version 99, newer than this helikon knows"):
        eval_run(SqliteTraceSink(path))


def test_parquet_files_match_the_report_row_by_row(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    sink = ParquetTraceSink(tmp_path / "parquet")
    report = eval_run(sink)
    events_path, scores_path = sink.paths("nightly/1")
    assert (events_path.name, scores_path.name) == ("nightly_1-events.parquet", "nightly_1-scores.parquet")
    assert sorted(p.name for p in (tmp_path / "parquet").iterdir()) == sorted(
        [events_path.name, scores_path.name]
    )

    events = pq.read_table(events_path)
    assert events.schema.field("at").type.unit == "ms" and str(events.schema.field("at").type.tz) == "UTC"
    rows = events.to_pylist()
    expected = [(r, n, e) for r in report.cases for n, e in enumerate(r.events)]
    assert len(rows) == len(expected) > 0
    for row, (result, sequence, event) in zip(rows, expected, strict=True):
        assert row["run_id"] == "nightly/1" and row["case_index"] == result.index
        assert row["case_id"] == result.case.id and row["agent_run_id"] == result.run_id
        assert row["sequence"] == sequence and row["kind"] == event_tag(event)
        assert decode_event(row["payload"]) == event
        assert row["at"] == datetime.datetime.fromtimestamp(event.at / 1000, tz=datetime.UTC)

    scores = pq.read_table(scores_path).to_pylist()
    expected_scores = [(result, s) for result in report.cases for s in (result.scores or (None,))]
    assert len(scores) == len(expected_scores) == 10
    for row, (result, scored) in zip(scores, expected_scores, strict=True):
        assert (row["case_index"], row["case_id"], row["status"]) == (
            result.index,
            result.case.id,
            result.status.value,
        )
        assert row["final_output"] == result.final_output and row["error"] is None
        assert scored is not None
        assert (row["evaluator"], row["outcome"], row["reason"]) == (
            scored.evaluator,
            scored.score.outcome.value,
            scored.score.reason,
        )
        skipped = scored.score.outcome.value == "skipped"
        assert row["value"] == (None if skipped else scored.score.value)


def test_parquet_a_case_no_evaluator_scored_has_one_row_with_its_error(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    def broken(case: object) -> object:
        raise RuntimeError("no agent")

    sink = ParquetTraceSink(tmp_path)
    report = trio.run(EvalRun(dataset(), EVALUATORS, agent_factory=broken, sinks=[sink], run_id="bad").run)
    assert {c.status for c in report.cases} == {CaseStatus.ERROR}
    rows = pq.read_table(sink.paths("bad")[1]).to_pylist()
    assert len(rows) == 5
    assert {(r["evaluator"], r["value"], r["status"]) for r in rows} == {(None, None, "error")}
    assert rows[0]["error"] == "could not set up the case: RuntimeError: no agent"
    assert pq.read_table(sink.paths("bad")[0]).num_rows == 0


def test_the_report_json_summary_matches_the_sinks(tmp_path: Path) -> None:
    report = eval_run(SqliteTraceSink(tmp_path / "e.db"))
    summary = msgspec.json.decode(report.to_json())["summary"]
    db = sqlite3.connect(tmp_path / "e.db")
    passed, mean = db.execute("SELECT passed, mean_score FROM eval_runs").fetchone()
    assert (bool(passed), mean) == (summary["passed"], summary["mean"])
    db.close()
