"""What the studio's browser tests share: the studio served on a loopback
port in a thread, a page that collects the errors it logs, and the check
that a page is laid out (nothing outside the viewport, no overlaps)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio

from helikon.studio import Studio


@contextmanager
def serving(studio: Studio) -> Iterator[str]:
    """The studio on a free loopback port (its own ``serve``, in a thread under trio); the base URL."""
    ready = threading.Event()
    urls: list[str] = []
    failure: list[BaseException] = []
    stop: list[trio.CancelScope] = []
    token: list[trio.lowlevel.TrioToken] = []

    async def main() -> None:
        token.append(trio.lowlevel.current_trio_token())
        with trio.CancelScope() as scope:
            stop.append(scope)
            async with trio.open_nursery() as nursery:
                urls.append(await nursery.start(studio.serve, 0))
                ready.set()

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as exc:  # surfaced to the test
            failure.append(exc)
        finally:
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(20) and urls, f"the studio did not start: {failure}"
    try:
        yield urls[0]
    finally:
        trio.from_thread.run_sync(stop[0].cancel, trio_token=token[0])
        thread.join(timeout=10)
    assert not failure, failure


def watched_page(browser: Any, errors: list[str], width: int = 1280, height: int = 800) -> Any:
    """A new page of ``width`` x ``height`` px whose console errors and
    uncaught exceptions are appended to ``errors``."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page


def assert_laid_out(page: Any, selectors: list[str], width: int) -> None:
    """Every element shown lies inside the viewport's width; siblings of one list do not overlap."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width, "the page scrolls sideways"
    for selector in selectors:
        items = page.locator(selector)
        boxes = []
        for n in range(items.count()):
            if not items.nth(n).is_visible():
                continue
            box = items.nth(n).bounding_box()
            assert box is not None and box["width"] > 0 and box["height"] > 0, selector
            assert box["x"] >= -0.5 and box["x"] + box["width"] <= width + 0.5, (selector, n, box, width)
            boxes.append(box)
        for a, b in itertools.pairwise(boxes):
            apart = (
                a["y"] + a["height"] <= b["y"] + 0.5
                or b["y"] + b["height"] <= a["y"] + 0.5
                or a["x"] + a["width"] <= b["x"] + 0.5
                or b["x"] + b["width"] <= a["x"] + 0.5
            )
            assert apart, (selector, a, b)
