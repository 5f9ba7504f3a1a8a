"""Time travel in a real browser (Debian's Chromium through Playwright, as the
other studio tests): fork a recorded run at its tool result with an edited
output and get a run whose answer says the edited value, its steps marked
replayed / edited / live and its divergence named; the machine state after a
step as a collapsible tree; the diff of the fork and its parent by field
path. At 1280 and 390 px every element shown lies inside the viewport and
none overlaps its neighbours. Screenshots are saved in the test's temporary
directory (``screenshots/``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import trio
from studio_browser import assert_laid_out, serving, watched_page

from helikon import LlmAgent, RunContext, tool
from helikon.interpreters import LiveInterpreter, RecordingInterpreter
from helikon.items import ToolResult
from helikon.model import ModelRequest
from helikon.studio import Studio
from helikon.testing import FunctionModel, call_tools

pytestmark = pytest.mark.integration


@tool
async def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def forecast(request: ModelRequest) -> Any:
    outputs = [m for m in request.messages if isinstance(m, ToolResult)]
    if not outputs:
        return call_tools(("weather", {"city": "Oslo"}))
    return f"The forecast: {outputs[-1].content}."


def forecaster() -> LlmAgent[Any]:
    return LlmAgent(name="forecaster", model=FunctionModel(forecast), tools=[weather])


def record(directory: Path) -> None:
    recorder = RecordingInterpreter(LiveInterpreter(lock_step=True))

    async def go() -> None:
        async for _ in forecaster().run(RunContext.ephemeral(None), "weather in Oslo?", interpreter=recorder):
            pass

    trio.run(go)
    recorder.trace.dump(directory / "forecast.jsonl")


def test_fork_at_a_tool_result_with_an_edited_output_then_diff_it_with_its_parent(
    chromium: Callable[[], AbstractContextManager[Any]], tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    record(traces)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    studio = Studio(traces=[traces], agents=[forecaster()])
    errors: list[str] = []
    with serving(studio) as base, chromium() as browser:
        for width, height in ((1280, 800), (390, 844)):
            page = watched_page(browser, errors, width, height)
            page.goto(f"{base}/")
            page.click(".run-row:has-text('traces: forecast.jsonl')")
            page.wait_for_selector("#run-head .status.completed")
            tool_step = page.locator("#timeline > li.step[data-index='1']")
            tool_step.locator("summary").first.click()
            tool_step.locator(".fork-here").click()
            edit = tool_step.locator(".fork-edit")
            edit.fill(edit.input_value().replace("sunny in Oslo", "snowing in Oslo"))
            assert tool_step.locator("input[value='replay']").is_checked()
            assert_laid_out(page, ["header#top", "#timeline > li.step", ".fork-form > *"], width)
            page.screenshot(path=str(shots / f"fork-form-{width}.png"), full_page=True)
            tool_step.locator(".fork-run").click()

            # the fork: a new run linked to its parent, its steps marked, its divergence named
            page.wait_for_selector("#fork-info:has-text('Fork of')")
            assert "source" not in page.url and "#/run/" in page.url
            head = page.locator("#fork-info").inner_text()
            assert "at step #1 (answer edited), replay mode" in head
            assert "diverged from the recording at step 2" in head
            marks = page.locator("#timeline > li.step .mark")
            assert marks.all_inner_texts() == ["replayed", "edited", "live"]
            page.locator("#timeline > li.step[data-index='2'] summary").first.click()
            page.wait_for_selector(".events li:has-text('The forecast: snowing in Oslo.')")
            assert page.locator(".events li:has-text('sunny in Oslo')").count() == 0

            # the machine state after the first step, as a tree
            first = page.locator("#timeline > li.step[data-index='0']")
            first.locator("summary").first.click()
            first.locator(".show-state").click()
            tree = first.locator(".state-view")
            tree.locator(".json-key:has-text('conversation')").wait_for()
            assert "machine state after step #0" in tree.inner_text()
            assert_laid_out(
                page, ["#fork-info", "#timeline > li.step", ".fork-tools > *", ".state-view"], width
            )
            page.screenshot(path=str(shots / f"fork-run-{width}.png"), full_page=True)

            # the diff of the fork and its parent
            page.click("#fork-info .diff-parent")
            page.wait_for_selector(".verdict.differ")
            assert "snowing in Oslo" in page.locator(".output.b").inner_text()
            assert "sunny in Oslo" in page.locator(".output.a").inner_text()
            paths = page.locator(".diff-part code").all_inner_texts()
            assert "output" in paths and any(p.startswith("events[") for p in paths)
            assert_laid_out(page, ["#diff-pick label", ".diff-head", ".output", ".diff-part"], width)
            page.screenshot(path=str(shots / f"diff-{width}.png"), full_page=True)

            # a run diffed with itself is the same
            page.select_option("#diff-b", page.locator("#diff-a").input_value())
            page.click("#diff-go")
            page.wait_for_selector(".verdict.same")
            page.close()
    assert errors == []
    assert all(
        (shots / f"{n}-{w}.png").stat().st_size > 1000 for n in ("fork-run", "diff") for w in (1280, 390)
    )
