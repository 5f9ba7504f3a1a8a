"""Secret redaction: the last transform on tool output, after PostToolUse hooks.

Tool output is scrubbed before it re-enters the model context and the
session, by two matchers run in sequence:

1. **Key names.** On each line, the first ``KEY=value``, ``KEY: value`` or
   ``export KEY=value`` whose ``KEY`` ends (case-insensitively) in one of
   :data:`SECRET_SUFFIXES` has its value replaced with ``***``.
2. **Known values.** Literal occurrences of known secret values are replaced
   with ``***``: the secret-named environment variables the interpreter
   captured at run start (:func:`secret_values_from_environment`, given the
   environment as data: this module never reads it) plus the run context's
   ``with_extra_secrets``. A value shorter than :data:`MIN_SECRET_LENGTH`
   characters or one of :data:`COMMON_WORDS` is never scanned for, so ordinary
   output is not corrupted. Longer secrets are replaced first, so a secret
   that contains another never leaks its tail.

The two run to a fixed point, so :func:`redact` is idempotent.

A secret is also scanned for in its JSON-escaped forms (a secret holding a
newline, a quote or a backslash appears as ``\\n``, ``\\"`` or ``\\\\`` once
a structured tool result is encoded), and a structured result is redacted as
a value before it is encoded (:func:`redact_json`): each string in it, and
the whole value of a string under a secret-named key (``{"DB_PASSWORD": ...}``).

Limitations (the book's): only the first ``KEY=``/``KEY:`` per line is
processed; the value scan is case-sensitive; key names must use underscores
(``X_API_KEY``, not ``X-API-KEY``), and JSON object keys (``"X_TOKEN": ...``)
are scanned only through :func:`redact_json` on a structured value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Final

from helikon._json import JsonValue

#: Key-name endings that mark a secret (compared case-insensitively).
SECRET_SUFFIXES: Final = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_CREDENTIAL")

#: Shorter known values are not scanned for.
MIN_SECRET_LENGTH: Final = 8

#: What a redacted value becomes.
REDACTED: Final = "***"

#: Ordinary words that a secret-named variable may hold without being a
#: secret (compared case-insensitively); words under the length floor need no entry.
COMMON_WORDS: Final = frozenset(
    {
        "anonymous",
        "automatic",
        "changeme",
        "database",
        "disabled",
        "external",
        "internal",
        "localhost",
        "optional",
        "password",
        "placeholder",
        "production",
        "development",
        "redacted",
        "required",
        "username",
        "undefined",
        "unlimited",
    }
)

_BLANKS: Final = re.compile(r"[ \t]+")


def is_secret_name(name: str) -> bool:
    """Whether a variable or key called ``name`` holds a secret.

    >>> is_secret_name("openai_api_key"), is_secret_name("GITHUB_TOKEN"), is_secret_name("TOKENIZER")
    (True, True, False)
    """
    upper = name.upper()
    return any(upper.endswith(suffix) for suffix in SECRET_SUFFIXES)


def is_scannable_secret(value: str) -> bool:
    """Whether ``value`` is long and unusual enough to be scanned for literally.

    >>> is_scannable_secret("sk-abc123xyz"), is_scannable_secret("hunter2"), is_scannable_secret("Password")
    (True, False, False)
    """
    return len(value) >= MIN_SECRET_LENGTH and value.casefold() not in COMMON_WORDS


def known_secrets(values: Iterable[str]) -> tuple[str, ...]:
    """The scannable ``values``, without duplicates, longest first (ties in text order).

    >>> known_secrets(["short", "abcdefgh", "abcdefghijkl", "abcdefgh"])
    ('abcdefghijkl', 'abcdefgh')
    """
    return tuple(sorted({v for v in values if is_scannable_secret(v)}, key=lambda v: (-len(v), v)))


def secret_values_from_environment(environment: Mapping[str, str]) -> tuple[str, ...]:
    """The known secrets among an environment the interpreter captured and passed in.

    Picks the values of secret-named variables (:func:`is_secret_name`), then
    applies the length floor and the common-word exclusion.

    >>> secret_values_from_environment({"HOME": "/home/me", "OPENAI_API_KEY": "sk-abc123xyz",
    ...                                 "DB_PASSWORD": "changeme", "CI_TOKEN": "dev"})
    ('sk-abc123xyz',)
    """
    return known_secrets(environment[name] for name in sorted(environment) if is_secret_name(name))


def _redact_line(line: str) -> str:
    for separator in ("=", ":"):
        position = line.find(separator)
        if position < 0:
            continue
        head = line[:position]
        key = _BLANKS.split(head.rstrip())[-1]
        if not is_secret_name(key):
            continue
        after = line[position + 1 :]
        value = after.strip()
        if not value:
            return line  # ``KEY=`` with no value: nothing to hide
        lead = after[: len(after) - len(after.lstrip())]
        trail = after[len(after.rstrip()) :]
        return f"{head}{separator}{lead}{REDACTED}{trail}"
    return line


def redact_key_values(text: str) -> str:
    """Replace the value of secret-named ``KEY=value`` / ``KEY: value`` lines.

    >>> redact_key_values("export DB_PASSWORD=hunter2pass\\nAUTH_TOKEN: abc\\nPATH=/bin")
    'export DB_PASSWORD=***\\nAUTH_TOKEN: ***\\nPATH=/bin'
    """
    return "\n".join(_redact_line(line) for line in text.split("\n"))


def encoded_forms(secret: str) -> tuple[str, ...]:
    """``secret`` and the forms JSON encoding gives it (escaped, ASCII-escaped).

    >>> encoded_forms('pa"ss\\nword')
    ('pa"ss\\nword', 'pa\\\\"ss\\\\nword')
    """
    forms = [secret, json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1]]
    return tuple(dict.fromkeys(forms))


def _scan_list(secrets: Iterable[str]) -> tuple[str, ...]:
    if type(secrets) is tuple:
        return _scan_tuple(secrets)  # a run's secrets: one tuple for the whole run
    return _scan(secrets)


@lru_cache(maxsize=16)
def _scan_tuple(secrets: tuple[str, ...]) -> tuple[str, ...]:
    return _scan(secrets)


def _scan(secrets: Iterable[str]) -> tuple[str, ...]:
    forms = {form for secret in known_secrets(secrets) for form in encoded_forms(secret)}
    return tuple(sorted(forms, key=lambda v: (-len(v), v)))


def redact_values(text: str, secrets: Iterable[str]) -> str:
    """Replace every literal occurrence of a known secret (or of its JSON-escaped
    form), until none is left.

    >>> redact_values("using sk-abc123xyz to auth", ["sk-abc123xyz"])
    'using *** to auth'
    >>> redact_values('{"out": "line1\\\\nsk-\\\\"quoted\\\\"-9"}', ['line1\\nsk-"quoted"-9'])
    '{"out": "***"}'
    """
    ordered = _scan_list(secrets)
    changed = True
    while changed:  # each replacement shortens the text, so this ends
        changed = False
        for secret in ordered:
            if secret in text:
                text = text.replace(secret, REDACTED)
                changed = True
    return text


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Scrub ``text``: key-name patterns, then known secret values, to a fixed point.

    Args:
        text: tool output as the model would see it.
        secrets: known secret values (unscannable ones are ignored).

    Returns:
        The text with secrets replaced by ``***``; ``redact(redact(t, s), s)``
        equals ``redact(t, s)``.

    >>> redact("OPENAI_API_KEY=sk-abc123xyz\\nconnecting with sk-abc123xyz", ["sk-abc123xyz"])
    'OPENAI_API_KEY=***\\nconnecting with ***'
    >>> redact("mode=dev ok=true", ["dev", "true"])
    'mode=dev ok=true'
    """
    if ":" not in text and "=" not in text and (len(text) < MIN_SECRET_LENGTH or not _scan_list(secrets)):
        return text  # no key-value line, and no secret fits in it: the hot path of a short output
    ordered = _scan_list(secrets)
    while True:  # see the module docs: every round that changes something shortens the text
        scrubbed = redact_values(redact_key_values(text), ordered)
        if scrubbed == text:
            return scrubbed
        text = scrubbed


