"""The chat page at ``/`` in a real browser: Debian's headless Chromium,
driven by Playwright (pointed at the system ``chromium``; it never downloads
a browser).

What a user of the page gets (issue 31, item 6): a layout that holds from a
phone to a wide screen (checked on element boxes at 360, 390 and 1280 px:
nothing off-screen, nothing overlapping, the Send button whole), one
conversation per browser tab with "New chat", the agent picker following a
handoff, Markdown rendered without letting model output inject markup, a
Stop button that cancels the run through the API, failures as sentences, a
sign-in prompt on 401, approvals answered inline with their call's path.
Screenshots of each width are written to a temporary directory (the path is
printed; ``HELIKON_PAGE_SHOTS`` names another).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import ScriptedModel, approving_context, assistant, paying_branches, serving

from helikon import Handoff, LlmAgent, ModelCapabilities, ParallelAgent
from helikon.cancel import CancellationToken
from helikon.model import Finish, FinishReason, ModelEvent, ModelRequest, TextChunk
from helikon.server import AgentServer, BearerAuth

pytestmark = pytest.mark.integration

TOKEN = "page-token-1234"

#: Model output that tries every way into the page's markup; each attempt
#: would set ``window.__pwned`` if it ran.
HOSTILE = (
    "# Report <script>window.__pwned = 1</script>\n"
    "Some **bold**, *leaning* and `code <b>x</b>` text.\n"
    '<img src=x onerror="window.__pwned = 2">\n'
    "\n"
    "[click me](javascript:window.__pwned=3) and [the docs](https://example.com/a?b=<c>)\n"
    "\n"
    '- first <iframe src="javascript:window.__pwned=4"></iframe>\n'
    "- [data](data:text/html,<script>window.__pwned=5</script>)\n"
    "\n"
    "```html\n"
    '<svg onload="window.__pwned=6"></svg>\n'
    "```\n"
    '> quoted <a href="javascript:window.__pwned=7">link</a>\n'
    "Averyveryverylongwordwithoutanyspacesthatmustwrapinsteadofpushingthebubbleofftheedgeofthescreen"
)


class FixedModel:
    """Streams one fixed answer in 7-character chunks (tags split across chunks)."""

    def __init__(self, text: str) -> None:
        self.text = text

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities.all()

    @property
    def provider(self) -> str:
        return "fixed"

    @property
    def model_id(self) -> str:
        return "fixed"

    def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        return self._answer()

    async def _answer(self) -> AsyncIterator[ModelEvent]:
        for start in range(0, len(self.text), 7):
            yield TextChunk(self.text[start : start + 7])
        yield Finish(FinishReason.STOP)


class BrokenModel(FixedModel):
    """A provider that fails."""

    async def _answer(self) -> AsyncIterator[ModelEvent]:
        raise RuntimeError("upstream exploded")
        yield  # pragma: no cover


def tree(paid: list[int]) -> ParallelAgent:
    """Two branches whose models reuse the call id ``c1``: only the path tells them apart."""
    result: ParallelAgent = paying_branches("tree", paid)
    return result


@pytest.fixture(scope="module")
def browser(chromium: Callable[[], AbstractContextManager[Any]]) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def paid() -> list[int]:
    return []


@pytest.fixture(scope="module")
def base(paid: list[int]) -> Iterator[str]:
    billing = assistant(name="billing")
    desk = assistant(name="desk").with_handoffs(Handoff.to(billing))
    agents = [
        assistant(ScriptedModel(pause=0.1)),
        desk,
        billing,
        LlmAgent(name="writer", model=FixedModel(HOSTILE), instructions="Write."),
        LlmAgent(name="broken", model=BrokenModel(""), instructions="Fail."),
        tree(paid),
    ]
    server = AgentServer(agents=agents, context=approving_context(), max_body_bytes=4000)
    with serving(server.app()) as url:
        yield url


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context (its own tabs' storage) with one tab; fails the
    test on any console error or page error."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.errors = errors
    try:
        yield tab
    finally:
        context.close()
    assert errors == [], errors


def say_to(page: Any, agent: str, text: str) -> None:
    page.wait_for_selector(f"#agent option[value='{agent}']", state="attached")
    page.select_option("#agent", agent)
    page.fill("#message", text)
    page.press("#message", "Enter")


def wait_idle(page: Any) -> None:
    page.wait_for_selector("#stop", state="hidden")
    page.wait_for_function("!document.getElementById('send-button').disabled")


def last_answer(page: Any) -> str:
    text: str = page.locator(".msg.assistant").last.inner_text()
    return text


# ---- layout ---------------------------------------------------------------------------

_BOXES = """() => {
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return {x: r.left, y: r.top, r: r.right, b: r.bottom, w: r.width, h: r.height};
  };
  const shown = (el) => el && getComputedStyle(el).display !== 'none' && el.getBoundingClientRect().width > 0;
  const regions = {};
  for (const sel of ['header', '#chat', '#status', '#send', '#events-pane', '#signin']) {
    const el = document.querySelector(sel);
    if (shown(el)) regions[sel] = box(el);
  }
  const controls = {};
  for (const el of document.querySelectorAll('header > *, header label > *, #send > *, .msg, .msg button')) {
    const name = el.id || el.tagName + '.' + el.className + ':' + (el.textContent || '').slice(0, 20);
    if (shown(el)) controls[name] = box(el);
  }
  const send = document.getElementById('send-button');
  return {regions, controls, sendCut: send.scrollWidth > send.clientWidth,
          sendWidth: send.getBoundingClientRect().width,
          scrollWidth: document.documentElement.scrollWidth,
          bodyScrollHeight: document.body.scrollHeight, innerHeight: window.innerHeight,
          chat: box(document.getElementById('chat'))};
}"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> float:
    width = min(a["r"], b["r"]) - max(a["x"], b["x"])
    height = min(a["b"], b["b"]) - max(a["y"], b["y"])
    return max(0.0, width) * max(0.0, height)


