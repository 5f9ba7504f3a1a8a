"""The official AG-UI client (``@ag-ui/client``) the AG-UI tests drive
helikon with, from npm.

Pinned by ``agui_client/package.json`` and ``agui_client/package-lock.json``,
installed with the machine's ``npm ci`` into a cache directory named after
the lock file's digest (so a changed pin installs afresh, an unchanged one
once per machine):

- ``$HELIKON_AGUI_CLIENT`` when set (``.ci/run`` sets it);
- else ``$XDG_CACHE_HOME/helikon/agui-client/<digest>`` (``~/.cache/...``).

Run it as a script (standard library only) to install and print the
directory: ``python3 tests/integration/protocols/npm_client.py``. The test
calls :func:`ensure` the same way; parallel workers take turns on a lock file
beside the directory (the first installs, the others find it done).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

SPEC = Path(__file__).resolve().parent / "agui_client"
CLIENT = "node_modules/@ag-ui/client/dist/index.js"
_STAMP = ".helikon-lock-digest"


class NpmUnavailable(RuntimeError):
    """npm (or Node.js) is not installed, or the install failed."""


def digest() -> str:
    """The pinned lock file's digest (first 16 hex digits of its SHA-256)."""
    return hashlib.sha256((SPEC / "package-lock.json").read_bytes()).hexdigest()[:16]


def target() -> Path:
    """Where the client is (to be) installed."""
    configured = os.environ.get("HELIKON_AGUI_CLIENT")
    if configured:
        return Path(configured)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "helikon" / "agui-client" / digest()


def installed(directory: Path) -> bool:
    """Whether ``directory`` holds this lock file's install."""
    stamp = directory / _STAMP
    return stamp.is_file() and stamp.read_text().strip() == digest() and (directory / CLIENT).is_file()


def ensure(directory: Path | None = None) -> Path:
    """Install the client into ``directory`` (default :func:`target`) unless it
    is there already; returns the directory.

    Raises:
        NpmUnavailable: no ``npm``/``node`` on PATH, or ``npm ci`` failed.
    """
    directory = directory or target()
    if installed(directory):
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with _locked(directory.parent / f".{directory.name}.lock"):
        if not installed(directory):
            _install(directory)
    return directory


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _install(directory: Path) -> None:
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        raise NpmUnavailable(
            "the AG-UI client test needs Node.js (20+) and npm on PATH to install @ag-ui/client"
        )
    staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=directory.parent))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(SPEC / name, staging / name)
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
            cwd=staging,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise NpmUnavailable(f"npm ci failed ({done.returncode}):\n{done.stderr[-2000:]}")
        (staging / _STAMP).write_text(digest() + "\n")
        if directory.exists():
            shutil.rmtree(directory)
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not installed(directory):
        raise NpmUnavailable(f"npm ci finished but the client is not in {directory}")


if __name__ == "__main__":
    try:
        print(ensure())
    except NpmUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
