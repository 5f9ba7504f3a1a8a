"""The chat page served at ``/``: plain HTML and JavaScript, no build step.

It lists the agents, keeps one conversation per browser tab (a session id in
``sessionStorage``, sent as ``X-Session-Id``, its transcript kept there too
so a reload shows it again; "New chat" starts another),
streams each message as a run (``?stream=sse``) and shows its events as they
come: the answer rendered as Markdown, tool calls and results, approvals
(approve/deny inline, each answered with its call's path), handoffs (the
agent picker follows them). A Stop button cancels the run through the
cancel route; failures read as sentences; a 401 asks for a sign-in token.

Markdown is rendered into DOM nodes: text only ever goes into text nodes,
links only with ``http``, ``https`` or ``mailto`` addresses, nothing through
``innerHTML``. The page is served with a Content-Security-Policy that allows
its own script and style (by hash) and nothing else inline, so markup that
slipped into the page could not run either.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from functools import cache
from importlib.resources import files


@cache
def _template() -> str:
    return files("helikon.server").joinpath("page.html").read_text(encoding="utf-8")


def page_html(title: str) -> str:
    return _template().replace("__TITLE__", html.escape(title))


def _hashes(tag: str) -> str:
    found = re.findall(rf"<{tag}>(.*?)</{tag}>", _template(), flags=re.S)
    digests = (base64.b64encode(hashlib.sha256(block.encode()).digest()).decode() for block in found)
    return " ".join(f"'sha256-{digest}'" for digest in digests)


@cache
def page_headers() -> dict[str, str]:
    """The page's security headers: its own script and style only, requests to this origin only."""
    policy = (
        f"default-src 'none'; script-src {_hashes('script')}; style-src {_hashes('style')}; "
        "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return {
        "content-security-policy": policy,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
    }


__all__ = ["page_headers", "page_html"]
