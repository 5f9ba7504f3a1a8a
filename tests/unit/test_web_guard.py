"""WebFetch's SSRF guard and host lists, one blocked range at a time.

The pure rules (``address_refusal``, ``host_refusal``, host-list matching)
are checked directly; then every blocked range is fetched through the tool,
both as an IP literal and as a host name a resolver maps into the range,
with a network backend that fails the test if a connection is ever
attempted. Nothing here touches the network.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

import anyio
import httpcore
import pytest

from helikon.cancel import CancellationToken
from helikon.context import Actions, SessionState, ToolContext, TracerHandle
from helikon.errors import ConfigError, Denied, ToolError
from helikon.ids import CallId, RunId
from helikon.model import ToolEffect
from helikon.protocols import Tool
from helikon.tools import WebFetchTool
from helikon.tools._web_guard import address_refusal, host_refusal, host_rule, literal_address

CTX: ToolContext[None] = ToolContext(
    None, SessionState(), Actions(), CancellationToken(), TracerHandle(), CallId("c1"), RunId("r1"), "tester"
)

#: One address from every blocked range, and a word its refusal must contain.
BLOCKED: list[tuple[str, str]] = [
    ("0.0.0.0", "unspecified"),
    ("0.255.255.255", "unspecified"),
    ("10.0.0.1", "private"),
    ("10.255.255.254", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.254", "carrier-grade NAT"),
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("169.254.169.254", "cloud metadata"),
    ("169.254.0.1", "link-local"),
    ("172.16.0.1", "private"),
    ("172.31.255.254", "private"),
    ("192.0.0.8", "IETF protocol assignment"),
    ("192.0.2.1", "documentation"),
    ("192.88.99.1", "6to4 relay"),
    ("192.168.0.1", "private"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.254", "benchmarking"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
    ("::ffff:169.254.169.254", "IPv4-mapped link-local cloud metadata"),
    ("::ffff:10.1.2.3", "IPv4-mapped private"),
    ("::ffff:0:7f00:1", "IPv4-translated loopback"),
    ("::127.0.0.1", "IPv4-compatible loopback"),
    ("::8.8.8.8", "reserved"),  # IPv4-compatible is deprecated: refused even for a public address
    ("64:ff9b::7f00:1", "NAT64 loopback"),
    ("64:ff9b::a9fe:a9fe", "NAT64 link-local cloud metadata"),
    ("64:ff9b:1::1", "local-use NAT64"),
    ("100::1", "discard-only"),
    ("2001::1", "Teredo"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo loopback"),  # client 127.0.0.1, obfuscated
    ("2001:db8::1", "documentation"),
    ("2002:7f00:1::1", "6to4 loopback"),
    ("2002:a9fe:a9fe::1", "6to4 link-local cloud metadata"),
    ("2002:c0a8:101::1", "6to4 private"),
    ("3fff::1", "documentation"),
    ("fc00::1", "unique local"),
    ("fd12:3456:789a::1", "unique local"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("febf:ffff::1", "link-local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("ff0e::101", "multicast"),
    ("4000::1", "reserved"),
]

#: Public addresses, many right next to a blocked range.
PUBLIC = [
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "9.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "126.255.255.255",
    "128.0.0.1",
    "169.253.255.255",
    "169.255.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.167.255.255",
    "192.169.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "223.255.255.254",
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


@pytest.mark.parametrize(("address", "why"), BLOCKED, ids=[a for a, _ in BLOCKED])
def test_every_blocked_range_is_refused_with_its_name(address: str, why: str) -> None:
    reason = address_refusal(ipaddress.ip_address(address))
    assert reason is not None and why in reason, reason


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_next_to_the_blocked_ranges_pass(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("[::1]", "::1"),
        ("fe80::1%25eth0", "fe80::1%eth0"),
    ],
)
def test_shorthand_ip_forms_are_read_as_the_address_a_resolver_would_give(host: str, address: str) -> None:
    assert literal_address(host) == ipaddress.ip_address(address)
    assert host_refusal(host) is not None


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("localhost", "this machine"),
        ("LOCALHOST.", "this machine"),
        ("localhost.localdomain", "this machine"),
        ("ip6-localhost", "this machine"),
        ("anything.localhost", ".localhost"),
        ("printer.local", ".local"),
        ("metadata.google.internal", ".internal"),
        ("router.home.arpa", ".home.arpa"),
        ("nas.localdomain", ".localdomain"),
        ("intranet", "single-label"),
        ("", "empty"),
        ("a..b", "invalid"),
    ],
)
def test_local_host_names_are_refused_before_any_lookup(host: str, why: str) -> None:
    reason = host_refusal(host)
    assert reason is not None and why in reason, reason


@pytest.mark.parametrize(
    "host", ["example.com", "127.example.com", "cafe.be", "xn--bcher-kva.example", "local.example"]
)
def test_ordinary_names_pass_the_name_check(host: str) -> None:
    assert host_refusal(host) is None


def test_host_list_entries_match_the_host_and_its_subdomains() -> None:
    plain, wildcard, address = host_rule("Example.COM."), host_rule("*.example.org"), host_rule("[::1]")
    assert plain.matches("example.com") and plain.matches("docs.example.com")
    assert not plain.matches("badexample.com") and not plain.matches("example.com.evil.net")
    assert wildcard.matches("a.example.org") and not wildcard.matches("example.org")
    assert address.matches("::1") and not address.matches("sub.::1")


@pytest.mark.parametrize("entry", ["", "https://example.com", "example.com:80", "example.com/path", "*"])
def test_invalid_host_list_entries_are_config_errors(entry: str) -> None:
    with pytest.raises(ConfigError, match="invalid host"):
        WebFetchTool(allow_hosts=[entry])


def test_configuration_is_checked_when_the_tool_is_built() -> None:
    with pytest.raises(ConfigError, match="allow_hosts is empty"):
        WebFetchTool(allow_hosts=[])
    with pytest.raises(ConfigError, match="max_bytes must be positive"):
        WebFetchTool(max_bytes=0)
    with pytest.raises(ConfigError, match="timeout must be positive"):
        WebFetchTool(timeout=-1)
    with pytest.raises(ConfigError, match="max_redirects"):
        WebFetchTool(max_redirects=-1)
    assert WebFetchTool(allow_hosts="Docs.Python.org").allow_hosts == ("docs.python.org",)


def test_the_tool_implements_the_tool_protocol_with_the_pinned_names() -> None:
    fetch = WebFetchTool(allow_hosts=["example.com"], deny_hosts=["bad.example.com"], max_bytes=10, timeout=1)
    assert isinstance(fetch, Tool)
    assert fetch.name == "WebFetch" and fetch.effect is ToolEffect.SIDE_EFFECT
    assert fetch.parameters == {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The http:// or https:// URL to fetch."}},
        "required": ["url"],
        "additionalProperties": False,
    }
    assert "example.com" in fetch.description and "private" in fetch.description
    assert fetch.output_schema == {"type": "string"}


# -- through the tool: refused before any connection -------------------------------------------


class NoNetwork(httpcore.AsyncNetworkBackend):
    """A network backend that records, and refuses, every connection attempt."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []

    async def connect_tcp(
        self, host: str, port: int, *args: Any, **kwargs: Any
    ) -> httpcore.AsyncNetworkStream:
        self.attempts.append((host, port))
        raise OSError("the unit tests have no network")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


