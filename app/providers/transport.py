"""The HTTP clients the SDKs are given, and how transport failures read as provider errors.

The `anthropic` and `openai` SDKs run on their aiohttp transport (`DefaultAioHttpClient`): its C HTTP parser
costs about a fifth less gateway CPU per streamed event than the default httpx2 one. The `google-genai` SDK is
given an httpx2 client (`http_client`), whose request and response hooks its adapter uses: the same client on
the same aiohttp transport (the `openai` SDK's `DefaultAioHttpClient`), so it no longer reads each chunk through
httpcore2's pure-Python h11 parser (less than half the Gemini adapter's CPU per event, docs/performance.md).

Every SDK reads a vendor's SSE body through its client's transport (`response.aiter_bytes()`), then joins the
bytes of one event (the Stainless SDKs' `SSEDecoder`) or one line (google-genai's `_SseLineDecoder`) until
its end, with no bound: a line that never ends would grow a stream's memory without limit. So the bound is
put where the bytes enter, on each client's transports (`bound_event_streams`): a response body whose
current event (the bytes since its last blank line) passes `max_event_bytes`
(`GATEWAY_MAX_UPSTREAM_EVENT_BYTES`) fails with `EventTooLarge`, which ends the attempt as an upstream error
of kind `event_too_large`.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any, AsyncIterator, Callable, cast

import aiohttp
import httpx2

from app.contract.failures import ErrorKind
from app.providers.base import RETRYABLE_STATUS, ProviderError, error_detail, http_error_kind, retry_after_ms
from app.providers.calls import DEMO_CALLER, DEMO_CALLER_HEADER
from app.providers.config import TransportSettings
from app.seams.httpx2 import take_content_decoder, wrap_transports


class EventTooLarge(httpx2.ReadError):
    """An upstream SSE event (or line) grew past the bound before it ended."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an SSE event longer than {limit} bytes")
        self.limit = limit


class BodyTooLarge(httpx2.ReadError):
    """A response body read whole (an error body, a JSON answer) grew past the bound before it ended."""

    def __init__(self, limit: int, status: int) -> None:
        super().__init__(f"an HTTP {status} body longer than {limit} bytes")
        self.limit = limit
        self.status = status


class _BodyBound:
    """Counts the bytes of a whole response body across its chunks."""

    __slots__ = ("limit", "size", "status")

    def __init__(self, limit: int, status: int) -> None:
        self.limit = limit
        self.size = 0
        self.status = status

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise BodyTooLarge(self.limit, self.status)


class _EventBound:
    """Counts the bytes of the SSE event being received (since the last blank line) across body chunks."""

    __slots__ = ("limit", "pending", "last")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0  # bytes of the current, unfinished event
        self.last = 0  # the previous chunk's last byte (an event may end across two chunks)

    def feed(self, chunk: bytes) -> None:
        """Take a body chunk; raises `EventTooLarge` when the current event passes the limit. An event ends
        at a blank line: two line ends in a row (`\n\n`, `\r\r`, or `\n\r` inside `\r\n\r\n`)."""
        if not chunk:
            return
        if chunk.endswith(b"\n\n"):  # the usual chunk: whole events (the fast path)
            self.pending = 0
            self.last = 10
            return
        end = max(chunk.rfind(b"\n\n"), chunk.rfind(b"\r\r"), chunk.rfind(b"\n\r"))
        if end >= 0:
            self.pending = len(chunk) - end - 2
        elif self.last in _LINE_ENDS and chunk[0] in _LINE_ENDS and not (self.last == 13 and chunk[0] == 10):
            self.pending = len(chunk) - 1  # the blank line straddles the two chunks
        else:
            self.pending += len(chunk)
        self.last = chunk[-1]
        if self.pending > self.limit:
            raise EventTooLarge(self.limit)


_LINE_ENDS = (10, 13)  # \n, \r


class _BoundedEventStream(httpx2.AsyncByteStream):
    """A response body, decoded (gzip, …) as the client would, that fails with `EventTooLarge` once one event
    passes the bound (`BodyTooLarge` once the whole body does, with a `_BodyBound`): the SDK above never holds
    more than the bound. The body is closed when it fails (its connection is not reused)."""

    def __init__(self, inner: httpx2.AsyncByteStream, bound: _EventBound | _BodyBound, decoder: Any) -> None:
        self._inner = inner
        self._bound = bound
        self._decoder = decoder

    async def __aiter__(self) -> AsyncIterator[bytes]:
        feed = self._bound.feed
        decoder = self._decoder
        try:
            if decoder is None:
                async for raw in self._inner:
                    feed(raw)
                    yield raw
                return
            async for raw in self._inner:
                for chunk in decoder.decode(raw):
                    feed(chunk)
                    yield chunk
            for chunk in decoder.flush():
                feed(chunk)
                yield chunk
        except (EventTooLarge, BodyTooLarge):
            await self._inner.aclose()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


