"""Amazon Bedrock through the Converse and ConverseStream APIs.

::

    from helikon.providers.bedrock import BedrockModel

    model = await BedrockModel.from_env("us.anthropic.claude-sonnet-4-20250514-v1:0")
    model = BedrockModel.converse("amazon.nova-pro-v1:0", region="us-east-1",
                                  credentials=AwsCredentials("AKIA...", "..."))

Requests are signed with SigV4 (service ``bedrock``) by helikon's own signer,
or carry a Bedrock API key as a bearer token. ConverseStream's binary
``application/vnd.amazon.eventstream`` body is decoded here, with both CRC32
checksums of every frame verified. No AWS SDK is needed at run time; with
botocore installed (``pip install 'paigasus-helikon[bedrock]'``) its full
credential chain (SSO, assume-role, container and instance roles) is used
when neither explicit credentials nor the environment nor the shared files
provide keys. See :mod:`helikon.providers._bedrock_credentials` for the chain.

The model family is detected from the model id (cross-region prefixes such as
``us.``, ``eu.``, ``apac.`` and ``global.`` stripped); it decides structured
output (forced-tool synthesis for Anthropic, Amazon Nova and Mistral, plain
text otherwise) and which history blocks may be sent back. Every tool schema
goes through :func:`rewrite_tool_schema`.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Final, TypedDict, Unpack, cast, final
from urllib.parse import quote

import anyio
import httpx

from helikon._json import JsonObject
from helikon.cancel import CancellationToken
from helikon.errors import ConfigError, ModelError
from helikon.model import ModelCapabilities, ModelEvent, ModelRequest, ModelSettings
from helikon.providers._anthropic_request import sampling_problem
from helikon.providers._bedrock_credentials import (
    CredentialSource,
    ExplicitCredentials,
    resolve_credentials,
    resolve_region,
)
from helikon.providers._bedrock_eventstream import EventStreamDecoder, EventStreamError
from helikon.providers._bedrock_request import (
    OUTPUT_TOOL,
    REDACTED_PREFIX,
    ModelFamily,
    Options,
    RequestError,
    base_model_id,
    build_request,
    detect_family,
    dumps,
)
from helikon.providers._bedrock_response import PROVIDER, StreamTranslator, converse_events, http_error
from helikon.providers._bedrock_schema import rewrite_tool_schema
from helikon.providers._bedrock_sigv4 import AwsCredentials, sign_headers
from helikon.providers._http import chunks, decode_json, new_client, read_all, transport_error
from helikon.providers._incremental import MessageCache
from helikon.providers._options import check_options

#: The SigV4 signing name of the Bedrock Runtime endpoints.
SIGNING_NAME: Final = "bedrock"


class BedrockEnvOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`BedrockModel.from_env` (what each means and its
    default: the :class:`BedrockModel` docs)."""

    region: str | None
    profile: str | None
    http_client: httpx.AsyncClient | None
    base_url: str | None
    stream: bool
    additional_model_request_fields: JsonObject | None
    stop_sequences: Sequence[str]
    prompt_caching: bool
    extra_body: JsonObject | None


class BedrockOptions(BedrockEnvOptions, total=False):
    """The keyword arguments of :class:`BedrockModel` and :meth:`BedrockModel.converse`:
    :class:`BedrockEnvOptions` and explicit credentials."""

    credentials: ExplicitCredentials | None
    api_key: str | None
    use_botocore: bool | None


