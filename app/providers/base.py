"""What every vendor adapter provides, and the events it speaks to the event stream.

An adapter has two halves: `open()` builds the vendor call through the official SDK and returns the raw
event stream (an `Upstream`), and a `Translator` turns each raw wire event into zero or more *adapter
events*: plain dicts whose shapes are typed in `app.contract.adapter_events` (`AdapterEvent`).

`contentIndex`, block text, tool argument parsing and settlement are the event stream's job
(`app.stream.turn`), so an adapter only translates. A vendor failure (HTTP error, in-band error, refusal,
missing terminal signal) is raised as `ProviderError`. Adapters know nothing of HTTP, the ledger or each other.
"""

from __future__ import annotations

import asyncio
import email.utils
import html
import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Awaitable, Mapping, Protocol, TypeVar

from app.contract.adapter_events import AdapterEvent
from app.contract.failures import ErrorKind
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.contract.catalog_entries import ModelInfo
from app.gc_pause import gc_paused
from app.redaction import redact

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class ProviderError(Exception):
    """An upstream failure, phrased without the provider/model prefix (the dispatcher adds it).

    `retryable` says whether another attempt may help (only used before content reached the client);
    `kind` says what failed (`app.contract.failures.ErrorKind`), which the attempt records.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after_ms: int | None = None,
        retryable: bool = False,
        kind: ErrorKind | str = ErrorKind.UPSTREAM,
    ) -> None:
        message = redact(message)  # where upstream failure text enters: a vendor may echo the key it was sent
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after_ms = retry_after_ms
        self.retryable = retryable
        self.kind = kind


class Upstream:
    """A vendor's raw event stream: iterate it for wire events, `aclose()` drops the connection."""

    def __init__(self, events: AsyncIterator[Any], close: Callable[[], Awaitable[None]]) -> None:
        self._events = events
        self._close = close
        self.closed = False

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            await self._close()


class Translator(Protocol):
    """Turns one attempt's wire events into adapter events (one translator per attempt)."""

    @property
    def response_id(self) -> str | None:
        """The vendor's id of its response, once a frame named it (None or "" before); the dispatcher copies it
        into the attempt, for tracing."""

    @property
    def response_model(self) -> str | None:
        """The model that answered, once a frame named it (None before)."""

    def feed(self, wire: Any) -> list[AdapterEvent]:
        """Adapter events for one wire event; raises ProviderError for a vendor-reported failure."""

    def end(self) -> list[AdapterEvent]:
        """Called when the upstream body ended; raises ProviderError if no terminal signal was seen."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a provider's api runs when a cloud serves it (catalog `cloud`): what records, log lines and
    metrics name beside the provider."""

    cloud: str  # the cloud's name (`app.providers.clouds.registry.CLOUDS`: bedrock, vertex, azure)
    region: str | None  # its region: the AWS region, the Vertex AI location, the Azure region


class Provider(Protocol):
    name: str

    @property
    def api(self) -> str:
        """The api it speaks (its key in `ADAPTERS`): a class attribute of each adapter."""

    @property
    def placement(self) -> Placement | None:
        """The cloud and region its api runs on; None when the api's maker serves it."""

    async def open(self, model: ModelInfo, context: Context, options: StreamOptions) -> Upstream:
        """Send the request; raises ProviderError (via `error`) when the vendor refuses it."""

    def translator(self, model: ModelInfo) -> Translator: ...

    def check_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> None:
        """Raise `app.contract.refusals.RequestRejected` for a request this vendor cannot honour (before any call)."""

    def error(self, exc: BaseException) -> ProviderError | None:
        """The ProviderError for an SDK or transport exception, or None if it is not one of those."""

    async def count_tokens(self, model: ModelInfo, context: Context, options: StreamOptions) -> int:
        """The vendor's own count of the input tokens this request would send (its counting endpoint, through
        its SDK). Raises `app.contract.refusals.TokensNotCounted` where the api has no such endpoint, and SDK or
        transport exceptions (read with `error`) when the vendor fails."""

    async def aclose(self) -> None:
        """Close the SDK client and its connection pool (once, when the gateway stops)."""


