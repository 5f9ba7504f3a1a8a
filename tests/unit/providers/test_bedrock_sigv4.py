"""The SigV4 signer against AWS's published SigV4 test-suite vectors.

The vectors (request, credentials, time, expected ``Authorization``) are
AWS's "Signature Version 4 test suite" (``aws-sig-v4-test-suite``): access key
``AKIDEXAMPLE``, secret ``wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY``, region
``us-east-1``, service ``service``, time 2015-08-30T12:36:00Z, host
``example.amazonaws.com``. The expected values below are copied from the
suite's ``.creq`` and ``.authz`` files.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest

from helikon.providers._bedrock_sigv4 import (
    AwsCredentials,
    amz_date,
    canonical_request,
    canonical_uri,
    sign_headers,
)

KEY = AwsCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
WHEN = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)
HOST = {"host": "example.amazonaws.com"}
SCOPE = "AKIDEXAMPLE/20150830/us-east-1/service/aws4_request"
STS_TOKEN = (
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTfl"
    "fKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvl"
    "Rd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx"
    "3iSIlTJabIQwj2ICCR/oLxBA=="
)


def sign(**kwargs: object) -> dict[str, str]:
    args: dict[str, object] = {
        "method": "POST",
        "raw_path": "/",
        "headers": HOST,
        "body": b"",
        "credentials": KEY,
        "region": "us-east-1",
        "service": "service",
        "now": WHEN,
    }
    args.update(kwargs)
    return sign_headers(**args)  # type: ignore[arg-type]


def test_post_vanilla() -> None:
    headers = sign()

    assert headers == {
        "x-amz-date": "20150830T123600Z",
        "authorization": f"AWS4-HMAC-SHA256 Credential={SCOPE}, SignedHeaders=host;x-amz-date, "
        "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
    }


def test_post_vanilla_canonical_request() -> None:
    canonical, signed = canonical_request("POST", "/", "", {**HOST, "x-amz-date": "20150830T123600Z"}, b"")

    assert canonical == (
        "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert signed == "host;x-amz-date"


def test_post_x_www_form_urlencoded_signs_the_body_and_content_type() -> None:
    headers = sign(
        headers={**HOST, "Content-Type": "application/x-www-form-urlencoded"}, body=b"Param1=value1"
    )

    assert headers["authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={SCOPE}, SignedHeaders=content-type;host;x-amz-date, "
        "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"
    )
    canonical, _ = canonical_request(
        "POST",
        "/",
        "",
        {**HOST, "content-type": "application/x-www-form-urlencoded", "x-amz-date": "20150830T123600Z"},
        b"Param1=value1",
    )
    assert canonical.endswith(hashlib.sha256(b"Param1=value1").hexdigest())


def test_post_vanilla_query() -> None:
    headers = sign(raw_query="Param1=value1")

    assert headers["authorization"].endswith(
        "Signature=28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"
    )


def test_post_sts_header_before_signs_the_session_token() -> None:
    headers = sign(credentials=AwsCredentials(KEY.access_key_id, KEY.secret_access_key, STS_TOKEN))

    assert headers["x-amz-security-token"] == STS_TOKEN
    assert headers["authorization"] == (
        f"AWS4-HMAC-SHA256 Credential={SCOPE}, SignedHeaders=host;x-amz-date;x-amz-security-token, "
        "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"
    )


def test_post_header_key_sort_and_value_trimming() -> None:
    # post-header-key-sort: an extra header sorts between host and x-amz-date.
    headers = sign(headers={**HOST, "My-Header1": "  value1  "})

    assert "SignedHeaders=host;my-header1;x-amz-date" in headers["authorization"]
    assert headers["authorization"].endswith(
        "Signature=c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"
    )


def test_the_signing_time_is_taken_in_utc() -> None:
    later = WHEN.astimezone(timezone(timedelta(hours=2)))

    assert amz_date(later) == "20150830T123600Z"
    assert sign(now=later) == sign()
    with pytest.raises(ValueError, match="timezone-aware"):
        amz_date(datetime(2015, 8, 30))


def test_bedrock_paths_are_encoded_twice() -> None:
    url = httpx.URL(
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.amazon.nova-micro-v1%3A0/converse"
    )

    assert canonical_uri(url.raw_path.decode()) == "/model/us.amazon.nova-micro-v1%253A0/converse"
    assert (
        canonical_uri("/model/arn%3Aaws%3Abedrock%2Fx/converse")
        == "/model/arn%253Aaws%253Abedrock%252Fx/converse"
    )


def test_credentials_never_show_their_secrets() -> None:
    shown = repr(AwsCredentials("AKID", "very-secret", "session-secret"))

    assert "very-secret" not in shown and "session-secret" not in shown and "AKID" in shown


@pytest.mark.parametrize(
    "model_id",
    ["us.amazon.nova-micro-v1:0", "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.x:0"],
)
def test_the_signature_matches_botocores_for_a_bedrock_request(model_id: str) -> None:
    awsrequest = pytest.importorskip("botocore.awsrequest")
    auth = pytest.importorskip("botocore.auth")
    botocore_credentials = pytest.importorskip("botocore.credentials")
    from urllib.parse import quote

    url = f"https://bedrock-runtime.us-east-1.amazonaws.com/model/{quote(model_id, safe='')}/converse-stream"
    body = b'{"messages":[{"role":"user","content":[{"text":"hi"}]}]}'
    theirs = awsrequest.AWSRequest(
        method="POST", url=url, data=body, headers={"Content-Type": "application/json"}
    )
    auth.SigV4Auth(
        botocore_credentials.Credentials("AKID", "secret", "tok"), "bedrock", "us-east-1"
    ).add_auth(theirs)
    when = datetime.strptime(theirs.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    request = httpx.Request("POST", url, content=body)

    mine = sign_headers(
        method="POST",
        raw_path=request.url.raw_path.decode(),
        headers={"host": request.headers["host"], "content-type": "application/json"},
        body=body,
        credentials=AwsCredentials("AKID", "secret", "tok"),
        region="us-east-1",
        service="bedrock",
        now=when,
    )

    assert mine["authorization"] == theirs.headers["Authorization"]
