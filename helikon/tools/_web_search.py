"""WebSearch: a web search tool over a swappable :class:`SearchBackend`.

The tool owns what every backend shares: the argument schema, the result
count, domain filters (the deployment's, given to the constructor, and the
model's, given per call), a time limit, and turning failures into tool
results. A backend only sends one query and parses the answer;
:class:`~helikon.tools.BraveBackend` and :class:`~helikon.tools.TavilyBackend`
ship, and any object with the right ``search`` method is a backend.

Domain filters are passed to the backend (which may apply them in the
search itself) *and* applied again to what comes back, so a backend that
ignores them cannot leak a blocked domain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol, final, runtime_checkable

import anyio
import attrs
import httpx

from helikon._json import JsonObject, JsonValue
from helikon.context import ToolContext
from helikon.errors import ConfigError, ToolError
from helikon.model import ToolEffect

#: The most results a backend is asked for at once (Brave's and Tavily's limit).
MAX_COUNT: Final = 20


@attrs.frozen
class SearchResult:
    """One search hit."""

    #: The page title.
    title: str
    #: The page's URL.
    url: str
    #: A short excerpt of the page, as the search engine gives it.
    snippet: str


@runtime_checkable
class SearchBackend(Protocol):
    """A web search engine behind :class:`WebSearchTool`.

    ``search`` returns at most ``count`` results, best first. It should
    restrict the search to ``allowed_domains`` (when not empty) and leave out
    ``blocked_domains`` if the engine can (the tool filters again either
    way), and raise :class:`~helikon.errors.ToolError` with a short message
    the model can read when the search fails.
    """

    async def search(
        self,
        query: str,
        *,
        count: int,
        allowed_domains: tuple[str, ...] = (),
        blocked_domains: tuple[str, ...] = (),
    ) -> Sequence[SearchResult]: ...


def _domains(entries: Iterable[str] | str) -> tuple[str, ...]:
    if isinstance(entries, str):
        entries = (entries,)
    out: list[str] = []
    for entry in entries:
        domain = normalized_domain(entry)
        if not domain:
            raise ConfigError(f"invalid domain {entry!r}: give a domain like 'example.com'")
        out.append(domain)
    return tuple(out)


def normalized_domain(entry: str) -> str:
    """A domain filter entry as it is matched: lower case, no scheme, path, ``*.`` or dots at the ends.

    >>> normalized_domain("https://WWW.Example.com/news/")
    'www.example.com'
    >>> normalized_domain("*.example.org.")
    'example.org'
    """
    text = entry.strip().lower()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    text = text.removeprefix("*.").strip(".")
    return "" if any(c in text for c in " :*") else text


def in_domains(url: str, domains: Sequence[str]) -> bool:
    """Whether ``url``'s host is one of ``domains`` or a subdomain of one.

    >>> in_domains("https://news.example.com/a", ["example.com"])
    True
    >>> in_domains("https://notexample.com/", ["example.com"])
    False
    """
    try:
        host = httpx.URL(url).host.lower().rstrip(".")
    except (httpx.InvalidURL, TypeError):
        return False
    return any(host == d or host.endswith("." + d) for d in domains)


@final
@attrs.frozen
class WebSearchTool:
    """The ``WebSearch`` tool: search the web, return titles, URLs and snippets.

    >>> class Canned:
    ...     async def search(self, query, *, count, allowed_domains=(), blocked_domains=()):
    ...         return [SearchResult("Rates", "https://example.com/rates", "Rates eased.")]
    >>> search = WebSearchTool(Canned())
    >>> search.name, search.effect, search.parameters["required"]
    ('WebSearch', <ToolEffect.SIDE_EFFECT: 'side_effect'>, ['query'])
    >>> WebSearchTool(Canned(), read_only=True).effect
    <ToolEffect.READ_ONLY: 'read_only'>

    The tool is ``SIDE_EFFECT`` (as the book marks it): a query is text the
    model sends to a third party, so it can carry a secret out, and
    ``PermissionMode.PLAN`` must not let it through unasked. For a backend
    that sends nothing outside your trust boundary (an in-house index, a
    canned corpus), pass ``read_only=True``.

    Args:
        backend: The search engine (:class:`~helikon.tools.BraveBackend`,
            :class:`~helikon.tools.TavilyBackend` or your own).
        max_results: The most results one call may ask for (1-20).
        default_count: Results returned when the model does not say.
        allowed_domains: Only results from these domains (and subdomains)
            are ever returned, whatever the model asks.
        blocked_domains: Results from these domains are never returned.
        timeout: Seconds one search may take.
        read_only: Declare the backend read-only: the tool's effect becomes
            ``READ_ONLY`` (PLAN mode runs it). Only for a backend whose
            queries never leave your trust boundary.

    Raises:
        ConfigError: a count out of range, an invalid domain, a non-positive timeout.
    """

    backend: SearchBackend = attrs.field(eq=False)
    max_results: int = attrs.field(default=10, kw_only=True)
    default_count: int = attrs.field(default=5, kw_only=True)
    allowed_domains: tuple[str, ...] = attrs.field(default=(), converter=_domains, kw_only=True)
    blocked_domains: tuple[str, ...] = attrs.field(default=(), converter=_domains, kw_only=True)
    timeout: float = attrs.field(default=30.0, kw_only=True)
    read_only: bool = attrs.field(default=False, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.max_results <= MAX_COUNT:
            raise ConfigError(f"WebSearchTool: max_results must be 1-{MAX_COUNT}, got {self.max_results}")
        if not 1 <= self.default_count <= self.max_results:
            raise ConfigError(
                f"WebSearchTool: default_count must be 1-{self.max_results}, got {self.default_count}"
            )
        if self.timeout <= 0:
            raise ConfigError(f"WebSearchTool: timeout must be positive, got {self.timeout}")

    @property
    def name(self) -> str:
        return "WebSearch"

    @property
    def description(self) -> str:
        text = "Search the web. Returns the best matching pages, each with its title, URL and a snippet."
        if self.allowed_domains:
            text += " Only results from these domains are returned: " + ", ".join(self.allowed_domains) + "."
        return text

    @property
    def parameters(self) -> JsonObject:
        domains: JsonObject = {"type": "array", "items": {"type": "string"}}
        return {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What to search for."},
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": self.max_results,
                    "default": self.default_count,
                    "description": "How many results to return.",
                },
                "allowed_domains": {
                    **domains,
                    "description": "Only return results from these domains (and their subdomains).",
                },
                "blocked_domains": {**domains, "description": "Never return results from these domains."},
            },
            "required": ["query"],
            "additionalProperties": False,
        }

    @property
    def output_schema(self) -> JsonObject | None:
        text: JsonObject = {"type": "string"}
        result: JsonObject = {
            "type": "object",
            "properties": {"title": text, "url": text, "snippet": text},
            "required": ["title", "url", "snippet"],
        }
        return {
            "type": "object",
            "properties": {"query": {"type": "string"}, "results": {"type": "array", "items": result}},
            "required": ["query", "results"],
        }

    @property
    def effect(self) -> ToolEffect:
        return ToolEffect.READ_ONLY if self.read_only else ToolEffect.SIDE_EFFECT

    async def invoke(self, ctx: ToolContext[Any], args: JsonObject) -> JsonValue:
        """Run the search; every failure is a :class:`~helikon.errors.ToolError`.

        Returns:
            ``{"query": ..., "results": [{"title", "url", "snippet"}, ...]}``.
        """
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("the query argument must be a non-empty string")
        count = args.get("count")
        count = self.default_count if count is None else count
        if not isinstance(count, int) or isinstance(count, bool):
            raise ToolError("the count argument must be an integer")
        count = max(1, min(count, self.max_results))
        asked_allowed = _model_domains(args.get("allowed_domains"), "allowed_domains")
        asked_blocked = _model_domains(args.get("blocked_domains"), "blocked_domains")
        blocked = tuple(dict.fromkeys(self.blocked_domains + asked_blocked))
        allowed = asked_allowed or self.allowed_domains
        try:
            with anyio.fail_after(self.timeout):
                found = await self.backend.search(
                    query.strip(), count=count, allowed_domains=allowed, blocked_domains=blocked
                )
        except ToolError:
            raise
        except TimeoutError:
            raise ToolError(f"the web search timed out after {self.timeout:g} s") from None
        except Exception as exc:  # the model sees a short message; nothing escapes the tool
            raise ToolError(f"the web search failed: {type(exc).__name__}: {exc}") from None
        results: list[JsonValue] = []
        for hit in found:
            if self.allowed_domains and not in_domains(hit.url, self.allowed_domains):
                continue
            if asked_allowed and not in_domains(hit.url, asked_allowed):
                continue
            if blocked and in_domains(hit.url, blocked):
                continue
            results.append({"title": hit.title, "url": hit.url, "snippet": hit.snippet})
            if len(results) == count:
                break
        return {"query": query.strip(), "results": results}


def _model_domains(value: object, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolError(f"the {name} argument must be a list of domains")
    try:
        return _domains(value)
    except ConfigError as exc:
        raise ToolError(f"{name}: {exc}") from None


__all__ = ["MAX_COUNT", "SearchBackend", "SearchResult", "WebSearchTool", "in_domains", "normalized_domain"]
