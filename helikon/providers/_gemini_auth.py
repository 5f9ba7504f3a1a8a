"""Credentials for Gemini: API keys and Vertex AI bearer tokens.

A Vertex token comes from a *token provider*: any callable returning the
token, synchronously or as an awaitable. It is called before every request,
so it should cache (Google's access tokens live an hour). Application Default
Credentials (ADC) need the optional ``google-auth`` package; when it is
installed, :func:`adc_token_provider` discovers the credentials the way
``gcloud`` and Google's SDKs do and refreshes them in a worker thread, over
httpx (``requests`` is not needed).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeAlias

import attrs
import httpx

from helikon.errors import ConfigError

#: Returns a bearer token, now or as an awaitable.
TokenProvider: TypeAlias = Callable[[], str | Awaitable[str]]

#: The OAuth scope Vertex AI needs.
CLOUD_PLATFORM_SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"


async def call_token_provider(provider: TokenProvider) -> str:
    """Call a sync or async token provider and check what it returned."""
    token = provider()
    if inspect.isawaitable(token):
        token = await token
    if not isinstance(token, str) or not token:
        raise ValueError(f"the token provider returned {type(token).__name__}, not a non-empty str")
    return token


@attrs.frozen
class _HttpxAuthResponse:
    """What google-auth expects back from a transport request."""

    status: int
    headers: Mapping[str, str]
    data: bytes


@attrs.define
class HttpxAuthRequest:
    """A ``google.auth.transport.Request`` over a synchronous httpx client.

    google-auth refreshes tokens through a callable with this signature; its
    own implementations need ``requests`` or ``urllib3``.
    """

    client: httpx.Client = attrs.field(factory=lambda: httpx.Client(timeout=30.0))

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _HttpxAuthResponse:
        exceptions = importlib.import_module("google.auth.exceptions")
        try:
            response = self.client.request(
                method, url, content=body, headers=headers, timeout=timeout if timeout is not None else 30.0
            )
        except httpx.HTTPError as exc:
            raise exceptions.TransportError(str(exc) or type(exc).__name__) from exc
        return _HttpxAuthResponse(response.status_code, dict(response.headers), response.content)


@attrs.define
class AdcTokenProvider:
    """An async token provider over google-auth credentials.

    The token is refreshed (in a worker thread: google-auth does blocking IO)
    when it is missing or about to expire; google-auth's ``valid`` already
    allows for clock skew.
    """

    credentials: Any
    request: Callable[..., Any] = attrs.field(factory=HttpxAuthRequest)

    async def __call__(self) -> str:
        import anyio.to_thread

        if not self.credentials.valid or not self.credentials.token:
            await anyio.to_thread.run_sync(self.credentials.refresh, self.request)
        token = self.credentials.token
        if not isinstance(token, str) or not token:
            raise ValueError("google-auth credentials gave no access token")
        return token


def adc_token_provider(project: str | None = None) -> tuple[AdcTokenProvider, str | None]:
    """Discover Application Default Credentials: ``(token provider, project)``.

    Raises:
        ConfigError: google-auth is not installed, or it found no credentials.
    """
    try:
        google_auth = importlib.import_module("google.auth")
        exceptions = importlib.import_module("google.auth.exceptions")
    except ImportError as exc:
        raise ConfigError(
            "Vertex AI needs a bearer token: set GOOGLE_OAUTH_ACCESS_TOKEN, pass bearer_token= or "
            "token_provider=, or install google-auth for Application Default Credentials "
            "(pip install 'paigasus-helikon[vertex]')"
        ) from exc
    try:
        credentials, found_project = google_auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
    except exceptions.DefaultCredentialsError as exc:
        raise ConfigError(f"no Google Application Default Credentials: {exc}") from exc
    return AdcTokenProvider(credentials), project or found_project


__all__ = [
    "CLOUD_PLATFORM_SCOPE",
    "AdcTokenProvider",
    "HttpxAuthRequest",
    "TokenProvider",
    "adc_token_provider",
    "call_token_provider",
]