BoundFor = Callable[[httpx2.Response, int], "_EventBound | _BodyBound | None"]


def _per_event(response: httpx2.Response, limit: int) -> _EventBound:
    return _EventBound(limit)


class _BoundingTransport(httpx2.AsyncBaseTransport):
    """A client's transport, with every response body bounded as `bound_for` says (None: that body is not
    bounded here). Per event, whatever the content type (`bound_event_streams`): the Stainless SDKs decode a
    streaming call's body as SSE whatever type it is labelled with, and these clients make no other calls (an
    error body, read whole, is bounded by the same rule: a larger one is hostile too)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int, bound_for: BoundFor = _per_event) -> None:
        self._inner = inner
        self._limit = limit
        self._bound_for = bound_for

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        bound = self._bound_for(response, self._limit)
        if bound is None:
            return response
        decoder = None
        if response.headers.get("content-encoding"):
            # Bound what the SDK buffers, i.e. the decoded bytes: decode here with the client's own decoders (a
            # small compressed body can hold a huge line), so the client must not decode again.
            decoder = take_content_decoder(response)
            del response.headers["content-encoding"]
        inner = cast(httpx2.AsyncByteStream, response.stream)  # an async transport answers with an async stream
        response.stream = _BoundedEventStream(inner, bound, decoder)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def bound_event_streams(client: httpx2.AsyncClient, max_event_bytes: int) -> httpx2.AsyncClient:
    """`client`, with each of its transports (the default one and any proxy mounts) bounding response bodies
    to `max_event_bytes` per event (0: unbounded). Returns the client."""
    if max_event_bytes > 0:
        wrap_transports(client, lambda transport: _BoundingTransport(transport, max_event_bytes))
    return client


def bound_whole_bodies(client: httpx2.AsyncClient, max_bytes: int, streamed_type: str) -> httpx2.AsyncClient:
    """`client`, with every response body it reads whole (any but a `streamed_type` one: an error body, a JSON
    answer) bounded to `max_bytes` in all (0: unbounded), failing with `BodyTooLarge`. For a client whose streams
    are not SSE (Bedrock's event stream: its decoder bounds each frame) and whose other bodies the SDK reads
    whole, without bound. Returns the client."""
    if max_bytes > 0:

        def whole(response: httpx2.Response, limit: int) -> _BodyBound | None:
            streamed = response.headers.get("content-type", "").split(";")[0].strip().lower() == streamed_type
            return None if streamed else _BodyBound(limit, response.status_code)

        wrap_transports(client, lambda transport: _BoundingTransport(transport, max_bytes, whole))
    return client


async def tag_demo_caller(request: httpx2.Request) -> None:
    """Request hook: `X-Gateway-Caller: <key name>` when `DEMO_CALLER` is set (demo mode with keys)."""
    caller = DEMO_CALLER.get()
    if caller is not None:
        request.headers[DEMO_CALLER_HEADER] = caller


def client_options(settings: TransportSettings) -> dict[str, Any]:
    """Options for a pooled client sized for many concurrent streams. Read timeouts are left to the
    dispatcher's watchdog (first event, idle gap, total), so the SDK only bounds connecting and the whole call."""
    return {
        "timeout": httpx2.Timeout(settings.total_timeout, connect=settings.connect_timeout),
        "limits": httpx2.Limits(max_connections=settings.max_connections, max_keepalive_connections=256),
        "follow_redirects": False,
        "event_hooks": {"request": [tag_demo_caller]},
    }


def http_client(settings: TransportSettings) -> httpx2.AsyncClient:
    """An httpx2 client with `client_options` on aiohttp's transport, its event streams bounded
    (`bound_event_streams`): what the Stainless adapters get from their SDK (`StainlessProvider`), here from the
    `openai` SDK's public `DefaultAioHttpClient` (an `httpx2.AsyncClient` whose transports are aiohttp's; imported
    here, when the first adapter that needs it is built, so that the other adapters do not load `openai`)."""
    from openai import DefaultAioHttpClient

    return bound_event_streams(DefaultAioHttpClient(**client_options(settings)), settings.max_event_bytes)


def transport_error(exc: BaseException) -> ProviderError | None:
    """A ProviderError for a network, framing or decoding failure; None for anything else (our own bugs)."""
    if isinstance(exc.__cause__, aiohttp.ClientError):
        exc = _httpx_equivalent(exc.__cause__) or exc
    if isinstance(exc, BodyTooLarge):
        answered = f"answered HTTP {exc.status} with" if exc.status != 200 else "answered with"
        return ProviderError(
            f"{answered} a body longer than {exc.limit} bytes (GATEWAY_MAX_UPSTREAM_EVENT_BYTES)",
            status=exc.status if exc.status != 200 else None,
            retryable=exc.status in RETRYABLE_STATUS,
            kind=ErrorKind.EVENT_TOO_LARGE,
        )
    if isinstance(exc, EventTooLarge):
        return ProviderError(
            f"sent an SSE event longer than {exc.limit} bytes (GATEWAY_MAX_UPSTREAM_EVENT_BYTES)",
            retryable=True,
            kind=ErrorKind.EVENT_TOO_LARGE,
        )
    if isinstance(exc, httpx2.ConnectTimeout):
        return ProviderError("connect timeout", retryable=True, kind="connect_timeout")
    if isinstance(exc, httpx2.ConnectError):
        return ProviderError(f"connection failed: {exc or type(exc).__name__}", retryable=True, kind="connect")
    if isinstance(exc, httpx2.TimeoutException):
        return ProviderError(f"timed out: {type(exc).__name__}", retryable=True, kind="timeout")
    if isinstance(exc, (httpx2.TransportError, httpx2.StreamError)):
        return ProviderError(f"connection lost: {exc or type(exc).__name__}", retryable=True, kind="transport")
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return ProviderError(f"sent malformed data: {exc}", retryable=True, kind="malformed")
    if isinstance(exc, ValueError) and _raised_in_json(exc):
        # Valid JSON Python will not read: an integer of more than 4,300 digits (`sys.get_int_max_str_digits`).
        detail = str(exc).split(";")[0][:200]
        return ProviderError(f"sent JSON the gateway could not read: {detail}", retryable=True, kind="malformed")
    return None


def _raised_in_json(exc: BaseException) -> bool:
    """Whether `exc` was raised by the standard `json` decoder (the SDKs decode each event with it)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith("json")


def _httpx_equivalent(exc: aiohttp.ClientError) -> httpx2.TransportError | None:
    """The httpx2 error an aiohttp one amounts to. The SDKs' aiohttp transport maps them itself, not always
    aptly (the openai SDK's reads a refused connection as a connect timeout), so the error underneath decides."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx2.ConnectTimeout(str(exc))
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return httpx2.ReadTimeout(str(exc))
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(str(exc))
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError)):
        return httpx2.ReadError(str(exc) or type(exc).__name__)
    return None


