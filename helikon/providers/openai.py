"""``OpenAIModel``: OpenAI's Chat Completions and Responses APIs, and the
servers that speak them (vLLM, llama.cpp, Ollama, Groq, OpenRouter, Azure
OpenAI deployments), over plain httpx: no vendor SDK.

::

    from helikon.providers.openai import OpenAIModel

    model = OpenAIModel.chat("gpt-4o")                 # OPENAI_API_KEY from the environment
    model = OpenAIModel.responses("gpt-5", reasoning_effort="low", reasoning_summary="auto")
    model = OpenAIModel.chat("llama3.1", base_url="http://localhost:11434/v1")   # Ollama
    model = OpenAIModel.chat("gpt-4o", azure=True, api_version="2024-10-21",
                             base_url="https://RESOURCE.openai.azure.com/openai/deployments/DEPLOYMENT")

The wire formats live in ``_openai_chat`` and ``_openai_responses``; what
they share (configuration, the streaming driver, strict tool schemas, error
payloads) in ``_openai_common``. Usage mapping, for both APIs: input tokens
are all prompt tokens (cached included), cached input tokens are
``prompt_tokens_details.cached_tokens`` / ``input_tokens_details.cached_tokens``,
output tokens are all completion tokens (reasoning included) and reasoning
tokens are ``completion_tokens_details.reasoning_tokens`` /
``output_tokens_details.reasoning_tokens``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from types import TracebackType
from typing import Any, Literal, TypedDict, Unpack, final, get_args

import attrs
import httpx

from helikon.cancel import CancellationToken
from helikon.errors import ConfigError
from helikon.model import JsonSchema, ModelCapabilities, ModelEvent, ModelRequest, ToolChoiceAuto
from helikon.providers import _openai_chat as chat_api
from helikon.providers import _openai_responses as responses_api
from helikon.providers._http import new_client
from helikon.providers._incremental import MessageCache, http_json
from helikon.providers._openai_common import (
    DEFAULT_BASE_URL,
    MaxTokensParam,
    OpenAIConfig,
    SystemRole,
    WireParser,
    stream_events,
)
from helikon.providers._openai_profiles import PROFILES, OutputMode, ServerProfile, profile_named
from helikon.providers._options import check_options

#: The environment variable holding the API key.
API_KEY_ENV = "OPENAI_API_KEY"
#: Tried first for Azure deployments (then ``OPENAI_API_KEY``).
AZURE_API_KEY_ENV = "AZURE_OPENAI_API_KEY"


class OpenAIOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`OpenAIModel.chat`, :meth:`OpenAIModel.responses`
    and the constructor (what each means and its default: the class docs)."""

    api_key: str | None
    base_url: str | None
    organization: str | None
    project: str | None
    extra_headers: Mapping[str, str] | None
    extra_body: Mapping[str, Any] | None
    http_client: httpx.AsyncClient | None
    stream: bool
    azure: bool
    api_version: str | None
    provider_name: str | None
    system_role: SystemRole
    max_tokens_param: MaxTokensParam
    stream_usage: bool
    reasoning_effort: str | None
    reasoning_summary: str | None
    parallel_tool_calls: bool | None
    store: bool | None
    capabilities: ModelCapabilities | None
    profile: str | ServerProfile
    structured_output: OutputMode | None


