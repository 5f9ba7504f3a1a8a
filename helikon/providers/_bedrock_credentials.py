"""Where Bedrock's credentials and region come from.

The chain, first match wins (the order the AWS SDKs use):

1. explicit ``credentials=``: helikon's :class:`AwsCredentials`, or the
   botocore objects AWS users already hold: ``botocore.credentials.Credentials``
   (including refreshable ones, asked again before every request) and the
   frozen ``ReadOnlyCredentials``; anything else is a ``ConfigError`` when
   the model is built. Or ``api_key=``, a Bedrock API key sent as a bearer
   token;
2. the environment: ``AWS_BEARER_TOKEN_BEDROCK``, else ``AWS_ACCESS_KEY_ID``
   plus ``AWS_SECRET_ACCESS_KEY`` (and ``AWS_SESSION_TOKEN``);
3. the shared files: the profile named by ``profile=`` or ``AWS_PROFILE``
   (else ``default``) in ``~/.aws/credentials`` (``AWS_SHARED_CREDENTIALS_FILE``),
   then in ``~/.aws/config`` (``AWS_CONFIG_FILE``) when it holds static keys;
4. when botocore is installed (the ``bedrock`` extra), its full provider
   chain: SSO, ``credential_process``, assume-role profiles, web identity,
   the ECS task role and EC2 instance metadata (IMDS). botocore refreshes
   temporary credentials itself; it is asked again before every request, in
   a worker thread, since it may block on the network.

The region: ``region=``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``, then the
profile's ``region`` in the config file.

The environment and files are read once, when the model is built; nothing
here is part of the pure core.
"""

from __future__ import annotations

import configparser
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, TypeAlias, final

import attrs

from helikon.errors import ConfigError
from helikon.providers._bedrock_sigv4 import AwsCredentials


class BotocoreStyleCredentials(Protocol):
    """What botocore's ``Credentials`` and ``ReadOnlyCredentials`` have in common."""

    @property
    def access_key(self) -> str: ...

    @property
    def secret_key(self) -> str: ...

    @property
    def token(self) -> str | None: ...


#: What ``credentials=`` accepts (checked at construction: see :func:`explicit_source`).
ExplicitCredentials: TypeAlias = AwsCredentials | BotocoreStyleCredentials


class CredentialSource(Protocol):
    """Hands out the credentials to sign the next request with."""

    @property
    def description(self) -> str:
        """Where the credentials come from (for messages)."""
        ...

    async def credentials(self) -> AwsCredentials:
        """The current credentials.

        Raises:
            LookupError: none could be found or refreshed (message says why).
        """
        ...


@final
@attrs.frozen
class StaticCredentials:
    """Fixed credentials (explicit, from the environment or a file)."""

    value: AwsCredentials
    description: str = "explicit credentials"

    async def credentials(self) -> AwsCredentials:
        return self.value


@final
@attrs.frozen
class BotocoreObjectCredentials:
    """A botocore ``Credentials`` object the caller passed in, frozen before every request.

    A refreshable one (``RefreshableCredentials``: assume-role, SSO, instance
    roles) may refresh itself over the network, so it is asked in a worker thread.
    """

    value: Any = attrs.field(repr=False)
    refreshable: bool = False
    description: str = "explicit botocore credentials"

    async def credentials(self) -> AwsCredentials:
        if not self.refreshable:
            return _frozen(self.value)
        import anyio.to_thread

        return await anyio.to_thread.run_sync(_frozen, self.value)


def _frozen(found: Any) -> AwsCredentials:
    """A botocore ``Credentials`` object's current keys (refreshing expiring temporary ones)."""
    try:
        frozen = found.get_frozen_credentials()
    except Exception as exc:  # botocore raises its own hierarchy; keep its message
        raise LookupError(f"botocore could not refresh credentials: {exc}") from exc
    return _from_read_only(frozen)


def _from_read_only(frozen: Any) -> AwsCredentials:
    return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token or None)


