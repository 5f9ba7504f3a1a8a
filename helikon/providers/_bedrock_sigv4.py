"""AWS Signature Version 4 request signing (header-based, ``AWS4-HMAC-SHA256``).

Pure functions over plain values: the caller passes the time, the
credentials and the exact request parts, and gets back the headers to add.
The steps follow AWS's published algorithm ("Create a signed AWS API
request"):

1. the canonical request: method, canonical URI, canonical query string,
   canonical headers, signed header names and the hex SHA-256 of the body;
2. the string to sign: algorithm, timestamp, credential scope and the hex
   SHA-256 of the canonical request;
3. the signing key: HMAC-SHA256 chained over date, region, service and
   ``aws4_request``, starting from ``"AWS4" + secret``;
4. the signature: hex HMAC-SHA256 of the string to sign with that key.

The canonical URI encodes every path segment once more, as every AWS service
but S3 expects: a path already holding ``%3A`` (a model id's colon) is signed
as ``%253A``. Tests check the result against AWS's SigV4 test-suite vectors.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Final
from urllib.parse import quote, unquote

import attrs

ALGORITHM: Final = "AWS4-HMAC-SHA256"
_SPACES: Final = re.compile(r"\s+")


@attrs.frozen(repr=False)
class AwsCredentials:
    """An AWS access key, with the session token of temporary credentials.

    The secret never shows in ``repr``.

    >>> AwsCredentials("AKIDEXAMPLE", "secret")
    AwsCredentials(access_key_id='AKIDEXAMPLE', secret_access_key='***', session_token=None)
    """

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def __repr__(self) -> str:
        token = None if self.session_token is None else "***"
        return (
            f"AwsCredentials(access_key_id={self.access_key_id!r}, secret_access_key='***', "
            f"session_token={token!r})"
        )


def amz_date(moment: datetime) -> str:
    """The ``x-amz-date`` form of ``moment`` (converted to UTC).

    >>> amz_date(datetime(2015, 8, 30, 12, 36, tzinfo=UTC))
    '20150830T123600Z'
    """
    if moment.tzinfo is None:
        raise ValueError("the signing time must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def canonical_uri(raw_path: str) -> str:
    """The canonical URI of a (percent-encoded) request path, for non-S3 services.

    Each segment is URI-encoded again, so an encoded colon is signed as ``%253A``.

    >>> canonical_uri("/model/us.amazon.nova-micro-v1%3A0/converse")
    '/model/us.amazon.nova-micro-v1%253A0/converse'
    >>> canonical_uri("")
    '/'
    """
    return quote(raw_path or "/", safe="/-_.~")


def canonical_query(raw_query: str) -> str:
    """The canonical query string: parameters decoded, re-encoded strictly, sorted.

    >>> canonical_query("Param2=value2&Param1=value1")
    'Param1=value1&Param2=value2'
    >>> canonical_query("")
    ''
    """
    if not raw_query:
        return ""
    pairs: list[tuple[str, str]] = []
    for part in raw_query.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((_encode(unquote(name)), _encode(unquote(value))))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def _encode(text: str) -> str:
    return quote(text, safe="-_.~")


def canonical_headers(headers: Mapping[str, str]) -> tuple[str, str]:
    """The canonical header block and the signed header list.

    Names are lower-cased and sorted; values are trimmed and runs of
    whitespace collapsed to one space.

    >>> canonical_headers({"X-Amz-Date": "20150830T123600Z", "Host": " example.amazonaws.com "})
    ('host:example.amazonaws.com\\nx-amz-date:20150830T123600Z\\n', 'host;x-amz-date')
    """
    merged: dict[str, list[str]] = {}
    for name, value in headers.items():
        merged.setdefault(name.strip().lower(), []).append(_SPACES.sub(" ", value.strip()))
    names = sorted(merged)
    block = "".join(f"{name}:{','.join(merged[name])}\n" for name in names)
    return block, ";".join(names)


def canonical_request(
    method: str, raw_path: str, raw_query: str, headers: Mapping[str, str], body: bytes
) -> tuple[str, str]:
    """The canonical request and its signed header list."""
    block, signed = canonical_headers(headers)
    request = "\n".join(
        [
            method.upper(),
            canonical_uri(raw_path),
            canonical_query(raw_query),
            block,
            signed,
            hashlib.sha256(body).hexdigest(),
        ]
    )
    return request, signed


def credential_scope(date_stamp: str, region: str, service: str) -> str:
    """``date/region/service/aws4_request``.

    >>> credential_scope("20150830", "us-east-1", "bedrock")
    '20150830/us-east-1/bedrock/aws4_request'
    """
    return f"{date_stamp}/{region}/{service}/aws4_request"


def string_to_sign(timestamp: str, scope: str, canonical: str) -> str:
    """The string to sign for a canonical request."""
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return f"{ALGORITHM}\n{timestamp}\n{scope}\n{digest}"


def signing_key(secret: str, date_stamp: str, region: str, service: str) -> bytes:
    """The derived signing key (HMAC chain over date, region, service)."""
    key = _hmac(("AWS4" + secret).encode("utf-8"), date_stamp)
    key = _hmac(key, region)
    key = _hmac(key, service)
    return _hmac(key, "aws4_request")


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def sign_headers(
    *,
    method: str,
    raw_path: str,
    raw_query: str = "",
    headers: Mapping[str, str],
    body: bytes,
    credentials: AwsCredentials,
    region: str,
    service: str,
    now: datetime,
) -> dict[str, str]:
    """The headers that sign a request: ``x-amz-date``, ``x-amz-security-token``
    (temporary credentials only) and ``authorization``.

    Every header in ``headers`` is signed (it must include ``host``), plus the
    date and token added here. Send all of them with the request unchanged.

    Args:
        method: the HTTP method.
        raw_path: the request path exactly as sent (already percent-encoded).
        raw_query: the query string as sent, without ``?``.
        headers: the headers to sign (name -> value).
        body: the exact body bytes.
        credentials: the access key to sign with.
        region: the AWS region, e.g. ``us-east-1``.
        service: the signing name, ``bedrock`` for Bedrock Runtime.
        now: the signing time (timezone-aware).

    Returns:
        The headers to add to the request.
    """
    timestamp = amz_date(now)
    to_sign = dict(headers)
    to_sign["x-amz-date"] = timestamp
    added = {"x-amz-date": timestamp}
    if credentials.session_token:
        to_sign["x-amz-security-token"] = credentials.session_token
        added["x-amz-security-token"] = credentials.session_token
    canonical, signed = canonical_request(method, raw_path, raw_query, to_sign, body)
    scope = credential_scope(timestamp[:8], region, service)
    key = signing_key(credentials.secret_access_key, timestamp[:8], region, service)
    signature = hmac.new(key, string_to_sign(timestamp, scope, canonical).encode("utf-8"), hashlib.sha256)
    added["authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature.hexdigest()}"
    )
    return added


__all__ = [
    "ALGORITHM",
    "AwsCredentials",
    "amz_date",
    "canonical_headers",
    "canonical_query",
    "canonical_request",
    "canonical_uri",
    "credential_scope",
    "sign_headers",
    "signing_key",
    "string_to_sign",
]
