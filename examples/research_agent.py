"""A research agent with the network tools: WebSearch finds a page, WebFetch reads it.

Run it with ``python examples/research_agent.py`` (install the ``web`` extra).
It needs no network and no API key: the model is scripted, the search
backend is a small in-memory one, and the "web" is an HTTP server this
script starts on 127.0.0.1. With a real deployment you would write
``WebSearchTool(BraveBackend())`` (the key from ``BRAVE_API_KEY``) or
``WebSearchTool(TavilyBackend())`` and a ``WebFetchTool()`` with the SSRF
guard on, as it is by default.

The scripted model also tries to read the cloud metadata address
(``169.254.169.254``); the refusal comes back to it as a tool result
(``denied: ...``) and the run goes on.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import trio

from helikon import LlmAgent, MessageOutput, RunCompleted, RunContext, RunFailed, ToolCallItem, ToolOutputItem
from helikon.errors import ToolError, describe
from helikon.items import text_of
from helikon.testing import MockModel, call_tools, say
from helikon.tools import SearchResult, WebFetchTool, WebSearchTool

ARTICLE = b"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Rates ease | The Daily Ledger</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/markets">Markets</a> | <a href="/login">Sign in</a></nav>
<article>
<h1>Mortgage rates ease to 6.1%</h1>
<p>Mortgage rates eased to 6.1% this week, the lowest level since spring, according to the
weekly survey of lenders published on Thursday.</p>
<p>Economists said the move <strong>reflects softer inflation data</strong> and expectations that
the central bank will hold its policy rate steady.</p>
<ul><li>30-year fixed: 6.1%</li><li>15-year fixed: 5.4%</li></ul>
</article>
<footer>Copyright 2024 The Daily Ledger. Cookie settings.</footer>
</body></html>
"""


class NewsSite(BaseHTTPRequestHandler):
    """The example's whole web: one article."""

    def do_GET(self) -> None:
        status, body = (200, ARTICLE) if self.path == "/rates" else (404, b"not found")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def local_news_site() -> Iterator[str]:
    """Serve :class:`NewsSite` on a free port of 127.0.0.1; yield its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), NewsSite)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class LocalIndex:
    """A search backend over a fixed list of pages (any object with this ``search`` method is one)."""

    def __init__(self, pages: Sequence[SearchResult]) -> None:
        self.pages = pages

    async def search(
        self,
        query: str,
        *,
        count: int,
        allowed_domains: tuple[str, ...] = (),
        blocked_domains: tuple[str, ...] = (),
    ) -> Sequence[SearchResult]:
        words = query.lower().split()
        return [p for p in self.pages if any(w in (p.title + p.snippet).lower() for w in words)][:count]


async def main() -> int:
    with local_news_site() as site:
        article = f"{site}/rates"
        search = WebSearchTool(
            LocalIndex(
                [SearchResult("Mortgage rates ease to 6.1%", article, "Rates eased to 6.1% this week.")]
            )
        )
        # The SSRF guard refuses loopback addresses, and this example's "web" is a server on
        # 127.0.0.1, so the guard is relaxed here; allow_hosts then pins the tool to that one server.
        # In production keep the default, WebFetchTool(), which refuses private addresses.
        fetch = WebFetchTool(allow_private_addresses=True, allow_hosts=["127.0.0.1"], timeout=10)
        model = MockModel(
            [
                call_tools(("WebSearch", '{"query": "mortgage rates this week", "count": 3}')),
                call_tools(
                    ("WebFetch", {"url": article}),
                    ("WebFetch", {"url": "http://169.254.169.254/latest/meta-data/"}),
                ),
                say(
                    "Mortgage rates eased to 6.1% this week, the lowest since spring, on softer "
                    "inflation data; a 15-year fixed loan averages 5.4%. (The metadata address was refused.)"
                ),
            ]
        )
        agent: LlmAgent[None] = LlmAgent(
            name="researcher",
            model=model,
            instructions="Search the web, read the best source, and answer in two sentences with figures.",
            tools=[search, fetch],
        )
        question = "What happened to mortgage rates this week?"
        print(f"user: {question}\n")
        async for event in agent.run(RunContext.ephemeral(None), question):
            match event:
                case ToolCallItem(item=call):
                    print(f"-> {call.name}({call.arguments})")
                case ToolOutputItem(item=result):
                    flag = " [error]" if result.is_error else ""
                    print(f"<- {result.name}{flag}:\n{result.content}\n")
                case MessageOutput(item=message):
                    print(f"{message.agent}: {text_of(message.content)}")
                case RunCompleted():
                    print("[done]")
                case RunFailed(error=error):
                    print(f"[run failed: {describe(error)}]", file=sys.stderr)
                    return 1

        # With its defaults, WebFetch refuses the same loopback server outright.
        try:
            await WebFetchTool().fetch(article)
        except ToolError as exc:
            print(f"\nthe default WebFetchTool() on {article}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main))
