"""The chat page at ``/`` in a real browser: Debian's headless Chromium,
driven by Playwright (pointed at the system ``chromium``; it never downloads
a browser). A message typed on the page streams back the answer, and the
tool call, its result and an approval show up as they happen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from server_support import approving_context, assistant, serving

from helikon import Handoff
from helikon.server import AgentServer, BearerAuth

pytestmark = pytest.mark.integration

TOKEN = "page-token-1234"


def test_the_page_streams_an_answer_a_tool_call_and_an_approval(
    launch_chromium: Callable[[Any], Any],
) -> None:
    from playwright.sync_api import sync_playwright

    desk = assistant(name="desk").with_handoffs(Handoff.to(assistant(name="billing")))
    server = AgentServer(agents=[assistant(), desk], context=approving_context(), auth=BearerAuth([TOKEN]))
    errors: list[str] = []
    with serving(server.app()) as base, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{base}/")
            # without the token the agents are not listed
            page.wait_for_selector("#status:has-text('HTTP 401')")
            errors.clear()  # the 401 is logged by the browser: expected
            page.fill("#token", TOKEN)
            page.click("#reload")
            page.wait_for_selector("#agent option[value='assistant']", state="attached")
            page.select_option("#agent", "assistant")

            page.fill("#message", "weather in Paris?")
            page.press("#message", "Enter")
            page.wait_for_selector(".msg.tool:has-text('tool call: get_weather')")
            page.wait_for_selector(".msg.tool:has-text('tool result: sunny in Paris')")
            page.wait_for_selector(".msg.assistant:has-text('The tool said: sunny in Paris')")
            page.wait_for_selector("#status:has-text('finished')")
            assert page.locator(".msg.user").inner_text() == "weather in Paris?"
            # the event panel shows the live stream, token deltas included
            events = page.locator("#events").inner_text()
            assert "RunStarted" in events and "TokenDelta" in events and "RunCompleted" in events

            # a payment waits for a human: approve it on the page
            page.fill("#message", "pay 12")
            page.press("#message", "Enter")
            page.wait_for_selector(".msg.approval:has-text('approval needed: pay')")
            page.click(".msg.approval button:has-text('approve')")
            page.wait_for_selector(".msg.approval:has-text('approval given (HTTP 200)')")
            page.wait_for_selector(".msg.assistant:has-text('The tool said: paid 12')")

            # text from a run is shown as text, never as markup
            page.fill("#message", "<img src=x onerror=alert(1)>")
            page.press("#message", "Enter")
            page.wait_for_selector(".msg.assistant:has-text('echo: <img src=x')")
            assert page.locator(".msg img").count() == 0

            # a handoff shows who answers now
            page.select_option("#agent", "desk")
            page.fill("#message", "transfer me")
            page.press("#message", "Enter")
            page.wait_for_selector(".msg.handoff:has-text('handoff: desk \u2192 billing')")
            page.wait_for_selector(".msg.handoff:has-text('now answering: billing')")
        finally:
            browser.close()
    assert errors == []
