"""The regression, evals and sessions views in a real browser: Debian's
headless Chromium driven by Playwright (pointed at the system ``chromium``).

- ``helikon studio --app broken:agent`` in a project whose ``tests/golden``
  holds a golden: the app's agent has other instructions than the recording;
  the golden opens, a strict replay shows the divergence on the step where
  it happened (field path, expected and actual) with the command that
  re-records the golden; a loose replay matches and warns.
- A saved eval run opens with the report's three charts, and a case's link
  opens its run; a chat made through the studio shows up as a session whose
  conversation opens.

Every page is laid out at 1280 and 390 px (inside the viewport, no overlaps);
screenshots are saved in the test's temporary directory (and in
``$HELIKON_STUDIO_SHOTS`` when set: the docs' images).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from studio_browser import assert_laid_out, serving, watched_page

from helikon import LlmAgent
from helikon.studio import Studio
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
GOLDEN_TESTS = ROOT / "tests" / "golden"
WIDTHS = ((1280, 800), (390, 844))

BROKEN_APP = f"""
import sys
sys.path.insert(0, {str(GOLDEN_TESTS)!r})
from scenarios import single_tool
from helikon import LlmAgent

recorded, _, _ = single_tool()
# the change under test: other instructions than the golden recorded
agent = LlmAgent(name=recorded.name, model=recorded.model, instructions="You are a careless assistant.",
                 tools=recorded.tools)
