"""Private names of `httpx2`, used by `app.providers.transport` to bound upstream SSE events.

- `AsyncClient._transport` and `AsyncClient._mounts` (pattern → transport or None): the SDKs build their
  own clients (`DefaultAioHttpClient`), so the only way to put the event bound under every request of such a
  client is to wrap the transports it already holds (`wrap_transports`). The public path, passing
  `transport=` / `mounts=` to the constructor, is not open to us for a client the SDK makes.
- `Response._get_content_decoder()` and `Response._decoder`: the client's own decoder for the response's
  `content-encoding` (`take_content_decoder`). The bound must count decoded bytes (a small gzip body can hold
  a huge line), so the transport decodes with the client's decoders and the client must not decode again.
"""

from __future__ import annotations

from typing import Any, Callable

import httpx2

__all__ = ["take_content_decoder", "wrap_transports"]


def wrap_transports(
    client: httpx2.AsyncClient, wrap: Callable[[httpx2.AsyncBaseTransport], httpx2.AsyncBaseTransport]
) -> None:
    """Replace the client's default transport and each of its mounted ones (proxies) by `wrap(transport)`."""
    client._transport = wrap(client._transport)
    client._mounts = {
        pattern: None if transport is None else wrap(transport) for pattern, transport in client._mounts.items()
    }


def take_content_decoder(response: httpx2.Response) -> Any:
    """The decoder for the response's `content-encoding`, taken from it: the response keeps none cached (the
    caller removes the header too, so the response will not decode the body again)."""
    decoder = response._get_content_decoder()
    del response._decoder
    return decoder
