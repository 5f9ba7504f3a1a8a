"""Secret redaction: key-name patterns, known values, the floor, the limitations."""

from __future__ import annotations

import pytest

from helikon._json import JsonValue
from helikon.governance import (
    REDACTED,
    is_secret_name,
    known_secrets,
    redact,
    redact_json,
    secret_values_from_environment,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("OPENAI_API_KEY=sk-abc123xyz", "OPENAI_API_KEY=***"),
        ("export DB_PASSWORD=hunter2pass", "export DB_PASSWORD=***"),
        ("AUTH_TOKEN: abcdefgh12", "AUTH_TOKEN: ***"),
        ("github_token=ghp_x", "github_token=***"),
        ("APP_SECRET = s3cr3t  ", "APP_SECRET = ***  "),
        ("AWS_CREDENTIAL=abc\r", "AWS_CREDENTIAL=***\r"),
        ("  stripe_api_key: sk_live_1", "  stripe_api_key: ***"),
        ("X_TOKEN=", "X_TOKEN="),
        ("PATH=/usr/bin", "PATH=/usr/bin"),
        ("TOKENIZER=bpe", "TOKENIZER=bpe"),
    ],
)
def test_key_name_patterns(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_every_line_is_scanned() -> None:
    text = "ok\nA_TOKEN=1\nB_SECRET: two\nplain: text\n"
    assert redact(text) == "ok\nA_TOKEN=***\nB_SECRET: ***\nplain: text\n"


def test_known_values_are_replaced_anywhere() -> None:
    assert redact("using sk-abc123xyz to auth; again sk-abc123xyz", ["sk-abc123xyz"]) == (
        "using *** to auth; again ***"
    )


def test_the_length_floor_and_common_words_prevent_over_matching() -> None:
    text = "mode=dev ok=true password: see docs, host=localhost"
    assert redact(text, ["dev", "true", "1234567", "password", "LOCALHOST"]) == text
    assert known_secrets(["dev", "abcdefgh", "Password", "abcdefgh"]) == ("abcdefgh",)


def test_longer_secrets_go_first_so_no_tail_leaks() -> None:
    assert redact("key=abcdefgh-ijklmnop", ["abcdefgh", "abcdefgh-ijklmnop"]) == "key=***"


def test_secret_values_come_from_an_environment_passed_in_as_data() -> None:
    environment = {
        "HOME": "/home/me",
        "OPENAI_API_KEY": "sk-abc123xyz",
        "github_token": "ghp_0123456789",
        "DB_PASSWORD": "changeme",
        "SHORT_TOKEN": "abc",
    }
    assert secret_values_from_environment(environment) == ("ghp_0123456789", "sk-abc123xyz")
    assert is_secret_name("x_credential") and not is_secret_name("X-API-KEY")


def test_redaction_is_idempotent() -> None:
    text = "A_TOKEN=abcdefgh12\nvalue abcdefgh12 here"
    once = redact(text, ["abcdefgh12"])
    assert once == f"A_TOKEN={REDACTED}\nvalue {REDACTED} here"
    assert redact(once, ["abcdefgh12"]) == once


def test_json_output_is_walked() -> None:
    value: JsonValue = {
        "stdout": "X_TOKEN=abcdefgh12",
        "lines": ["ok", "uses sk-abc123xyz"],
        "code": 0,
        "ok": True,
    }
    assert redact_json(value, ["sk-abc123xyz"]) == {
        "stdout": "X_TOKEN=***",
        "lines": ["ok", "uses ***"],
        "code": 0,
        "ok": True,
    }


# -- the book's limitations, pinned ------------------------------------------------------


def test_limitation_only_the_first_key_per_line() -> None:
    assert redact("A_TOKEN=1 B_TOKEN=2") == "A_TOKEN=***"  # the first key's value runs to the line end
    assert redact("note=x B_TOKEN: 2") == "note=x B_TOKEN: ***"  # "=" did not match a secret key; ":" did


def test_limitation_value_scan_is_case_sensitive() -> None:
    assert redact("SK-ABC123XYZ", ["sk-abc123xyz"]) == "SK-ABC123XYZ"


def test_limitation_dashed_keys_and_json_keys_are_not_scanned() -> None:
    assert redact("X-API-KEY=abc") == "X-API-KEY=abc"
    assert redact('{"X_TOKEN": "abc"}') == '{"X_TOKEN": "abc"}'
