"""The egress proxy: HTTP ``CONNECT`` and forward proxying under a domain policy.

:class:`EgressPolicy` decides, by host name, which destinations a sandboxed
command may reach; :class:`EgressProxy` enforces it on ``127.0.0.1``. The
``OsSandboxBackend`` with network allowed points ``HTTP(S)_PROXY`` at it and
lets Landlock allow TCP ``connect`` to its port only, so a command cannot go
around it (see ``docs/tools.md``).

Rules of the proxy:

- ``CONNECT host:port`` (HTTPS and any TCP tunnel) and absolute-form
  requests (``GET http://host/...``, plain HTTP) are the only requests
  served; anything else is ``400``.
- A host the policy does not permit gets ``403`` and never a connection.
- A permitted host is resolved by the proxy, and every address it resolves
  to is judged by the same classifier as WebFetch's SSRF guard
  (:func:`helikon.tools._web_guard.address_refusal`: loopback, private,
  CGNAT, link-local, site-local, reserved, multicast, and the IPv6 forms
  that embed one of those, such as 6to4, NAT64, IPv4-mapped and Teredo);
  any non-public answer is refused (``403``), so a permitted name cannot be
  pointed at this machine or the local network, unless it is mapped
  explicitly with ``hosts=`` or ``allow_private=True``. The proxy connects
  to the address it checked (no second lookup).
- A forwarded request carries the host the proxy checked: the client's
  ``Host`` headers are dropped and ``Host: <checked host>`` is sent instead,
  so a request checked for one name cannot ask the upstream for another.
- It runs in its own daemon threads, independent of the event loop, from
  :meth:`EgressProxy.start` to :meth:`EgressProxy.close`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import socketserver
import threading
import urllib.parse
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Final, final

import attrs

from helikon.tools._web_guard import address_refusal
from helikon.tools.sandbox._isolate import _pump  # one byte pump for the relay and the proxy

_MAX_HEAD: Final = 64 * 1024
_HOP_HEADERS: Final = frozenset({b"connection", b"keep-alive", b"proxy-authorization", b"proxy-connection"})
#: Headers never forwarded: the hop-by-hop ones, and ``Host`` (replaced by the host the proxy checked).
_DROPPED_HEADERS: Final = _HOP_HEADERS | {b"host"}


def _host_header(host: str, port: int) -> bytes:
    """``Host: <host>[:port]`` for the checked host (IPv6 literals bracketed)."""
    if not host.isascii():
        host = host.encode("idna").decode("ascii")
    name = f"[{host}]" if ":" in host else host
    return f"Host: {name}{'' if port == 80 else f':{port}'}".encode("ascii")


def normalize_host(host: str) -> str:
    """A host as the policy compares it: lower case, no trailing dot, no IPv6 brackets.

    >>> normalize_host("API.Example.COM."), normalize_host("[::1]")
    ('api.example.com', '::1')
    """
    return host.strip().strip("[]").rstrip(".").lower()


def host_matches(pattern: str, host: str) -> bool:
    """``example.com`` matches itself only; ``*.example.com`` its subdomains; ``*`` anything.

    >>> host_matches("example.com", "example.com"), host_matches("example.com", "www.example.com")
    (True, False)
    >>> host_matches("*.example.com", "a.b.example.com"), host_matches("*.example.com", "example.com")
    (True, False)
    """
    pattern = normalize_host(pattern)
    if pattern == "*":
        return True
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


def _patterns(domains: Iterable[str]) -> tuple[str, ...]:
    if isinstance(domains, str):
        domains = (domains,)
    return tuple(normalize_host(d) for d in domains)


@final
@attrs.frozen
class EgressPolicy:
    """Which hosts a sandboxed command may reach through the proxy.

    A denied pattern wins over an allowed one; a host neither allows nor
    denies gets the default.

    >>> policy = EgressPolicy.deny_all().allow_domains(["pypi.org", "*.pythonhosted.org"])
    >>> policy.permits("pypi.org"), policy.permits("files.pythonhosted.org"), policy.permits("evil.test")
    (True, True, False)
    >>> EgressPolicy.allow_all().deny_domains(["*.internal"]).permits("db.internal")
    False
    """

    default_allow: bool = False
    allowed: tuple[str, ...] = attrs.field(default=(), converter=_patterns)
    denied: tuple[str, ...] = attrs.field(default=(), converter=_patterns)

    @classmethod
    def deny_all(cls) -> EgressPolicy:
        """Nothing is reachable until allowed."""
        return cls(False)

    @classmethod
    def allow_all(cls) -> EgressPolicy:
        """Everything public is reachable until denied."""
        return cls(True)

    def allow_domains(self, domains: Iterable[str]) -> EgressPolicy:
        """A copy that also allows ``domains`` (``example.com``, ``*.example.com``)."""
        return attrs.evolve(self, allowed=(*self.allowed, *_patterns(domains)))

    def deny_domains(self, domains: Iterable[str]) -> EgressPolicy:
        """A copy that also denies ``domains``."""
        return attrs.evolve(self, denied=(*self.denied, *_patterns(domains)))

    def permits(self, host: str) -> bool:
        """Whether ``host`` may be reached."""
        name = normalize_host(host)
        if any(host_matches(p, name) for p in self.denied):
            return False
        if any(host_matches(p, name) for p in self.allowed):
            return True
        return self.default_allow


@final
@attrs.frozen
class EgressDecision:
    """One request the proxy answered: where to, and whether it went through."""

    host: str
    port: int
    allowed: bool
    reason: str = ""


class EgressDenied(Exception):
    """A request the proxy refuses (``status`` and a reason for the body)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def address_refusal_text(address: str) -> str | None:
    """Why the proxy must not connect to ``address`` (an IP literal), or ``None`` when it is public.

    The one classifier WebFetch's SSRF guard uses, so both refuse the same ranges.

    >>> address_refusal_text("100.100.100.200")
    'carrier-grade NAT (shared) address 100.100.100.200'
    >>> address_refusal_text("2002:7f00:1::1")
    '6to4 loopback address 127.0.0.1 (2002:7f00:1::1)'
    >>> address_refusal_text("93.184.216.34") is None
    True
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    return address_refusal(ip)


def _split_host_port(target: str, default_port: int) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit("//" + target)
    if not parsed.hostname:
        raise EgressDenied(400, f"bad target {target!r}")
    try:
        port = parsed.port or default_port
    except ValueError:
        raise EgressDenied(400, f"bad port in {target!r}") from None
    return parsed.hostname, port


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: EgressProxy


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        proxy = self.server.proxy
        client: socket.socket = self.request
        client.settimeout(proxy.idle_timeout)
        try:
            head, rest = _read_head(client)
            request_line, *headers = head.split(b"\r\n")
            method, target, _version = request_line.decode("latin-1").split(" ", 2)
        except (OSError, ValueError):
            _respond(client, 400, "malformed request")
            return
        try:
            if method.upper() == "CONNECT":
                host, port = _split_host_port(target, 443)
                upstream = proxy.open_upstream(host, port)
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                first = rest
            else:
                url = urllib.parse.urlsplit(target)
                if url.scheme != "http" or not url.hostname:
                    raise EgressDenied(400, "only CONNECT and absolute http:// requests are proxied")
                host, port = url.hostname, url.port or 80
                upstream = proxy.open_upstream(host, port)
                path = urllib.parse.urlunsplit(("", "", url.path or "/", url.query, ""))
                kept = [
                    h for h in headers if h and h.split(b":", 1)[0].strip().lower() not in _DROPPED_HEADERS
                ]
                checked = _host_header(normalize_host(host), port)
                first = (
                    b"\r\n".join(
                        [
                            f"{method} {path} HTTP/1.1".encode("latin-1"),
                            checked,
                            *kept,
                            b"Connection: close",
                            b"",
                            b"",
                        ]
                    )
                    + rest
                )
        except EgressDenied as exc:
            _respond(client, exc.status, exc.reason)
            return
        with upstream:
            if first:
                upstream.sendall(first)
            _relay(client, upstream)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ValueError("connection closed before the request head")
        data += chunk
        if len(data) > _MAX_HEAD:
            raise ValueError("request head too large")
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _respond(sock: socket.socket, status: int, reason: str) -> None:
    phrase = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}.get(status, "Error")
    body = f"helikon egress proxy: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        sock.sendall(head.encode() + body)


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()


@final
class EgressProxy:
    """An HTTP proxy on loopback that lets through only what ``policy`` permits.

    Use it as a context manager, or :meth:`start` and :meth:`close` it::

        with EgressProxy(EgressPolicy.deny_all().allow_domains(["pypi.org"])) as proxy:
            backend = OsSandboxBackend(sandbox).allow_network(True, proxy=proxy)

    Args:
        policy: which hosts may be reached.
        hosts: fixed name -> address mappings, used instead of DNS; a mapped
            name may point at a private or loopback address (tests, internal
            mirrors).
        allow_private: let DNS answers on private/loopback networks through.
        host: the address to listen on (keep it on loopback).
        port: the port (``0``: any free one).
        connect_timeout: seconds to reach an upstream.
        idle_timeout: seconds a silent connection stays open.
    """

    def __init__(
        self,
        policy: EgressPolicy,
        *,
        hosts: Mapping[str, str] | None = None,
        allow_private: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        connect_timeout: float = 10.0,
        idle_timeout: float = 300.0,
    ) -> None:
        self.policy = policy
        self.hosts = {normalize_host(k): v for k, v in (hosts or {}).items()}
        self.allow_private = allow_private
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self._bind = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        #: The most recent decisions (newest last), for audit and tests.
        self.decisions: deque[EgressDecision] = deque(maxlen=1000)

    def start(self) -> EgressProxy:
        """Listen and serve in a daemon thread; returns the proxy.

        Raises:
            OSError: the address could not be bound.
        """
        if self._server is not None:
            return self
        server = _Server(self._bind, _Handler)
        server.proxy = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="helikon-egress-proxy", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop listening (connections in flight end on their own). Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def running(self) -> bool:
        """Whether it is serving."""
        return self._server is not None and self._thread is not None and self._thread.is_alive()

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` it listens on."""
        if self._server is None:
            raise RuntimeError("the egress proxy is not running")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """``http://host:port``, for ``HTTP_PROXY``/``HTTPS_PROXY``."""
        host, port = self.address
        return f"http://{host}:{port}"

    def __enter__(self) -> EgressProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.url if self.running else "stopped"
        return f"EgressProxy({where}, {self.policy!r})"

    # -- deciding and connecting ---------------------------------------------------

    def open_upstream(self, host: str, port: int) -> socket.socket:
        """Check ``host`` and connect to it, or raise :class:`EgressDenied`."""
        name = normalize_host(host)
        if not self.policy.permits(name):
            self._note(name, port, False, "not allowed by the egress policy")
            raise EgressDenied(403, f"{name} is not allowed by the egress policy")
        try:
            address = self._resolve(name, port)
        except EgressDenied as exc:
            self._note(name, port, False, exc.reason)
            raise
        try:
            upstream = socket.create_connection((address, port), timeout=self.connect_timeout)
        except OSError as exc:
            self._note(name, port, False, f"cannot connect: {exc.strerror or exc}")
            raise EgressDenied(502, f"cannot connect to {name}:{port}: {exc.strerror or exc}") from None
        upstream.settimeout(self.idle_timeout)
        self._note(name, port, True)
        return upstream

    def _resolve(self, name: str, port: int) -> str:
        if name in self.hosts:
            return self.hosts[name]
        try:
            infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise EgressDenied(502, f"cannot resolve {name}: {exc.strerror or exc}") from None
        addresses = [str(info[4][0]) for info in infos]
        if not addresses:
            raise EgressDenied(502, f"cannot resolve {name}: no addresses")
        if not self.allow_private:
            for address in addresses:
                reason = address_refusal_text(address)
                if reason is not None:
                    raise EgressDenied(403, f"{name} resolves to a non-public address ({reason})")
        return addresses[0]

    def _note(self, host: str, port: int, allowed: bool, reason: str = "") -> None:
        self.decisions.append(EgressDecision(host, port, allowed, reason))


__all__ = [
    "EgressDecision",
    "EgressPolicy",
    "EgressProxy",
    "address_refusal_text",
    "host_matches",
    "normalize_host",
]
