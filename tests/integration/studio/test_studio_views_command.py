"""``helikon studio --evals DIR --sessions sqlite:FILE`` as a real process, in
a project that keeps its goldens in ``tests/goldens`` (as
examples/golden_project does): the saved eval run, the SQLite sessions and
the goldens are all served, and a golden's replay names the command that
re-records it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import httpx
import pytest
import trio
from test_studio_views_chromium import ROOT, studio_process

from helikon.sessions import SqliteSession, UserMessageEvent

pytestmark = pytest.mark.integration


def test_the_command_serves_saved_evals_sqlite_sessions_and_tests_goldens(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    shutil.copytree(ROOT / "examples" / "golden_project" / "tests", project / "tests")
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "studio"))
    try:
        from studio_views_support import saved_eval_run
    finally:
        sys.path.pop(0)
    saved_eval_run(project / "eval-runs" / "nightly")

    async def fill() -> None:
        session = SqliteSession.open(project / "chat.db", "customer-7")
        await session.append([UserMessageEvent.from_text("where is my order?", at=1)])
        await session.aclose()

    trio.run(fill)
    with studio_process(project, "--evals", "eval-runs", "--sessions", "sqlite:chat.db") as base:
        evals = httpx.get(f"{base}/api/evals", timeout=10).json()["evals"]
        sessions = httpx.get(f"{base}/api/sessions", timeout=10).json()
        runs = httpx.get(f"{base}/api/runs", timeout=10).json()["runs"]
        sales = next(r for r in runs if r["source"] == "golden" and r["name"] == "sales.jsonl")
        replayed = httpx.post(
            f"{base}/api/runs/{sales['id']}/replay",
            json={"mode": "strict"},
            headers={"origin": base},
            timeout=30,
        ).json()
    assert [(e["name"], e["cases"]) for e in evals] == [("support nightly", 7)]
    assert sessions == {
        "backend": "sqlite",
        "sessions": [{"id": "customer-7", "events": 1, "last_at": 1}],
    }
    assert sum(r["source"] == "evals" for r in runs) == 7  # each case's trace
    assert replayed["outcome"] == "error" and "no agent named 'sales'" in replayed["message"]
    assert replayed["record_command"] == "pytest tests -k sales --helikon-record"
