"""WebFetch: fetch an http(s) URL and give the model its main content as Markdown.

Every failure reaches the model as a tool result, never as an exception out
of the run: refusals by the guard or the host lists are ``Denied``
(``"denied: ..."``); timeouts, HTTP errors, oversized bodies and unreadable
content are short ordinary failures. What is checked, per hop (the request
and every redirect, followed here one at a time up to ``max_redirects``):

1. the scheme is ``http`` or ``https``;
2. the host is not on ``deny_hosts`` and, when ``allow_hosts`` is given, is on it;
3. unless ``allow_private_addresses``, the SSRF guard: the host is not a
   local name, and neither it nor any address it resolves to is loopback,
   private, link-local, CGNAT, multicast, reserved or an IPv6 form of one
   (see ``_web_guard``);
4. the same guard again at connect time, on the addresses the socket
   actually connects to (see ``_web_net``), so DNS rebinding cannot slip
   through between the check and the connection.

The whole fetch (all hops and the extraction) runs under ``timeout``; the
decoded body may be at most ``max_bytes`` long (see ``_web_body``).
"""

from __future__ import annotations

import ssl
from typing import Any, Final, final

import anyio
import anyio.to_thread
import attrs
import httpcore
import httpx

from helikon._json import JsonObject, JsonValue
from helikon._version import __version__
from helikon.context import ToolContext
from helikon.errors import ConfigError, ToolError
from helikon.model import ToolEffect
from helikon.tools._web_body import ACCEPT_ENCODING, read_capped
from helikon.tools._web_extract import Page, render, truncated
from helikon.tools._web_guard import HostRule, host_rule, host_rules, normalized_host
from helikon.tools._web_net import (
    GuardedBackend,
    GuardedTransport,
    Resolver,
    checked_addresses,
    system_resolver,
)

_PARAMETERS: Final[JsonObject] = {
    "type": "object",
    "properties": {
        "url": {
            "type": "string",
            "description": "The http:// or https:// URL to fetch.",
        }
    },
    "required": ["url"],
    "additionalProperties": False,
}
_ACCEPT: Final = (
    "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,text/*;q=0.8,*/*;q=0.1"
)


def _host_list(entries: Any) -> tuple[str, ...]:
    rules = host_rules(entries) or ()
    return tuple(("*." if rule.subdomains_only else "") + rule.name for rule in rules)


def _allow_list(entries: Any) -> tuple[str, ...] | None:
    if entries is None:
        return None
    hosts = _host_list(entries)
    if not hosts:
        raise ConfigError("WebFetchTool: allow_hosts is empty, nothing could be fetched (None: any host)")
    return hosts


