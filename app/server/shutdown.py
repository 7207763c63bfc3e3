"""Shutting down, in the order it happens. Everything about stopping the gateway is in this module; each step
names the code it calls.

1. The app starts: the lifespan (`app.main`) starts `watch_server_exit`, which installs a `DrainGate` on the
   hosting uvicorn server, then polls the server's exit flag (`server_exiting`).
2. The server is told to stop (SIGTERM, Ctrl-C): uvicorn sets `should_exit`. The gate holds uvicorn's own
   shutdown, so the server keeps listening: a new connection is answered (`/readyz` and new turns 503
   "draining") rather than refused.
3. `watch_server_exit` sees the flag and runs `shut_down`:
   a. every SSE response still open (`app.gateway.OpenStreams`: live turns and resumptions alike, `app.api.sse`) is given
      `GATEWAY_DRAIN_TIMEOUT` + `SHUTDOWN_MARGIN` seconds; one still open then is ended with a clean end of
      stream (`app.api.event_stream.EventStreamResponse`);
   b. `Gateway.drain`: no new turns, in-flight turns get `GATEWAY_DRAIN_TIMEOUT` to finish, the rest are
      interrupted (`Interrupt.SHUTDOWN`) and settle as `error` "gateway shutting down", which their responses
      still write as their terminal event. A response that ends before its terminal event while the gateway
      drains interrupts its turn the same way (`app.api.sse.TurnFrames`; a resumable turn's last reader:
      `app.resume.hub.ResumeHub.reader_left`).
4. The gate opens: uvicorn's shutdown runs (it closes the listeners, waits for the open responses, then runs
   the end of the lifespan).
5. The end of the lifespan calls `close_gateway`: anything still running is settled, then the providers'
   clients, the limits, the resumable streams, the ledger (queued writes flushed) and the metrics are closed.
   (`app.main` then flushes the trace exporter, when tracing is on.)

Under a server that installs no signal handler (tests run uvicorn in a thread) steps 1–4 do nothing; the end of
the lifespan still closes everything.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from app.server.hosting import hosting_server
from app.seams.uvicorn import Server

if TYPE_CHECKING:
    from app.gateway import Gateway

log = logging.getLogger("gateway")

SHUTDOWN_MARGIN = 10.0  # seconds an SSE response outlives the drain timeout, for the shutdown error to reach the client
EXIT_POLL_SECONDS = 0.1  # how often the watcher looks at the server's exit flag


# ---------------------------------------------------------------------- 1, 2: the gate and the server's exit flag


def server_exiting() -> bool:
    """True once the hosting server is shutting down (its `should_exit`)."""
    server = hosting_server()
    return bool(server is not None and server.should_exit)


class DrainGate:
    """Holds the hosting uvicorn server's shutdown until the app has drained.

    uvicorn stops accepting connections as soon as SIGTERM arrives. The gateway drains first
    (`GATEWAY_DRAIN_TIMEOUT`): in-flight turns may finish, and meanwhile a new connection is answered, `/readyz`
    and new turns with 503, so that load balancers and clients see "draining" rather than a refused connection.
    The gate replaces the `shutdown` of that one running server (however it was started: `python -m app`,
    `uvicorn app.main:app`, each of the container's workers) with one that first waits until the gate is
    released, `limit` seconds have passed, or a second Ctrl-C forces the exit; then uvicorn's own shutdown runs.
    """

    def __init__(self, server: Server, limit: float) -> None:
        self.server = server
        self.limit = limit
        self.closed = True
        self._uvicorn_shutdown = server.shutdown
        server.shutdown = self._shutdown_after_drain  # type: ignore[method-assign]

    async def _shutdown_after_drain(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limit
        while self.closed and not self.server.force_exit and loop.time() < deadline:
            await asyncio.sleep(0.1)
        await self._uvicorn_shutdown(sockets=sockets)

    def release(self) -> None:
        self.closed = False


@contextmanager
def waits_for_drain(limit: float) -> Iterator[None]:
    """While this block runs, the hosting uvicorn server, once told to stop, keeps listening (for at most
    `limit` seconds). No-op without a hosting server (tests run uvicorn in a thread)."""
    server = hosting_server()
    if not isinstance(server, Server):
        yield
        return
    gate = DrainGate(server, limit)
    try:
        yield
    finally:
        gate.release()


# ---------------------------------------------------------------------- 3: the watcher and the sequence


async def watch_server_exit(gateway: "Gateway", poll: float = EXIT_POLL_SECONDS) -> None:
    """The lifespan's task: hold the server's shutdown (the gate) and run `shut_down` once the server exits.

    uvicorn closes its listeners and then waits for open responses before the lifespan's end runs, so the
    drain cannot wait for the lifespan: this task notices the server's exit flag itself."""
    with waits_for_drain(gateway.settings.drain_timeout + SHUTDOWN_MARGIN):
        while not server_exiting():
            await asyncio.sleep(poll)
        await shut_down(gateway)


async def shut_down(gateway: "Gateway") -> None:
    """What the gateway does once the server is exiting: its open SSE responses get until the drain's end plus
    `SHUTDOWN_MARGIN`, then it drains (`/readyz` answers 503 from now on)."""
    timeout = gateway.settings.drain_timeout
    log.info(
        "shutdown requested: draining %d turn(s) for up to %gs (%d SSE response(s) open)",
        len(gateway.jobs),
        timeout,
        len(gateway.streams),
    )
    gateway.streams.close_within(timeout + SHUTDOWN_MARGIN)
    await gateway.drain(timeout)


# ---------------------------------------------------------------------- 5: the end of the lifespan


async def close_gateway(gateway: "Gateway") -> None:
    """Settle whatever still runs, then close what the gateway holds: the providers' clients, the limits, the
    resumable streams, the ledger (queued writes flushed, up to `GATEWAY_LEDGER_FLUSH_TIMEOUT_S`), the metrics."""
    await gateway.drain(timeout=0)
    await gateway.aclose()
    await gateway.recorder.aclose()
    gateway.metrics.close()
