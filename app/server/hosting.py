"""The ASGI server hosting the gateway (uvicorn), seen from inside the app: the HTTP protocol it serves with
(`BoundedHttpToolsProtocol`: bounds on request headers), and the running server itself (`hosting_server`).
Its shutdown, held while the app drains, is `app.server.shutdown`.

uvicorn installs its `handle_exit` as the SIGTERM/SIGINT handler, so the handler's `__self__` is the running
`uvicorn.Server`: its `should_exit` flag says the server is stopping, its `servers` hold the listening
sockets. Under a server that installs no handler (tests run uvicorn in a thread) the helpers do nothing.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from functools import lru_cache
from typing import Any, NamedTuple

from app.seams.uvicorn import HttpToolsProtocol

log = logging.getLogger("gateway")


def hosting_server() -> Any | None:
    """The running uvicorn server (the SIGTERM handler's `__self__`); None when no server installed one."""
    handler = signal.getsignal(signal.SIGTERM)
    server = getattr(handler, "__self__", None)
    return server if hasattr(server, "should_exit") else None


async def wait_listening(poll: float = 0.05) -> bool:
    """Wait until the server listens (its port is bound). False when it stops first, e.g. because the port
    is taken. The lifespan runs before uvicorn binds, so anything that may only run in a process that
    serves waits for this. True at once under a server that installs no handler."""
    server = hosting_server()
    if server is None:
        return True
    while not getattr(server, "started", False):
        if server.should_exit:
            return False
        await asyncio.sleep(poll)
    return True


async def bound_send_buffers(size: int, poll: float = 0.05) -> None:
    """Give the listening sockets a fixed `SO_SNDBUF` of `size` bytes, which every connection accepted later
    inherits (Linux).

    With the kernel's autotuning a client connection may buffer megabytes (`net.ipv4.tcp_wmem`, 4 MB by
    default): a client that stops reading would go on absorbing the stream there, so the gateway's own bound
    (`GATEWAY_MAX_PENDING_BYTES`) would never make it stop reading the upstream. With a fixed buffer, a slow
    reader fills it within `size` bytes, the response waits, and back-pressure reaches the vendor. The
    lifespan runs before uvicorn listens, so this waits for the server to start. `size` 0 leaves autotuning on.
    """
    server = hosting_server()
    if size <= 0 or server is None or not await wait_listening(poll):
        return
    for listener in getattr(server, "servers", []):
        for sock in listener.sockets:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
    log.debug("client connections: SO_SNDBUF %d bytes", size)


class HeaderLimits(NamedTuple):
    max_bytes: int
    timeout: float


_STATUS_LINES = {431: b"HTTP/1.1 431 Request Header Fields Too Large", 408: b"HTTP/1.1 408 Request Timeout"}


@lru_cache(maxsize=1)
def header_limits() -> HeaderLimits:
    """`GATEWAY_MAX_HEADER_BYTES` and `GATEWAY_HEADER_TIMEOUT`, read once per process (also in each worker that
    `uvicorn --workers` starts, which imports this class by name)."""
    from app.settings import Settings

    settings = Settings()
    return HeaderLimits(settings.max_header_bytes, settings.header_timeout)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with two bounds it lacks: the size of a request's line and headers, and
    the time a connection may take to send them.

    Without them one client holds the event loop and memory with a single endless header (httptools gathers
    a header's pieces until it ends), or holds connections forever sending a byte at a time. Here, bytes that
    arrive while a request's headers are incomplete are counted before they reach the parser: past
    `max_bytes` the connection gets `431` and is closed. A timer runs from the moment a connection opens (or a
    new request on it begins) until its headers are complete: when it fires the connection gets `408` and is
    closed. The idle time between requests stays uvicorn's keep-alive timeout. Select it with
    `http=BoundedHttpToolsProtocol` or `--http app.server.hosting:BoundedHttpToolsProtocol`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = header_limits()
        self.reading_headers = True
        self.header_bytes = 0
        self.headers_completed = 0  # requests on this connection whose headers were complete
        self.header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.reading_headers:
            super().data_received(data)
            return
        room = self.limits.max_bytes - self.header_bytes
        if len(data) <= room:
            self.header_bytes += len(data)
            super().data_received(data)
            return
        # Feed what fits; if no request's headers completed in it, they are too large.
        completed = self.headers_completed
        self.header_bytes += room
        super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if self.headers_completed == completed:
            self._refuse(431, "request headers exceed %d bytes" % self.limits.max_bytes)
            return
        self.data_received(data[room:])

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.reading_headers = True
        self._start_header_timer()

    def on_headers_complete(self) -> None:
        self.reading_headers = False
        self.header_bytes = 0
        self.headers_completed += 1
        self._stop_header_timer()
        super().on_headers_complete()

    def _start_header_timer(self) -> None:
        if self.header_timer is None:
            self.header_timer = self.loop.call_later(self.limits.timeout, self._headers_timed_out)

    def _stop_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _headers_timed_out(self) -> None:
        self.header_timer = None
        if not self.reading_headers or self.transport.is_closing():
            return
        if self.header_bytes == 0:  # a connection that never sent a byte asked nothing: close it quietly
            log.debug("closed an idle connection from %s", self.client[0] if self.client else "?")
            self.transport.close()
            return
        self._refuse(408, "request headers not received within %gs" % self.limits.timeout)

    def _refuse(self, status: int, reason: str) -> None:
        """Answer `status` with a short text and close the connection (no request reached the app)."""
        self._stop_header_timer()
        self.reading_headers = False
        log.info("closed a connection from %s: %s", self.client[0] if self.client else "?", reason)
        body = reason.encode()
        self.transport.write(
            b"".join(
                (
                    _STATUS_LINES[status],
                    b"\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\ncontent-length: ",
                    str(len(body)).encode(),
                    b"\r\n\r\n",
                    body,
                )
            )
        )
        self.transport.close()
