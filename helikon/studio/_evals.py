"""The studio's evals view: saved eval runs (``helikon eval run --save DIR``,
:meth:`helikon.evals.EvalReport.save`) with the HTML report's charts, each
case linked to its run.

``--evals DIR`` names directories searched for saved runs (every
``report.json`` below them); the case traces a run saved beside its report
(``traces/<case>.jsonl``) are in the run list too (source ``evals``), so a
case's link opens its run step by step. The charts' data (the score
histogram of :func:`helikon.evals._html.histogram`, each evaluator's passed,
failed and skipped counts and its mean) is sent as numbers and drawn by the
page, as text and shapes: no markup from a report is ever parsed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Final, final

import anyio
import msgspec

from helikon.evals import EvalReport, ReportFormatError
from helikon.evals._html import histogram
from helikon.evals._scores import ScoreOutcome
from helikon.studio._catalog import run_id_of

#: The most saved runs listed from one directory.
MAX_REPORTS: Final = 500
#: The source name of eval case traces in the run list.
SOURCE: Final = "evals"


def _id(path: Path) -> str:
    return hashlib.sha256(f"evalrun\0{path.resolve()}".encode()).hexdigest()[:20]


@final
class SavedRuns:
    """The saved eval runs under some directories (re-listed on every call)."""

    def __init__(self, directories: tuple[Path, ...]) -> None:
        self.directories = directories

    def reports(self) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for directory in self.directories:
            if not directory.is_dir():
                continue
            for path in sorted(directory.rglob("report.json"), key=str)[:MAX_REPORTS]:
                found[_id(path)] = path
        return found

    def read(self, path: Path) -> tuple[EvalReport, dict[str, Any]]:
        """The report and its JSON (a ``report.json`` that is not a report raises ReportFormatError)."""
        try:
            data = msgspec.json.decode(path.read_bytes())
        except (OSError, msgspec.DecodeError) as exc:
            raise ReportFormatError(f"{path}: cannot read the report: {exc}") from None
        return EvalReport.from_dict(data), data

    def rows(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for rid, path in self.reports().items():
            name = self._name(path)
            try:
                report, data = self.read(path)
            except ReportFormatError as exc:
                rows.append({"id": rid, "path": name, "error": str(exc)})
                continue
            summary = dict(data.get("summary") or {})
            rows.append(
                {
                    "id": rid,
                    "path": name,
                    "name": report.name,
                    "run_id": report.run_id,
                    "mode": report.mode,
                    "started_at": report.started_at,
                    "passed": report.passed(),
                    "cases": len(report.cases),
                    "passed_cases": summary.get("passed_cases"),
                    "failed_cases": summary.get("failed_cases"),
                    "error_cases": summary.get("error_cases"),
                    "diverged_cases": summary.get("diverged_cases"),
                    "mean": report.mean,
                }
            )
        rows.sort(key=lambda r: (-(r.get("started_at") or 0), r["path"]))
        return rows

    def _name(self, path: Path) -> str:
        for directory in self.directories:
            try:
                return str(path.parent.relative_to(directory)) or "."
            except ValueError:
                continue
        return str(path.parent)

    def page(self, rid: str) -> dict[str, Any] | None:
        """One saved run: the report's JSON (cases without their event logs), the
        charts' data, and each case's run id in the run list (None: no trace saved)."""
        path = self.reports().get(rid)
        if path is None:
            return None
        report, data = self.read(path)
        values = [
            s.score.value
            for c in report.cases
            for s in c.scores
            if s.score.outcome is not ScoreOutcome.SKIPPED
        ]
        cases = []
        for raw in data.get("cases", ()):
            case = {k: v for k, v in raw.items() if k != "events"}
            trace = raw.get("trace")
            target = (path.parent / trace) if isinstance(trace, str) else None
            case["run"] = run_id_of(SOURCE, target) if target is not None and target.is_file() else None
            cases.append(case)
        return {
            "id": rid,
            "path": self._name(path),
            "run_id": report.run_id,
            "name": report.name,
            "mode": report.mode,
            "source_run": report.source_run,
            "started_at": report.started_at,
            "duration_ms": report.duration_ms,
            "passed": report.passed(),
            "evaluators": list(report.evaluators),
            "summary": data.get("summary"),
            "stats": data.get("stats"),
            "histogram": histogram(values),
            "scores": len(values),
            "cases": cases,
        }


def routes(studio: Any) -> list[Any]:
    """The view's routes, for :meth:`Studio.app`."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    saved = SavedRuns(tuple(studio.evals))

    async def list_evals(request: Request) -> JSONResponse:
        return JSONResponse({"evals": await anyio.to_thread.run_sync(saved.rows)})

    async def show_eval(request: Request) -> JSONResponse:
        rid = str(request.path_params["eval_id"])
        try:
            page = await anyio.to_thread.run_sync(saved.page, rid)
        except ReportFormatError as exc:
            return JSONResponse({"error": {"code": "not_a_report", "message": str(exc)}}, status_code=422)
        if page is None:
            return JSONResponse(
                {"error": {"code": "not_found", "message": "no such eval run"}}, status_code=404
            )
        return JSONResponse(page)

    return [
        Route("/api/evals", list_evals, methods=["GET"]),
        Route("/api/evals/{eval_id}", show_eval, methods=["GET"]),
    ]


__all__ = ["MAX_REPORTS", "SOURCE", "SavedRuns", "routes"]
