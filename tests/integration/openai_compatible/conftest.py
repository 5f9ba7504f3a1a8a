"""A real llama-cpp-python server on loopback for the OpenAI-compatible suite
(installed once per machine by ``llama_server.py``; ``.ci/run`` installs it
first)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from llama_server import ServerUnavailable, ensure, model, python

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class LlamaServer:
    """One ``python -m llama_cpp.server`` process."""

    def __init__(self, directory: Path, log: Path) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [
                str(python(directory)), "-m", "llama_cpp.server",
                "--model", str(model(directory)),
                "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", "8192", "--n_threads", "2",
                "--chat_format", "chatml-function-calling",
                "--model_alias", "smollm2",
            ],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        self.log = log
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerUnavailable(f"the server exited at start:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        self.stop()
        raise ServerUnavailable(f"the server did not answer in 120 s:\n{log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def _directory() -> Path:
    try:
        return ensure()
    except ServerUnavailable as error:
        if os.environ.get("CI"):
            pytest.fail(f"the llama-cpp-python server could not be installed: {error}")
        pytest.skip(f"the llama-cpp-python server could not be installed: {error}")


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer(_directory(), tmp_path_factory.mktemp("llama") / "server.log")
    yield server
    server.stop()


@pytest.fixture
def own_llama_server(tmp_path: Path) -> Iterator[LlamaServer]:
    """A server of the test's own (to kill, or to keep busy)."""
    server = LlamaServer(_directory(), tmp_path / "server.log")
    yield server
    server.stop()