def check_layout(page: Any, width: int, height: int) -> dict[str, Any]:
    found: dict[str, Any] = page.evaluate(_BOXES)
    regions, controls = found["regions"], found["controls"]
    slack = 0.5
    for name, box in {**regions, **controls}.items():
        sideways = box["x"] >= -slack and box["r"] <= width + slack
        assert sideways, f"{name} is off-screen sideways at {width}: {box}"
    for name, box in regions.items():
        upright = box["y"] >= -slack and box["b"] <= height + slack
        assert upright, f"{name} is off-screen at {width}x{height}: {box}"
    names = sorted(regions)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            shared = _overlap(regions[first], regions[second])
            assert shared < 1, f"{first} overlaps {second} at {width}: {found}"
    chat = found["chat"]
    for name, box in controls.items():
        if name.startswith("DIV.msg"):
            inside = box["x"] >= chat["x"] - slack and box["r"] <= chat["r"] + slack
            assert inside, f"{name} leaves the chat: {box}"
    composer = [controls[k] for k in ("message", "send-button") if k in controls]
    assert len(composer) == 2 and _overlap(composer[0], composer[1]) < 1
    assert not found["sendCut"] and found["sendWidth"] >= 40, f"the Send button is cut at {width}: {found}"
    assert found["scrollWidth"] <= width, f"the page scrolls sideways at {width}"
    whole = found["bodyScrollHeight"] <= found["innerHeight"] + 1
    assert whole, "the page scrolls as a whole (only the chat should)"
    header = regions["header"]
    assert header["h"] <= 0.2 * height, f"the header takes {header['h']} of {height} px"
    assert chat["h"] >= 0.4 * height, f"the chat gets only {chat['h']} of {height} px"
    return found


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("HELIKON_PAGE_SHOTS") or tmp_path_factory.mktemp("page-shots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {folder}")
    return folder