def _check_keys(owner: str, access_key: object, secret_key: object, token: object) -> None:
    for field, value in (("access key", access_key), ("secret key", secret_key)):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{owner}: the {field} must be a non-empty string, not {type(value).__name__}")
    if token is not None and not isinstance(token, str):
        raise ConfigError(f"{owner}: the session token must be a string or None, not {type(token).__name__}")


def explicit_source(credentials: object) -> CredentialSource:
    """The source for explicit ``credentials=``, refusing what cannot sign.

    botocore is not imported here: an object can only be one of botocore's
    if the caller imported botocore already.

    >>> explicit_source(AwsCredentials("AKIDEXAMPLE", "secret")).description
    'explicit credentials'
    >>> explicit_source({"access_key": "AKID"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    helikon.errors.ConfigError: credentials= must be helikon's AwsCredentials or ... not dict

    Raises:
        ConfigError: ``credentials`` is none of those, or its keys are not strings.
    """
    if isinstance(credentials, AwsCredentials):
        _check_keys(
            "AwsCredentials",
            credentials.access_key_id,
            credentials.secret_access_key,
            credentials.session_token,
        )
        return StaticCredentials(credentials)
    boto = sys.modules.get("botocore.credentials")
    if boto is not None and isinstance(credentials, boto.ReadOnlyCredentials):
        _check_keys("ReadOnlyCredentials", credentials.access_key, credentials.secret_key, credentials.token)
        return StaticCredentials(_from_read_only(credentials), "explicit botocore credentials")
    if boto is not None and isinstance(credentials, boto.RefreshableCredentials):
        # Reading its keys here could start a refresh (network): leave that to the first call.
        return BotocoreObjectCredentials(credentials, refreshable=True)
    if boto is not None and isinstance(credentials, boto.Credentials):
        _check_keys("Credentials", credentials.access_key, credentials.secret_key, credentials.token)
        return BotocoreObjectCredentials(credentials)
    raise ConfigError(
        "credentials= must be helikon's AwsCredentials or botocore's Credentials or ReadOnlyCredentials, "
        f"not {type(credentials).__name__}"
    )


@final
@attrs.frozen
class BotocoreCredentials:
    """botocore's default provider chain, resolved lazily and refreshed by botocore."""

    profile: str | None = None
    description: str = "the botocore credential chain"
    _state: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)

    async def credentials(self) -> AwsCredentials:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self._fetch)

    def _fetch(self) -> AwsCredentials:
        found = self._state.get("credentials")
        if found is None:
            try:
                import botocore.session  # type: ignore[import-not-found,import-untyped,unused-ignore]
            except ImportError as exc:  # pragma: no cover - guarded by the caller
                raise LookupError("botocore is not installed") from exc
            session = botocore.session.Session(profile=self.profile)
            try:
                found = session.get_credentials()
            except Exception as exc:  # botocore raises its own hierarchy; keep its message
                raise LookupError(f"botocore could not load credentials: {exc}") from exc
            if found is None:
                raise LookupError(
                    "no AWS credentials found (environment, shared files, SSO, container or instance role)"
                )
            self._state["credentials"] = found
        return _frozen(found)


def botocore_available() -> bool:
    """Whether the optional botocore dependency can be imported."""
    try:
        import botocore.session  # type: ignore[import-not-found,import-untyped,unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


def _profile_name(env: Mapping[str, str], profile: str | None) -> str:
    return profile or env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"


def _read_ini(path: Path) -> configparser.RawConfigParser | None:
    parser = configparser.RawConfigParser()
    try:
        with path.open(encoding="utf-8") as handle:
            parser.read_file(handle)
    except (OSError, configparser.Error):
        return None
    return parser


def _section(
    parser: configparser.RawConfigParser, name: str, *, config_file: bool
) -> Mapping[str, str] | None:
    candidates = [name] if not config_file else ([f"profile {name}", name] if name != "default" else [name])
    for candidate in candidates:
        if parser.has_section(candidate):
            return dict(parser.items(candidate))
    return None


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def credentials_file(env: Mapping[str, str]) -> Path:
    raw = env.get("AWS_SHARED_CREDENTIALS_FILE")
    return Path(raw).expanduser() if raw else _home(env) / ".aws" / "credentials"


