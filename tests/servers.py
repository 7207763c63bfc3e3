"""Real loopback servers for the tests: uvicorn in a background thread, on a free port."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import uvicorn


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self._ready.set()

    def install_signal_handlers(self) -> None:  # the test process keeps its own signal handling
        pass


class ServerThread:
    """Runs an ASGI app under uvicorn (its own event loop, its own thread) until `stop()`."""

    def __init__(self, app: Any, name: str) -> None:
        self.app = app
        self.name = name
        self._ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", loop="asyncio")
        self.server = _Server(config, self._ready)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        self.loop = loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self.server.serve())
        finally:
            # Libraries may leave per-loop helper tasks: end them cleanly.
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def start(self) -> "ServerThread":
        self.thread.start()
        if not self._ready.wait(30):
            raise RuntimeError(f"{self.name} did not start")
        if not self.server.started:
            raise RuntimeError(f"{self.name} failed to start")
        return self

    @property
    def port(self) -> int:
        return self.server.servers[0].sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, coro: Any, timeout: float = 10) -> Any:
        """Run a coroutine on the server's loop (to look at its state safely) and return its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        stop_all([self])


def stop_all(servers: list[ServerThread]) -> None:
    """Stop servers together: every one is told to exit, then each is waited for, so their shutdowns (a few
    tenths of a second each: uvicorn's exit tick, the gateway's lifespan) overlap instead of adding up."""
    for server in servers:
        server.server.should_exit = True
    for server in servers:
        server.thread.join(30)
