"""Search backends for :class:`~helikon.tools.WebSearchTool`: Brave Search and Tavily.

Both speak their service's documented HTTP API through httpx:

- Brave: ``GET https://api.search.brave.com/res/v1/web/search?q=...&count=...``
  with the key in ``X-Subscription-Token``; hits are ``web.results[]``
  (``title``, ``url``, ``description``). Errors are
  ``{"type": "ErrorResponse", "error": {"code", "detail", "status", ...}}``,
  a bad key is HTTP 422 ``SUBSCRIPTION_TOKEN_INVALID``, throttling HTTP 429
  ``RATE_LIMITED`` (per second) or ``QUOTA_LIMITED`` (per month), with
  ``X-RateLimit-Remaining``/``X-RateLimit-Reset`` headers per window.
- Tavily: ``POST https://api.tavily.com/search`` with a JSON body
  (``query``, ``max_results``, ``include_domains``, ``exclude_domains``, ...)
  and ``Authorization: Bearer <key>``; hits are ``results[]`` (``title``,
  ``url``, ``content``, ``score``). Errors are ``{"detail": {"error": "..."}}``:
  401 a bad key, 429 throttling, 432/433 plan limits.

The key comes from the constructor or the environment (``BRAVE_API_KEY``,
``TAVILY_API_KEY``); without one the constructor raises ``ConfigError``
naming the variable. The key never appears in a repr or an error message.
Pass ``http_client=`` to reuse a client (or to test through
``httpx.MockTransport``); otherwise each search opens its own.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, final

import httpx
import msgspec

from helikon.errors import ConfigError, ToolError
from helikon.tools._web_search import MAX_COUNT, SearchResult

_TAG: Final = re.compile(r"<[^>]+>")


def _key(given: str | None, variable: str, owner: str) -> str:
    key = given if given is not None else os.environ.get(variable, "")
    if not key.strip():
        raise ConfigError(f"{owner}: no API key: pass api_key= or set the {variable} environment variable")
    return key.strip()


def _plain(text: object) -> str:
    """Snippet text without the engine's highlighting markup.

    >>> _plain("<strong>Rates</strong> eased &amp; steadied")
    'Rates eased & steadied'
    """
    return html.unescape(_TAG.sub("", text)).strip() if isinstance(text, str) else ""


def _json(body: bytes) -> Any:
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None


async def _send(
    client: httpx.AsyncClient | None, request: httpx.Request, timeout: float, service: str
) -> httpx.Response:
    """Send ``request`` (on ``client`` or a short-lived one) and read the whole answer."""
    try:
        if client is not None:
            return await _read(client, request)
        async with httpx.AsyncClient(timeout=timeout, trust_env=True) as own:
            return await _read(own, request)
    except httpx.TimeoutException:
        raise ToolError(f"{service} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"{service} request failed: {type(exc).__name__}: {exc}") from None


async def _read(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    response = await client.send(request)
    await response.aread()
    return response


async def _answer(
    client: httpx.AsyncClient | None,
    request: httpx.Request,
    timeout: float,
    service: str,
    error: Callable[[httpx.Response, Any], ToolError],
) -> dict[str, Any]:
    """The JSON object ``service`` answers ``request`` with.

    Raises:
        ToolError: the request failed, the service answered with an HTTP
            error (``error`` words it from the response and its decoded
            body), or the answer is not a JSON object.
    """
    response = await _send(client, request, timeout, service)
    data = _json(response.content)
    if response.status_code >= 400:
        raise error(response, data)
    if not isinstance(data, dict):
        raise ToolError(f"{service} answered with something that is not a JSON object")
    return data


def _results(hits: object, snippet: str) -> list[SearchResult]:
    """The hits that have a URL, in order, as results; ``snippet`` is the
    key of a hit's excerpt."""
    return [
        SearchResult(_plain(hit.get("title")), hit["url"], _plain(hit.get(snippet)))
        for hit in (hits if isinstance(hits, list) else ())
        if isinstance(hit, dict) and isinstance(hit.get("url"), str)
    ]


