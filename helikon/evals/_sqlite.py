"""``SqliteTraceSink``: eval runs in SQLite (stdlib ``sqlite3``).

Three tables: ``eval_runs`` (one row per run), ``eval_cases`` (one row per
case, in dataset order: status, answer, scores as JSON, the case's helikon
trace as JSON Lines) and ``eval_events`` (each case's conversation in the
session-event form, exactly as ``SqliteSession`` stores a session:
``kind`` is the event's tag, ``payload`` its sorted-key JSON, ``at`` its
milliseconds). Rules:

- The schema is created by numbered migrations recorded in
  ``helikon_eval_migrations``; a database migrated by a newer helikon is
  refused rather than written with an older layout.
- A run is written in one ``BEGIN IMMEDIATE`` transaction, after the whole
  run is done. Recording a run id again replaces that run's rows.
- :meth:`SqliteTraceSink.load` reads a run back as an :class:`EvalReport`
  (traces included), so a run stored here can be re-scored or replayed.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, Final, final

import msgspec

from helikon.evals._report import REPORT_FORMAT, REPORT_VERSION, EvalReport, ReportFormatError, case_dict
from helikon.evals._results import CaseResult
from helikon.sessions import decode_event, encode_event, event_to_json
from helikon.sessions._events import event_tag
from helikon.trace import Trace

#: (version, description, statements), applied in order, each once.
MIGRATIONS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
    (
        1,
        "create eval_runs, eval_cases, eval_events",
        (
            """CREATE TABLE IF NOT EXISTS eval_runs (
                run_id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                mode TEXT NOT NULL,
                source_run TEXT,
                started_at INTEGER NOT NULL,
                duration_ms REAL NOT NULL,
                evaluators TEXT NOT NULL,
                cases INTEGER NOT NULL,
                passed INTEGER NOT NULL,
                mean_score REAL
            )""",
            """CREATE TABLE IF NOT EXISTS eval_cases (
                run_id TEXT NOT NULL,
                case_index INTEGER NOT NULL,
                case_id TEXT NOT NULL,
                agent_run_id TEXT NOT NULL,
                input TEXT NOT NULL,
                expected TEXT,
                expected_tools TEXT,
                metadata TEXT NOT NULL,
                status TEXT NOT NULL,
                final_output TEXT NOT NULL,
                tool_calls TEXT NOT NULL,
                error TEXT,
                divergence TEXT,
                scores TEXT NOT NULL,
                usage TEXT NOT NULL,
                started_at INTEGER NOT NULL,
                duration_ms REAL NOT NULL,
                trace TEXT,
                PRIMARY KEY (run_id, case_index)
            )""",
            """CREATE TABLE IF NOT EXISTS eval_events (
                run_id TEXT NOT NULL,
                case_index INTEGER NOT NULL,
                sequence INTEGER NOT NULL,
                kind TEXT NOT NULL,
                payload TEXT NOT NULL,
                at INTEGER NOT NULL,
                PRIMARY KEY (run_id, case_index, sequence)
            )""",
        ),
    ),
)

_MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS helikon_eval_migrations (
    version INTEGER PRIMARY KEY,
    description TEXT NOT NULL
)"""


def _json(value: object) -> str:
    return msgspec.json.encode(value, order="sorted").decode()


