"""npm packages the integration tests run, installed once per machine.

A :class:`NpmInstall` is pinned by a ``package.json`` and ``package-lock.json``
in its ``spec`` folder and installed with the machine's ``npm ci`` into a
cache directory named after the lock file's digest (so a changed pin
installs afresh, an unchanged one once per machine):

- ``$<env_var>`` when set (``.ci/run`` sets it);
- else ``$XDG_CACHE_HOME/helikon/<cache_name>/<digest>`` (``~/.cache/...``).

Parallel test workers (pytest-xdist) that find the install missing take
turns on a lock file beside the directory: the first installs, the others
find the install done. Standard library only: the install scripts run with
the system ``python3``.
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

_STAMP = ".helikon-lock-digest"


class NpmUnavailable(RuntimeError):
    """npm (or Node.js) is not installed, or the install failed."""


class NpmInstall:
    """Packages pinned in ``spec``, installed under ``$env_var`` or the cache's
    ``cache_name``; ``entry_points`` (paths under the install) must exist
    once installed; ``needs`` says what a missing npm keeps from running."""

    def __init__(self, spec: Path, env_var: str, cache_name: str, entry_points: tuple[str, ...], needs: str):
        self.spec = spec
        self.env_var = env_var
        self.cache_name = cache_name
        self.entry_points = entry_points
        self.needs = needs

    def digest(self) -> str:
        """The pinned lock file's digest (first 16 hex digits of its SHA-256)."""
        return hashlib.sha256((self.spec / "package-lock.json").read_bytes()).hexdigest()[:16]

    def target(self) -> Path:
        """Where the packages are (to be) installed."""
        configured = os.environ.get(self.env_var)
        if configured:
            return Path(configured)
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return cache / "helikon" / self.cache_name / self.digest()

    def installed(self, directory: Path) -> bool:
        """Whether ``directory`` holds this lock file's install."""
        stamp = directory / _STAMP
        return (
            stamp.is_file()
            and stamp.read_text().strip() == self.digest()
            and all((directory / entry).is_file() for entry in self.entry_points)
        )

    def ensure(self, directory: Path | None = None) -> Path:
        """Install the packages into ``directory`` (default :meth:`target`)
        unless they are there already; returns the directory.

        Raises:
            NpmUnavailable: no ``npm``/``node`` on PATH, or ``npm ci`` failed.
        """
        directory = directory or self.target()
        if self.installed(directory):
            return directory
        directory.parent.mkdir(parents=True, exist_ok=True)
        with _locked(directory.parent / f".{directory.name}.lock"):
            if not self.installed(directory):  # another worker may have installed it meanwhile
                self._install(directory)
        return directory

    def main(self) -> int:
        """The install script: install, print the directory (exit status 0),
        or say why not on stderr (1)."""
        try:
            print(self.ensure())
        except NpmUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0

    def _install(self, directory: Path) -> None:
        npm, node = shutil.which("npm"), shutil.which("node")
        if npm is None or node is None:
            raise NpmUnavailable(f"{self.needs} Node.js (20+) and npm on PATH")
        # Install next to the target, then move it in place: a half-finished
        # install is never mistaken for a finished one.
        staging = Path(tempfile.mkdtemp(prefix=".installing-", dir=directory.parent))
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(self.spec / name, staging / name)
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
                cwd=staging,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0:
                raise NpmUnavailable(f"npm ci failed ({done.returncode}):\n{done.stderr[-2000:]}")
            (staging / _STAMP).write_text(self.digest() + "\n")
            if directory.exists():
                shutil.rmtree(directory)
            staging.rename(directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if not self.installed(directory):
            raise NpmUnavailable(f"npm ci finished but {', '.join(self.entry_points)} are not in {directory}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing)."""
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
