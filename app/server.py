"""The ASGI server hosting the gateway (uvicorn), seen from inside the app.

uvicorn installs its `handle_exit` as the SIGTERM/SIGINT handler, so the handler's `__self__` is the running
`uvicorn.Server`: its `should_exit` flag says the server is stopping, its `servers` hold the listening
sockets. Under a server that installs no handler (tests run uvicorn in a thread) both helpers do nothing.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from typing import Any

from sse_starlette.sse import AppStatus

log = logging.getLogger("gateway")


def hosting_server() -> Any | None:
    handler = signal.getsignal(signal.SIGTERM)
    server = getattr(handler, "__self__", None)
    return server if hasattr(server, "should_exit") else None


def server_exiting() -> bool:
    """True once the server is shutting down. sse-starlette's `AppStatus.should_exit` is honoured too."""
    if AppStatus.should_exit:
        return True
    server = hosting_server()
    return bool(server is not None and server.should_exit)


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
    if size <= 0 or server is None:
        return
    while not getattr(server, "started", False):
        if server.should_exit:
            return
        await asyncio.sleep(poll)
    for listener in getattr(server, "servers", []):
        for sock in listener.sockets:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
    log.debug("client connections: SO_SNDBUF %d bytes", size)
