"""The Anthropic Messages API adapter (``POST /v1/messages``), spoken with
httpx: streaming Server-Sent Events by default, the plain JSON call with
``stream=False``. Both yield the same model events.

::

    from helikon.providers.anthropic import AnthropicModel, CacheStrategy, ExtendedThinking

    model = AnthropicModel.messages("claude-sonnet-4-5")             # ANTHROPIC_API_KEY
    model = AnthropicModel.messages(
        "claude-sonnet-4-5",
        cache=CacheStrategy.SYSTEM_TOOLS_AND_HISTORY,
        thinking=ExtendedThinking(budget_tokens=2048),
    )

What it owns: credentials and headers (``x-api-key``, ``anthropic-version``,
``anthropic-beta``), the endpoint, and driving one HTTP exchange per call.
The request body is built by :mod:`._anthropic_request` and the response
decoded by :mod:`._anthropic_response` (both pure). Failures are
:class:`~helikon.errors.ModelError`: HTTP errors by status and the body's
message, ``error`` events in the stream by their type (``overloaded_error``
and ``api_error`` are Unavailable, ``rate_limit_error`` RateLimited), a
stream that ends before ``message_stop`` a Transport failure, a data line
that is not JSON an Other failure. Any other exception is a bug.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from typing import Final, TypedDict, Unpack, final

import httpx
import msgspec

from helikon.cancel import CancellationToken
from helikon.errors import ConfigError, ModelError, OtherModelFailure
from helikon.model import JsonSchema, ModelCapabilities, ModelEvent, ModelRequest, ModelSettings
from helikon.providers import _http
from helikon.providers._anthropic_request import build_body, settings_problem
from helikon.providers._anthropic_response import PROVIDER, StreamDecoder, decode_message
from helikon.providers._anthropic_settings import (
    ANTHROPIC_VERSION,
    DEFAULT_BASE_URL,
    DEFAULT_MAX_TOKENS,
    OUTPUT_TOOL_NAME,
    REDACTED_PREFIX,
    CacheStrategy,
    ExtendedThinking,
    Options,
    StructuredOutputMode,
)
from helikon.providers._incremental import MessageCache
from helikon.providers._options import check_options

#: The environment variable read when no ``api_key=`` is given.
API_KEY_ENV: Final = "ANTHROPIC_API_KEY"


class AnthropicOptions(TypedDict, total=False):
    """The keyword arguments of :class:`AnthropicModel` and :meth:`AnthropicModel.messages`
    (what each means and its default: the class docs)."""

    api_key: str | None
    base_url: str | None
    http_client: httpx.AsyncClient | None
    stream: bool
    max_tokens: int | None
    cache: CacheStrategy
    thinking: ExtendedThinking | None
    structured_output: StructuredOutputMode
    parallel_tool_calls: bool
    anthropic_version: str
    betas: Iterable[str]
    headers: Mapping[str, str] | None


@final
class AnthropicModel:
    """A Claude model behind the Messages API.

    Args:
        model_id: the model, e.g. ``"claude-sonnet-4-5"``.
        api_key: the API key; ``ANTHROPIC_API_KEY`` when not given.
        base_url: the API's base URL (default ``https://api.anthropic.com``);
            ``/v1/messages`` is appended (``/messages`` if it ends in ``/v1``).
        http_client: an ``httpx.AsyncClient`` to send with (transports,
            proxies, timeouts, connection pooling). Without one, each call
            opens and closes its own client.
        stream: stream the answer (SSE) or, when False, make the
            non-streaming call (for gateways that only pass whole responses).
        max_tokens: the ``max_tokens`` the API requires, used when the
            request's ``ModelSettings.max_output_tokens`` is None (which
            always wins). Default 4096; with ``thinking``,
            ``max(4096, budget_tokens + 4096)``.
        cache: where to put prompt-cache breakpoints (:class:`CacheStrategy`).
        thinking: turn on extended thinking (:class:`ExtendedThinking`).
        structured_output: how a JSON-schema response format is asked for
            (:class:`StructuredOutputMode`; native ``output_config`` by default).
        parallel_tool_calls: False sends ``disable_parallel_tool_use``.
        anthropic_version: the ``anthropic-version`` header.
        betas: ``anthropic-beta`` feature flags to send.
        headers: extra headers for every request.

    Raises:
        ConfigError: no API key was given and ``ANTHROPIC_API_KEY`` is unset,
            or a setting is out of range.
    """

    __slots__ = ("_api_key", "_client", "_headers", "_messages", "_options", "_url")

    def __init__(self, model_id: str, **options: Unpack[AnthropicOptions]) -> None:
        check_options("AnthropicModel", options, AnthropicOptions)
        if not isinstance(model_id, str) or not model_id:
            raise ConfigError("AnthropicModel needs a model id, e.g. 'claude-sonnet-4-5'")
        api_key = options.get("api_key")
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        if not key:
            raise ConfigError(
                f"no Anthropic API key: pass api_key= or set the {API_KEY_ENV} environment variable"
            )
        max_tokens, thinking = options.get("max_tokens"), options.get("thinking")
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
            raise ConfigError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if thinking is not None and max_tokens is not None and thinking.budget_tokens >= max_tokens:
            raise ConfigError(
                f"ExtendedThinking.budget_tokens ({thinking.budget_tokens}) "
                f"must be below max_tokens ({max_tokens})"
            )
        stream = options.get("stream", True)
        self._api_key = key
        self._client = options.get("http_client")
        self._options = Options(
            model_id,
            stream=stream,
            max_tokens=max_tokens,
            cache=options.get("cache", CacheStrategy.NONE),
            thinking=thinking,
            structured_output=options.get("structured_output", StructuredOutputMode.NATIVE),
            parallel_tool_calls=options.get("parallel_tool_calls", True),
        )
        # Each wire message of a run is encoded once (see _incremental).
        self._messages = MessageCache()
        base = (options.get("base_url") or DEFAULT_BASE_URL).rstrip("/")
        self._url = base + ("/messages" if base.endswith("/v1") else "/v1/messages")
        extra = dict(options.get("headers") or {})
        beta_list = [b for b in options.get("betas", ()) if b]
        if beta_list:
            extra["anthropic-beta"] = ",".join(beta_list)
        self._headers: dict[str, str] = {
            "x-api-key": key,
            "anthropic-version": options.get("anthropic_version", ANTHROPIC_VERSION),
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
            **extra,
        }

    def check_settings(self, settings: ModelSettings) -> None:
        """Refuse, with a :class:`ConfigError`, agent settings the Messages API
        never accepts for this model (``LlmAgent`` calls this when it is built).

        Raises:
            ConfigError: temperature and top_p together on a model that takes
                one, or a temperature, a narrow top_p or a forced tool choice
                with extended thinking.
        """
        problem = settings_problem(settings, self._options)
        if problem is not None:
            raise ConfigError(f"AnthropicModel {self._options.model_id!r}: {problem}")

    @classmethod
    def messages(cls, model_id: str, **options: Unpack[AnthropicOptions]) -> AnthropicModel:
        """The Messages API model ``model_id`` (the book's
        ``AnthropicModel::messages``); the arguments are the constructor's."""
        return cls(model_id, **options)

    @property
    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities(
            streaming=self._options.stream,
            tools=True,
            parallel_tool_calls=self._options.parallel_tool_calls,
            structured_output=True,
            reasoning=self._options.thinking is not None,
            vision=True,
            prompt_caching=True,
        )

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def model_id(self) -> str:
        return self._options.model_id

    @property
    def url(self) -> str:
        """The endpoint requests go to."""
        return self._url

    @property
    def options(self) -> Options:
        """The settings that shape each request body."""
        return self._options

    @property
    def streams(self) -> bool:
        """Whether requests ask for a streamed reply."""
        return self._options.stream

    def request_body(self, request: ModelRequest) -> dict[str, object]:
        """The JSON body :meth:`invoke` sends for ``request`` (for inspection)."""
        return build_body(request, self._options)

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_id!r}, url={self._url!r}, stream={self._options.stream})"

    async def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        """Call the model; yield its events, ending with one ``Finish``.

        Raises:
            ModelError: the call failed (see the module docstring).
        """
        model_id = self._options.model_id
        body = build_body(request, self._options, self._messages)
        output_tool = (
            self._options.structured_output is StructuredOutputMode.TOOL
            and type(request.settings.response_format) is JsonSchema
        )
        client = _http.new_client(self._client)
        try:
            http_request = client.build_request(
                "POST", self._url, content=msgspec.json.encode(body), headers=self._headers
            )
            response = await _http.send(client, http_request, cancel, provider=PROVIDER, model_id=model_id)
            if response is None:
                return
            try:
                # A gateway may answer a streamed request with one JSON message.
                whole = response.headers.get("content-type", "").startswith("application/json")
                if self._options.stream and not whole:
                    async for event in self._stream(response, cancel, output_tool):
                        yield event
                else:
                    raw = await _http.read_all(response, cancel, provider=PROVIDER, model_id=model_id)
                    if raw is None:
                        return
                    message = _http.decode_json(raw, provider=PROVIDER, model_id=model_id)
                    for event in decode_message(model_id, message, output_tool=output_tool):
                        yield event
            finally:
                await response.aclose()
        finally:
            if self._client is None:
                await client.aclose()

    async def _stream(
        self, response: httpx.Response, cancel: CancellationToken, output_tool: bool
    ) -> AsyncIterator[ModelEvent]:
        model_id = self._options.model_id
        decoder = StreamDecoder(model_id, output_tool)
        sse = _http.SseDecoder()
        raw = _http.chunks(response, cancel, provider=PROVIDER, model_id=model_id)
        try:
            async for chunk in raw:
                for event in sse.feed(chunk):
                    # In-memory or fast transports may never reach a checkpoint
                    # where the cancel scope could act: poll the token too.
                    if cancel.cancelled:
                        return
                    for model_event in _decode(decoder, event):
                        yield model_event
                    if decoder.finished:
                        return
        finally:
            if isinstance(raw, AsyncGenerator):
                await raw.aclose()
        if cancel.cancelled:
            return
        if sse.incomplete:
            # The body ended without the blank line that closes an event (some
            # servers and recordings end so). A last event whose data is whole
            # still counts; one cut in the middle of its JSON is a truncation.
            for event in sse.feed(b"\n\n"):
                try:
                    model_events = _decode(decoder, event)
                except ModelError as exc:
                    if isinstance(exc.failure, OtherModelFailure):
                        raise ModelError.transport(
                            f"{PROVIDER} {model_id}: the event stream was cut off mid-event"
                        ) from None
                    raise
                for model_event in model_events:
                    yield model_event
            if decoder.finished:
                return
        raise ModelError.transport(
            f"{PROVIDER} {model_id}: the event stream ended before message_stop (the answer is incomplete)"
        )


def _decode(decoder: StreamDecoder, sse: _http.SseEvent) -> list[ModelEvent]:
    """The model events of one SSE event (raises for ``error`` events)."""
    if not sse.data.strip():
        return []
    if sse.event == "error":
        try:
            payload: object = msgspec.json.decode(sse.data)
        except msgspec.DecodeError:
            payload = {"error": {"message": sse.data.strip()}}
        return decoder.feed("error", payload)  # raises
    data = _http.decode_json(sse.data, provider=PROVIDER, model_id=decoder.model_id)
    return decoder.feed(sse.event, data)


__all__ = [
    "ANTHROPIC_VERSION",
    "API_KEY_ENV",
    "DEFAULT_MAX_TOKENS",
    "OUTPUT_TOOL_NAME",
    "REDACTED_PREFIX",
    "AnthropicModel",
    "AnthropicOptions",
    "CacheStrategy",
    "ExtendedThinking",
    "StructuredOutputMode",
]