@final
class BedrockModel:
    """A Bedrock model behind the Converse API.

    Prefer the named constructors :meth:`converse` and :meth:`from_env`; the
    keyword constructor takes the same arguments.

    Args:
        model_id: a model id (``amazon.nova-pro-v1:0``), a cross-region
            inference profile id (``us.anthropic.claude-...``) or an ARN.
        region: the AWS region; else ``AWS_REGION``, ``AWS_DEFAULT_REGION``,
            or the profile's ``region`` in ``~/.aws/config``.
        credentials: explicit credentials: an :class:`AwsCredentials`, or
            botocore's ``Credentials`` (refreshable ones are asked again
            before every request) or frozen ``ReadOnlyCredentials``; else the
            chain (environment, shared files, then botocore's chain when
            installed).
        api_key: a Bedrock API key (sent as a bearer token instead of SigV4);
            else ``AWS_BEARER_TOKEN_BEDROCK`` when set and no explicit
            credentials are given.
        profile: the shared-config profile (default ``AWS_PROFILE``, else
            ``default``).
        http_client: the :class:`httpx.AsyncClient` to use (transports,
            proxies, timeouts); otherwise each call opens and closes its own.
        base_url: the endpoint (default
            ``https://bedrock-runtime.{region}.amazonaws.com``), e.g. a VPC
            endpoint or a proxy; requests are still signed for ``region``.
        stream: ConverseStream (the default) or, when False, Converse; both
            yield the same model events.
        additional_model_request_fields: sent as
            ``additionalModelRequestFields`` (e.g. Claude's
            ``{"thinking": {"type": "enabled", "budget_tokens": 1024}}``).
        stop_sequences: ``inferenceConfig.stopSequences``.
        prompt_caching: add cache points after the system prompt and the tool
            list (Anthropic and Amazon Nova models).
        extra_body: extra top-level request fields (``guardrailConfig``,
            ``performanceConfig``, ...), merged last.
        use_botocore: use botocore's credential chain as the last resort
            (default: when it is installed).

    Raises:
        ConfigError: no region, no credentials could come from anywhere, or
            ``credentials`` is not one of the accepted types.
    """

    __slots__ = (
        "_base_url",
        "_bearer",
        "_capabilities",
        "_client",
        "_family",
        "_messages",
        "_model_id",
        "_options",
        "_region",
        "_source",
        "_stream",
    )

    def __init__(self, model_id: str, **options: Unpack[BedrockOptions]) -> None:
        check_options("BedrockModel", options, BedrockOptions)
        if not isinstance(model_id, str) or not model_id.strip():
            raise ConfigError("BedrockModel needs a model id, e.g. 'amazon.nova-pro-v1:0'")
        self._model_id = model_id.strip()
        profile, base_url = options.get("profile"), options.get("base_url")
        resolved = resolve_credentials(
            credentials=options.get("credentials"),
            api_key=options.get("api_key"),
            profile=profile,
            use_botocore=options.get("use_botocore"),
        )
        self._bearer = resolved.bearer_token
        self._source: CredentialSource | None = resolved.source
        if self._bearer is None and self._source is None:
            raise ConfigError(
                "no AWS credentials for Bedrock: pass credentials=AwsCredentials(...) or api_key=, set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_BEARER_TOKEN_BEDROCK), configure a "
                "profile in ~/.aws/credentials (AWS_PROFILE), or install botocore for SSO and instance roles"
            )
        found_region = resolve_region(options.get("region"), profile)
        if found_region is None and (base_url is None or self._bearer is None):
            raise ConfigError(
                "no AWS region for Bedrock: pass region= or set AWS_REGION (or AWS_DEFAULT_REGION)"
            )
        self._region = found_region or ""
        self._base_url = (base_url or f"https://bedrock-runtime.{self._region}.amazonaws.com").rstrip("/")
        self._client = options.get("http_client")
        self._stream = options.get("stream", True)
        self._family = detect_family(self._model_id)
        # Each wire message of a run is encoded once (see _incremental).
        self._messages = MessageCache()
        self._options = Options(
            additional_model_request_fields=options.get("additional_model_request_fields"),
            stop_sequences=tuple(options.get("stop_sequences", ())),
            prompt_caching=options.get("prompt_caching", False),
            extra_body=options.get("extra_body"),
        )
        self._capabilities = _capabilities(self._family, self._model_id, self._stream)

    # -- construction -------------------------------------------------------------

    @classmethod
    def converse(cls, model_id: str, **options: Unpack[BedrockOptions]) -> BedrockModel:
        """A model using Converse (ConverseStream when ``stream``); see the class docs."""
        return cls(model_id, **options)

    @classmethod
    async def from_env(cls, model_id: str, **options: Unpack[BedrockEnvOptions]) -> BedrockModel:
        """A model configured from the standard AWS chain (no explicit credentials).

        Asynchronous for parity with the AWS SDKs: the environment and the
        shared files are read in a worker thread. The botocore part of the
        chain stays lazy: SSO, container and instance-role failures surface
        from ``invoke``, not here.

        Raises:
            ConfigError: no region, or no credentials could come from anywhere.
        """
        check_options("BedrockModel.from_env", options, BedrockEnvOptions)

        def build() -> BedrockModel:
            return cls(model_id, **options)

        return await anyio.to_thread.run_sync(build)

    def check_settings(self, settings: ModelSettings) -> None:
        """Refuse, with a :class:`ConfigError`, sampling settings a Claude model
        on Bedrock never accepts (``LlmAgent`` calls this when it is built): the
        same per-family rule as :meth:`AnthropicModel.check_settings`.

        Raises:
            ConfigError: a temperature or top_p the model's family refuses.
        """
        if self._family is ModelFamily.ANTHROPIC:
            problem = sampling_problem(settings, base_model_id(self._model_id))
            if problem is not None:
                raise ConfigError(f"BedrockModel {self._model_id!r}: {problem}")

    # -- the Model protocol -------------------------------------------------------------

    @property
    def capabilities(self) -> ModelCapabilities:
        return self._capabilities

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def family(self) -> ModelFamily:
        """The model family detected from the id."""
        return self._family

    @property
    def base_url(self) -> str:
        """The endpoint root requests go to."""
        return self._base_url

    @property
    def streams(self) -> bool:
        """Whether requests use ``converse-stream``."""
        return bool(self._stream)

    @property
    def region(self) -> str:
        """The region requests are signed for."""
        return self._region

    def __repr__(self) -> str:
        return f"BedrockModel({self._model_id!r}, region={self._region!r}, stream={self._stream})"

    async def invoke(self, request: ModelRequest, cancel: CancellationToken) -> AsyncIterator[ModelEvent]:
        """Call Converse (or ConverseStream) and yield the model events.

        Raises:
            ModelError: the request could not be built, signed or sent, the
                server refused it, or the stream was malformed or cut.
        """
        try:
            converse = build_request(request, self._family, self._options, self._messages)
        except RequestError as exc:
            raise ModelError.other(f"{PROVIDER} {self._model_id}: {exc}") from None
        http_request = await self._http_request(dumps(converse.body))
        # Without a caller's client, each call has its own: a pooled
        # connection must not outlive the event loop that opened it.
        client = new_client(self._client)
        try:
            response = await self._send(client, http_request, cancel)
            if response is None:
                return
            try:
                translator = StreamTranslator(self._model_id, converse.output)
                # A gateway may answer a streamed request with one JSON response.
                whole = response.headers.get("content-type", "").startswith("application/json")
                events = (
                    self._stream_events(response, cancel, translator)
                    if self._stream and not whole
                    else self._whole_events(response, cancel, translator)
                )
                async with aclosing(events):
                    async for event in events:
                        yield event
            finally:
                await response.aclose()
        finally:
            if self._client is None:
                await client.aclose()

    async def _stream_events(
        self, response: httpx.Response, cancel: CancellationToken, translator: StreamTranslator
    ) -> AsyncGenerator[ModelEvent, None]:
        decoder = EventStreamDecoder()
        body_chunks = cast(  # chunks() is an async generator; aclosing needs to know it
            AsyncGenerator[bytes, None],
            chunks(response, cancel, provider=PROVIDER, model_id=self._model_id),
        )
        async with aclosing(body_chunks) as body:
            async for chunk in body:
                try:
                    messages = decoder.feed(chunk)
                except EventStreamError as exc:
                    raise self._corrupt(exc) from None
                for message in messages:
                    # In-memory transports may never reach a checkpoint where
                    # the cancel scope could act: poll the token too.
                    if cancel.cancelled:
                        return
                    for event in translator.on_message(message):
                        yield event
        if _stopped(cancel):
            return
        try:
            decoder.close()
        except EventStreamError as exc:
            raise self._corrupt(exc) from None
        for event in translator.finish():
            yield event

    async def _whole_events(
        self, response: httpx.Response, cancel: CancellationToken, translator: StreamTranslator
    ) -> AsyncGenerator[ModelEvent, None]:
        raw = await read_all(response, cancel, provider=PROVIDER, model_id=self._model_id)
        if raw is None:
            return
        data = decode_json(raw, provider=PROVIDER, model_id=self._model_id)
        for event_type, payload in converse_events(data, self._model_id):
            for event in translator.on_event(event_type, payload):
                yield event
        for event in translator.finish():
            yield event

    # -- HTTP -------------------------------------------------------------------------

    def _corrupt(self, exc: EventStreamError) -> ModelError:
        return ModelError.transport(f"{PROVIDER} {self._model_id}: corrupt event stream: {exc}")

    async def _http_request(self, body: bytes) -> httpx.Request:
        operation = "converse-stream" if self._stream else "converse"
        url = f"{self._base_url}/model/{quote(self._model_id, safe='')}/{operation}"
        accept = "application/vnd.amazon.eventstream" if self._stream else "application/json"
        request = httpx.Request(
            "POST", url, headers={"content-type": "application/json", "accept": accept}, content=body
        )
        if self._bearer is not None:
            request.headers["authorization"] = f"Bearer {self._bearer}"
            return request
        assert self._source is not None
        try:
            credentials = await self._source.credentials()
        except LookupError as exc:
            raise ModelError.other(
                f"{PROVIDER} {self._model_id}: no usable AWS credentials ({self._source.description}): {exc}"
            ) from None
        path, _, query = request.url.raw_path.decode("ascii").partition("?")
        signed = sign_headers(
            method="POST",
            raw_path=path,
            raw_query=query,
            headers={"host": request.headers["host"], "content-type": "application/json"},
            body=body,
            credentials=credentials,
            region=self._region,
            service=SIGNING_NAME,
            now=datetime.now(UTC),
        )
        request.headers.update(signed)
        return request

    async def _send(
        self, client: httpx.AsyncClient, request: httpx.Request, cancel: CancellationToken
    ) -> httpx.Response | None:
        """Send for a streamed response; None if cancelled first.

        Like :func:`helikon.providers._http.send`, but errors are classified by
        Bedrock's ``x-amzn-ErrorType`` (a ``ModelNotReadyException`` is HTTP 429
        yet means the model is unavailable, not that the caller is throttled).
        """
        try:
            with cancel.scope() as scope:
                response = await client.send(request, stream=True)
                if response.status_code >= 400:
                    body = await response.aread()
                    await response.aclose()
                    raise http_error(self._model_id, response.status_code, response.headers, body)
        except httpx.HTTPError as exc:
            raise transport_error(PROVIDER, self._model_id, exc) from exc
        if scope.cancelled_caught:
            return None
        return response