@final
class OpenAIModel:
    """An OpenAI model (or an OpenAI-compatible server's) behind helikon's
    :class:`~helikon.protocols.Model` protocol.

    Build it with :meth:`chat` (Chat Completions) or :meth:`responses` (the
    Responses API); both take the keyword arguments below.

    Args:
        model_id: the model (or, on Azure, anything: the deployment in the
            URL decides), e.g. ``"gpt-4o"``.
        api: ``"chat"`` or ``"responses"``.
        api_key: the key; defaults to ``OPENAI_API_KEY`` (``AZURE_OPENAI_API_KEY``
            first with ``azure=True``). Required for OpenAI and Azure; a
            custom ``base_url`` may go without one (local servers), and then
            no ``Authorization`` header is sent. Like the official SDK, an
            environment key is sent to whatever ``base_url`` says: pass
            ``api_key=`` explicitly for third-party hosts.
        base_url: the API root, default ``https://api.openai.com/v1``; for a
            compatible server its ``/v1`` root, for an Azure deployment
            ``https://RESOURCE.openai.azure.com/openai/deployments/NAME``
            (Chat) or ``https://RESOURCE.openai.azure.com/openai`` (Responses).
        organization: sent as ``OpenAI-Organization``.
        project: sent as ``OpenAI-Project``.
        extra_headers: more headers (they win over the defaults).
        extra_body: more top-level JSON fields, merged last (e.g. vLLM's
            ``chat_template_kwargs``, ``service_tier``, ``include``).
        http_client: the ``httpx.AsyncClient`` to use (transports, proxies,
            timeouts); one with long read timeouts is made otherwise.
        stream: stream the reply (default) or make one non-streaming call;
            both yield the same model events.
        azure: authenticate with an ``api-key`` header (Azure OpenAI);
            needs ``base_url``.
        api_version: sent as the ``api-version`` query parameter (Azure).
        provider_name: the telemetry provider name; default ``"openai"``
            (``"azure.ai.openai"`` with ``azure=True``).
        system_role: Chat only: the role of the one instruction message,
            ``"system"`` (default; OpenAI treats it as ``developer`` for
            reasoning models) or ``"developer"``.
        max_tokens_param: Chat only: the field that carries
            ``max_output_tokens``: ``"max_completion_tokens"`` (OpenAI's,
            required by its reasoning models) or ``"max_tokens"`` (older
            compatible servers); default from the profile.
        stream_usage: Chat only: ask for usage in the stream
            (``stream_options.include_usage``); turn off for servers that
            reject ``stream_options``; default from the profile.
        profile: Chat only: what the server accepts: ``"openai"`` (default),
            ``"llama.cpp"``, ``"vllm"``, ``"ollama"``, ``"lmstudio"``, or a
            :class:`~helikon.providers.openai.ServerProfile` for any other
            server. Explicit options (``max_tokens_param``, ``stream_usage``,
            ``structured_output``) override it.
        structured_output: Chat only: how an ``output_type`` is asked for:
            ``"native"`` (``json_schema``), ``"json_object"`` (``json_object``
            with the schema, llama.cpp's form), ``"tool"`` (a forced
            final-result tool) or ``"prompted"`` (the schema in the
            instructions); default: the profile's first mode.
        reasoning_effort: ``reasoning_effort`` (Chat) / ``reasoning.effort``
            (Responses), e.g. ``"low"``.
        reasoning_summary: Responses only: ``reasoning.summary`` (``"auto"``,
            ``"concise"``, ``"detailed"``): stream reasoning summaries.
        parallel_tool_calls: send ``parallel_tool_calls`` (when tools are given).
        store: send ``store`` (Responses keeps state for ``previous_response_id``
            unless it is False).
        capabilities: override the capability flags (e.g. a compatible
            server without vision).

    Raises:
        ConfigError: no key where one is needed, or an invalid option.
    """

    def __init__(
        self, model_id: str, *, api: Literal["chat", "responses"] = "chat", **options: Unpack[OpenAIOptions]
    ) -> None:
        check_options("OpenAIModel", options, OpenAIOptions)
        base_url, azure = options.get("base_url"), options.get("azure", False)
        stream = options.get("stream", True)
        system_role = options.get("system_role", "system")
        profile = profile_named(options.get("profile", "openai"))
        max_tokens_param = options.get("max_tokens_param", profile.max_tokens_param)
        output_mode = options.get("structured_output") or profile.output_mode
        reasoning_summary = options.get("reasoning_summary")
        if not model_id:
            raise ConfigError("OpenAIModel needs a model id")
        if api not in ("chat", "responses"):
            raise ConfigError(f"OpenAIModel api must be 'chat' or 'responses', got {api!r}")
        if system_role not in get_args(SystemRole):
            raise ConfigError(f"system_role must be 'system' or 'developer', got {system_role!r}")
        if max_tokens_param not in get_args(MaxTokensParam):
            raise ConfigError(
                f"max_tokens_param must be 'max_completion_tokens' or 'max_tokens', got {max_tokens_param!r}"
            )
        if output_mode not in get_args(OutputMode):
            raise ConfigError(
                f"structured_output must be one of {', '.join(map(repr, get_args(OutputMode)))}, "
                f"got {output_mode!r}"
            )
        if api != "chat" and ("profile" in options or "structured_output" in options):
            raise ConfigError(
                "profile= and structured_output= are Chat Completions options: use OpenAIModel.chat"
            )
        if reasoning_summary is not None and api != "responses":
            raise ConfigError("reasoning_summary is a Responses API option: use OpenAIModel.responses(...)")
        if azure and base_url is None:
            raise ConfigError("azure=True needs base_url= (the resource's deployment URL)")
        key = _api_key(options.get("api_key"), azure=azure, required=azure or base_url is None)
        headers: list[tuple[str, str]] = []
        if key:
            headers.append(("api-key", key) if azure else ("authorization", f"Bearer {key}"))
        if organization := options.get("organization"):
            headers.append(("openai-organization", organization))
        if project := options.get("project"):
            headers.append(("openai-project", project))
        headers.extend((name.lower(), value) for name, value in (options.get("extra_headers") or {}).items())
        api_version = options.get("api_version")
        self._config = OpenAIConfig(
            model_id=model_id,
            api=api,
            provider=options.get("provider_name") or ("azure.ai.openai" if azure else "openai"),
            base_url=base_url or DEFAULT_BASE_URL,
            headers=tuple(headers),
            params=(("api-version", api_version),) if api_version else (),
            extra_body=dict(options.get("extra_body") or {}),
            stream=stream,
            system_role=system_role,
            max_tokens_param=max_tokens_param,
            stream_usage=options.get("stream_usage", profile.stream_usage),
            reasoning_effort=options.get("reasoning_effort"),
            reasoning_summary=reasoning_summary,
            parallel_tool_calls=options.get("parallel_tool_calls"),
            store=options.get("store"),
            profile=profile,
            output_mode=output_mode,
        )
        http_client = options.get("http_client")
        self._owns_client = http_client is None
        # Each wire message of a run is encoded once (see _incremental).
        self._messages = MessageCache(encode=http_json)
        self._client = new_client(http_client)
        self._capabilities = options.get("capabilities") or ModelCapabilities(
            streaming=stream,
            tools=True,
            parallel_tool_calls=True,
            structured_output=True,
            server_managed_state=api == "responses",
            reasoning=True,
            vision=True,
            audio=False,
            prompt_caching=True,
        )

    @classmethod
    def chat(cls, model_id: str, **options: Unpack[OpenAIOptions]) -> OpenAIModel:
        """A Chat Completions model (``POST {base_url}/chat/completions``)."""
        return cls(model_id, api="chat", **options)

    @classmethod
    def responses(cls, model_id: str, **options: Unpack[OpenAIOptions]) -> OpenAIModel:
        """A Responses API model (``POST {base_url}/responses``), with
        server-managed state through ``ModelSettings.previous_response_id``."""
        return cls(model_id, api="responses", **options)

    @property
    def capabilities(self) -> ModelCapabilities:
        return self._capabilities

    @property
    def provider(self) -> str:
        return self._config.provider

    @property
    def model_id(self) -> str:
        return self._config.model_id

    @property
    def api(self) -> Literal["chat", "responses"]:
        """Which OpenAI API this model calls."""
        return self._config.api

    @property
    def base_url(self) -> str:
        return self._config.base_url

    @property
    def streams(self) -> bool:
        """Whether requests ask for a streamed reply."""
        return self._config.stream

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body :meth:`invoke` would send for ``request`` (for inspection)."""
        config = self._config_for(request)
        if config.api == "chat":
            return chat_api.chat_body(request, config)
        return responses_api.responses_body(request, config)

    def _body(self, request: ModelRequest, config: OpenAIConfig) -> dict[str, Any]:
        """:meth:`request_body`, its conversation's final messages as the
        parts encoded for the previous calls (the same bytes, encoded once)."""
        if config.api == "chat":
            return chat_api.chat_body(request, config, self._messages)
        return responses_api.responses_body(request, config, self._messages)

    def _config_for(self, request: ModelRequest) -> OpenAIConfig:
        """The configuration one call is made with: a server that cannot stream
        a turn whose tools are offered with an "auto" choice gets that turn as
        one non-streaming call (its profile says so)."""
        config = self._config
        if config.api == "chat" and config.stream and not config.profile.streams_auto_tool_choice:
            choice = request.settings.tool_choice
            if request.tools and (choice is None or isinstance(choice, ToolChoiceAuto)):
                return attrs.evolve(config, stream=False)
        return config

    async def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        """Call the model and stream its events.

        Raises:
            ModelError: the call failed (HTTP error, mid-stream error event,
                malformed or truncated stream, refusal).
        """
        parser: WireParser
        config = self._config_for(request)
        if config.api == "chat":
            schema = request.settings.response_format
            output_tool = config.output_mode == "tool" and isinstance(schema, JsonSchema)
            unwrap = isinstance(schema, JsonSchema) and chat_api.output_tool_wraps(schema.schema)
            parser = chat_api.ChatParser(config, output_tool, output_tool and unwrap)
            path = chat_api.PATH
        else:
            path, parser = responses_api.PATH, responses_api.ResponsesParser(config)
        body = self._body(request, config)
        async with aclosing(stream_events(self._client, config, path, body, cancel, parser)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        """Close the HTTP client, if this model made it."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"OpenAIModel.{self._config.api}({self._config.model_id!r}, base_url={self._config.base_url!r})"
        )


def _api_key(given: str | None, *, azure: bool, required: bool) -> str | None:
    if given is not None:
        if not given and required:
            raise ConfigError("OpenAIModel: api_key is empty")
        return given
    names = (AZURE_API_KEY_ENV, API_KEY_ENV) if azure else (API_KEY_ENV,)
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    if required:
        raise ConfigError(f"OpenAIModel: no API key: pass api_key= or set {' or '.join(names)}")
    return None


__all__ = [
    "API_KEY_ENV",
    "AZURE_API_KEY_ENV",
    "PROFILES",
    "OpenAIModel",
    "OpenAIOptions",
    "OutputMode",
    "ServerProfile",
]
