"""helikon studio: a local web UI to read runs step by step and chat with
agents (the ``studio`` extra: Starlette, Hypercorn). ``helikon studio`` on
the command line; ``docs/studio.md`` is the guide.

- :class:`Studio`: the trace files of ``--traces`` directories and the
  project's golden traces, plus every run made through the studio (its
  agents are served by an :class:`~helikon.server.AgentServer` at
  ``/server/``, recorded), as a run list and a timeline per run.
- Safe by default: it listens on 127.0.0.1 only, refuses a request whose
  ``Host`` is not a loopback name or whose ``Origin`` is another
  (:class:`LocalOnly`: DNS rebinding), and renders every string of a run as
  text, never as markup. It makes no network requests of its own.
- The regression view replays a run against the current code (strict,
  loose, live tools) and shows where it first diverges; the evals view shows
  saved eval runs (``--evals``); the sessions view browses a session backend
  (:class:`SessionBrowser`: :class:`MemoryBrowser`, :class:`SqliteBrowser`,
  :class:`PostgresBrowser`, :class:`RedisBrowser`; :func:`browser_for`).
"""

try:
    import hypercorn  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "helikon.studio needs Starlette and Hypercorn: pip install 'paigasus-helikon[studio]'"
    ) from exc

from helikon.studio._app import HOST, Studio, agents_of
from helikon.studio._catalog import Catalogue, RunEntry, status_of, summary, timeline
from helikon.studio._guard import LocalOnly, loopback_host, loopback_origin
from helikon.studio._record import Recorded
from helikon.studio._sessions import (
    MemoryBrowser,
    PostgresBrowser,
    RedisBrowser,
    SessionBrowser,
    SqliteBrowser,
    browser_for,
)

__all__ = [
    "HOST",
    "Catalogue",
    "LocalOnly",
    "MemoryBrowser",
    "PostgresBrowser",
    "Recorded",
    "RedisBrowser",
    "RunEntry",
    "SessionBrowser",
    "SqliteBrowser",
    "Studio",
    "agents_of",
    "browser_for",
    "loopback_host",
    "loopback_origin",
    "status_of",
    "summary",
    "timeline",
]
