"""Bedrock with the credentials AWS users hold: botocore's own objects.

``credentials=`` takes helikon's :class:`AwsCredentials` or botocore's
``Credentials`` (refreshable ones included) and frozen ``ReadOnlyCredentials``,
all real botocore objects here; anything else is refused when the model is
built. (The signer and the event-stream decoder are checked against
botocore's in ``test_bedrock_sigv4.py`` and ``test_bedrock_eventstream.py``.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from test_bedrock_support import HI, capture, collect, event_stream, failure, frames, model

from helikon.errors import ConfigError, OtherModelFailure
from helikon.providers._bedrock_credentials import BotocoreObjectCredentials, StaticCredentials
from helikon.providers.bedrock import AwsCredentials, BedrockModel

boto = pytest.importorskip("botocore.credentials", reason="botocore (the bedrock extra) is not installed")

KEYS = ("AKIDTEST", "test-secret", "test-session-token")  # the keys capture() checks signatures with
SAME = AwsCredentials(*KEYS)


def signed_with(request: httpx.Request) -> str:
    return request.headers["authorization"].split("Credential=")[1].split("/")[0]


# -- accepted: botocore's credential objects ------------------------------------------------


@pytest.mark.parametrize(
    "credentials",
    [
        boto.Credentials(*KEYS),
        boto.ReadOnlyCredentials(*KEYS, None),
        boto.Credentials(*KEYS).get_frozen_credentials(),
    ],
    ids=["Credentials", "ReadOnlyCredentials", "frozen"],
)
def test_botocore_credentials_sign_like_the_same_keys(credentials: Any) -> None:
    seen, handler = capture()  # capture() recomputes each signature with SAME's keys

    collect(model(handler, credentials=credentials), HI)

    assert len(seen) == 1 and signed_with(seen[0]) == "AKIDTEST"
    assert seen[0].headers["x-amz-security-token"] == "test-session-token"


def test_frozen_credentials_without_a_token_send_no_token_header() -> None:
    frozen = boto.ReadOnlyCredentials("AKIDPLAIN", "s", None, None)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return event_stream(frames([["messageStop", {"stopReason": "end_turn"}]]))

    collect(model(handler, credentials=frozen), HI)

    assert signed_with(seen[0]) == "AKIDPLAIN" and "x-amz-security-token" not in seen[0].headers


def refreshable(expires_in: timedelta, refresh: Any) -> Any:
    """A real botocore ``RefreshableCredentials``, as assume-role and SSO hand out."""
    return boto.RefreshableCredentials.create_from_metadata(
        metadata={
            "access_key": "AKIDOLD",
            "secret_key": "old-secret",
            "token": "old-token",
            "expiry_time": (datetime.now(UTC) + expires_in).isoformat(),
        },
        refresh_using=refresh,
        method="assume-role",
    )


def test_refreshable_credentials_are_refreshed_by_botocore_before_a_request() -> None:
    refreshes: list[int] = []

    def refresh() -> dict[str, str]:
        refreshes.append(1)
        return {
            "access_key": "AKIDTEST",
            "secret_key": "test-secret",
            "token": "test-session-token",
            "expiry_time": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
        }

    credentials = refreshable(timedelta(minutes=1), refresh)  # inside botocore's mandatory refresh window
    seen, handler = capture()
    m = model(handler, credentials=credentials)

    assert refreshes == []  # building the model does not touch them
    collect(m, HI)
    collect(m, HI)

    assert [signed_with(r) for r in seen] == ["AKIDTEST", "AKIDTEST"]
    assert refreshes == [1]  # the fresh keys last an hour: one refresh


def test_a_failing_refresh_is_a_model_failure_at_the_call() -> None:
    def refresh() -> dict[str, str]:
        raise RuntimeError("the SSO token has expired")

    m = model(lambda r: httpx.Response(200), credentials=refreshable(timedelta(seconds=-5), refresh))

    found, _ = failure(m, HI)

    assert isinstance(found, OtherModelFailure)
    assert "no usable AWS credentials (explicit botocore credentials)" in found.message
    assert "the SSO token has expired" in found.message


# -- refused at construction ---------------------------------------------------------------------


class LookAlike:
    access_key = "AKID"
    secret_key = "s"
    token = None


@pytest.mark.parametrize(
    ("credentials", "message"),
    [
        ({"access_key": "AKID", "secret_key": "s"}, "not dict"),
        (("AKID", "s", None), "not tuple"),
        ("AKID:s", "not str"),
        (LookAlike(), "not LookAlike"),
        (AwsCredentials("", "s"), "AwsCredentials: the access key must be a non-empty string, not str"),
        (AwsCredentials("AKID", None), "secret key must be a non-empty string, not NoneType"),  # type: ignore[arg-type]
        (AwsCredentials("AKID", "s", 5), "session token must be a string or None, not int"),  # type: ignore[arg-type]
        (boto.Credentials(None, "s"), "Credentials: the access key must be a non-empty"),
        (boto.ReadOnlyCredentials("AKID", "", None, None), "the secret key must be"),
    ],
)
def test_anything_else_is_a_config_error_when_the_model_is_built(credentials: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BedrockModel.converse("amazon.nova-micro-v1:0", region="us-east-1", credentials=credentials)


def test_each_kind_becomes_the_right_source() -> None:
    from helikon.providers._bedrock_credentials import explicit_source

    assert isinstance(explicit_source(SAME), StaticCredentials)
    frozen = explicit_source(boto.ReadOnlyCredentials("A", "s", None, None))
    assert isinstance(frozen, StaticCredentials) and frozen.value == AwsCredentials("A", "s")
    plain = explicit_source(boto.Credentials("A", "s"))
    assert isinstance(plain, BotocoreObjectCredentials) and not plain.refreshable
    assert "secret" not in repr(plain)
    rotating = explicit_source(refreshable(timedelta(hours=1), dict))
    assert isinstance(rotating, BotocoreObjectCredentials) and rotating.refreshable
