"""The third-party MCP servers the integration tests talk to, from npm.

``@modelcontextprotocol/server-everything`` and
``@modelcontextprotocol/server-filesystem``, pinned by ``servers/package.json``
and ``servers/package-lock.json``, installed once per machine by
:class:`_support.npm.NpmInstall` (``$HELIKON_MCP_SERVERS`` when set, which
``.ci/run`` does; else ``$XDG_CACHE_HOME/helikon/mcp-servers/<digest>``).

Run it as a script (standard library only) to install and print the
directory: ``python3 tests/integration/mcp/npm_servers.py``. The tests'
``npm_servers`` fixture calls :func:`ensure` the same way, so ``./test.sh``
works on a fresh machine too; parallel workers install once.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/integration: the shared _support
from _support.npm import NpmInstall, NpmUnavailable

SPEC = Path(__file__).resolve().parent / "servers"
EVERYTHING = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

SERVERS = NpmInstall(
    SPEC,
    "HELIKON_MCP_SERVERS",
    "mcp-servers",
    (EVERYTHING, FILESYSTEM),
    "the MCP integration tests need to install @modelcontextprotocol/server-everything and "
    "server-filesystem with",
)


def ensure(directory: Path | None = None) -> Path:
    """Install the servers into ``directory`` (default: see the module) unless
    they are there already; returns the directory.

    Raises:
        NpmUnavailable: no ``npm``/``node`` on PATH, or ``npm ci`` failed.
    """
    return SERVERS.ensure(directory)


__all__ = ["EVERYTHING", "FILESYSTEM", "SERVERS", "NpmUnavailable", "ensure"]

if __name__ == "__main__":
    sys.exit(SERVERS.main())