@pytest.mark.parametrize(("width", "height"), [(360, 640), (390, 844), (1280, 800)])
def test_the_layout_holds_from_a_phone_to_a_wide_screen(
    page: Any, base: str, shots: Path, width: int, height: int
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{base}/")
    check_layout(page, width, height)  # empty: the header does not take the screen
    say_to(page, "writer", "write the report")
    page.wait_for_selector(".msg.assistant:has-text('Averyveryverylongword')")
    wait_idle(page)
    say_to(page, "assistant", "pay 12")
    page.wait_for_selector(".msg.approval button:has-text('Approve')")
    say_long = "a fairly long message " * 12
    page.locator("#message").fill(say_long)  # typed, not sent: the composer holds it
    found = check_layout(page, width, height)
    side_by_side = "#events-pane" in found["regions"]
    assert side_by_side == (width >= 900)  # a side column only where there is room
    if not side_by_side:  # on a phone the events open below the chat, still inside the screen
        page.click("#toggle-events")
        assert "#events-pane" in check_layout(page, width, height)["regions"]
        page.click("#toggle-events")
    shot = shots / f"page-{width}x{height}.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 1000
    page.click(".msg.approval button:has-text('Approve')")
    page.wait_for_selector(".msg.approval:has-text('Approved.')")
    page.wait_for_selector(".msg.assistant:has-text('The tool said: paid 12')")
    wait_idle(page)


# ---- Markdown without injection ----------------------------------------------------------------


def test_markdown_is_rendered_and_hostile_output_stays_text(page: Any, base: str) -> None:
    page.goto(f"{base}/")
    say_to(page, "writer", "write the report")
    page.wait_for_selector(".msg.assistant:has-text('Averyveryverylongword')")
    wait_idle(page)
    answer = page.locator(".msg.assistant").last
    # the Markdown became elements ...
    assert answer.locator("h3").inner_text().startswith("Report <script>")
    assert answer.locator("strong").inner_text() == "bold"
    assert answer.locator("em").inner_text() == "leaning"
    assert answer.locator("p code").first.inner_text() == "code <b>x</b>"
    assert answer.locator("li").count() == 2
    assert '<svg onload="window.__pwned=6"></svg>' in answer.locator("pre code").inner_text()
    assert answer.locator("blockquote").count() == 1
    # ... and nothing in the model's text became markup
    for tag in ("script", "img", "iframe", "svg", "b", "object", "embed"):
        assert page.locator(f"#chat {tag}").count() == 0, tag
    links = page.eval_on_selector_all(
        "#chat a", "els => els.map(a => [a.getAttribute('href'), a.rel, a.target])"
    )
    assert links == [["https://example.com/a?b=%3Cc%3E", "noopener noreferrer nofollow", "_blank"]]
    text = answer.inner_text()
    assert '<img src=x onerror="window.__pwned = 2">' in text
    assert "[click me](javascript:window.__pwned=3)" in text
    assert "data:text/html,<script>" in text
    assert page.evaluate("window.__pwned") is None
    handlers = (
        "[...document.querySelectorAll('#chat *')]"
        ".some(e => e.getAttributeNames().some(n => n.startsWith('on')))"
    )
    assert not page.evaluate(handlers)
    page.reload()  # the transcript shown again after a reload is rendered the same way
    page.wait_for_selector(".msg.assistant:has-text('Averyveryverylongword')")
    assert page.locator("#chat a").count() == 1 and page.locator("#chat img, #chat script").count() == 0
    assert page.evaluate("window.__pwned") is None
    # the user's own text is shown as typed
    say_to(page, "assistant", "<img src=x onerror=window.__pwned=8> **not bold**")
    page.wait_for_selector(".msg.user:has-text('<img src=x')")
    wait_idle(page)
    assert page.locator("#chat img").count() == 0 and page.evaluate("window.__pwned") is None


def test_the_page_is_served_with_a_policy_that_allows_only_its_own_script(base: str) -> None:
    answer = httpx.get(f"{base}/")
    policy = answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'sha256-" in policy
    assert "unsafe-inline" not in policy
    assert answer.headers["x-content-type-options"] == "nosniff"


# ---- one conversation per tab -----------------------------------------------------------------


def test_a_tab_keeps_its_conversation_and_new_chat_starts_another(page: Any, base: str) -> None:
    page.goto(f"{base}/")
    say_to(page, "assistant", "hello")
    page.wait_for_selector(".msg.assistant:has-text('echo: hello')")
    wait_idle(page)
    say_to(page, "assistant", "history")
    page.wait_for_selector(".msg.assistant:has-text('I have seen 2 user messages')")
    wait_idle(page)
    page.reload()  # the same tab: the same conversation, still on screen
    page.wait_for_selector(".msg.assistant:has-text('echo: hello')")
    assert page.locator(".msg.user").count() == 2
    say_to(page, "assistant", "history")
    page.wait_for_selector(".msg.assistant:has-text('I have seen 3 user messages')")
    wait_idle(page)

    other = page.context.new_page()  # another tab: a conversation of its own
    try:
        other.goto(f"{base}/")
        say_to(other, "assistant", "history")
        other.wait_for_selector(".msg.assistant:has-text('I have seen 1 user messages')")
        wait_idle(other)
    finally:
        other.close()

    page.click("#new-chat")
    assert page.locator(".msg").count() == 0
    say_to(page, "assistant", "history")
    page.wait_for_selector(".msg.assistant:has-text('I have seen 1 user messages')")
    wait_idle(page)
    page.reload()  # the new chat is the one kept
    page.wait_for_selector(".msg.assistant:has-text('I have seen 1 user messages')")
    assert page.locator(".msg.user").count() == 1


# ---- handoffs ---------------------------------------------------------------------------------


def test_the_agent_picker_follows_a_handoff(page: Any, base: str) -> None:
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
    page.goto(f"{base}/")
    say_to(page, "desk", "transfer me")
    page.wait_for_selector(".msg.handoff:has-text('Handed over from desk to billing.')")
    page.wait_for_selector(".msg.handoff:has-text('Now answering: billing.')")
    wait_idle(page)
    assert page.eval_on_selector("#agent", "s => s.value") == "billing"
    page.fill("#message", "history")
    page.press("#message", "Enter")
    page.wait_for_selector(".msg.assistant:has-text('I have seen 2 user messages')")
    wait_idle(page)
    assert [url.split("/agents/")[1] for url in posted] == ["desk/runs?stream=sse", "billing/runs?stream=sse"]


# ---- stop -------------------------------------------------------------------------------------


def test_stop_cancels_the_run_through_the_api_and_keeps_what_was_said(page: Any, base: str) -> None:
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
    page.goto(f"{base}/")
    say_to(page, "assistant", "slow 100")
    page.wait_for_selector(".msg.assistant:has-text('w1')")
    assert page.locator("#stop").is_visible() and page.locator("#send-button").is_disabled()
    page.click("#stop")
    page.wait_for_selector(".msg.notice:has-text('Stopped. What the agent said so far is kept.')")
    wait_idle(page)
    cancels = [url for url in posted if url.endswith("/cancel")]
    assert len(cancels) == 1, posted
    run_id = cancels[0].rsplit("/", 2)[1]
    run = httpx.get(f"{base}/agents/assistant/runs/{run_id}").json()
    assert run["status"] == "cancelled" and run["output"].startswith("w0 w1")
    assert "w99" not in run["output"]
    assert last_answer(page).startswith("w0 w1")
    assert page.locator(".msg.error").count() == 0


# ---- failures as sentences --------------------------------------------------------------------


def test_failures_read_as_sentences(page: Any, base: str) -> None:
    page.goto(f"{base}/")
    say_to(page, "broken", "hi")
    page.wait_for_selector(".msg.error")
    wait_idle(page)
    failed = page.locator(".msg.error").last.inner_text()
    assert failed.startswith("The ") and failed.endswith(".") and "{" not in failed, failed
    assert "upstream exploded" in failed

    say_to(page, "assistant", "x" * 5000)  # over the server's 4,000-byte body limit: 413
    page.wait_for_selector(".msg.error:has-text('too long for the server')")
    wait_idle(page)
    refused = page.locator(".msg.error").last.inner_text()
    assert refused == "That message is too long for the server."
    page.errors[:] = [e for e in page.errors if "413" not in e]  # the browser logs the refusal


# ---- approvals inline, with their path --------------------------------------------------------


def test_approvals_are_answered_inline_with_the_calls_path(page: Any, base: str, paid: list[int]) -> None:
    bodies: list[Any] = []
    page.on(
        "request",
        lambda r: bodies.append(json.loads(r.post_data or "{}")) if r.url.endswith("/approvals") else None,
    )
    page.goto(f"{base}/")
    say_to(page, "tree", "pay both")
    small = page.locator(".msg.approval[data-path='small']")
    big = page.locator(".msg.approval[data-path='big']")
    small.wait_for()
    big.wait_for()
    assert "Approval needed: pay" in small.inner_text() and "in small" in small.inner_text()
    small.locator("button:has-text('Approve')").click()
    small.locator(":text('Approved.')").wait_for()
    big.locator("button:has-text('Deny')").click()
    big.locator(":text('Denied.')").wait_for()
    wait_idle(page)
    decisions = sorted((d["path"], d["call_id"], d["approved"]) for b in bodies for d in b["decisions"])
    assert decisions == [(["big"], "c1", False), (["small"], "c1", True)]
    assert paid.count(5) == 1 and 100000 not in paid


# ---- sign-in on 401 ---------------------------------------------------------------------------


def test_a_401_asks_for_a_sign_in_token(browser: Any) -> None:
    server = AgentServer(agents=[assistant()], auth=BearerAuth([TOKEN]))
    with serving(server.app()) as url:
        context = browser.new_context(viewport={"width": 390, "height": 844})
        try:
            page = context.new_page()
            page.goto(f"{url}/")
            page.wait_for_selector("#signin:not([hidden])")
            assert "needs a sign-in token" in page.locator("#signin").inner_text()
            check_layout(page, 390, 844)
            page.fill("#token", "wrong-token")
            page.click("#signin button[type=submit]")
            page.wait_for_selector("#signin-reason:has-text('That token was not accepted')")
            page.fill("#token", TOKEN)
            page.click("#signin button[type=submit]")
            page.wait_for_selector("#agent option[value='assistant']", state="attached")
            assert page.locator("#signin").is_hidden()
            say_to(page, "assistant", "hello")
            page.wait_for_selector(".msg.assistant:has-text('echo: hello')")
            wait_idle(page)
            # the token is the tab's: a new tab asks again
            other = context.new_page()
            other.goto(f"{url}/")
            other.wait_for_selector("#signin:not([hidden])")
        finally:
            context.close()
