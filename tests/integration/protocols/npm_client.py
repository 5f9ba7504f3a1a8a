"""The official AG-UI client (``@ag-ui/client``) the AG-UI tests drive
helikon with, from npm.

Pinned by ``agui_client/package.json`` and ``agui_client/package-lock.json``,
installed once per machine by :class:`_support.npm.NpmInstall`
(``$HELIKON_AGUI_CLIENT`` when set, which ``.ci/run`` does; else
``$XDG_CACHE_HOME/helikon/agui-client/<digest>``).

Run it as a script (standard library only) to install and print the
directory: ``python3 tests/integration/protocols/npm_client.py``. The test
calls :func:`ensure` the same way; parallel workers install once.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/integration: the shared _support
from _support.npm import NpmInstall, NpmUnavailable

SPEC = Path(__file__).resolve().parent / "agui_client"
CLIENT = "node_modules/@ag-ui/client/dist/index.js"

AGUI_CLIENT = NpmInstall(
    SPEC,
    "HELIKON_AGUI_CLIENT",
    "agui-client",
    (CLIENT,),
    "the AG-UI client test needs to install @ag-ui/client with",
)


def ensure(directory: Path | None = None) -> Path:
    """Install the client into ``directory`` (default: see the module) unless
    it is there already; returns the directory.

    Raises:
        NpmUnavailable: no ``npm``/``node`` on PATH, or ``npm ci`` failed.
    """
    return AGUI_CLIENT.ensure(directory)


__all__ = ["AGUI_CLIENT", "CLIENT", "NpmUnavailable", "ensure"]

if __name__ == "__main__":
    sys.exit(AGUI_CLIENT.main())
