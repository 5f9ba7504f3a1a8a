"""The studio in a real browser: Debian's headless Chromium driven by
Playwright (pointed at the system ``chromium``; it never downloads one).

A recorded agent-tree run opens from the run list, and a sub-agent's step of
its wave expands to show that agent's model request and reply; at 1280 and
390 px every element shown lies inside the viewport and none overlaps its
neighbours. A run whose strings are markup and script shows them as text.
Screenshots are saved in the test's temporary directory.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import trio
from studio_browser import assert_laid_out, serving, watched_page

from helikon import LlmAgent, RunContext, collect, tool
from helikon.governance import Allow, Deny
from helikon.interpreters import RecordingInterpreter
from helikon.studio import Studio
from helikon.testing import MockModel, call_tools, say

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "traces"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


@tool
async def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: the term.
    """
    return f"found {term} {HOSTILE}"


def record_hostile_run(directory: Path) -> None:
    agent = LlmAgent(
        name="hostile-agent",
        model=MockModel([call_tools(("lookup", {"term": HOSTILE})), say(f"answer {HOSTILE}")]),
        tools=[lookup],
    )
    recorder = RecordingInterpreter()

    async def go() -> None:
        await collect(agent.run(RunContext.ephemeral(None), f"question {HOSTILE}", interpreter=recorder))

    trio.run(go)
    recorder.trace.dump(directory / "hostile.jsonl")


def record_denied_run(directory: Path) -> None:
    def policy(ctx: Any, tool: str, args: Any) -> Any:
        return Deny("no lookups today") if tool == "lookup" else Allow()

    agent = LlmAgent(
        name="policed-agent",
        model=MockModel([call_tools(("lookup", {"term": "tides"})), say("I may not look it up.")]),
        tools=[lookup],
    )
    recorder = RecordingInterpreter()
    ctx = RunContext.ephemeral(None).with_permission_policy(policy)

    async def go() -> None:
        await collect(agent.run(ctx, "look up the tides", interpreter=recorder))

    trio.run(go)
    recorder.trace.dump(directory / "denied.jsonl")


def test_a_tree_runs_sub_agent_step_expands_laid_out_at_1280_and_390_px(
    chromium: Callable[[], AbstractContextManager[Any]], tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(GOLDEN / "parallel_fan_out.jsonl", traces / "fan_out.jsonl")
    record_hostile_run(traces)
    record_denied_run(traces)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    studio = Studio(traces=[traces], golden=GOLDEN)
    errors: list[str] = []
    with serving(studio) as base, chromium() as browser:
        for width, height in ((1280, 800), (390, 844)):
            page = watched_page(browser, errors, width, height)
            page.goto(f"{base}/")
            page.wait_for_selector(".run-row:has-text('three-lenses')")
            assert page.locator("#runs > li").count() == 3 + len(list(GOLDEN.glob("*.jsonl")))
            page.fill("#filter", "traces fan_out")
            assert page.locator("#runs > li").count() == 1
            assert_laid_out(page, ["header#top", "#runs-tools", "#runs > li", ".run-row span"], width)
            page.screenshot(path=str(shots / f"runs-{width}.png"), full_page=True)

            page.click(".run-row:has-text('three-lenses')")
            page.wait_for_selector("#run-head h1:has-text('three-lenses')")
            wave = page.locator("#timeline > li.step").filter(has_text="PerformAll").first
            wave.locator("summary").first.click()
            child = wave.locator(".children > li.step[data-path='pessimist']")
            child.locator("summary").click()
            body = child.locator(".body")
            body.wait_for()
            assert "model request" in body.inner_text()
            assert body.locator(".said").inner_text() == "It will go down."
            assert "What will the market do?" in body.inner_text()
            assert_laid_out(
                page,
                [
                    "#run-head",
                    "#timeline > li.step",
                    ".children > li.step",
                    "[data-path='pessimist'] .body > *",
                    "#run-head > *",
                ],
                width,
            )
            page.screenshot(path=str(shots / f"tree-run-{width}.png"), full_page=True)
            page.close()

        # a run whose strings are markup and script shows them as text
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/")
        page.click(".run-row:has-text('hostile-agent')")
        page.wait_for_selector("#run-input:has-text('question <img')")
        for step in range(page.locator("#timeline > li.step details").count()):
            page.locator("#timeline > li.step details > summary").nth(step).click()
        page.wait_for_selector(".said:has-text('answer <img src=x')")
        page.wait_for_selector(".events li:has-text('found')")
        assert page.locator("main img, main script").count() == 0
        assert page.evaluate("window.__pwned === undefined")
        page.screenshot(path=str(shots / "hostile-1280.png"), full_page=True)

        # a tool round shows the permission policy's decision
        page.goto(f"{base}/")
        page.click(".run-row:has-text('policed-agent')")
        page.wait_for_selector("#run-head .status.completed")
        page.locator("#timeline > li.step details > summary").nth(1).click()
        ruled = page.locator(".governance")
        ruled.wait_for()
        assert "Deny" in ruled.inner_text() and "no lookups today" in ruled.inner_text()
        assert "denied: lookup: no lookups today" in ruled.inner_text()
    assert errors == []
    assert all((shots / name).stat().st_size > 1000 for name in ("runs-390.png", "tree-run-1280.png"))


def test_a_chat_through_the_studio_is_recorded_and_opens_as_a_run(
    chromium: Callable[[], AbstractContextManager[Any]],
) -> None:
    """The agent server's chat page works under the studio's policy (its inline
    script admitted by hash), its run is recorded, and the page asks nothing of
    any other origin."""
    desk = LlmAgent(
        name="desk",
        model=MockModel([call_tools(("lookup", {"term": "tides"})), say("Tides come twice a day.")]),
        tools=[lookup],
    )
    studio = Studio(agents=[desk])
    errors: list[str] = []
    requested: list[str] = []
    with serving(studio) as base, chromium() as browser:
        page = watched_page(browser, errors)
        page.on("request", lambda r: requested.append(r.url))
        page.goto(f"{base}/")
        page.wait_for_selector("#runs-status:has-text('no runs yet')")
        page.click("#nav-chat")
        page.wait_for_selector("#agent option[value='desk']", state="attached")
        page.fill("#message", "when are the tides?")
        page.press("#message", "Enter")
        page.wait_for_selector(".msg.tool:has-text('tool call: lookup')")
        page.wait_for_selector(".msg.assistant:has-text('Tides come twice a day.')")
        page.goto(f"{base}/")
        page.click(".run-row:has-text('desk')")
        page.wait_for_selector("#run-head .status.completed")
        page.locator("#timeline > li.step details > summary").nth(1).click()
        page.wait_for_selector(".body:has-text('tool calls')")
        assert '"term": "tides"' in page.locator(".body").first.inner_text()
    assert errors == []
    assert requested and all(url.startswith(f"{base}/") or url.startswith("data:") for url in requested)