"""


def keep(shots: Path, name: str, page: Any) -> None:
    page.screenshot(path=str(shots / name), full_page=True)
    docs = os.environ.get("HELIKON_STUDIO_SHOTS")
    if docs:
        shutil.copy(shots / name, Path(docs) / name)


@contextmanager
def studio_process(project: Path, *args: str) -> Iterator[str]:
    """``helikon studio ARGS --port 0`` run in ``project``; its URL."""
    helikon = [sys.executable, "-c", "from helikon._console import main; main()"]
    process = subprocess.Popen(
        [*helikon, "studio", *args, "--port", "0"], cwd=project, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 60
        line = ""
        while "helikon studio at" not in line:
            line = process.stderr.readline()
            assert line or process.poll() is None, "the studio exited"
            assert time.monotonic() < deadline, "the studio did not start"
        yield line.split(" at ", 1)[1].split()[0].rstrip("/")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_a_golden_replayed_against_a_broken_agent_shows_the_divergence_in_place(
    chromium: Callable[[], AbstractContextManager[Any]], tmp_path: Path
) -> None:
    project = tmp_path / "project"
    golden = project / "tests" / "golden"
    (golden / "traces").mkdir(parents=True)
    (golden / "test_golden.py").write_text("# replays the goldens\n")
    shutil.copy(GOLDEN_TESTS / "traces" / "single_tool.jsonl", golden / "traces")
    (project / "broken.py").write_text(BROKEN_APP)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    errors: list[str] = []
    with studio_process(project, "--app", "broken:agent") as base, chromium() as browser:
        for width, height in WIDTHS:
            page = watched_page(browser, errors, width, height)
            page.goto(f"{base}/")
            page.click(".run-row:has-text('single_tool')")
            page.wait_for_selector("#run-head h1:has-text('budget-assistant')")
            page.select_option("#replay-mode", "strict")
            page.click("#replay")
            page.wait_for_selector(".replay-diverged")
            assert "definition differs" in page.inner_text(".replay-diverged")
            # in place: on the timeline's first step, with the field path, expected and actual
            step = page.locator("#timeline > li.step.diverged")
            assert step.count() == 1 and step.get_attribute("data-index") == "0"
            here = step.locator(".divergence-here")
            field = (
                here.locator(".field")
                .filter(has=page.locator(".field-path", has_text="instructions"))
                .first
            )
            assert field.is_visible()
            assert field.locator(".expected code").inner_text() == "'You are a budgeting assistant.'"
            assert field.locator(".actual code").inner_text() == "'You are a careless assistant.'"
            command = page.inner_text(".record-command")
            assert command == "pytest tests/golden -k single_tool --helikon-record"
            assert_laid_out(
                page,
                [
                    "header#top",
                    "#regression",
                    "#replay-result > *",
                    "#timeline > li.step",
                    ".divergence-here .field",
                ],
                width,
            )
            keep(shots, f"studio-regression-{width}.png", page)

            # a loose replay compares effect kinds and tool calls: it matches, and warns
            page.select_option("#replay-mode", "loose")
            page.click("#replay")
            page.wait_for_selector(".replay-ok")
            assert "different agent definition" in page.inner_text(".replay-warning")
            assert page.locator("#timeline .divergence-here").count() == 0
            page.close()
    assert errors == []


@pytest.fixture
def saved_run(tmp_path: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "studio"))
    try:
        from studio_views_support import saved_eval_run
    finally:
        sys.path.pop(0)
    evals = tmp_path / "evals"
    saved_eval_run(evals / "nightly")
    return evals


def test_eval_runs_with_their_charts_and_chat_sessions_are_browsable(
    chromium: Callable[[], AbstractContextManager[Any]], tmp_path: Path, saved_run: Path
) -> None:
    desk = LlmAgent(name="desk", model=MockModel([say("Tides come twice a day."), say("Every 12 hours.")]))
    studio = Studio(agents=[desk], evals=[saved_run])
    shots = tmp_path / "screenshots"
    shots.mkdir()
    errors: list[str] = []
    with serving(studio) as base, chromium() as browser:
        # a chat through the studio: its session is browsable
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/server/")
        page.wait_for_selector("#agent option[value='desk']", state="attached")
        for text, answer in (("when are the tides?", "twice a day"), ("how often?", "12 hours")):
            page.fill("#message", text)
            page.press("#message", "Enter")
            page.wait_for_selector(f".msg.assistant:has-text('{answer}')")
        page.close()

        for width, height in WIDTHS:
            page = watched_page(browser, errors, width, height)
            page.goto(f"{base}/")
            page.click("#nav-evals")
            page.wait_for_selector(".eval-row:has-text('support nightly')")
            assert "4/7 cases passed" in page.inner_text(".eval-row")
            assert_laid_out(page, ["header#top", "#evals > li", ".eval-row span"], width)
            page.click(".eval-row")
            page.wait_for_selector(".eval-head h1:has-text('support nightly')")
            charts = page.locator(".charts figure")
            assert charts.count() == 3
            assert page.locator("svg.chart rect.bar").count() >= 2 + 2 + 4
            assert page.locator("svg[aria-label='score distribution'] rect.bar").count() == 10
            failed = page.locator("li.case[data-status='failed']")
            assert failed.count() == 2
            assert_laid_out(
                page, ["#eval-page .eval-head", ".charts figure", "li.case", ".case-head > *"], width
            )
            keep(shots, f"studio-evals-{width}.png", page)
            # a case's link opens its run
            page.locator("li.case").filter(has_text="refund-b2").locator("a.case-run").click()
            page.wait_for_selector("#run-head h1:has-text('support')")
            assert "evals: nightly/traces/" in page.inner_text("#run-head")
            assert page.locator("#timeline > li.step").count() >= 3

            page.click("#nav-sessions")
            page.wait_for_selector(".session-row")
            assert "(memory backend)" in page.inner_text("#sessions-status")
            assert page.locator(".session-row").count() == 1
            assert "4 events" in page.inner_text(".session-row")
            page.click(".session-row")
            page.wait_for_selector(".session-head")
            items = page.locator("ol.items > li")
            assert [items.nth(n).inner_text().split(": ", 1)[1] for n in range(items.count())] == [
                "when are the tides?",
                "Tides come twice a day.",
                "how often?",
                "Every 12 hours.",
            ]
            assert items.first.inner_text().startswith("user: ")
            assert items.nth(1).inner_text().startswith("desk: ")
            assert_laid_out(page, ["header#top", ".session-head", "ol.items > li"], width)
            keep(shots, f"studio-sessions-{width}.png", page)
            page.close()
    assert errors == []
    assert all((shots / f"studio-{v}-390.png").stat().st_size > 1000 for v in ("evals", "sessions"))


def test_a_chat_in_the_studio_asks_for_an_approval_inline_follows_a_handoff_and_is_recorded(
    chromium: Callable[[], AbstractContextManager[Any]], tmp_path: Path
) -> None:
    """Item 1 through the studio: the mounted chat streams a tool call, asks
    for an approval inline (answered there), follows a handoff, and the run
    opens in the run list with the approval among its governance decisions."""
    from helikon import RunContext, tool
    from helikon.governance import GuardRule
    from helikon.workflows import Handoff

    @tool
    async def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: how much.
        """
        return f"paid {amount}"

    billing = LlmAgent(
        name="billing",
        model=MockModel([call_tools(("pay", {"amount": 12})), say("Paid 12, done.")]),
        tools=[pay],
    )
    desk = LlmAgent(
        name="desk",
        model=MockModel([call_tools(("transfer_to_billing", {}))]),
        handoffs=[Handoff.to(billing)],
    )
    ctx = RunContext.ephemeral(None).with_guard_rules([GuardRule.tool("pay")]).with_suspend_on_approval()
    studio = Studio(agents=[desk, billing], context=ctx)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    errors: list[str] = []
    with serving(studio) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/")
        page.click("#nav-chat")
        page.wait_for_selector("#agent option[value='desk']", state="attached")
        page.select_option("#agent", "desk")
        page.fill("#message", "please pay my bill of 12")
        page.press("#message", "Enter")
        page.wait_for_selector(".msg.handoff:has-text('billing')")
        page.wait_for_selector(".msg.approval button:has-text('Approve')")
        keep(shots, "studio-chat-approval-1280.png", page)
        page.click(".msg.approval button:has-text('Approve')")
        page.wait_for_selector(".msg.assistant:has-text('Paid 12, done.')")
        page.goto(f"{base}/")
        page.wait_for_selector(".run-row:has-text('desk')")
        page.click(".run-row:has-text('desk')")
        page.wait_for_selector("#run-head .status.completed")
        for n in range(page.locator("#timeline > li.step > details > summary").count()):
            page.locator("#timeline > li.step > details > summary").nth(n).click()
        # billing's part of each wave, nested under its path: the approval, then the tool's output
        for index, shown in (("2", "approval of"), ("3", "paid 12")):
            child = page.locator(f"#timeline > li.step[data-index='{index}'] .children > li.step").first
            assert child.get_attribute("data-path") == "billing"
            child.locator("summary").first.click()
            child.locator(".body").first.wait_for()
            assert shown in child.inner_text()
        approval = page.locator("#timeline > li.step[data-index='2'] .governance")
        assert ": approved" in approval.inner_text()
        keep(shots, "studio-chat-run-1280.png", page)
    assert errors == []
