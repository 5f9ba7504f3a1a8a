"""The studio's guard: loopback names only (DNS rebinding), same-origin only,
and headers that keep the page from being framed or sniffed.

A page on ``evil.example`` whose name an attacker re-points at 127.0.0.1 can
reach a local server, but its requests say ``Host: evil.example`` (and
``Origin: http://evil.example``): refusing every ``Host`` that is not a
loopback name, and every ``Origin`` that is not this studio's, closes that door.
"""

from __future__ import annotations

import json
import re
from typing import Final, final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The names a browser uses for this machine (a trailing dot is the same name, fully qualified).
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_PORT = re.compile(r"[0-9]{1,5}")


def security_headers(inline: tuple[str, ...] = ()) -> tuple[tuple[bytes, bytes], ...]:
    """Every response's: no framing by others, no sniffing, scripts and styles
    from this origin only (plus the ``inline`` ones, by their CSP hashes:
    the agent server's chat page), no referrer."""
    hashes = "".join(f" '{h}'" for h in inline)
    policy = (
        f"default-src 'none'; script-src 'self'{hashes}; style-src 'self'{hashes}; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'"
    )
    return ((b"content-security-policy", policy.encode()), *SECURITY_HEADERS)


SECURITY_HEADERS: Final = (
    (b"x-frame-options", b"SAMEORIGIN"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def authority(value: str, default_port: int = 80) -> tuple[str, int] | None:
    """``(name, port)`` of a ``Host`` header (``name[:port]``) that names this
    machine, the name normalised (lower case, no trailing dot); else None."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket:
            return None
    else:
        name, colon, rest = value.partition(":")
        rest = ":" + rest if colon else ""
    port = default_port
    if rest:
        if not (rest.startswith(":") and _PORT.fullmatch(rest[1:]) and 0 < int(rest[1:]) < 65536):
            return None
        port = int(rest[1:])
    if name.endswith(".") and not name.endswith(".."):
        name = name[:-1]
    return (name, port) if name in LOOPBACK_NAMES else None


def loopback_host(value: str) -> bool:
    """Whether a ``Host`` header (``name[:port]``) names this machine."""
    return authority(value) is not None


def origin_authority(value: str) -> tuple[str, int] | None:
    """``(name, port)`` of an ``Origin`` header that is an http(s) origin on a loopback name; else None."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or parts.path or parts.query or parts.fragment:
        return None
    if "@" in parts.netloc:
        return None
    return authority(parts.netloc, 443 if parts.scheme == "https" else 80)


def loopback_origin(value: str) -> bool:
    """Whether an ``Origin`` header is an http(s) origin on a loopback name."""
    return origin_authority(value) is not None


def refusal(scope: Scope) -> str | None:
    """Why a request is refused (``None``: it is admitted).

    The ``Host`` must name this machine; an ``Origin``, when sent, must be
    the very origin the ``Host`` names (another local server's page, on
    another port, is another origin); a browser's ``Sec-Fetch-Site``, when
    sent, must say the request is same-origin (or typed by the user).
    """
    headers: dict[str, list[str]] = {}
    for key, value in scope.get("headers", []):
        headers.setdefault(key.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    hosts = headers.get("host", [])
    host = authority(hosts[0]) if len(hosts) == 1 else None
    if host is None:
        return "the Host header does not name this machine (127.0.0.1, localhost or [::1])"
    origins = headers.get("origin", [])
    if len(origins) > 1 or (
        origins
        and (  # the studio serves plain HTTP: its page's origin is http://{Host}
            not origins[0].strip().lower().startswith("http://") or origin_authority(origins[0]) != host
        )
    ):
        return "the request comes from another origin"
    if headers.get("sec-fetch-site", ["same-origin"])[0] not in ("same-origin", "none"):
        return "the request comes from another site"
    return None


@final
class LocalOnly:
    """ASGI middleware: refuse foreign ``Host``/``Origin`` (403), add the security headers."""

    def __init__(self, app: ASGIApp, inline: tuple[str, ...] = ()) -> None:
        self.app = app
        self.headers = security_headers(inline)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        why = refusal(scope)
        if why is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": why})
                return
            body = json.dumps({"error": {"code": "forbidden", "message": why}}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 403,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        *self.headers,
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in self.headers}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *self.headers]}
            await send(message)

        await self.app(scope, receive, secured)


__all__ = [
    "LOOPBACK_NAMES",
    "SECURITY_HEADERS",
    "LocalOnly",
    "authority",
    "loopback_host",
    "loopback_origin",
    "refusal",
    "security_headers",
]