def _positive(_: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and value <= 0:
        raise ConfigError(f"WebFetchTool: {attribute.name} must be positive, got {value!r}")


def _rules(hosts: tuple[str, ...] | None) -> tuple[HostRule, ...] | None:
    return None if hosts is None else tuple(host_rule(h) for h in hosts)


@final
@attrs.frozen(kw_only=True)
class WebFetchTool:
    """The ``WebFetch`` tool: fetch a URL, return its main content as Markdown.

    >>> fetch = WebFetchTool(allow_hosts=["docs.python.org"], max_bytes=1_000_000, timeout=10)
    >>> fetch.name, fetch.effect, list(fetch.parameters["properties"])
    ('WebFetch', <ToolEffect.SIDE_EFFECT: 'side_effect'>, ['url'])

    Args:
        allow_hosts: Only these hosts (and their subdomains; ``*.example.com``
            for subdomains only) may be fetched. ``None``: any host.
        deny_hosts: These hosts (and their subdomains) are never fetched;
            the deny list wins over the allow list.
        allow_private_addresses: Turn the SSRF guard off, so loopback and
            private addresses can be fetched: for tests against a local
            server and for intranet deployments. Off by default.
        max_bytes: The largest (decoded) body read; larger ones fail.
        timeout: Seconds the whole fetch may take, redirects and extraction included.
        max_redirects: Redirects followed (each one checked) before giving up.
        max_chars: The output is cut to this many characters (``None``: never).
        user_agent: The ``User-Agent`` header.
        resolver: Turns a host name into IP addresses (``getaddrinfo`` by
            default): an async ``(host, port) -> addresses`` function.
        network_backend: The ``httpcore`` backend that opens the (already
            checked) TCP connections; ``AnyIOBackend`` by default.
        ssl_context: How HTTPS certificates are verified (a private CA, say);
            httpx's default context (certifi's roots) by default.

    Raises:
        ConfigError: an empty allow list, an invalid host entry, or a
            non-positive limit.
    """

    allow_hosts: tuple[str, ...] | None = attrs.field(default=None, converter=_allow_list)
    deny_hosts: tuple[str, ...] = attrs.field(default=(), converter=_host_list)
    allow_private_addresses: bool = False
    max_bytes: int = attrs.field(default=5 * 1024 * 1024, validator=_positive)
    timeout: float = attrs.field(default=30.0, validator=_positive)
    max_redirects: int = attrs.field(default=5)
    max_chars: int | None = attrs.field(default=100_000, validator=_positive)
    user_agent: str = f"helikon-webfetch/{__version__}"
    resolver: Resolver | None = attrs.field(default=None, eq=False, repr=False)
    network_backend: httpcore.AsyncNetworkBackend | None = attrs.field(default=None, eq=False, repr=False)
    ssl_context: ssl.SSLContext | None = attrs.field(default=None, eq=False, repr=False)
    _allow: tuple[HostRule, ...] | None = attrs.field(init=False, eq=False, repr=False)
    _deny: tuple[HostRule, ...] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_allow", _rules(self.allow_hosts))
        object.__setattr__(self, "_deny", _rules(self.deny_hosts) or ())

    @max_redirects.validator
    def _check_redirects(self, _: attrs.Attribute[int], value: int) -> None:
        if value < 0:
            raise ConfigError(f"WebFetchTool: max_redirects must be 0 or more, got {value!r}")

    @property
    def name(self) -> str:
        return "WebFetch"

    @property
    def description(self) -> str:
        text = (
            "Fetch a web page by its http(s) URL and return its main content as Markdown "
            "(HTML pages are reduced to the article; plain text and JSON come back as they are)."
        )
        if not self.allow_private_addresses:
            text += " Loopback, private and link-local addresses are refused."
        if self.allow_hosts is not None:
            text += " Only these hosts can be fetched: " + ", ".join(self.allow_hosts) + "."
        return text

    @property
    def parameters(self) -> JsonObject:
        return _PARAMETERS

    @property
    def output_schema(self) -> JsonObject | None:
        return {"type": "string"}

    @property
    def effect(self) -> ToolEffect:
        return ToolEffect.SIDE_EFFECT

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        """Fetch ``args["url"]``; every failure is a :class:`~helikon.errors.ToolError`.

        Raises:
            ToolError: ``Denied`` for the guard and the host lists, an
                ordinary failure for anything else that went wrong.
        """
        url = args.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ToolError("the url argument must be a non-empty string")
        url = url.strip()
        try:
            with anyio.fail_after(self.timeout):
                page = await self.fetch(url)
                text = await anyio.to_thread.run_sync(render, page, abandon_on_cancel=True)
        except ToolError:
            raise
        except (TimeoutError, httpx.TimeoutException):
            raise ToolError(f"timed out after {self.timeout:g} s fetching {url}") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
        except Exception as exc:  # the model sees a short message; nothing escapes the tool
            raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
        return truncated(text, self.max_chars)

    async def fetch(self, url: str) -> Page:
        """Fetch ``url`` (following checked redirects) and return the body, unrendered.

        Raises:
            ToolError: as :meth:`invoke`; transport errors propagate as httpx
                exceptions (``invoke`` turns them into short messages).
        """
        current = _parse(url)
        resolver = self.resolver if self.resolver is not None else system_resolver
        backend = GuardedBackend(resolver, self.network_backend, check=not self.allow_private_addresses)
        headers = {"User-Agent": self.user_agent, "Accept": _ACCEPT, "Accept-Encoding": ACCEPT_ENCODING}
        async with httpx.AsyncClient(
            transport=GuardedTransport(backend, self.ssl_context),
            trust_env=False,
            follow_redirects=False,
            timeout=httpx.Timeout(self.timeout),
            headers=headers,
        ) as client:
            for _hop in range(self.max_redirects + 1):
                await self._check(current, resolver)
                response = await client.send(client.build_request("GET", current), stream=True)
                try:
                    if response.is_redirect:
                        current = _parse(response.headers["location"], base=current)
                        continue
                    if response.status_code >= 400:
                        status = f"{response.status_code} {response.reason_phrase}"
                        raise ToolError(f"HTTP {status} from {current}")
                    body = await read_capped(response, self.max_bytes)
                finally:
                    await response.aclose()
                content_type = response.headers.get("content-type", "")
                return Page(str(current), content_type, response.charset_encoding, body)
        raise ToolError(f"too many redirects (more than {self.max_redirects}) fetching {url}")

    async def _check(self, url: httpx.URL, resolver: Resolver) -> None:
        """Refuse ``url`` unless its scheme, host lists and (with the guard on) addresses pass."""
        if url.scheme not in ("http", "https"):
            shown = f"{url.scheme}:" if url.scheme else "a URL without a scheme"
            raise ToolError.denied(f"only http:// and https:// URLs can be fetched, not {shown}")
        host = url.raw_host.decode("ascii")
        if not host:
            raise ToolError(f"the URL {url} has no host")
        name = normalized_host(host)
        if any(rule.matches(name) for rule in self._deny):
            raise ToolError.denied(f"host {name} is on the deny list")
        if self._allow is not None and not any(rule.matches(name) for rule in self._allow):
            raise ToolError.denied(f"host {name} is not on the allow list")
        if not self.allow_private_addresses:
            await checked_addresses(host, url.port or (443 if url.scheme == "https" else 80), resolver)


def _parse(text: str, base: httpx.URL | None = None) -> httpx.URL:
    try:
        return base.join(text) if base is not None else httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ToolError(f"invalid URL {text!r}: {exc}") from None


__all__ = ["WebFetchTool"]
