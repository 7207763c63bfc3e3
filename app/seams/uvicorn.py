"""Internal names of `uvicorn`, used by `app.server.hosting` and `app.server.shutdown`.

- `HttpToolsProtocol` (`uvicorn.protocols.http.httptools_impl`, an internal module): subclassed as
  `BoundedHttpToolsProtocol` to bound request headers (size and time), which uvicorn's public settings do not.
  The subclass overrides `connection_made`, `connection_lost`, `data_received`, `on_message_begin` and
  `on_headers_complete`, and reads the instance's `loop`, `transport` and `client`.
- `Server`: its `handle_exit(sig, frame)` is what uvicorn installs as the SIGTERM/SIGINT handler (so the
  handler's `__self__` is the running server), its `should_exit`, `force_exit`, `started` and `servers`
  say where it stands, and `DrainGate` replaces one running server's `shutdown(sockets=None)` with one that
  waits for the app to drain. uvicorn has no public hook to hold its shutdown.
"""

from __future__ import annotations

from uvicorn import Server
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HttpToolsProtocol", "Server"]
