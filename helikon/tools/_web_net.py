"""The network under WebFetch: name resolution, the connect-time SSRF check,
and an httpx transport that cannot be talked into connecting elsewhere.

Checking a URL's host before sending a request is not enough: the name is
resolved again when the socket connects, and a hostile DNS server can answer
a public address the first time and ``127.0.0.1`` the second (DNS
rebinding). So the check lives where the connection is made.
:class:`GuardedBackend` is an ``httpcore`` network backend: asked to connect
to ``host:port``, it resolves ``host`` itself (through the injectable
:data:`Resolver`), refuses when *any* address in the answer is refused by
:func:`~helikon.tools._web_guard.address_refusal`, and then connects to the
checked IP address, never to the name. TLS still verifies the certificate
against, and sends SNI for, the URL's host name: ``httpcore`` passes the
origin's host to ``start_tls`` whatever address the stream was opened to.

:class:`GuardedTransport` is the ``httpx`` transport over a connection pool
built on that backend. It never uses a proxy (an environment proxy would
make the proxy's address the one checked) and never follows redirects
(the fetch tool follows them itself, checking every hop).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, Final, TypeAlias

import anyio
import httpcore
import httpx

from helikon.errors import ToolError
from helikon.tools._web_guard import address_refusal, host_refusal, literal_address

#: Resolves ``(host, port)`` to IP address strings, like ``getaddrinfo``.
#: Inject one to test rebinding, or to use your own DNS.
Resolver: TypeAlias = Callable[[str, int], Awaitable[Sequence[str]]]


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The addresses ``getaddrinfo`` gives for ``host`` (in its order, without duplicates)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, None] = {}
    for info in infos:
        seen.setdefault(str(info[4][0]), None)
    return tuple(seen)


async def checked_addresses(host: str, port: int, resolver: Resolver) -> tuple[str, ...]:
    """``host``'s addresses, each one allowed by the SSRF guard.

    Raises:
        ToolError: ``Denied`` when the name or any of its addresses is refused;
            an ordinary failure when the name does not resolve.
    """
    literal = literal_address(host)
    if literal is not None:
        refusal = address_refusal(literal)
        if refusal is not None:
            raise ToolError.denied(f"refusing to connect to {refusal}")
        return (str(literal),)
    reason = host_refusal(host)
    if reason is not None:
        raise ToolError.denied(f"refusing to fetch {host}: {reason}")
    try:
        answers = tuple(await resolver(host, port))
    except OSError as exc:
        raise ToolError(f"cannot resolve host {host}: {exc.strerror or exc}") from None
    if not answers:
        raise ToolError(f"cannot resolve host {host}: no addresses")
    for answer in answers:
        address = literal_address(answer)
        if address is None:
            raise ToolError.denied(f"{host} resolved to {answer!r}, which is not an IP address")
        refusal = address_refusal(address)
        if refusal is not None:
            raise ToolError.denied(f"{host} resolves to {refusal}")
    return answers


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An ``httpcore`` backend that connects only to checked IP addresses.

    Args:
        resolver: How host names become addresses.
        inner: The backend that opens the checked connections (``AnyIOBackend``
            by default, which works under asyncio and trio).
        check: False turns the checks off (``allow_private_addresses=True``);
            names are still resolved through ``resolver``.
    """

    def __init__(self, resolver: Resolver, inner: httpcore.AsyncNetworkBackend | None, check: bool) -> None:
        self._resolver = resolver
        self._inner = inner if inner is not None else httpcore.AnyIOBackend()
        self._check = check

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if self._check:
            addresses = await checked_addresses(host, port, self._resolver)
        else:
            literal = literal_address(host)
            addresses = (str(literal),) if literal is not None else tuple(await self._resolver(host, port))
        failure: Exception = httpcore.ConnectError(f"no addresses for {host}")
        for address in addresses:  # in the resolver's order, like getaddrinfo callers do
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (OSError, httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise ToolError.denied("unix sockets cannot be fetched")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


#: httpcore's exceptions and the httpx exceptions they become (most specific first).
_MAPPED: Final[tuple[tuple[type[Exception], type[httpx.TransportError]], ...]] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.NetworkError, httpx.NetworkError),
)


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    """Re-raise httpcore's exceptions as httpx's (what httpx's own transport does)."""
    try:
        yield
    except Exception as exc:
        for source, target in _MAPPED:
            if isinstance(exc, source):
                raise target(str(exc) or type(exc).__name__) from exc
        raise


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        closer = getattr(self._stream, "aclose", None)
        if closer is not None:
            with _httpx_errors():
                await closer()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport over a :class:`GuardedBackend` connection pool (HTTP/1.1, no proxy)."""

    def __init__(self, backend: GuardedBackend, ssl_context: ssl.SSLContext | None = None) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context if ssl_context is not None else httpx.create_ssl_context(),
            max_connections=4,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.AsyncByteStream):  # pragma: no cover - httpx always sets it
            raise TypeError("GuardedTransport needs an async request body")
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions={k: v for k, v in request.extensions.items() if k == "timeout"},
        )
        with _httpx_errors():
            response = await self._pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


__all__ = ["GuardedBackend", "GuardedTransport", "Resolver", "checked_addresses", "system_resolver"]