def resolver_to(*answers: str) -> Any:
    async def resolve(host: str, port: int) -> Sequence[str]:
        return answers

    return resolve


def fetch_error(tool: WebFetchTool, url: str) -> ToolError:
    async def go() -> ToolError:
        with pytest.raises(ToolError) as caught:
            await tool.invoke(CTX, {"url": url})
        return caught.value

    return anyio.run(go, backend="trio")


def literal_url(address: str) -> str:
    host = f"[{address.replace('%', '%25')}]" if ":" in address else address
    return f"http://{host}:8080/latest/meta-data/"


@pytest.mark.parametrize(("address", "why"), BLOCKED, ids=[a for a, _ in BLOCKED])
def test_webfetch_refuses_each_blocked_range_as_a_literal_without_connecting(address: str, why: str) -> None:
    network = NoNetwork()
    error = fetch_error(WebFetchTool(network_backend=network), literal_url(address))
    assert isinstance(error.failure, Denied), error
    assert str(error).startswith("denied: ") and why in str(error)
    assert network.attempts == []


@pytest.mark.parametrize(("address", "why"), BLOCKED, ids=[a for a, _ in BLOCKED])
def test_webfetch_refuses_a_name_that_resolves_into_each_blocked_range(address: str, why: str) -> None:
    network = NoNetwork()
    tool = WebFetchTool(network_backend=network, resolver=resolver_to(address))
    error = fetch_error(tool, "https://innocent.example.com/page")
    assert isinstance(error.failure, Denied) and why in str(error), error
    assert "innocent.example.com resolves to" in str(error)
    assert network.attempts == []


