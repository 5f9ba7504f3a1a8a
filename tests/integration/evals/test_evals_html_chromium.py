"""The HTML report in a real browser: Debian's headless Chromium, driven by Playwright.

Playwright is pointed at the system ``chromium`` (``executable_path``); it
never downloads a browser. The page must load with no console error and no
request leaving ``file://`` (it is self-contained), show its charts (bars
with a real size) and its tables, and its filter and trace links must work.
A screenshot is taken and checked to be a real picture.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import trio

from helikon.evals import EvalCase, EvalDataset, EvalReport, EvalRun, ExactMatch, ToolUseTrajectory

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "evals"))
from evals_support import agent_for, dataset

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[EvalReport, Path]:
    cases = [*dataset(), EvalCase("broken", "<b>this case's agent cannot be built</b>", expected="x")]

    def factory(case: EvalCase) -> Any:
        if case.id == "broken":
            raise RuntimeError("no agent for <b>you</b>")
        return agent_for(case)

    evals = EvalRun(
        EvalDataset.from_cases(cases),
        [ExactMatch(), ToolUseTrajectory.exact()],
        agent_factory=factory,
        run_id="browser",
    )
    report = trio.run(evals.run)
    root = tmp_path_factory.mktemp("report")
    report.save(root)
    return report, root


@pytest.fixture(scope="module")
def browser(chromium: Callable[[], AbstractContextManager[Any]]) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


class Watched:
    """A page with its console errors, page errors and non-file requests collected."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.problems: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("request", self._request)

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"console {message.type}: {message.text}")

    def _request(self, request: Any) -> None:
        if not request.url.startswith("file://"):
            self.problems.append(f"external request: {request.url}")


def test_the_report_renders_its_charts_and_tables_without_errors(
    browser: Any, saved: tuple[EvalReport, Path], tmp_path: Path
) -> None:
    report, root = saved
    watched = Watched(browser)
    page = watched.page
    page.goto((root / "report.html").as_uri())
    page.wait_for_load_state("load")

    assert page.title() == "Eval run browser"
    assert page.locator("#verdict").inner_text() == "FAILED"
    for chart in ("#chart-distribution", "#chart-outcomes", "#chart-means"):
        bars = page.locator(f"{chart} svg rect.bar")
        assert bars.count() > 0, chart
        sizes = [bars.nth(i).bounding_box() for i in range(bars.count())]
        assert any(box is not None and box["width"] > 0 and box["height"] > 0 for box in sizes), chart
    assert page.locator("#chart-distribution svg text").count() > 0  # axis labels

    rows = page.locator("#cases tbody tr.case")
    assert rows.count() == len(report.cases) == 6
    assert rows.nth(0).locator("td").nth(1).inner_text() == "shipped"
    assert page.locator("#stats tbody tr").count() == 2
    assert page.locator("#summary .card").count() == 8

    failing = page.locator("#case-3 + tr.detail details")
    assert failing.get_attribute("open") is not None
    assert failing.locator("pre.diff del").inner_text() == "has shipped"
    assert failing.locator("pre.diff ins").inner_text() == "is still in the warehouse"
    broken = page.locator("#case-6 + tr.detail")
    assert "no agent for <b>you</b>" in broken.inner_text()  # escaped text, not markup
    assert broken.locator("b").count() == 0

    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    chart_shot = page.locator("#chart-distribution").screenshot()
    assert len(chart_shot) > 2_000
    assert watched.problems == []
    page.close()


def test_the_failures_filter_and_the_trace_links_work(browser: Any, saved: tuple[EvalReport, Path]) -> None:
    report, root = saved
    watched = Watched(browser)
    page = watched.page
    page.goto((root / "report.html").as_uri())

    page.locator(".filters button[data-filter=failures]").click()
    visible = [c.case.id for n, c in enumerate(report.cases) if page.locator(f"#case-{n + 1}").is_visible()]
    assert visible == ["wrong-answer", "broken"]
    page.locator(".filters button[data-filter=all]").click()
    assert page.locator("#cases tbody tr.case:visible").count() == 6

    page.locator("#case-1 a", has_text="trace").click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/traces/0001-shipped.html")
    # the run's start-up events (before any effect) have a row of their own, then one row a step
    assert page.locator("#steps tbody tr").count() == 4
    assert "RunStarted" in page.locator("#steps tbody tr").first.inner_text()
    assert "lookup_order" in page.locator("#steps").inner_text()
    page.locator("a", has_text="report").first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith("/report.html")
    assert watched.problems == []
    page.close()