def counted_tokens(answer: Any, field: str) -> int:
    """The whole number a vendor's counting endpoint answered in `field` (`input_tokens`, `totalTokens`,
    `inputTokens`); a `ProviderError` (malformed) when the answer has none."""
    tokens = answer.get(field) if isinstance(answer, dict) else None
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise ProviderError(f"answered a token count without {field}", kind=ErrorKind.MALFORMED)
    return tokens


# Vendor error types that blame the request itself (Anthropic and OpenAI use these names).
_REQUEST_ERROR_TYPES = frozenset({"request_too_large", "invalid_request_error"})
_REQUEST_TOO_LARGE = "request too large"  # OpenAI's 429 about one request over the tokens-per-minute limit


def http_error_kind(status: int, body: Any) -> ErrorKind:
    """The kind of a vendor's HTTP error answer: `REQUEST_AT_FAULT` for a 429 or 5xx whose body says the request
    itself is at fault (its error type `request_too_large` or `invalid_request_error`, or OpenAI's 429 message
    "Request too large for … on tokens per min"), which says nothing of the deployment's health; else `HTTP`."""
    if status != 429 and status < 500:
        return ErrorKind.HTTP
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return ErrorKind.HTTP
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return ErrorKind.HTTP
    kind, message = error.get("type"), error.get("message")
    if kind in _REQUEST_ERROR_TYPES:
        return ErrorKind.REQUEST_AT_FAULT
    if status == 429 and isinstance(message, str) and message[:40].lower().startswith(_REQUEST_TOO_LARGE):
        return ErrorKind.REQUEST_AT_FAULT
    return ErrorKind.HTTP