def test_one_bad_address_among_good_ones_is_enough_to_refuse() -> None:
    network = NoNetwork()
    tool = WebFetchTool(network_backend=network, resolver=resolver_to("93.184.216.34", "10.0.0.7"))
    error = fetch_error(tool, "http://mixed.example.com/")
    assert isinstance(error.failure, Denied) and "private address 10.0.0.7" in str(error)
    assert network.attempts == []


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8000/",
        "http://LOCALHOST./admin",
        "http://127.1/",
        "http://0x7f.1/",
        "http://2130706433/",
        "http://evil.example@127.0.0.1/",
        "http://127.0.0.1#@evil.example/",
        "http://[::ffff:7f00:1]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://intranet/",
    ],
)
def test_url_tricks_that_mean_this_machine_are_refused(url: str) -> None:
    network = NoNetwork()
    error = fetch_error(WebFetchTool(network_backend=network, resolver=resolver_to("93.184.216.34")), url)
    assert isinstance(error.failure, Denied), error
    assert network.attempts == []


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "gopher://example.com/",
        "data:text/plain,hi",
        "example.com/page",
    ],
)
def test_only_http_and_https_urls_are_fetched(url: str) -> None:
    network = NoNetwork()
    error = fetch_error(WebFetchTool(network_backend=network), url)
    assert isinstance(error.failure, Denied) and "only http:// and https://" in str(error)
    assert network.attempts == []


def test_host_lists_refuse_before_any_lookup() -> None:
    network = NoNetwork()
    looked_up: list[str] = []

    async def resolve(host: str, port: int) -> Sequence[str]:
        looked_up.append(host)
        return ("93.184.216.34",)

    allow = WebFetchTool(allow_hosts=["docs.example.com"], network_backend=network, resolver=resolve)
    assert "not on the allow list" in str(fetch_error(allow, "https://example.com/"))
    assert "not on the allow list" in str(fetch_error(allow, "https://docs.example.com.evil.net/"))
    deny = WebFetchTool(deny_hosts=["example.com"], network_backend=network, resolver=resolve)
    assert "host ads.example.com is on the deny list" in str(fetch_error(deny, "https://ADS.example.com./x"))
    both = WebFetchTool(allow_hosts=["example.com"], deny_hosts=["ads.example.com"], network_backend=network)
    assert "on the deny list" in str(fetch_error(both, "https://ads.example.com/"))
    assert looked_up == [] and network.attempts == []


def test_the_allow_list_does_not_switch_the_guard_off() -> None:
    network = NoNetwork()
    error = fetch_error(WebFetchTool(allow_hosts=["127.0.0.1"], network_backend=network), "http://127.0.0.1/")
    assert isinstance(error.failure, Denied) and "loopback" in str(error)
    assert network.attempts == []


def test_a_name_that_does_not_resolve_is_a_short_error() -> None:
    async def resolve(host: str, port: int) -> Sequence[str]:
        raise OSError(-2, "Name or service not known")

    error = fetch_error(
        WebFetchTool(resolver=resolve, network_backend=NoNetwork()), "http://nowhere.example/"
    )
    assert str(error) == "cannot resolve host nowhere.example: Name or service not known"


def test_a_connection_failure_is_a_short_error_not_an_exception() -> None:
    network = NoNetwork()
    error = fetch_error(
        WebFetchTool(network_backend=network, resolver=resolver_to("93.184.216.34")),
        "http://down.example.com/",
    )
    assert not isinstance(error.failure, Denied)
    assert str(error).startswith("fetching http://down.example.com/ failed: ")
    assert network.attempts == [("93.184.216.34", 80)]