def _retry_hint(headers: Mapping[str, str]) -> str:
    """`` (retry after N s)`` from ``Retry-After`` or Brave's per-window rate-limit headers.

    >>> _retry_hint({"x-ratelimit-remaining": "0, 1999", "x-ratelimit-reset": "1, 1419704"})
    ' (retry after 1 s)'
    >>> _retry_hint({"x-ratelimit-remaining": "5, 0", "x-ratelimit-reset": "1, 86400"})
    ' (retry after 86400 s)'
    >>> _retry_hint({"retry-after": "30"})
    ' (retry after 30 s)'
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    remaining = [p.strip() for p in lowered.get("x-ratelimit-remaining", "").split(",")]
    reset = [p.strip() for p in lowered.get("x-ratelimit-reset", "").split(",")]
    for left, wait in zip(remaining, reset, strict=False):
        if left == "0" and wait.isdigit():
            return f" (retry after {wait} s)"
    retry_after = lowered.get("retry-after", "").strip()
    return f" (retry after {retry_after} s)" if retry_after.isdigit() else ""


@final
class BraveBackend:
    """Web search through the Brave Search API.

    Args:
        api_key: The subscription token; ``BRAVE_API_KEY`` by default.
        http_client: An ``httpx.AsyncClient`` to send with (a new one per search by default).
        base_url: The API root (``https://api.search.brave.com/res/v1``).
        country: Brave's ``country`` parameter (e.g. ``"US"``, ``"ALL"``).
        search_lang: Brave's ``search_lang`` parameter (e.g. ``"en"``).
        safesearch: ``"off"``, ``"moderate"`` (Brave's default) or ``"strict"``.
        timeout: Seconds a search may take, when the backend makes its own client.

    Raises:
        ConfigError: no API key was given and ``BRAVE_API_KEY`` is not set.
    """

    #: The environment variable the key is read from.
    ENV_VAR: Final = "BRAVE_API_KEY"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        base_url: str = "https://api.search.brave.com/res/v1",
        country: str | None = None,
        search_lang: str | None = None,
        safesearch: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._key = _key(api_key, self.ENV_VAR, "BraveBackend")
        self._client = http_client
        self._url = base_url.rstrip("/") + "/web/search"
        options = (("country", country), ("search_lang", search_lang), ("safesearch", safesearch))
        self._extra = {key: value for key, value in options if value}
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"BraveBackend(base_url={self._url.removesuffix('/web/search')!r})"

    async def search(
        self,
        query: str,
        *,
        count: int,
        allowed_domains: tuple[str, ...] = (),
        blocked_domains: tuple[str, ...] = (),
    ) -> Sequence[SearchResult]:
        """Search; Brave has no domain parameters, so filters become ``site:`` operators.

        Raises:
            ToolError: the request failed or Brave answered with an error.
        """
        terms = [query]
        if len(allowed_domains) == 1:  # several site: terms would all have to match; the tool filters instead
            terms.append(f"site:{allowed_domains[0]}")
        terms.extend(f"-site:{domain}" for domain in blocked_domains)
        asked = MAX_COUNT if len(allowed_domains) > 1 else count
        params = {"q": " ".join(terms), "count": str(max(1, min(asked, MAX_COUNT))), "result_filter": "web"}
        params.update(self._extra)
        headers = {"Accept": "application/json", "X-Subscription-Token": self._key}
        request = httpx.Request("GET", self._url, params=params, headers=headers)
        data = await _answer(self._client, request, self._timeout, "Brave Search", _brave_error)
        web = data.get("web")
        hits = web.get("results") if isinstance(web, dict) else None
        return _results(hits, "description")[:asked]


def _brave_error(response: httpx.Response, data: Any) -> ToolError:
    status = response.status_code
    error: Any = data.get("error") if isinstance(data, dict) else None
    if error is None and isinstance(data, dict) and isinstance(data.get("errors"), list) and data["errors"]:
        error = data["errors"][0]
    code = error.get("code") if isinstance(error, dict) else None
    detail = error.get("detail") if isinstance(error, dict) else None
    message = ": ".join(str(p) for p in (code, detail) if p) or response.reason_phrase or "error"
    if code in ("SUBSCRIPTION_TOKEN_INVALID", "SUBSCRIPTION_TOKEN_MISSING") or status in (401, 403):
        return ToolError(f"Brave Search rejected the API key (check BRAVE_API_KEY): HTTP {status}: {message}")
    if status == 429:
        hint = _retry_hint(response.headers)
        return ToolError(f"Brave Search rate limit reached: HTTP 429: {message}{hint}")
    return ToolError(f"Brave Search failed: HTTP {status}: {message}")


@final
class TavilyBackend:
    """Web search through the Tavily Search API.

    Args:
        api_key: The API key (``tvly-...``); ``TAVILY_API_KEY`` by default.
        http_client: An ``httpx.AsyncClient`` to send with (a new one per search by default).
        base_url: The API root (``https://api.tavily.com``).
        search_depth: ``"basic"`` (1 credit, the default) or ``"advanced"`` (2 credits).
        topic: ``"general"`` (the default), ``"news"`` or ``"finance"``.
        timeout: Seconds a search may take, when the backend makes its own client.

    Raises:
        ConfigError: no API key was given and ``TAVILY_API_KEY`` is not set.
    """

    #: The environment variable the key is read from.
    ENV_VAR: Final = "TAVILY_API_KEY"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        base_url: str = "https://api.tavily.com",
        search_depth: str = "basic",
        topic: str = "general",
        timeout: float = 30.0,
    ) -> None:
        self._key = _key(api_key, self.ENV_VAR, "TavilyBackend")
        self._client = http_client
        self._url = base_url.rstrip("/") + "/search"
        self._depth = search_depth
        self._topic = topic
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"TavilyBackend(base_url={self._url.removesuffix('/search')!r})"

    async def search(
        self,
        query: str,
        *,
        count: int,
        allowed_domains: tuple[str, ...] = (),
        blocked_domains: tuple[str, ...] = (),
    ) -> Sequence[SearchResult]:
        """Search; domain filters go in ``include_domains`` and ``exclude_domains``.

        Raises:
            ToolError: the request failed or Tavily answered with an error.
        """
        body: dict[str, Any] = {
            "query": query,
            "max_results": max(1, min(count, MAX_COUNT)),
            "search_depth": self._depth,
            "topic": self._topic,
            "include_answer": False,
            "include_raw_content": False,
            "include_images": False,
        }
        if allowed_domains:
            body["include_domains"] = list(allowed_domains)
        if blocked_domains:
            body["exclude_domains"] = list(blocked_domains)
        headers = {"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"}
        request = httpx.Request("POST", self._url, content=msgspec.json.encode(body), headers=headers)
        data = await _answer(self._client, request, self._timeout, "Tavily", _tavily_error)
        return _results(data.get("results"), "content")[:count]


def _tavily_error(response: httpx.Response, data: Any) -> ToolError:
    status = response.status_code
    detail: Any = data.get("detail") if isinstance(data, dict) else None
    message = detail.get("error") if isinstance(detail, dict) else detail
    text = str(message) if message else (response.reason_phrase or "error")
    if status in (401, 403):
        return ToolError(f"Tavily rejected the API key (check TAVILY_API_KEY): HTTP {status}: {text}")
    if status == 429:
        hint = _retry_hint(response.headers)
        return ToolError(f"Tavily rate limit reached: HTTP 429: {text}{hint}")
    if status in (432, 433):
        return ToolError(f"Tavily usage limit reached: HTTP {status}: {text}")
    return ToolError(f"Tavily search failed: HTTP {status}: {text}")


__all__ = ["BraveBackend", "TavilyBackend"]