@final
class SqliteTraceSink:
    """Writes finished eval runs to the SQLite database at ``path`` (created when missing).

    Args:
        path: the database file.
        busy_timeout: seconds to wait for another writer's lock.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            _migrate(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            conn.close()
            raise
        return conn

    def record(self, report: EvalReport) -> None:
        """Write ``report`` (replacing an earlier run with the same id) in one transaction."""
        with closing(self._connect()) as conn:
            try:
                for table in ("eval_runs", "eval_cases", "eval_events"):
                    conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (report.run_id,))
                conn.execute(
                    "INSERT INTO eval_runs (run_id, name, mode, source_run, started_at, duration_ms,"
                    " evaluators, cases, passed, mean_score) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        report.run_id,
                        report.name,
                        report.mode,
                        report.source_run,
                        report.started_at,
                        report.duration_ms,
                        _json(list(report.evaluators)),
                        len(report.cases),
                        int(report.passed()),
                        report.mean,
                    ),
                )
                conn.executemany(
                    "INSERT INTO eval_cases (run_id, case_index, case_id, agent_run_id, input, expected,"
                    " expected_tools, metadata, status, final_output, tool_calls, error, divergence, scores,"
                    " usage, started_at, duration_ms, trace)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [_case_row(report.run_id, case) for case in report.cases],
                )
                conn.executemany(
                    "INSERT INTO eval_events (run_id, case_index, sequence, kind, payload, at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [
                        (
                            report.run_id,
                            case.index,
                            sequence,
                            event_tag(event),
                            encode_event(event).decode(),
                            event.at,
                        )
                        for case in report.cases
                        for sequence, event in enumerate(case.events)
                    ],
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def run_ids(self) -> tuple[str, ...]:
        """The stored runs' ids, oldest first."""
        with closing(self._connect()) as conn:
            rows = conn.execute("SELECT run_id FROM eval_runs ORDER BY started_at, run_id").fetchall()
            conn.execute("COMMIT")
        return tuple(row[0] for row in rows)

    def load(self, run_id: str) -> EvalReport:
        """The stored run ``run_id`` as a report, traces included.

        Raises:
            ReportFormatError: there is no such run.
        """
        with closing(self._connect()) as conn:
            conn.row_factory = sqlite3.Row
            run = conn.execute("SELECT * FROM eval_runs WHERE run_id = ?", (run_id,)).fetchone()
            cases = conn.execute(
                "SELECT * FROM eval_cases WHERE run_id = ? ORDER BY case_index", (run_id,)
            ).fetchall()
            events = conn.execute(
                "SELECT case_index, payload FROM eval_events WHERE run_id = ? ORDER BY case_index, sequence",
                (run_id,),
            ).fetchall()
            conn.execute("COMMIT")
        if run is None:
            raise ReportFormatError(f"{self.path}: no eval run {run_id!r}")
        by_case: dict[int, list[Any]] = {}
        for row in events:
            by_case.setdefault(row["case_index"], []).append(event_to_json(decode_event(row["payload"])))
        data = {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "run_id": run["run_id"],
            "name": run["name"],
            "mode": run["mode"],
            "source_run": run["source_run"],
            "started_at": run["started_at"],
            "duration_ms": run["duration_ms"],
            "evaluators": msgspec.json.decode(run["evaluators"]),
            "cases": [_case_data(row, by_case.get(row["case_index"], [])) for row in cases],
        }
        traces = [Trace.from_bytes(row["trace"].encode()) if row["trace"] else None for row in cases]
        return EvalReport.from_dict(data, traces=traces)


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute(_MIGRATIONS_TABLE)
    applied = {row[0] for row in conn.execute("SELECT version FROM helikon_eval_migrations")}
    known = {version for version, _, _ in MIGRATIONS}
    if applied - known:
        raise ReportFormatError(
            f"the database has eval schema version {max(applied)}, newer than this helikon knows "
            f"({max(known)}); upgrade helikon"
        )
    for version, description, statements in MIGRATIONS:
        if version not in applied:
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO helikon_eval_migrations (version, description) VALUES (?, ?)",
                (version, description),
            )


def _case_row(run_id: str, case: CaseResult) -> tuple[Any, ...]:
    data = case_dict(case)

    def encoded(key: str) -> str | None:
        return None if data[key] is None else _json(data[key])

    return (
        run_id,
        case.index,
        data["id"],
        data["run_id"],
        data["input"],
        encoded("expected"),
        encoded("expected_tools"),
        _json(data["metadata"]),
        data["status"],
        data["final_output"],
        _json(data["tool_calls"]),
        data["error"],
        encoded("divergence"),
        _json(data["scores"]),
        _json(data["usage"]),
        case.started_at,
        case.duration_ms,
        None if case.trace is None else case.trace.to_bytes().decode(),
    )


def _case_data(row: sqlite3.Row, events: list[Any]) -> dict[str, Any]:
    def decoded(column: str) -> Any:
        return None if row[column] is None else msgspec.json.decode(row[column])

    return {
        "index": row["case_index"],
        "id": row["case_id"],
        "input": row["input"],
        "expected": decoded("expected"),
        "expected_tools": decoded("expected_tools"),
        "metadata": decoded("metadata"),
        "final_output": row["final_output"],
        "tool_calls": decoded("tool_calls"),
        "error": row["error"],
        "divergence": decoded("divergence"),
        "usage": decoded("usage"),
        "run_id": row["agent_run_id"],
        "started_at": row["started_at"],
        "duration_ms": row["duration_ms"],
        "scores": decoded("scores"),
        "events": events,
    }


__all__ = ["MIGRATIONS", "SqliteTraceSink"]