def stainless_error(exc: BaseException, sdk: ModuleType) -> ProviderError | None:
    """A ProviderError for an exception of the `anthropic` or `openai` SDK (both generated by Stainless, with
    the same exception classes), or of the transport under them; None for anything else."""
    if isinstance(exc, sdk.APIStatusError):
        detail = error_detail(exc.body)
        if exc.status_code == 200:  # an in-band error event inside a 200 stream, raised by the SDK
            return ProviderError(f"sent an error event: {detail}", retryable=True)
        kind = http_error_kind(exc.status_code, exc.body)
        return ProviderError(
            f"returned HTTP {exc.status_code}: {detail}",
            status=exc.status_code,
            retry_after_ms=retry_after_ms(exc.response.headers),
            # the same request sent again gets the same answer when the request itself is at fault
            retryable=exc.status_code in RETRYABLE_STATUS and kind is not ErrorKind.REQUEST_AT_FAULT,
            kind=kind,
        )
    if isinstance(exc, sdk.APIConnectionError):
        cause = transport_error(exc.__cause__) if exc.__cause__ is not None else None
        return cause or ProviderError(f"connection failed: {exc}", retryable=True, kind="connect")
    if isinstance(exc, sdk.APIError):  # an in-band `{"error": …}` frame raised without a status (openai)
        return ProviderError(f"sent an error event: {error_detail(exc.body)}", retryable=True)
    return transport_error(exc)
