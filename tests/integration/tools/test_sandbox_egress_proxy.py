"""The egress proxy with real clients and loopback servers, alone and in front of the OS sandbox.

Two loopback HTTP servers stand in for the internet; the proxy's resolver
maps ``allowed.test`` and ``other.test`` to them (a mapped name may point at
loopback; an unmapped one may not).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import attrs
import httpx
import pytest
from process_support import confined, http_server

from helikon.tools import EgressPolicy, EgressProxy, Isolation, Sandbox
from helikon.tools._web_guard import address_refusal
from helikon.tools.sandbox._egress import EgressDenied, address_refusal_text

pytestmark = pytest.mark.integration


@attrs.frozen
class Net:
    proxy: EgressProxy
    allowed_port: int
    other_port: int
    allowed_hits: list[str]
    other_hits: list[str]


@pytest.fixture
def net() -> Iterator[Net]:
    with http_server("allowed") as allowed, http_server("other") as other:
        policy = EgressPolicy.deny_all().allow_domains(["allowed.test"])
        hosts = {"allowed.test": "127.0.0.1", "other.test": "127.0.0.1"}
        with EgressProxy(policy, hosts=hosts) as proxy:
            yield Net(
                proxy,
                allowed.server_address[1],
                other.server_address[1],
                allowed.hits,  # type: ignore[attr-defined]
                other.hits,  # type: ignore[attr-defined]
            )


def test_a_forward_proxied_request_to_a_listed_domain_goes_through(net: Net) -> None:
    with httpx.Client(proxy=net.proxy.url, trust_env=False) as client:
        response = client.get(f"http://allowed.test:{net.allowed_port}/page?q=1")
    assert response.status_code == 200 and response.text == "hello from allowed at /page?q=1"
    assert net.allowed_hits == ["/page?q=1"]


def test_a_forward_proxied_request_to_another_domain_is_refused(net: Net) -> None:
    with httpx.Client(proxy=net.proxy.url, trust_env=False) as client:
        response = client.get(f"http://other.test:{net.other_port}/secret")
    assert response.status_code == 403 and "other.test is not allowed" in response.text
    assert net.other_hits == [], "the refused request reached the server"
    assert [(d.host, d.allowed) for d in net.proxy.decisions] == [("other.test", False)]


def _connect(proxy: EgressProxy, target: str) -> tuple[bytes, socket.socket]:
    sock = socket.create_connection(proxy.address, timeout=5)
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    return head, sock


def test_connect_tunnels_to_a_listed_domain_and_refuses_another(net: Net) -> None:
    head, tunnel = _connect(net.proxy, f"allowed.test:{net.allowed_port}")
    with tunnel:
        assert head.startswith(b"HTTP/1.1 200")
        tunnel.sendall(b"GET /tunnelled HTTP/1.0\r\nHost: allowed.test\r\n\r\n")
        reply = b""
        while chunk := tunnel.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(b"hello from allowed at /tunnelled")
    head, refused = _connect(net.proxy, f"other.test:{net.other_port}")
    refused.close()
    assert head.startswith(b"HTTP/1.1 403")
    assert net.other_hits == []


def test_a_permitted_name_that_resolves_to_loopback_is_refused(net: Net) -> None:
    with EgressProxy(EgressPolicy.allow_all()) as open_proxy, httpx.Client(proxy=open_proxy.url) as client:
        response = client.get(f"http://localhost:{net.allowed_port}/")
        assert response.status_code == 403 and "non-public address" in response.text
        assert client.get(f"http://127.0.0.1:{net.allowed_port}/").status_code == 403
    assert net.allowed_hits == []


def test_anything_but_connect_or_absolute_http_is_a_bad_request(net: Net) -> None:
    with socket.create_connection(net.proxy.address, timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")


def test_the_sandboxed_command_is_forced_through_the_proxy(tmp_path: Path, net: Net) -> None:
    backend = confined(Sandbox.open(tmp_path))
    if backend is None:
        return
    networked = backend.allow_network(True, proxy=net.proxy)
    assert networked.guarantees().network is Isolation.PROXIED

    def run(command: str) -> tuple[int | None, str]:
        result = anyio.run(networked.run, command)
        return result.exit_code, result.stdout + result.stderr

    fetch = "python3 -c \"import urllib.request as u; print(u.urlopen('{}').read().decode())\""
    code, out = run(fetch.format(f"http://allowed.test:{net.allowed_port}/from-sandbox"))
    assert code == 0 and "hello from allowed at /from-sandbox" in out
    code, out = run(fetch.format(f"http://other.test:{net.other_port}/from-sandbox"))
    assert code == 1 and "403" in out
    # Going around the proxy: direct TCP to the server's port, UDP, and a client told to ignore the proxy.
    direct = (
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {net.other_port}), timeout=2)\""
    )
    code, out = run(direct)
    assert code == 1 and "Permission denied" in out
    code, out = run('python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"')
    assert code == 1 and "Permission denied" in out
    code, out = run(f"curl -sS --noproxy '*' http://127.0.0.1:{net.other_port}/around")
    assert code != 0
    assert net.other_hits == [], "a sandboxed command reached the unlisted server"
    assert net.allowed_hits == ["/from-sandbox"]


# -- issue 30: one address classifier for WebFetch and the proxy; the proxy forwards what it checked --


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Refuse, in-process, any upstream connect the proxy makes to a non-loopback address (and record it)."""
    attempted: list[tuple[str, int]] = []
    real = socket.create_connection

    def guarded(address: tuple[str, int], *args: object, **kwargs: object) -> socket.socket:
        host = address[0]
        if not (host.startswith("127.") or host == "::1"):
            attempted.append((host, address[1]))
            raise OSError(f"test guard: no connect to non-loopback {host}")
        return real(address, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "create_connection", guarded)  # the proxy calls socket.create_connection
    return attempted