def config_file(env: Mapping[str, str]) -> Path:
    raw = env.get("AWS_CONFIG_FILE")
    return Path(raw).expanduser() if raw else _home(env) / ".aws" / "config"


def _static_from(section: Mapping[str, str] | None) -> AwsCredentials | None:
    if not section:
        return None
    key = section.get("aws_access_key_id", "").strip()
    secret = section.get("aws_secret_access_key", "").strip()
    if not key or not secret:
        return None
    token = section.get("aws_session_token", "").strip() or section.get("aws_security_token", "").strip()
    return AwsCredentials(key, secret, token or None)


@attrs.frozen
class Resolved:
    """What construction found: a bearer token or a credential source (or neither)."""

    bearer_token: str | None
    source: CredentialSource | None


def resolve_credentials(
    *,
    credentials: ExplicitCredentials | None,
    api_key: str | None,
    profile: str | None,
    env: Mapping[str, str] | None = None,
    use_botocore: bool | None = None,
) -> Resolved:
    """Walk the chain (see the module docs) and say where credentials come from.

    Raises:
        ConfigError: explicit ``credentials`` of a type that cannot sign.

    >>> resolve_credentials(credentials=None, api_key=None, profile=None,
    ...     env={"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s", "HOME": "/nonexistent"},
    ...     use_botocore=False).source.description
    'the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables'
    """
    env = os.environ if env is None else env
    if credentials is not None:
        return Resolved(None, explicit_source(credentials))
    if api_key:
        return Resolved(api_key, None)
    bearer = env.get("AWS_BEARER_TOKEN_BEDROCK", "").strip()
    if bearer:
        return Resolved(bearer, None)
    key = env.get("AWS_ACCESS_KEY_ID", "").strip()
    secret = env.get("AWS_SECRET_ACCESS_KEY", "").strip()
    if key and secret:
        token = env.get("AWS_SESSION_TOKEN", "").strip() or env.get("AWS_SECURITY_TOKEN", "").strip()
        return Resolved(
            None,
            StaticCredentials(
                AwsCredentials(key, secret, token or None),
                "the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables",
            ),
        )
    name = _profile_name(env, profile)
    for path, is_config in ((credentials_file(env), False), (config_file(env), True)):
        parser = _read_ini(path)
        found = _static_from(_section(parser, name, config_file=is_config)) if parser else None
        if found is not None:
            return Resolved(None, StaticCredentials(found, f"profile {name!r} in {path}"))
    if use_botocore is None:
        use_botocore = botocore_available()
    if use_botocore:
        return Resolved(None, BotocoreCredentials(profile or env.get("AWS_PROFILE") or None))
    return Resolved(None, None)


def resolve_region(
    region: str | None, profile: str | None, env: Mapping[str, str] | None = None
) -> str | None:
    """The region to call: ``region``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``,
    then the profile's ``region`` in the config file.

    >>> resolve_region(None, None, {"AWS_DEFAULT_REGION": "eu-west-1", "HOME": "/nonexistent"})
    'eu-west-1'
    """
    env = os.environ if env is None else env
    for candidate in (region, env.get("AWS_REGION"), env.get("AWS_DEFAULT_REGION")):
        if candidate and candidate.strip():
            return candidate.strip()
    parser = _read_ini(config_file(env))
    section = _section(parser, _profile_name(env, profile), config_file=True) if parser else None
    found = (section or {}).get("region", "").strip()
    return found or None


__all__ = [
    "BotocoreCredentials",
    "BotocoreObjectCredentials",
    "BotocoreStyleCredentials",
    "CredentialSource",
    "ExplicitCredentials",
    "Resolved",
    "StaticCredentials",
    "botocore_available",
    "config_file",
    "credentials_file",
    "explicit_source",
    "resolve_credentials",
    "resolve_region",
]
