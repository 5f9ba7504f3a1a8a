"""The chat page served at ``/``: plain HTML and JavaScript, no build step.

It lists the agents, sends a message as a streamed run (``?stream=sse``) and
shows the events as they come: tokens, tool calls and results, approvals
(with approve/deny buttons), handoffs. Text from runs is set with
``textContent`` only, never parsed as HTML.
"""

from __future__ import annotations

import html
from functools import cache
from importlib.resources import files


@cache
def _template() -> str:
    return files("helikon.server").joinpath("page.html").read_text(encoding="utf-8")


def page_html(title: str) -> str:
    return _template().replace("__TITLE__", html.escape(title))


__all__ = ["page_html"]
