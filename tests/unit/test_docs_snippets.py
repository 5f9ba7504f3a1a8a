"""Every Python snippet in ``README.md`` and ``docs/*.md`` runs as written.

The convention (also in ``docs/testing.md``, "The docs' own snippets"):

- Every fenced block labelled ``python`` is run. The blocks of one page run
  in order in one namespace, as a reader pastes them into one session: a
  block may use what an earlier block of the same page defined. Each page is
  one test; a failure names the page and the line in it.
- A page may hold hidden setup: a ``python`` block inside an HTML comment
  that opens with ``<!-- docs-test: setup`` on the line just before the
  fence (and closes with ``-->`` after it). It runs like any block but is not
  shown: it stands for what the page's prose says the reader already has
  (for example ``model``, "any model": a scripted ``MockModel`` here).
- A block with a top-level ``await`` (or ``async for``/``async with``) runs
  under asyncio, as in a Jupyter notebook or ``python -m asyncio``.
- A block that cannot run as written (a fragment of a larger program, or one
  that needs a provider's API key, a cloud account or the internet) is
  preceded by ``<!-- docs-test: skip: REASON -->`` on the line just before
  its fence. The reason is required and shown in the test report.
- Snippets run in a fresh temporary directory, with no provider API keys or
  cloud credentials in the environment, and with name resolution refused for
  every host but loopback: a snippet that would reach the internet fails
  instead of passing on a developer's machine only.

Blocks labelled anything else (``bash``, ``toml``, ``json``, unlabelled
output) are not run here; the README's commands have a test of their own.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import linecache
import os
import re
import socket
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

#: ``<!-- docs-test: skip: REASON -->``: the block after it is not run, for REASON.
SETUP = re.compile(r"^<!--\s*docs-test:\s*setup\s*$")
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*(?::\s*(?P<reason>.*?))?\s*-->")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<info>[^`\s]*)")


@attrs.frozen
class Block:
    """One fenced ``python`` block of a page."""

    page: str
    line: int  #: the 1-based line of the block's first code line
    code: str
    skip: str | None  #: why it is not run, or None


def blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """The ``python`` blocks of ``path``, in order, with their skip markers.

    Raises:
        ValueError: a skip marker without a reason, or an unclosed fence.
    """
    name = str(path.relative_to(root))
    lines = path.read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence, info = len(opening["indent"]), opening["fence"], opening["info"].lower()
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if end == len(lines):
            raise ValueError(f"{name}:{index + 1}: a ``` fence is never closed")
        if info in ("python", "py", "python3"):
            body = [line[indent:] if line[:indent].isspace() else line for line in lines[index + 1 : end]]
            previous = lines[index - 1].strip() if index else ""
            marker = None if SETUP.match(previous) else SKIP.search(previous)
            reason = None
            if marker is not None:
                reason = (marker["reason"] or "").strip()
                if len(reason) < 10:
                    raise ValueError(
                        f"{name}:{index}: a docs-test skip marker must say why the block cannot run "
                        "(<!-- docs-test: skip: REASON -->)"
                    )
            found.append(Block(name, index + 2, "\n".join(body) + "\n", reason))
        index = end + 1
    return found


def run_block(block: Block, namespace: dict[str, Any]) -> None:
    """Run ``block`` in ``namespace``; tracebacks name the page's own lines."""
    source = "\n" * (block.line - 1) + block.code
    code = compile(source, block.page, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    if code.co_flags & inspect.CO_COROUTINE:  # the block awaits at top level
        asyncio.run(eval(code, namespace))
    else:
        exec(code, namespace)


#: Environment variables a snippet must not see: with them it could reach a real provider.
CREDENTIALS = re.compile(r"API_KEY|_TOKEN$|^AWS_|^GOOGLE_|^GEMINI_|^ANTHROPIC_|^OPENAI_|^HELIKON_")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A fresh directory, no credentials, and no name resolution but for loopback."""
    for name in list(os.environ):
        if CREDENTIALS.search(name):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws, ~/.config/gcloud
    monkeypatch.chdir(tmp_path)
    real = socket.getaddrinfo

    def loopback_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (None, "localhost", "127.0.0.1", "::1", b"localhost", b"127.0.0.1"):
            raise OSError(f"docs snippets run offline: refusing to resolve {host!r}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    modules, environment = set(sys.modules), dict(os.environ)
    yield
    os.environ.clear()  # a setup block may set fake keys
    os.environ.update(environment)
    for name in set(sys.modules) - modules:  # a page's own modules (e.g. written by a snippet)
        if name.startswith("__docs_"):
            del sys.modules[name]


def page_module(name: str, found: list[Block]) -> types.ModuleType:
    """A module to run a page's blocks in, as if they were one file.

    Its source (for ``inspect.getsource``, which ``@tool`` uses to read
    attribute docstrings, and for tracebacks) is the page's Python blocks at
    their own line numbers, the prose blanked out.
    """
    lines = [""] * (max((b.line + b.code.count("\n") for b in found), default=0) + 1)
    for block in found:
        for offset, line in enumerate(block.code.splitlines()):
            lines[block.line - 1 + offset] = line
    source = [line + "\n" for line in lines]
    linecache.cache[name] = (sum(map(len, source)), None, source, name)
    module = types.ModuleType("__docs_" + re.sub(r"\W", "_", name))
    module.__file__ = name
    sys.modules[module.__name__] = module
    return module


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_snippets_of_the_page_run(page: Path, offline: None) -> None:
    found = blocks(page)
    namespace = page_module(str(page.relative_to(ROOT)), found).__dict__
    for block in found:
        if block.skip is not None:
            continue
        try:
            run_block(block, namespace)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise AssertionError(
                f"the snippet at {block.page}:{block.line} fails as written: {type(exc).__name__}: {exc}"
            ) from exc


def test_every_skipped_snippet_says_why() -> None:
    skipped = [block for page in PAGES for block in blocks(page) if block.skip is not None]
    ran = [block for page in PAGES for block in blocks(page) if block.skip is None]
    assert all(block.skip for block in skipped)
    assert len(ran) > 3 * len(skipped), "most snippets must run; skip only what cannot"


def test_a_skip_marker_without_a_reason_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: skip -->\n```python\nimport nowhere\n```\n")
    with pytest.raises(ValueError, match="must say why"):
        blocks_of(page)


def test_a_failing_snippet_names_its_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```python\nx = 1\n```\n\nText.\n\n```python\nassert x == 2, 'x is 1'\n```\n")
    found = blocks_of(page)
    assert [b.line for b in found] == [4, 10]
    namespace: dict[str, Any] = {}
    run_block(found[0], namespace)
    with pytest.raises(AssertionError, match="x is 1") as caught:
        run_block(found[1], namespace)
    assert caught.traceback[-1].lineno + 1 == 10  # pytest's line numbers are 0-based


def test_a_hidden_setup_block_runs_before_the_shown_ones(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- docs-test: setup\n```python\nmodel = 'scripted'\n```\n-->\n\n```python\nused = model\n```\n"
    )
    namespace: dict[str, Any] = {}
    for block in blocks_of(page):
        assert block.skip is None
        run_block(block, namespace)
    assert namespace["used"] == "scripted"


def test_a_block_with_top_level_await_runs_under_asyncio(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nimport asyncio\n\nawait asyncio.sleep(0)\nslept = True\n```\n")
    namespace: dict[str, Any] = {}
    (block,) = blocks_of(page)
    run_block(block, namespace)
    assert namespace["slept"] is True



def blocks_of(path: Path) -> list[Block]:
    """:func:`blocks` of one of these tests' own pages."""
    return blocks(path, path.parent)


#: What the golden-test snippets of docs/traces.md import: an agent factory of the reader's project.
GOLDEN_AGENT = '''
from helikon import LlmAgent, tool
from helikon.testing import MockModel, call_tools, say


@tool
async def budget_status(category: str) -> float:
    """The remaining budget of a category.

    Args:
        category: e.g. Dining.
    """
    return 37.6


def make_agent():
    model = MockModel([call_tools(("budget_status", {"category": "Dining"})), say("$37.60 left.")])
    return LlmAgent(name="budget", model=model, instructions="Advise.", tools=[budget_status])
'''


def test_the_golden_tests_of_the_traces_page_pass_under_pytest(pytester: pytest.Pytester) -> None:
    """docs/traces.md's golden tests, as a reader's test module and conftest, run by pytest itself
    (the async one needs its anyio marker: pytest runs no bare ``async def`` test)."""
    page = ROOT / "docs" / "traces.md"
    found = [b for b in blocks(page) if "helikon_golden" in b.code or "anyio_backend" in b.code]
    tests, fixture = (b.code for b in found)
    pytester.makepyfile(
        agents=GOLDEN_AGENT,
        test_budget="from agents import make_agent\n\n" + tests,
        conftest="import pytest\n\n" + fixture,
    )
    pytester.runpytest_subprocess("-k", "not async", "--helikon-record").assert_outcomes(passed=1)
    assert (pytester.path / "tests" / "golden" / "budget.jsonl").is_file()
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=3)  # sync, asyncio, trio
