"""A free loopback port, and an ASGI app served on one by Hypercorn."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(app: Any, backend: str = "asyncio", port: int | None = None) -> Iterator[str]:
    """Serve ``app`` with Hypercorn on a loopback port (``port``, or one the
    OS gives) under trio or asyncio, in a thread; the base URL once the
    server answers. A failure of the server is raised when the block ends."""
    import anyio
    import httpx
    from hypercorn.config import Config

    from helikon.server import serve_app

    port = port or free_port()
    stop = threading.Event()
    failure: list[BaseException] = []

    async def until_stopped() -> None:
        while not stop.is_set():
            await anyio.sleep(0.02)

    async def main() -> None:
        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.accesslog = None
        config.graceful_timeout = 1.0
        await serve_app(app, config, until_stopped)

    def run() -> None:
        try:
            anyio.run(main, backend=backend)
        except BaseException as exc:  # surfaced to the test
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            httpx.get(f"{base}/", timeout=1)  # any answer will do: it listens
            break
        except httpx.TransportError:
            if failure or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {failure}") from None
            time.sleep(0.05)
    try:
        yield base
    finally:
        stop.set()
        thread.join(timeout=10)
    if failure:
        raise failure[0]