def _under(key: str, inner: JsonValue, walk: Callable[[JsonValue], JsonValue]) -> JsonValue:
    return REDACTED if isinstance(inner, str) and inner and is_secret_name(key) else walk(inner)


_SCALARS: Final = frozenset({int, float, bool})


def redact_json(value: JsonValue, secrets: Iterable[str] = ()) -> JsonValue:
    """:func:`redact` every string inside a JSON value, before it is encoded; a
    non-empty string under a secret-named key is replaced whole (keys themselves
    are left alone).

    >>> redact_json({"stdout": ["X_TOKEN=abcdefgh12"], "code": 0, "DB_PASSWORD": "hunter2"})
    {'stdout': ['X_TOKEN=***'], 'code': 0, 'DB_PASSWORD': '***'}
    """
    if value is None or type(value) in _SCALARS:
        return value  # nothing to scrub in a number or a boolean
    ordered = known_secrets(secrets)

    def walk(item: JsonValue) -> JsonValue:
        if isinstance(item, str):
            return redact(item, ordered)
        if isinstance(item, Mapping):
            return {
                key: REDACTED
                if isinstance(inner, str) and inner and is_secret_name(str(key))
                else walk(inner)
                for key, inner in item.items()
            }
        if isinstance(item, Sequence):
            return [walk(inner) for inner in item]
        return item

    return walk(value)


__all__ = [
    "COMMON_WORDS",
    "encoded_forms",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "SECRET_SUFFIXES",
    "is_scannable_secret",
    "is_secret_name",
    "known_secrets",
    "redact",
    "redact_json",
    "redact_key_values",
    "redact_values",
    "secret_values_from_environment",
]
