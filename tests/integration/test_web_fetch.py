"""WebFetch against a real HTTP server on 127.0.0.1.

The server (``http.server`` in a thread) serves an article page, plain text,
JSON, redirects, oversized and compressed bodies, a slow page and errors, and
counts the requests it gets, so a test can show that a refused fetch never
reached it.

Tests that need the guard *on* while still reaching the server use a small
test network: a resolver that gives ``news.example`` a public address and a
network backend that routes that address, and only that address, to the
loopback server. The guard sees a public address and lets it through; what
it must refuse (a redirect to ``127.0.0.1``, a rebinding resolver) is then
the only thing standing between the fetch and the server.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpcore
import pytest
import trustme

from helikon import LlmAgent, RunContext, ToolOutputItem, collect
from helikon.cancel import CancellationToken
from helikon.context import Actions, SessionState, ToolContext, TracerHandle
from helikon.errors import Denied, ToolError
from helikon.ids import CallId, RunId
from helikon.items import ToolResult
from helikon.testing import MockModel, call_tools, say
from helikon.tools import WebFetchTool

pytestmark = pytest.mark.integration

CTX: ToolContext[None] = ToolContext(
    None, SessionState(), Actions(), CancellationToken(), TracerHandle(), CallId("c1"), RunId("r1"), "tester"
)
PUBLIC = "93.184.216.34"  # what the test resolver answers for news.example; routed to the loopback server

ARTICLE = b"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Rates ease | The Daily Ledger</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/markets">Markets</a> | <a href="/login">Sign in</a></nav>
<main><article>
<h1>Mortgage rates ease to 6.1%</h1>
<p>Mortgage rates eased to 6.1% this week, the lowest level since spring, according to the
weekly survey of lenders published on Thursday morning.</p>
<p>Economists said the move <strong>reflects softer inflation data</strong> and expectations that
the central bank will hold its policy rate steady at the next meeting.</p>
<h2>What it means for buyers</h2>
<ul><li>A 30-year fixed loan now averages 6.1%.</li><li>A 15-year fixed loan averages 5.4%.</li></ul>
<p>Read the <a href="https://example.com/survey">full survey</a> for regional figures.</p>
</article></main>
<footer>Copyright 2024 The Daily Ledger. All rights reserved. Cookie settings.</footer>
</body></html>
"""


