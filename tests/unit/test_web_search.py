"""WebSearch and its Brave and Tavily backends.

The backends are tested through ``httpx.MockTransport`` against response
bodies shaped like the services' documented APIs (Brave's
``WebSearchApiResponse`` and ``ErrorResponse``, Tavily's ``/search`` answer
and ``{"detail": {"error": ...}}`` errors), checking the requests they send
too. The tool is tested with small in-memory backends, alone and in a run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import httpx
import pytest

from helikon import LlmAgent, RunContext, ToolOutputItem, collect
from helikon.cancel import CancellationToken
from helikon.context import Actions, SessionState, ToolContext, TracerHandle
from helikon.errors import ConfigError, ToolError
from helikon.ids import CallId, RunId
from helikon.model import ToolEffect
from helikon.protocols import Tool
from helikon.testing import MockModel, call_tools, say
from helikon.tools import BraveBackend, SearchBackend, SearchResult, TavilyBackend, WebSearchTool

CTX: ToolContext[None] = ToolContext(
    None, SessionState(), Actions(), CancellationToken(), TracerHandle(), CallId("c1"), RunId("r1"), "tester"
)
BRAVE_KEY = "BSA-test-subscription-token"
TAVILY_KEY = "tvly-test-key-123"

#: A Brave web search answer, trimmed but with the documented structure and field names.
BRAVE_OK: dict[str, Any] = {
    "type": "search",
    "query": {
        "original": "mortgage rates",
        "show_strict_warning": False,
        "is_navigational": False,
        "local_decision": "drop",
        "local_locations_idx": 0,
        "is_news_breaking": False,
        "spellcheck_off": True,
        "country": "us",
        "bad_results": False,
        "should_fallback": False,
        "postal_code": "",
        "city": "",
        "header_country": "",
        "more_results_available": True,
        "state": "",
    },
    "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}], "top": [], "side": []},
    "web": {
        "type": "search",
        "results": [
            {
                "title": "Mortgage Rates Today | <strong>Rates</strong> Ease",
                "url": "https://www.ledger.example/rates/today",
                "is_source_local": False,
                "is_source_both": False,
                "description": (
                    "Mortgage <strong>rates</strong> eased to 6.1% this week &amp; may fall further."
                ),
                "page_age": "2024-05-02T09:00:00",
                "profile": {
                    "name": "The Daily Ledger",
                    "url": "https://www.ledger.example/rates/today",
                    "long_name": "ledger.example",
                    "img": "https://imgs.search.brave.com/abc/favicon.ico",
                },
                "language": "en",
                "family_friendly": True,
                "type": "search_result",
                "subtype": "generic",
                "is_live": False,
                "meta_url": {
                    "scheme": "https",
                    "netloc": "ledger.example",
                    "hostname": "www.ledger.example",
                    "favicon": "https://imgs.search.brave.com/abc/favicon.ico",
                    "path": "\u203a rates \u203a today",
                },
                "age": "May 2, 2024",
                "extra_snippets": ["30-year fixed: 6.1%", "15-year fixed: 5.4%"],
            },
            {
                "title": "Weekly survey of lenders",
                "url": "https://survey.example.org/weekly",
                "is_source_local": False,
                "is_source_both": False,
                "description": "The weekly survey of lenders, published every Thursday.",
                "language": "en",
                "family_friendly": True,
                "type": "search_result",
                "subtype": "generic",
                "meta_url": {
                    "scheme": "https",
                    "netloc": "survey.example.org",
                    "hostname": "survey.example.org",
                    "favicon": "https://imgs.search.brave.com/def/favicon.ico",
                    "path": "\u203a weekly",
                },
            },
        ],
        "family_friendly": True,
    },
}


def brave_error(status: int, code: str, detail: str, component: str) -> dict[str, Any]:
    return {
        "type": "ErrorResponse",
        "error": {
            "id": "5d832250-9396-4f6e-b84a-2a1fe524cd7d",
            "status": status,
            "code": code,
            "detail": detail,
            "meta": {"component": component},
        },
        "time": 1714640400,
    }


#: A Tavily /search answer as its API reference shows it.
TAVILY_OK: dict[str, Any] = {
    "query": "mortgage rates",
    "follow_up_questions": None,
    "answer": None,
    "images": [],
    "results": [
        {
            "title": "Mortgage rates ease to 6.1%",
            "url": "https://www.ledger.example/rates/today",
            "content": "Mortgage rates eased to 6.1% this week, the lowest level since spring.",
            "score": 0.81025416,
            "raw_content": None,
        },
        {
            "title": "Weekly survey of lenders",
            "url": "https://survey.example.org/weekly",
            "content": "The weekly survey of lenders, published every Thursday.",
            "score": 0.6213,
            "raw_content": None,
        },
    ],
    "response_time": "1.67",
    "request_id": "123e4567-e89b-12d3-a456-426614174111",
}


class Recorder:
    """A MockTransport handler that records requests and answers from a script."""

    def __init__(self, *responses: httpx.Response | Callable[[httpx.Request], httpx.Response]) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.responses.pop(0)
        return answer(request) if callable(answer) else answer

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def search(backend: Any, query: str = "mortgage rates", **options: Any) -> Sequence[SearchResult]:
    async def go() -> Sequence[SearchResult]:
        found: Sequence[SearchResult] = await backend.search(query, **{"count": 5, **options})
        return found

    return anyio.run(go, backend="trio")


def search_error(backend: Any) -> str:
    with pytest.raises(ToolError) as caught:
        search(backend)
    return str(caught.value)


# -- Brave -----------------------------------------------------------------------------------------


def test_brave_sends_the_documented_request_and_reads_web_results() -> None:
    recorder = Recorder(httpx.Response(200, json=BRAVE_OK))
    results = search(BraveBackend(api_key=BRAVE_KEY, http_client=recorder.client()))
    assert results == [
        SearchResult(
            "Mortgage Rates Today | Rates Ease",
            "https://www.ledger.example/rates/today",
            "Mortgage rates eased to 6.1% this week & may fall further.",
        ),
        SearchResult(
            "Weekly survey of lenders",
            "https://survey.example.org/weekly",
            "The weekly survey of lenders, published every Thursday.",
        ),
    ]
    [request] = recorder.requests
    assert request.method == "GET"
    assert str(request.url).startswith("https://api.search.brave.com/res/v1/web/search?")
    assert dict(request.url.params) == {"q": "mortgage rates", "count": "5", "result_filter": "web"}
    assert request.headers["X-Subscription-Token"] == BRAVE_KEY
    assert request.headers["Accept"] == "application/json"


def test_brave_turns_domain_filters_into_site_operators_and_passes_options() -> None:
    recorder = Recorder(httpx.Response(200, json=BRAVE_OK), httpx.Response(200, json=BRAVE_OK))
    backend = BraveBackend(
        api_key=BRAVE_KEY, http_client=recorder.client(), country="GB", safesearch="strict"
    )
    search(backend, allowed_domains=("ledger.example",), blocked_domains=("spam.example", "ads.example"))
    search(backend, allowed_domains=("a.example", "b.example"))
    first, second = (dict(r.url.params) for r in recorder.requests)
    assert first["q"] == "mortgage rates site:ledger.example -site:spam.example -site:ads.example"
    assert first["country"] == "GB" and first["safesearch"] == "strict"
    assert second["q"] == "mortgage rates" and second["count"] == "20"  # several domains: the tool filters


def test_brave_with_no_web_results_returns_nothing() -> None:
    body = {"type": "search", "query": {"original": "zzqx"}, "mixed": {"type": "mixed", "main": []}}
    assert (
        search(BraveBackend(api_key=BRAVE_KEY, http_client=Recorder(httpx.Response(200, json=body)).client()))
        == []
    )


def test_brave_rejecting_the_key_names_the_environment_variable_and_hides_the_key() -> None:
    body = brave_error(
        422, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.", "authentication"
    )
    recorder = Recorder(httpx.Response(422, json=body))
    message = search_error(BraveBackend(api_key=BRAVE_KEY, http_client=recorder.client()))
    assert message == (
        "Brave Search rejected the API key (check BRAVE_API_KEY): HTTP 422: "
        "SUBSCRIPTION_TOKEN_INVALID: The provided subscription token is invalid."
    )
    assert BRAVE_KEY not in message


def test_brave_rate_limits_say_when_to_retry() -> None:
    per_second = httpx.Response(
        429,
        json=brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan.", "rate_limiter"),
        headers={
            "X-RateLimit-Limit": "1, 2000",
            "X-RateLimit-Remaining": "0, 1500",
            "X-RateLimit-Reset": "1, 1419704",
        },
    )
    per_month = httpx.Response(
        429,
        json=brave_error(429, "QUOTA_LIMITED", "Request quota limit exceeded for plan.", "rate_limiter"),
        headers={
            "X-RateLimit-Limit": "1, 2000",
            "X-RateLimit-Remaining": "1, 0",
            "X-RateLimit-Reset": "1, 86400",
        },
    )
    recorder = Recorder(per_second, per_month)
    backend = BraveBackend(api_key=BRAVE_KEY, http_client=recorder.client())
    assert search_error(backend) == (
        "Brave Search rate limit reached: HTTP 429: RATE_LIMITED: Request rate limit exceeded for plan."
        " (retry after 1 s)"
    )
    assert search_error(backend).endswith(
        "QUOTA_LIMITED: Request quota limit exceeded for plan. (retry after 86400 s)"
    )


def test_brave_other_errors_and_non_json_bodies_are_short_messages() -> None:
    listed = {  # the older shape, with a list of errors
        "type": "ErrorResponse",
        "errors": [
            {"id": "x", "status": 404, "code": "SUBSCRIPTION_NOT_FOUND", "detail": "No subscription found."}
        ],
        "time": 1663072993,
    }
    recorder = Recorder(
        httpx.Response(404, json=listed),
        httpx.Response(502, text="<html><body>Bad gateway</body></html>"),
        httpx.Response(200, text="<html>not json</html>"),
    )
    backend = BraveBackend(api_key=BRAVE_KEY, http_client=recorder.client())
    assert (
        search_error(backend)
        == "Brave Search failed: HTTP 404: SUBSCRIPTION_NOT_FOUND: No subscription found."
    )
    assert search_error(backend) == "Brave Search failed: HTTP 502: Bad Gateway"
    assert search_error(backend) == "Brave Search answered with something that is not a JSON object"


# -- Tavily ----------------------------------------------------------------------------------------


def test_tavily_posts_the_documented_body_and_reads_results() -> None:
    recorder = Recorder(httpx.Response(200, json=TAVILY_OK))
    backend = TavilyBackend(api_key=TAVILY_KEY, http_client=recorder.client())
    results = search(backend, count=3, allowed_domains=("ledger.example",), blocked_domains=("spam.example",))
    assert results == [
        SearchResult(
            "Mortgage rates ease to 6.1%",
            "https://www.ledger.example/rates/today",
            "Mortgage rates eased to 6.1% this week, the lowest level since spring.",
        ),
        SearchResult(
            "Weekly survey of lenders",
            "https://survey.example.org/weekly",
            "The weekly survey of lenders, published every Thursday.",
        ),
    ]
    [request] = recorder.requests
    assert request.method == "POST" and str(request.url) == "https://api.tavily.com/search"
    assert request.headers["Authorization"] == f"Bearer {TAVILY_KEY}"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.content) == {
        "query": "mortgage rates",
        "max_results": 3,
        "search_depth": "basic",
        "topic": "general",
        "include_answer": False,
        "include_raw_content": False,
        "include_images": False,
        "include_domains": ["ledger.example"],
        "exclude_domains": ["spam.example"],
    }


def test_tavily_errors_name_the_problem() -> None:
    recorder = Recorder(
        httpx.Response(401, json={"detail": {"error": "Unauthorized: missing or invalid API key."}}),
        httpx.Response(
            429,
            json={"detail": {"error": "Your request has been blocked due to excessive requests."}},
            headers={"Retry-After": "30"},
        ),
        httpx.Response(432, json={"detail": {"error": "This request exceeds your plan's set usage limit."}}),
        httpx.Response(
            400, json={"detail": {"error": "Query is too long. Max query length is 400 characters."}}
        ),
    )
    backend = TavilyBackend(api_key=TAVILY_KEY, http_client=recorder.client())
    assert search_error(backend) == (
        "Tavily rejected the API key (check TAVILY_API_KEY): HTTP 401:"
        " Unauthorized: missing or invalid API key."
    )
    assert search_error(backend) == (
        "Tavily rate limit reached: HTTP 429: Your request has been blocked due to excessive requests."
        " (retry after 30 s)"
    )
    assert search_error(backend) == (
        "Tavily usage limit reached: HTTP 432: This request exceeds your plan's set usage limit."
    )
    assert search_error(backend).startswith("Tavily search failed: HTTP 400: Query is too long.")


def test_connection_failures_and_timeouts_are_short_messages() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def stall(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    recorder = Recorder(refuse, stall)
    backend = TavilyBackend(api_key=TAVILY_KEY, http_client=recorder.client(), timeout=7)
    assert search_error(backend) == "Tavily request failed: ConnectError: connection refused"
    assert search_error(backend) == "Tavily did not answer within 7 s"


# -- keys ------------------------------------------------------------------------------------------


def test_a_missing_key_is_a_config_error_naming_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="BraveBackend: no API key: pass api_key= or set the BRAVE_API_KEY"):
        BraveBackend()
    with pytest.raises(
        ConfigError, match="TavilyBackend: no API key: pass api_key= or set the TAVILY_API_KEY"
    ):
        TavilyBackend(api_key="  ")


def test_keys_come_from_the_environment_and_never_show_in_a_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", "from-env-brave")
    monkeypatch.setenv("TAVILY_API_KEY", "from-env-tavily")
    brave_calls = Recorder(httpx.Response(200, json=BRAVE_OK))
    tavily_calls = Recorder(httpx.Response(200, json=TAVILY_OK))
    brave, tavily = (
        BraveBackend(http_client=brave_calls.client()),
        TavilyBackend(http_client=tavily_calls.client()),
    )
    search(brave)
    search(tavily)
    assert brave_calls.requests[0].headers["X-Subscription-Token"] == "from-env-brave"
    assert tavily_calls.requests[0].headers["Authorization"] == "Bearer from-env-tavily"
    assert "from-env" not in repr(brave) + repr(tavily) + repr(WebSearchTool(brave))


# -- the tool --------------------------------------------------------------------------------------


class Canned:
    """A backend with fixed hits that remembers what it was asked."""

    def __init__(self, *hits: SearchResult) -> None:
        self.hits = hits
        self.asked: list[dict[str, Any]] = []

    async def search(
        self,
        query: str,
        *,
        count: int,
        allowed_domains: tuple[str, ...] = (),
        blocked_domains: tuple[str, ...] = (),
    ) -> Sequence[SearchResult]:
        self.asked.append(
            {"query": query, "count": count, "allowed": allowed_domains, "blocked": blocked_domains}
        )
        return self.hits


HITS = (
    SearchResult("Rates ease", "https://www.ledger.example/rates", "Rates eased to 6.1%."),
    SearchResult("Spam", "https://spam.example/win", "You won!"),
    SearchResult("Survey", "https://survey.example.org/weekly", "Weekly survey."),
    SearchResult("Lookalike", "https://notledger.example/rates", "Not the ledger."),
)


def invoke(tool: WebSearchTool, args: dict[str, Any]) -> Any:
    return anyio.run(tool.invoke, CTX, args, backend="asyncio")


def test_the_tool_has_the_pinned_shape() -> None:
    tool = WebSearchTool(Canned())
    assert isinstance(tool, Tool) and isinstance(Canned(), SearchBackend)
    assert tool.name == "WebSearch" and tool.effect is ToolEffect.SIDE_EFFECT
    assert tool.parameters["required"] == ["query"]
    properties: Any = tool.parameters["properties"]
    assert properties["count"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "default": 5,
        "description": "How many results to return.",
    }


def test_results_come_back_as_title_url_snippet_objects_limited_to_count() -> None:
    backend = Canned(*HITS)
    out = invoke(WebSearchTool(backend), {"query": "  mortgage rates ", "count": 2})
    assert out == {
        "query": "mortgage rates",
        "results": [
            {
                "title": "Rates ease",
                "url": "https://www.ledger.example/rates",
                "snippet": "Rates eased to 6.1%.",
            },
            {"title": "Spam", "url": "https://spam.example/win", "snippet": "You won!"},
        ],
    }
    assert backend.asked == [{"query": "mortgage rates", "count": 2, "allowed": (), "blocked": ()}]


def test_domain_filters_are_passed_on_and_applied_to_what_comes_back() -> None:
    backend = Canned(*HITS)  # ignores the filters it is given
    out = invoke(WebSearchTool(backend), {"query": "q", "blocked_domains": ["spam.example"]})
    assert [r["title"] for r in out["results"]] == ["Rates ease", "Survey", "Lookalike"]
    out = invoke(WebSearchTool(backend), {"query": "q", "allowed_domains": ["https://ledger.example/"]})
    assert [r["title"] for r in out["results"]] == ["Rates ease"]  # subdomains match, lookalikes do not
    assert backend.asked[-1]["allowed"] == ("ledger.example",)


def test_the_deployments_filters_bind_the_model() -> None:
    backend = Canned(*HITS)
    tool = WebSearchTool(
        backend, allowed_domains=["ledger.example", "survey.example.org"], blocked_domains="spam.example"
    )
    assert "Only results from these domains" in tool.description
    out = invoke(tool, {"query": "q", "allowed_domains": ["spam.example", "survey.example.org"]})
    assert [r["title"] for r in out["results"]] == ["Survey"]
    assert backend.asked[-1]["blocked"] == ("spam.example",)


def test_bad_arguments_and_configuration() -> None:
    tool = WebSearchTool(Canned(*HITS))
    with pytest.raises(ToolError, match="non-empty string"):
        invoke(tool, {"query": "   "})
    with pytest.raises(ToolError, match="list of domains"):
        invoke(tool, {"query": "q", "blocked_domains": "spam.example"})
    with pytest.raises(ConfigError, match="max_results must be 1-20"):
        WebSearchTool(Canned(), max_results=50)
    with pytest.raises(ConfigError, match="invalid domain"):
        WebSearchTool(Canned(), blocked_domains=["*"])


def test_a_failing_or_hanging_backend_becomes_a_tool_error() -> None:
    class Broken:
        async def search(self, query: str, **_: Any) -> Sequence[SearchResult]:
            raise RuntimeError("socket exploded")

    class Hanging:
        async def search(self, query: str, **_: Any) -> Sequence[SearchResult]:
            await anyio.sleep(30)
            return []

    with pytest.raises(ToolError, match=r"^the web search failed: RuntimeError: socket exploded$"):
        invoke(WebSearchTool(Broken()), {"query": "q"})
    with pytest.raises(ToolError, match=r"^the web search timed out after 0\.2 s$"):
        invoke(WebSearchTool(Hanging(), timeout=0.2), {"query": "q"})


def test_in_a_run_results_and_a_rate_limit_reach_the_model_as_tool_results() -> None:
    limited = httpx.Response(
        429, json=brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan.", "rate_limiter")
    )
    recorder = Recorder(httpx.Response(200, json=BRAVE_OK), limited)
    tool = WebSearchTool(BraveBackend(api_key=BRAVE_KEY, http_client=recorder.client()))
    model = MockModel(
        [
            call_tools(("WebSearch", '{"query": "mortgage rates", "count": 1}')),
            call_tools(("WebSearch", {"query": "mortgage rates again"})),
            say("Rates eased to 6.1%."),
        ]
    )
    agent: LlmAgent[None] = LlmAgent(name="researcher", model=model, tools=[tool])
    result = anyio.run(collect, agent.run(RunContext.ephemeral(None), "Rates?"), backend="trio")
    assert result.final_output == "Rates eased to 6.1%."
    first, second = (e.item for e in result.events if isinstance(e, ToolOutputItem))
    assert not first.is_error and json.loads(first.content)["results"][0]["url"] == (
        "https://www.ledger.example/rates/today"
    )
    assert second.is_error and "Brave Search rate limit reached: HTTP 429" in second.content


def test_importing_helikon_tools_does_not_import_httpx() -> None:
    code = (
        "import sys, helikon.tools as t; assert 'httpx' not in sys.modules, 'eager';"
        " t.WebFetchTool; assert 'httpx' in sys.modules; print(sorted(set(t.__all__) - set(dir(t))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_search_is_a_side_effect_unless_the_backend_is_declared_read_only() -> None:
    """Issue 30: a query carries model text to a third party, so PLAN mode must not run it unasked."""
    from helikon.config import PermissionMode
    from helikon.governance import Allow, Decided, Deny, PermissionSettings, PermissionStage, fold_permissions

    plan = PermissionSettings(PermissionMode.PLAN)
    tool = WebSearchTool(Canned())
    step = fold_permissions(tool.name, tool.effect, {"query": "sk-live-secret"}, plan)
    assert isinstance(step, Decided) and isinstance(step.decision, Deny)
    in_house = WebSearchTool(Canned(), read_only=True)
    assert in_house.effect is ToolEffect.READ_ONLY
    assert fold_permissions(in_house.name, in_house.effect, {"query": "x"}, plan) == Decided(
        Allow(), PermissionStage.MODE
    )
