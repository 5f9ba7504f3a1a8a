"""Google Gemini, over the Developer API or Vertex AI, speaking HTTP directly.

::

    from helikon.providers.gemini import GeminiModel

    model = GeminiModel.from_env("gemini-2.5-flash")            # GEMINI_API_KEY / GOOGLE_API_KEY
    model = GeminiModel.vertex("gemini-2.5-flash", "my-project", "us-central1",
                               bearer_token="ya29....")
    model = GeminiModel.vertex_from_env("gemini-2.5-flash")     # GOOGLE_CLOUD_PROJECT, ADC

Streaming uses ``streamGenerateContent?alt=sse``; ``stream=False`` uses
``generateContent`` and yields the same events. The request translation
lives in ``_gemini_request``, the response parsing in ``_gemini_response``,
the schema sanitiser in ``_gemini_schema`` (re-exported here as
:func:`sanitize_schema`) and credentials in ``_gemini_auth``.

Thought signatures: Gemini gives function calls no ids, so call ids are left
to the agent loop (derived from run, turn and position). The opaque
``thoughtSignature`` Gemini attaches to a part is emitted as
``ReasoningChunk("", signature=...)`` just before that part's events, so it is
kept in the conversation as a :class:`~helikon.items.ReasoningPart` of the
assistant message; on the next request it goes back on the first
``functionCall`` of that turn (where Gemini 3 requires it), or on the turn's
last part when there are no calls.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any, Final, TypedDict, Unpack, cast, final

import anyio
import httpx
import msgspec

from helikon.cancel import CancellationToken
from helikon.errors import ConfigError, ModelError
from helikon.model import ModelCapabilities, ModelEvent, ModelRequest
from helikon.providers._gemini_auth import (
    TokenProvider,
    adc_token_provider,
    call_token_provider,
)
from helikon.providers._gemini_request import Thinking, build_body
from helikon.providers._gemini_response import ResponseParser
from helikon.providers._gemini_schema import sanitize_schema
from helikon.providers._http import SseEvent, decode_json, new_client, read_all, send, sse_events
from helikon.providers._incremental import MessageCache
from helikon.providers._options import check_options

#: The Developer API's base URL (``generativelanguage.googleapis.com``).
DEVELOPER_BASE_URL: Final = "https://generativelanguage.googleapis.com/v1beta"

#: Environment variables holding a Developer API key, in the order read.
API_KEY_VARIABLES: Final = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

#: GenAI ``gen_ai.provider.name`` of each transport.
DEVELOPER_PROVIDER: Final = "gcp.gemini"
VERTEX_PROVIDER: Final = "gcp.vertex_ai"


class GeminiOptions(TypedDict, total=False):
    """The keyword arguments every :class:`GeminiModel` constructor takes, besides its
    credentials (what each means and its default: the class docs)."""

    base_url: str | None
    http_client: httpx.AsyncClient | None
    stream: bool
    include_thoughts: bool
    thinking_budget: int | None
    thinking_level: str | None
    headers: Mapping[str, str] | None


def vertex_base_url(location: str) -> str:
    """The Vertex AI endpoint for ``location`` (``global`` has no region prefix).

    >>> vertex_base_url("us-central1")
    'https://us-central1-aiplatform.googleapis.com/v1'
    >>> vertex_base_url("global")
    'https://aiplatform.googleapis.com/v1'
    """
    host = "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
    return f"https://{host}/v1"


@final
class GeminiModel:
    """A Gemini model behind the :class:`~helikon.protocols.Model` protocol.

    Prefer the named constructors: :meth:`developer`, :meth:`from_env`,
    :meth:`vertex` and :meth:`vertex_from_env`. The keyword constructor picks
    Vertex AI when ``project`` is given and the Developer API otherwise.

    Args:
        model_id: e.g. ``"gemini-2.5-flash"`` (a ``models/`` prefix is dropped).
        api_key: Developer API key; read from ``GEMINI_API_KEY`` or
            ``GOOGLE_API_KEY`` when omitted.
        project: Vertex AI project id (selects Vertex AI).
        location: Vertex AI location; ``"global"`` by default.
        bearer_token: a static Vertex AI access token.
        token_provider: a callable returning a Vertex AI access token (sync
            or async), called before every request; it should cache.
        base_url: replaces ``https://generativelanguage.googleapis.com/v1beta``
            (Developer) or ``https://{location}-aiplatform.googleapis.com/v1``
            (Vertex), e.g. for a proxy.
        http_client: the ``httpx.AsyncClient`` to use (transports, proxies,
            timeouts, pooling); without one, each call opens and closes its own.
        stream: stream with ``streamGenerateContent`` (default) or call
            ``generateContent``.
        include_thoughts: ask for thought summaries (streamed as reasoning).
        thinking_budget: Gemini 2.5 ``thinkingBudget`` (0 off, -1 dynamic).
        thinking_level: Gemini 3 ``thinkingLevel`` (``"low"``, ``"high"``, ...).
        headers: extra HTTP headers for every request.

    Raises:
        ConfigError: no API key (naming the variables), or Vertex AI without
            a token or token provider.
    """

    def __init__(
        self,
        model_id: str,
        *,
        api_key: str | None = None,
        project: str | None = None,
        location: str | None = None,
        bearer_token: str | None = None,
        token_provider: TokenProvider | None = None,
        **options: Unpack[GeminiOptions],
    ) -> None:
        check_options("GeminiModel", options, GeminiOptions)
        model_id = model_id.removeprefix("models/")
        if not model_id:
            raise ConfigError("GeminiModel needs a model id, e.g. 'gemini-2.5-flash'")
        self._model_id = model_id
        self._stream = options.get("stream", True)
        self._thinking = Thinking(
            options.get("include_thoughts", False),
            options.get("thinking_budget"),
            options.get("thinking_level"),
        )
        self._extra_headers = dict(options.get("headers") or {})
        self._client = options.get("http_client")
        # Each wire content (message) of a run is encoded once (see _incremental).
        self._messages = MessageCache()
        base_url = options.get("base_url")
        self._api_key: str | None = None
        self._token_provider: TokenProvider | None = None
        if project is not None:
            location = location or "global"
            if bearer_token is not None and token_provider is not None:
                raise ConfigError("give Vertex AI either bearer_token= or token_provider=, not both")
            if bearer_token is not None:
                token = bearer_token

                def static() -> str:
                    return token

                token_provider = static
            if token_provider is None:
                raise ConfigError(
                    "Vertex AI needs bearer_token= or token_provider= (or use GeminiModel.vertex_from_env)"
                )
            self._token_provider = token_provider
            self._provider = VERTEX_PROVIDER
            root = (base_url or vertex_base_url(location)).rstrip("/")
            self._endpoint = (
                f"{root}/projects/{project}/locations/{location}/publishers/google/models/{model_id}"
            )
        else:
            if bearer_token is not None or token_provider is not None or location is not None:
                raise ConfigError("bearer_token=, token_provider= and location= need project= (Vertex AI)")
            key = api_key or next((os.environ[v] for v in API_KEY_VARIABLES if os.environ.get(v)), None)
            if not key:
                raise ConfigError("no Gemini API key: pass api_key= or set " + " or ".join(API_KEY_VARIABLES))
            self._api_key = key
            self._provider = DEVELOPER_PROVIDER
            self._endpoint = f"{(base_url or DEVELOPER_BASE_URL).rstrip('/')}/models/{model_id}"

    # -- named constructors ----------------------------------------------------

    @classmethod
    def developer(
        cls, model_id: str, api_key: str | None = None, **options: Unpack[GeminiOptions]
    ) -> GeminiModel:
        """The Gemini Developer API (``generativelanguage.googleapis.com``),
        authenticated with the ``x-goog-api-key`` header.

        The key is ``api_key`` or, when omitted, ``GEMINI_API_KEY`` or
        ``GOOGLE_API_KEY``.
        """
        return cls(model_id, api_key=api_key, **options)

    @classmethod
    def from_env(cls, model_id: str, **options: Unpack[GeminiOptions]) -> GeminiModel:
        """The Developer API with the key from ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``."""
        return cls.developer(model_id, **options)

    @classmethod
    def vertex(
        cls,
        model_id: str,
        project: str,
        location: str = "global",
        *,
        bearer_token: str | None = None,
        token_provider: TokenProvider | None = None,
        **options: Unpack[GeminiOptions],
    ) -> GeminiModel:
        """Gemini on Vertex AI, authenticated with a bearer token.

        Give a static ``bearer_token`` or a ``token_provider`` (a callable,
        sync or async, returning a fresh token; it is called before every
        request, so it should cache until the token nears expiry).
        """
        return cls(
            model_id,
            project=project,
            location=location,
            bearer_token=bearer_token,
            token_provider=token_provider,
            **options,
        )

    @classmethod
    def vertex_from_env(
        cls,
        model_id: str,
        *,
        project: str | None = None,
        location: str | None = None,
        **options: Unpack[GeminiOptions],
    ) -> GeminiModel:
        """Vertex AI configured from the environment.

        The project is ``GOOGLE_CLOUD_PROJECT`` (or the ADC project), the
        location ``GOOGLE_CLOUD_LOCATION`` (default ``"global"``). The token is
        ``GOOGLE_OAUTH_ACCESS_TOKEN`` when set; otherwise Application Default
        Credentials are discovered with the optional ``google-auth`` package
        (``pip install 'paigasus-helikon[vertex]'``) and refreshed as needed.

        Raises:
            ConfigError: no token and no google-auth (or no credentials), or
                no project.
        """
        project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or None
        location = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or "global"
        token = os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN") or None
        provider: TokenProvider | None = None
        if token is None:
            provider, project = adc_token_provider(project)
        if not project:
            raise ConfigError("no Vertex AI project: pass project= or set GOOGLE_CLOUD_PROJECT")
        return cls.vertex(model_id, project, location, bearer_token=token, token_provider=provider, **options)

    # -- the Model protocol ------------------------------------------------------

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities(
            streaming=self._stream,
            tools=True,
            parallel_tool_calls=True,
            structured_output=True,
            reasoning=True,
            vision=True,
            prompt_caching=True,
        )

    @property
    def provider(self) -> str:
        """``gcp.gemini`` (Developer API) or ``gcp.vertex_ai``."""
        return self._provider

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def streams(self) -> bool:
        """Whether requests ask for a streamed reply."""
        return bool(self._stream)

    @property
    def url(self) -> str:
        """The URL requests go to (streaming or not, as configured)."""
        if self._stream:
            return f"{self._endpoint}:streamGenerateContent?alt=sse"
        return f"{self._endpoint}:generateContent"

    async def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        """Call the model; yield its events.

        Raises:
            ModelError: the structured-output/tools conflict (before sending),
                no access token, an HTTP or transport failure, a blocked
                prompt (``refused``), an error or bad JSON mid-stream, or a
                stream that ends without a ``finishReason``.
        """
        provider, model_id = self._provider, self._model_id
        body = build_body(request, self._thinking, f"{provider} {model_id}", self._messages)
        headers = await self._headers(cancel)
        if headers is None:
            return
        # Without a caller's client, each call opens and closes its own: a
        # pooled connection must not outlive the event loop that opened it
        # (``run_sync`` starts a new one every time).
        client = self._client if self._client is not None else new_client(None)
        try:
            async with aclosing(self._exchange(client, body, headers, cancel)) as events:
                async for event in events:
                    yield event
        finally:
            if client is not self._client:
                with anyio.CancelScope(shield=True):
                    await client.aclose()

    async def _exchange(
        self,
        client: httpx.AsyncClient,
        body: dict[str, Any],
        headers: dict[str, str],
        cancel: CancellationToken,
    ) -> AsyncGenerator[ModelEvent, None]:
        """Send the request and parse the answer (streamed or whole)."""
        provider, model_id = self._provider, self._model_id
        http_request = client.build_request(
            "POST", self.url, headers=headers, content=msgspec.json.encode(body)
        )
        response = await send(client, http_request, cancel, provider=provider, model_id=model_id)
        if response is None:
            return
        parser = ResponseParser(provider, model_id)
        # A gateway that drops ``alt=sse`` answers a stream request with one
        # JSON array of response objects: read it whole, like generateContent.
        if self._stream and "json" not in response.headers.get("content-type", ""):
            # sse_events is an async generator: close it (and the response) on an early return.
            stream = cast(
                AsyncGenerator[SseEvent, None],
                sse_events(response, cancel, provider=provider, model_id=model_id),
            )
            async with aclosing(stream) as events:
                async for event in events:
                    if not event.data.strip():
                        continue
                    payload = decode_json(event.data, provider=provider, model_id=model_id)
                    for model_event in parser.feed(payload):
                        yield model_event
                        if cancel.cancelled:
                            return
            if cancel.cancelled:
                return
        else:
            raw = await read_all(response, cancel, provider=provider, model_id=model_id)
            if raw is None:
                return
            payload = decode_json(raw, provider=provider, model_id=model_id)
            for item in payload if isinstance(payload, list) else [payload]:
                for model_event in parser.feed(item):
                    yield model_event
        for model_event in parser.close():
            yield model_event

    async def _headers(self, cancel: CancellationToken) -> dict[str, str] | None:
        """The request headers, with credentials; None if cancelled meanwhile."""
        headers = {"content-type": "application/json", **self._extra_headers}
        if self._stream:
            # The shared SSE reader takes the raw (undecoded) body bytes, so
            # ask for an uncompressed stream: Google front ends gzip when told
            # they may.
            headers.setdefault("accept-encoding", "identity")
        if self._api_key is not None:
            headers["x-goog-api-key"] = self._api_key
            return headers
        assert self._token_provider is not None
        try:
            with cancel.scope() as scope:
                token = await call_token_provider(self._token_provider)
        except ModelError:
            raise
        except Exception as exc:
            where = f"{self._provider} {self._model_id}"
            raise ModelError.other(
                f"{where}: could not get an access token: {type(exc).__name__}: {exc}"
            ) from exc
        if scope.cancelled_caught:
            return None
        headers["authorization"] = f"Bearer {token}"
        return headers

    def __repr__(self) -> str:
        return f"GeminiModel({self._model_id!r}, provider={self._provider!r}, stream={self._stream})"


__all__ = [
    "API_KEY_VARIABLES",
    "DEVELOPER_BASE_URL",
    "DEVELOPER_PROVIDER",
    "VERTEX_PROVIDER",
    "GeminiModel",
    "GeminiOptions",
    "TokenProvider",
    "sanitize_schema",
    "vertex_base_url",
]