class Server:
    """The loopback server's state: request counts and a switch that releases slow requests."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.port = 0

    def count(self, path: str) -> int:
        with self.lock:
            return self.hits[path]

    def total(self) -> int:
        with self.lock:
            return sum(self.hits.values())

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


def handler_for(state: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def handle(self) -> None:
            with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # a client stopped at a limit
                super().handle()

        def reply(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            with state.lock:
                state.hits[parts.path] += 1
            match parts.path:
                case "/article" | "/secret":
                    self.reply(200, ARTICLE, "text/html; charset=utf-8")
                case "/plain":
                    self.reply(200, b"Plain text, 100% as served.\nLine two.\n", "text/plain; charset=utf-8")
                case "/data.json":
                    self.reply(200, b'{"rate": 6.1, "unit": "%"}', "application/json")
                case "/latin1":
                    self.reply(200, "Caf\xe9 cr\xe8me".encode("latin-1"), "text/plain; charset=iso-8859-1")
                case "/image.png":
                    self.reply(200, b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png")
                case "/missing":
                    self.reply(404, b"<h1>Not here</h1>", "text/html")
                case "/broken":
                    self.reply(500, b"oops", "text/plain")
                case "/redirect":
                    self.send_response(int(query.get("status", ["302"])[0]))
                    self.send_header("Location", query["to"][0])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                case "/loop":
                    self.reply(302, b"", "text/plain", Location="/loop")
                case "/big-declared":
                    self.reply(200, b"x" * 300_000, "text/plain")
                case "/big-chunked":  # no Content-Length: the limit must hold while streaming
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    chunk = b"y" * 16384
                    try:
                        for _ in range(200):
                            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:  # the client stopped reading at the limit
                        pass
                case "/bomb":  # 20 MB of zeros in about 20 kB of gzip
                    self.reply(200, gzip.compress(bytes(20_000_000)), "text/plain", Content_Encoding="gzip")
                case "/gzipped":
                    self.reply(
                        200, gzip.compress(ARTICLE), "text/html; charset=utf-8", Content_Encoding="gzip"
                    )
                case "/brotli":
                    self.reply(200, b"\x0b\x02\x80hello\x03", "text/plain", Content_Encoding="br")
                case "/host":
                    self.reply(200, self.headers.get("Host", "").encode(), "text/plain")
                case "/slow":
                    state.release.wait(10)
                    self.reply(200, b"too late", "text/plain")
                case _:
                    self.reply(404, b"no such page", "text/plain")

    return Handler


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    state = Server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()


class TestNetwork(httpcore.AsyncNetworkBackend):
    """Routes the public test address to the loopback server; refuses to go anywhere else."""

    __test__ = False

    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.connected: list[str] = []

    async def connect_tcp(
        self, host: str, port: int, *args: Any, **kwargs: Any
    ) -> httpcore.AsyncNetworkStream:
        self.connected.append(host)
        if host not in (PUBLIC, "127.0.0.1"):
            raise OSError(f"the test network has no route to {host}")
        return await self.inner.connect_tcp("127.0.0.1", port, *args, **kwargs)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class Resolver:
    """Answers from a script: one answer per lookup (the last one repeats)."""

    def __init__(self, *answers: Sequence[str], names: dict[str, Sequence[str]] | None = None) -> None:
        self.answers = list(answers)
        self.names = names or {}
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append(host)
        if host in self.names:
            return self.names[host]
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def fetch(tool: WebFetchTool, url: str, backend: str = "trio") -> str:
    async def go() -> str:
        result = await tool.invoke(CTX, {"url": url})
        assert isinstance(result, str)
        return result

    return anyio.run(go, backend=backend)


def failure(tool: WebFetchTool, url: str) -> ToolError:
    with pytest.raises(ToolError) as caught:
        fetch(tool, url)
    return caught.value


# -- the article, with the guard relaxed and on ------------------------------------------------------


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_with_the_guard_relaxed_for_loopback_the_article_comes_back_as_markdown(
    server: Server, backend: str
) -> None:
    # allow_private_addresses=True: the test server lives on 127.0.0.1, which the guard refuses by default
    markdown = fetch(WebFetchTool(allow_private_addresses=True), server.url("/article"), backend)
    assert markdown.startswith("# Mortgage rates ease to 6.1%")
    assert "Mortgage rates eased to 6.1% this week" in markdown
    assert "**reflects softer inflation data**" in markdown
    assert "## What it means for buyers" in markdown
    assert "- A 30-year fixed loan now averages 6.1%." in markdown
    assert "[full survey](https://example.com/survey)" in markdown
    assert "Sign in" not in markdown and "Cookie settings" not in markdown  # navigation and footer dropped


def test_with_the_guard_on_loopback_is_refused_and_the_server_never_hears_of_it(server: Server) -> None:
    before = server.count("/secret")
    for url in (server.url("/secret"), server.url("/secret", "localhost"), server.url("/secret", "[::1]")):
        error = failure(WebFetchTool(), url)
        assert isinstance(error.failure, Denied) and str(error).startswith("denied: "), error
    assert server.count("/secret") == before


def test_text_json_and_declared_charsets_pass_through(server: Server) -> None:
    tool = WebFetchTool(allow_private_addresses=True)
    assert fetch(tool, server.url("/plain")) == "Plain text, 100% as served.\nLine two.\n"
    assert json.loads(fetch(tool, server.url("/data.json"))) == {"rate": 6.1, "unit": "%"}
    assert fetch(tool, server.url("/latin1")) == "Café crème"


def test_a_gzipped_page_is_decoded(server: Server) -> None:
    markdown = fetch(WebFetchTool(allow_private_addresses=True), server.url("/gzipped"))
    assert markdown.startswith("# Mortgage rates ease to 6.1%")


def test_http_errors_and_unreadable_content_are_short_messages(server: Server) -> None:
    tool = WebFetchTool(allow_private_addresses=True)
    assert str(failure(tool, server.url("/missing"))) == f"HTTP 404 Not Found from {server.url('/missing')}"
    assert str(failure(tool, server.url("/broken"))).startswith("HTTP 500 Internal Server Error")
    assert "cannot read image/png content" in str(failure(tool, server.url("/image.png")))
    assert str(failure(tool, server.url("/brotli"))) == "unsupported content encoding 'br'"


def test_long_output_is_cut_to_max_chars(server: Server) -> None:
    text = fetch(WebFetchTool(allow_private_addresses=True, max_chars=20), server.url("/plain"))
    assert (
        text.startswith("Plain text, 100% as ")
        and "[truncated: showing the first 20 of 38 characters]" in text
    )


# -- redirects ---------------------------------------------------------------------------------------


def routed_tool(**options: Any) -> tuple[WebFetchTool, TestNetwork]:
    network = TestNetwork()
    resolver = Resolver([PUBLIC], names={"internal.example": ["10.0.0.5"], "other.example": [PUBLIC]})
    return WebFetchTool(resolver=resolver, network_backend=network, **options), network


def test_a_redirect_on_the_public_test_host_is_followed(server: Server) -> None:
    tool, network = routed_tool()
    markdown = fetch(tool, server.url("/redirect?to=/article", "news.example"))
    assert markdown.startswith("# Mortgage rates ease")
    assert network.connected and set(network.connected) == {PUBLIC}


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("http://127.0.0.1:{port}/secret", "loopback address 127.0.0.1"),
        ("http://localhost:{port}/secret", "always means this machine"),
        ("http://[::1]:{port}/secret", "loopback address ::1"),
        ("http://[::ffff:127.0.0.1]:{port}/secret", "IPv4-mapped loopback"),
        ("http://2130706433:{port}/secret", "loopback address 127.0.0.1"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://internal.example:{port}/secret", "internal.example resolves to private address 10.0.0.5"),
        ("file:///etc/passwd", "only http:// and https://"),
    ],
)
@pytest.mark.parametrize("status", ["301", "302", "303", "307", "308"])
def test_a_redirect_from_an_allowed_host_to_a_private_address_is_refused(
    server: Server, target: str, why: str, status: str
) -> None:
    tool, network = routed_tool()
    before = server.count("/secret")
    location = target.format(port=server.port)
    error = failure(tool, server.url(f"/redirect?status={status}&to={location}", "news.example"))
    assert isinstance(error.failure, Denied) and why in str(error), error
    assert server.count("/secret") == before
    assert set(network.connected) == {PUBLIC}  # only the first hop was ever connected


def test_a_redirect_off_the_allow_list_is_refused(server: Server) -> None:
    tool, _ = routed_tool(allow_hosts=["news.example"])
    location = server.url("/article", "other.example")
    error = failure(tool, server.url(f"/redirect?to={location}", "news.example"))
    assert str(error) == "denied: host other.example is not on the allow list"


def test_redirects_stop_at_the_limit(server: Server) -> None:
    before = server.count("/loop")
    error = failure(WebFetchTool(allow_private_addresses=True, max_redirects=3), server.url("/loop"))
    assert str(error) == f"too many redirects (more than 3) fetching {server.url('/loop')}"
    assert server.count("/loop") - before == 4


# -- DNS rebinding -----------------------------------------------------------------------------------


def test_dns_rebinding_public_at_the_check_then_loopback_at_connect_time_is_refused(server: Server) -> None:
    network = TestNetwork()
    rebinding = Resolver([PUBLIC], ["127.0.0.1"])
    tool = WebFetchTool(resolver=rebinding, network_backend=network)
    before = server.total()
    error = failure(tool, server.url("/secret", "rebind.example"))
    assert isinstance(error.failure, Denied), error
    assert str(error) == "denied: rebind.example resolves to loopback address 127.0.0.1"
    assert rebinding.calls == ["rebind.example", "rebind.example"]  # the check, then the connection
    assert network.connected == [] and server.total() == before


def test_the_same_setup_with_a_steady_resolver_reaches_the_server(server: Server) -> None:
    """The control for the rebinding test: only the second answer made the difference."""
    network = TestNetwork()
    steady = Resolver([PUBLIC])
    markdown = fetch(
        WebFetchTool(resolver=steady, network_backend=network), server.url("/article", "steady.example")
    )
    assert markdown.startswith("# Mortgage rates ease") and network.connected == [PUBLIC]


# -- the checked IP is connected, the name is kept (Host header, SNI, certificate) -------------------


def test_the_host_header_keeps_the_name_while_the_socket_goes_to_the_checked_address(server: Server) -> None:
    tool, network = routed_tool()
    assert fetch(tool, server.url("/host", "news.example")) == f"news.example:{server.port}"
    assert network.connected == [PUBLIC]


@pytest.fixture(scope="module")
def tls_server(server: Server) -> Iterator[tuple[int, trustme.CA, list[str]]]:
    """An HTTPS server on 127.0.0.1 with a certificate for news.example only; records the SNI it gets."""
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("news.example").configure_cert(context)
    names: list[str] = []

    def record_sni(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        names.append(str(name))

    context.sni_callback = record_sni
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(server))
    httpd.daemon_threads = True
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1], ca, names
    httpd.shutdown()
    httpd.server_close()


def test_https_verifies_the_certificate_for_the_name_and_sends_it_as_sni(
    tls_server: tuple[int, trustme.CA, list[str]],
) -> None:
    port, ca, names = tls_server
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    network = TestNetwork()
    resolver = Resolver([PUBLIC])
    tool = WebFetchTool(resolver=resolver, network_backend=network, ssl_context=client_context)
    markdown = fetch(tool, f"https://news.example:{port}/article")
    assert markdown.startswith("# Mortgage rates ease")
    assert network.connected == [PUBLIC] and names[-1] == "news.example"
    # the same server under another name: the certificate does not match, so the fetch fails
    error = failure(tool, f"https://other.example:{port}/article")
    assert "CERTIFICATE_VERIFY_FAILED" in str(error) and not isinstance(error.failure, Denied)


# -- host lists --------------------------------------------------------------------------------------


def test_allow_and_deny_lists_decide_which_hosts_are_fetched(server: Server) -> None:
    allowed = WebFetchTool(allow_hosts=["127.0.0.1"], allow_private_addresses=True)
    assert fetch(allowed, server.url("/plain")).startswith("Plain text")
    elsewhere = WebFetchTool(allow_hosts=["example.com"], allow_private_addresses=True)
    assert str(failure(elsewhere, server.url("/plain"))) == "denied: host 127.0.0.1 is not on the allow list"
    denied = WebFetchTool(deny_hosts=["127.0.0.1"], allow_private_addresses=True)
    assert str(failure(denied, server.url("/plain"))) == "denied: host 127.0.0.1 is on the deny list"
    tool, _ = routed_tool(allow_hosts=["*.example"], deny_hosts=["ads.example"])
    assert fetch(tool, server.url("/plain", "news.example")).startswith("Plain text")
    assert "on the deny list" in str(failure(tool, server.url("/plain", "ads.example")))


# -- size and time limits ----------------------------------------------------------------------------


def test_a_declared_oversized_body_is_refused_before_reading(server: Server) -> None:
    error = failure(
        WebFetchTool(allow_private_addresses=True, max_bytes=100_000), server.url("/big-declared")
    )
    assert str(error) == "the response is 300000 bytes, over the 100000-byte limit"


def test_the_size_limit_holds_while_streaming_a_body_of_unknown_length(server: Server) -> None:
    error = failure(WebFetchTool(allow_private_addresses=True, max_bytes=100_000), server.url("/big-chunked"))
    assert str(error) == "the response is over the 100000-byte limit"
    roomy = WebFetchTool(allow_private_addresses=True, max_bytes=4_000_000, max_chars=None)
    assert fetch(roomy, server.url("/big-chunked")) == "y" * 16384 * 200


def test_a_decompression_bomb_is_cut_off_at_the_limit(server: Server) -> None:
    error = failure(WebFetchTool(allow_private_addresses=True, max_bytes=1_000_000), server.url("/bomb"))
    assert str(error) == "the response is over the 1000000-byte limit"


def test_a_slow_server_runs_into_the_time_limit(server: Server) -> None:
    started = time.monotonic()
    error = failure(WebFetchTool(allow_private_addresses=True, timeout=0.5), server.url("/slow"))
    assert str(error) == f"timed out after 0.5 s fetching {server.url('/slow')}"
    assert time.monotonic() - started < 5


# -- in a run: errors are tool results ---------------------------------------------------------------


def test_in_a_run_the_refusal_and_the_page_reach_the_model_as_tool_results(server: Server) -> None:
    url = server.url("/article")

    async def outputs(tool: WebFetchTool) -> list[ToolResult]:
        model = MockModel([call_tools(("WebFetch", {"url": url})), say("Done.")])
        agent: LlmAgent[None] = LlmAgent(name="reader", model=model, tools=[tool])
        result = await collect(agent.run(RunContext.ephemeral(None), "What happened to rates?"))
        assert result.final_output == "Done."  # the run went on after the tool result
        return [event.item for event in result.events if isinstance(event, ToolOutputItem)]

    refused = anyio.run(outputs, WebFetchTool(), backend="trio")
    assert [o.is_error for o in refused] == [True]
    assert refused[0].content.startswith("denied: refusing to connect to loopback address 127.0.0.1")
    fetched = anyio.run(outputs, WebFetchTool(allow_private_addresses=True), backend="asyncio")
    assert [o.is_error for o in fetched] == [False]
    assert "Mortgage rates eased to 6.1% this week" in fetched[0].content