def _stopped(cancel: CancellationToken) -> bool:
    """Whether the token fired or its deadline passed (streams then end quietly)."""
    if cancel.cancelled:
        return True
    deadline = cancel.deadline
    return deadline is not None and not math.isinf(deadline) and anyio.current_time() >= deadline


def _capabilities(family: ModelFamily, model_id: str, stream: bool) -> ModelCapabilities:
    name = base_model_id(model_id).lower()
    vision = (
        family is ModelFamily.ANTHROPIC
        or (family is ModelFamily.AMAZON_NOVA and "micro" not in name)
        or any(marker in name for marker in ("llama3-2-11b", "llama3-2-90b", "llama4", "pixtral"))
    )
    return ModelCapabilities(
        streaming=stream,
        tools=True,
        parallel_tool_calls=family in (ModelFamily.ANTHROPIC, ModelFamily.AMAZON_NOVA, ModelFamily.OPENAI),
        structured_output=family.forced_tool_choice,
        server_managed_state=False,
        reasoning=family in (ModelFamily.ANTHROPIC, ModelFamily.OPENAI) or name.startswith("deepseek."),
        vision=vision,
        audio=False,
        prompt_caching=family in (ModelFamily.ANTHROPIC, ModelFamily.AMAZON_NOVA),
    )


__all__ = [
    "OUTPUT_TOOL",
    "REDACTED_PREFIX",
    "AwsCredentials",
    "BedrockEnvOptions",
    "BedrockModel",
    "BedrockOptions",
    "ModelFamily",
    "detect_family",
    "rewrite_tool_schema",
]
