"""Where credentials and the region come from: explicit values, the
environment, the shared files and (optionally) botocore's chain."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import trio

from helikon.errors import ConfigError
from helikon.providers._bedrock_credentials import (
    BotocoreCredentials,
    StaticCredentials,
    resolve_credentials,
    resolve_region,
)
from helikon.providers.bedrock import AwsCredentials, BedrockModel

AWS_VARS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No AWS variables, and a HOME without ~/.aws."""
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def write_aws_files(home: Path) -> None:
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s-default\n\n"
        "[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = s-work\naws_session_token = t-work\n"
    )
    (home / ".aws" / "config").write_text(
        "[default]\nregion = eu-central-1\n\n[profile work]\nregion = us-west-2\n\n"
        "[profile keys-in-config]\naws_access_key_id = AKIDCONFIG\naws_secret_access_key = s-config\n"
    )


def static(resolved: Any) -> AwsCredentials:
    assert isinstance(resolved.source, StaticCredentials)
    value: AwsCredentials = resolved.source.value
    return value


def test_explicit_credentials_win(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s-env")
    explicit = AwsCredentials("AKIDX", "s-x")

    assert static(resolve_credentials(credentials=explicit, api_key=None, profile=None)) == explicit


def test_environment_variables(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_aws_files(clean_env)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s-env")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "t-env")

    found = resolve_credentials(credentials=None, api_key=None, profile=None, use_botocore=False)

    assert static(found) == AwsCredentials("AKIDENV", "s-env", "t-env")


def test_shared_credentials_file_and_profiles(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_aws_files(clean_env)

    default = resolve_credentials(credentials=None, api_key=None, profile=None, use_botocore=False)
    monkeypatch.setenv("AWS_PROFILE", "work")
    work = resolve_credentials(credentials=None, api_key=None, profile=None, use_botocore=False)
    from_config = resolve_credentials(
        credentials=None, api_key=None, profile="keys-in-config", use_botocore=False
    )

    assert static(default) == AwsCredentials("AKIDDEFAULT", "s-default")
    assert static(work) == AwsCredentials("AKIDWORK", "s-work", "t-work")
    assert static(from_config) == AwsCredentials("AKIDCONFIG", "s-config")
    assert "profile 'work'" in work.source.description  # type: ignore[union-attr]


def test_file_locations_can_be_moved(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "creds.ini"
    elsewhere.write_text("[default]\naws_access_key_id = AKIDMOVED\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(elsewhere))

    found = resolve_credentials(credentials=None, api_key=None, profile=None, use_botocore=False)

    assert static(found).access_key_id == "AKIDMOVED"


def test_a_bedrock_api_key_is_a_bearer_token(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key")

    assert resolve_credentials(credentials=None, api_key=None, profile=None).bearer_token == "bedrock-api-key"
    assert resolve_credentials(credentials=None, api_key="given", profile=None).bearer_token == "given"


def test_nothing_found_without_botocore(clean_env: Path) -> None:
    found = resolve_credentials(credentials=None, api_key=None, profile=None, use_botocore=False)

    assert found.source is None and found.bearer_token is None


def test_missing_credentials_are_a_config_error_naming_the_variables(clean_env: Path) -> None:
    with pytest.raises(ConfigError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        BedrockModel.converse("amazon.nova-micro-v1:0", region="us-east-1", use_botocore=False)


def test_a_missing_region_is_a_config_error(clean_env: Path) -> None:
    with pytest.raises(ConfigError, match="AWS_REGION"):
        BedrockModel.converse("amazon.nova-micro-v1:0", credentials=AwsCredentials("a", "b"))


def test_region_order(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_aws_files(clean_env)

    assert resolve_region(None, None) == "eu-central-1"
    assert resolve_region(None, "work") == "us-west-2"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert resolve_region(None, "work") == "ap-south-1"
    monkeypatch.setenv("AWS_REGION", "ca-central-1")
    assert resolve_region(None, None) == "ca-central-1"
    assert resolve_region("us-east-2", None) == "us-east-2"


def test_the_model_reads_the_chain(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_aws_files(clean_env)
    monkeypatch.setenv("AWS_PROFILE", "work")

    model = trio.run(BedrockModel.from_env, "us.amazon.nova-micro-v1:0")

    assert model.region == "us-west-2"
    assert model.provider == "aws.bedrock" and model.model_id == "us.amazon.nova-micro-v1:0"


class FakeFrozen:
    access_key = "AKIDBOTO"
    secret_key = "s-boto"
    token = "t-boto"


class FakeCredentials:
    refreshed = 0

    def get_frozen_credentials(self) -> FakeFrozen:
        FakeCredentials.refreshed += 1
        return FakeFrozen()


def fake_botocore(monkeypatch: pytest.MonkeyPatch, credentials: object) -> list[str | None]:
    profiles: list[str | None] = []

    class Session:
        def __init__(self, profile: str | None = None) -> None:
            profiles.append(profile)

        def get_credentials(self) -> object:
            return credentials

    session_module = types.ModuleType("botocore.session")
    session_module.Session = Session  # type: ignore[attr-defined]
    package = types.ModuleType("botocore")
    package.session = session_module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "botocore", package)
    monkeypatch.setitem(sys.modules, "botocore.session", session_module)
    return profiles


def test_botocore_is_the_last_resort_and_is_asked_before_every_request(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profiles = fake_botocore(monkeypatch, FakeCredentials())
    monkeypatch.setenv("AWS_PROFILE", "sso-profile")

    found = resolve_credentials(credentials=None, api_key=None, profile=None)
    assert isinstance(found.source, BotocoreCredentials)

    async def twice() -> list[AwsCredentials]:
        assert found.source is not None
        return [await found.source.credentials(), await found.source.credentials()]

    before = FakeCredentials.refreshed
    first, second = trio.run(twice)

    assert first == second == AwsCredentials("AKIDBOTO", "s-boto", "t-boto")
    assert profiles == ["sso-profile"]  # one session, created lazily
    assert FakeCredentials.refreshed - before == 2  # botocore may refresh temporary credentials each time


def test_botocore_finding_nothing_is_a_lookup_error(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_botocore(monkeypatch, None)
    source = BotocoreCredentials()

    with pytest.raises(LookupError, match="no AWS credentials found"):
        trio.run(source.credentials)