NON_PUBLIC = [
    # the examples
    "100.100.100.200",  # CGNAT (Tailscale's resolver address)
    "2002:7f00:1::1",  # 6to4 embedding 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 embedding 169.254.169.254
    "fec0::1",  # site-local
    # other spellings of each class
    "100.64.0.1",
    "100.127.255.254",
    "2002:c0a8:101::1",  # 6to4 embedding 192.168.1.1
    "2002:a00:1::",  # 6to4 embedding 10.0.0.1
    "fec0:1234::5",
    "feff::1",  # site-local, top of the range
    "64:ff9b::7f00:1",  # NAT64 embedding 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 embedding 169.254.169.254
    "::ffff:100.64.0.1",  # IPv4-mapped CGNAT
    "::127.0.0.1",  # IPv4-compatible loopback
    "192.0.0.8",  # IETF protocol assignments
    "198.18.0.1",  # benchmarking
]


@pytest.mark.parametrize("address", NON_PUBLIC)
def test_the_proxy_refuses_every_address_webfetch_refuses(
    address: str, loopback_only: list[tuple[str, int]]
) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is not None, "WebFetch's guard refuses it"
    with EgressProxy(EgressPolicy.allow_all()) as proxy:
        with pytest.raises(EgressDenied) as refused:
            proxy.open_upstream(address, 443)
        assert refused.value.status == 403 and "non-public address" in refused.value.reason
        head, sock = _connect(proxy, f"[{address}]:443" if ":" in address else f"{address}:443")
        sock.close()
        assert head.startswith(b"HTTP/1.1 403"), head
    assert loopback_only == [], "the proxy tried to connect to a non-public address"


def test_the_proxy_and_webfetch_share_one_classifier() -> None:
    for address in (*NON_PUBLIC, "127.0.0.1", "10.1.2.3", "::1", "93.184.216.34", "2606:4700::1111"):
        assert address_refusal_text(address) == address_refusal(ipaddress.ip_address(address)), address


@attrs.frozen
class Seen:
    port: int
    heads: list[bytes]


@pytest.fixture
def host_echo() -> Iterator[Seen]:
    """A loopback server that records each request head it gets and answers 200."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    heads: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(4096)):
                    data += chunk
                heads.append(data)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield Seen(listener.getsockname()[1], heads)
    finally:
        stop.set()
        thread.join()
        listener.close()


@pytest.mark.parametrize(
    "host_lines",
    [
        [b"Host: other.test"],  # the example
        [b"host:   other.test"],
        [b"Host: allowed.test", b"Host: other.test"],  # two Host headers
        [b"HOST: 127.0.0.1:1"],
        [],  # none at all: the checked one is added
    ],
)
def test_a_forwarded_request_carries_only_the_checked_host(host_echo: Seen, host_lines: list[bytes]) -> None:
    policy = EgressPolicy.deny_all().allow_domains(["allowed.test"])
    with EgressProxy(policy, hosts={"allowed.test": "127.0.0.1"}) as proxy:
        sock = socket.create_connection(proxy.address, timeout=5)
        request = [f"GET http://allowed.test:{host_echo.port}/p HTTP/1.1".encode(), *host_lines, b"", b""]
        sock.sendall(b"\r\n".join(request))
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
        sock.close()
    assert reply.startswith(b"HTTP/1.1 200"), reply
    [head] = host_echo.heads
    hosts = [line for line in head.split(b"\r\n") if line.lower().startswith(b"host:")]
    assert hosts == [f"Host: allowed.test:{host_echo.port}".encode()], head
