"""Turning a fetched body into what the model reads.

HTML becomes Markdown of the page's main content, extracted by
`trafilatura <https://trafilatura.readthedocs.io>`_: one maintained library
(Apache-2.0, regular releases, compared against the other extractors in
its own evaluation and in independent ones) that both finds the article (dropping navigation, footers and
boilerplate) and writes Markdown itself, headings, lists, emphasis, links
and tables included. The alternative, readability-lxml plus markdownify, is
two libraries glued by an HTML round trip, and readability sees far less
maintenance. When trafilatura finds no main content (a tiny page, an index),
the page's whole text is returned instead.

Text (``text/*``) and JSON pass through as they are. Anything else (images,
PDFs, archives) is refused with a short message.
"""

from __future__ import annotations

import html
import re
from typing import Final

import attrs
import trafilatura

from helikon.errors import ToolError

_HTML_TYPES: Final = frozenset({"text/html", "application/xhtml+xml"})
_TEXT_TYPES: Final = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/x-ndjson"}
    | {"application/yaml", "application/x-yaml"}
)
_TITLE: Final = re.compile(rb"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_SPACE: Final = re.compile(r"\s+")


@attrs.frozen
class Page:
    """A fetched response body and what the server said about it."""

    url: str
    content_type: str
    charset: str | None
    body: bytes


def media_type(content_type: str) -> str:
    """The bare media type of a ``Content-Type`` value.

    >>> media_type("Text/HTML; charset=UTF-8")
    'text/html'
    """
    return content_type.split(";", 1)[0].strip().lower()


def kind_of(page: Page) -> str:
    """``"html"``, ``"text"`` or ``"other"``: how the body is read.

    >>> kind_of(Page("u", "application/ld+json", None, b"{}"))
    'text'
    >>> kind_of(Page("u", "", None, b"<!DOCTYPE html><html></html>"))
    'html'
    """
    kind = media_type(page.content_type)
    if kind in _HTML_TYPES:
        return "html"
    if kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml")):
        return "text"
    if not kind:  # no Content-Type: sniff the way browsers start to
        head = page.body[:512].lstrip().lower()
        if head.startswith((b"<!doctype html", b"<html")):
            return "html"
        try:
            page.body[:4096].decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < 4090:  # not just a character cut in half at the end
                return "other"
        return "text"
    return "other"


def decoded(page: Page) -> str:
    """The body as text: the declared charset, else UTF-8 (bad bytes replaced)."""
    charset = page.charset or "utf-8"
    try:
        return page.body.decode(charset, errors="replace")
    except LookupError:  # an unknown charset name
        return page.body.decode("utf-8", errors="replace")


def title_of(body: bytes) -> str | None:
    """The text of the page's ``<title>``, or None.

    >>> title_of(b"<html><head><title> Rates &amp; Loans\\n</title></head></html>")
    'Rates & Loans'
    """
    found = _TITLE.search(body[:65536])
    if found is None:
        return None
    text = _SPACE.sub(" ", html.unescape(found.group(1).decode("utf-8", errors="replace"))).strip()
    return text or None


def markdown_of(page: Page) -> str:
    """The page's main content as Markdown (the whole text when no main content is found)."""
    source: str | bytes = decoded(page) if page.charset else page.body  # trafilatura sniffs <meta charset>
    text = _extract(source, page.url, favor_recall=False) or _extract(source, page.url, favor_recall=True)
    if not text:
        text = trafilatura.html2txt(source) or ""
    text = text.strip()
    title = title_of(page.body)
    if title and not text.startswith("#"):
        text = f"# {title}\n\n{text}" if text else f"# {title}"
    return text


def _extract(source: str | bytes, url: str, *, favor_recall: bool) -> str | None:
    return trafilatura.extract(
        source,
        url=url,
        output_format="markdown",
        include_formatting=True,
        include_links=True,
        include_tables=True,
        include_comments=False,
        favor_recall=favor_recall,
    )


def render(page: Page) -> str:
    """What the model reads for ``page``.

    Raises:
        ToolError: the content type is neither HTML, text nor JSON.
    """
    match kind_of(page):
        case "html":
            return markdown_of(page) or "(the page has no readable text)"
        case "text":
            return decoded(page)
        case _:
            shown = media_type(page.content_type) or "binary"
            raise ToolError(f"cannot read {shown} content from {page.url}: only HTML, text and JSON")


def truncated(text: str, max_chars: int | None) -> str:
    """``text`` cut to ``max_chars`` characters, with a note saying so.

    >>> truncated("abcdef", 3)
    'abc\\n\\n[truncated: showing the first 3 of 6 characters]'
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n\n[truncated: showing the first {max_chars} of {len(text)} characters]"


__all__ = ["Page", "decoded", "kind_of", "markdown_of", "media_type", "render", "title_of", "truncated"]