def error_detail(body: Any) -> str:
    """`<error type or code>: <message>` from a vendor's JSON error body, whatever shape it came in; a body
    that is not JSON (an HTML error page, plain text) becomes `error_text` of it."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return error_text(body)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            kind = error.get("type") or error.get("code") or "error"
            return f"{kind}: {error.get('message') or ''}".strip()
    return error_text(str(body)) if body else "no error details"


ERROR_TEXT_MAX = 200
_HTML_START = re.compile(r"\s*<(?:!doctype|html|head|body|\?xml|!--|title)\b", re.I)
_TITLE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.I | re.S)
_HIDDEN = re.compile(r"<(script|style|head)\b.*?</\1\s*>|<!--.*?-->", re.I | re.S)
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def error_text(text: str, limit: int = ERROR_TEXT_MAX) -> str:
    """A short clean message from an error body that is not JSON: an HTML page (a proxy's or a vendor's
    error page) gives its title, else its first visible text; any text is unescaped, its whitespace collapsed
    to single spaces, and cut to `limit` characters."""
    if _HTML_START.match(text):
        title = _TITLE.search(text)
        text = (
            title.group(1) if title and _TAG.sub("", title.group(1)).strip() else _TAG.sub(" ", _HIDDEN.sub(" ", text))
        )
        text = _TAG.sub(" ", text)
        text = html.unescape(text)
    text = _SPACE.sub(" ", text).strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text or "no error details"


def retry_after_ms(headers: Mapping[str, str] | None, now: float | None = None) -> int | None:
    """Milliseconds until the vendor wants a retry; None when the headers say nothing usable.

    The most precise header the vendor sent wins, not the largest: `retry-after-ms`, else `retry-after`
    (seconds or an HTTP date), else the rate limit's reset, `x-ratelimit-reset-ms`, else `x-ratelimit-reset`
    (seconds, or an epoch in seconds or milliseconds). Azure sends `retry-after-ms: 600` with `retry-after: 1`,
    the second rounded up: the wait is 600 ms. A header whose value is not a usable number (negative, NaN, not
    a number) is skipped for the next one."""
    if not headers:
        return None
    now = time.time() if now is None else now

    def number(name: str) -> float | None:
        value = headers.get(name)
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            return None

    def retry_after() -> float | None:
        raw = headers.get("retry-after")
        if raw is None:
            return None
        try:
            return float(raw) * 1000
        except ValueError:
            try:
                return (email.utils.parsedate_to_datetime(raw).timestamp() - now) * 1000
            except (TypeError, ValueError, IndexError):
                return None

    def reset() -> float | None:
        value = number("x-ratelimit-reset")
        if value is None:
            return None
        if value > 1e12:
            return value - now * 1000
        if value > 1e9:
            return (value - now) * 1000
        return value * 1000

    for candidate in (lambda: number("retry-after-ms"), retry_after, lambda: number("x-ratelimit-reset-ms"), reset):
        value = candidate()
        if value is not None and value >= 0:  # NaN is never >= 0
            return int(min(value, RETRY_AFTER_MAX_MS))
    return None


RETRY_AFTER_MAX_MS = 86_400_000  # a vendor's retry-after beyond a day (`inf`, `1e400`) reads as a day


def retry_delay_ms(seconds: float) -> int | None:
    """A retry delay in seconds (e.g. Gemini's `retryDelay`) as milliseconds, capped at `RETRY_AFTER_MAX_MS`;
    None for a negative or NaN one."""
    if not seconds >= 0:
        return None
    return int(min(seconds * 1000, RETRY_AFTER_MAX_MS))


MAX_USAGE_TOKENS = 1_000_000_000
"""The largest token count the gateway takes from a vendor: no model reads or writes a billion tokens in one
turn, and counts past 64 bits break the ledger, the charge and the spend metric. A larger count is recorded as
this one (clamped, so the turn still settles and is billed at most this)."""


def token_count(value: Any, name: str) -> int:
    """A vendor's token count (`name` is its wire field, for the error) as the gateway keeps it: absent → 0,
    a whole number clamped to `0 ..= MAX_USAGE_TOKENS`. Any other value (text, a list, a fraction, NaN) is a
    malformed event (`ProviderError`, kind `malformed`). Every adapter reads usage through this."""
    if type(value) is int and 0 <= value <= MAX_USAGE_TOKENS:
        return value  # the usual count, read once per chunk by some adapters
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = MAX_USAGE_TOKENS if value > MAX_USAGE_TOKENS else int(value)  # 1e400 is inf: clamped too
    elif isinstance(value, float) and math.isinf(value) and value > 0:
        value = MAX_USAGE_TOKENS
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProviderError(
            f"sent a token count that is not a whole number: {name}={_shown(value)}",
            retryable=True,
            kind=ErrorKind.MALFORMED,
        )
    return min(max(value, 0), MAX_USAGE_TOKENS)


def wire_text(value: Any, name: str) -> str:
    """A text field of a wire event (`name` says which, for the error): absent → "", a string as it is; any
    other value (`"thinking": 5`, a list) is a malformed event (`ProviderError`, kind `malformed`)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    raise ProviderError(f"sent {name} that is not a string: {_shown(value)}", retryable=True, kind=ErrorKind.MALFORMED)


def wire_name(value: Any, name: str) -> str:
    """A text field of a wire event that must not be empty (a tool call's id or name): absent, empty or not a
    string is a malformed event (`ProviderError`, kind `malformed`)."""
    if text := wire_text(value, name):
        return text
    raise ProviderError(f"sent {name} that is empty", retryable=True, kind=ErrorKind.MALFORMED)


def wire_index(value: Any, name: str) -> int | None:
    """An index field of a wire event (a content block's, a tool call's): absent → None, an integer as it is;
    any other value (a list, a dict, text) is a malformed event (`ProviderError`, kind `malformed`)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ProviderError(
        f"sent {name} that is not an integer: {_shown(value)}", retryable=True, kind=ErrorKind.MALFORMED
    )


def _shown(value: Any, limit: int = 60) -> str:
    """A wire value as an error message shows it: its JSON-ish repr, cut to `limit` characters."""
    text = (
        repr(value) if not isinstance(value, int) or value.bit_length() < 200 else f"<{value.bit_length()}-bit integer>"
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


OFF_LOOP_MESSAGES = 2_000  # histories at least this long are converted in a worker thread

R = TypeVar("R")


async def build_off_loop(
    build: Callable[[ModelInfo, Context, StreamOptions], R], model: ModelInfo, context: Context, options: StreamOptions
) -> R:
    """`build(model, context, options)`, in a worker thread for a long history: converting 100,000 messages
    takes the interpreter for a second, and on the event loop that second would stall every other stream.
    (Python code in a worker thread hands the interpreter back every few milliseconds.)"""
    if len(context.messages) < OFF_LOOP_MESSAGES:
        return build(model, context, options)
    return await asyncio.to_thread(_build_paused, build, model, context, options)


def _build_paused(
    build: Callable[[ModelInfo, Context, StreamOptions], R], model: ModelInfo, context: Context, options: StreamOptions
) -> R:
    with gc_paused():
        return build(model, context, options)
