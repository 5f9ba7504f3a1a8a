"""The egress proxy with real clients and loopback servers, alone and in front of the OS sandbox.

Two loopback HTTP servers stand in for the internet; the proxy's resolver
maps ``allowed.test`` and ``other.test`` to them (a mapped name may point at
loopback; an unmapped one may not).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import attrs
import httpx
import pytest
from process_support import confined, http_server

from helikon.tools import EgressPolicy, EgressProxy, Isolation, Sandbox

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
        assert response.status_code == 403 and "private or local address" in response.text
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
