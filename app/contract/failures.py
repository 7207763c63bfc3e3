"""Failure data as data: what kind of failure ended an attempt, why a turn was interrupted, one attempt, and
what kind of failure ended a turn as a door answers it.

Adapters raise `ProviderError(kind=ErrorKind.…)`; the dispatcher records every try as an `Attempt`; metrics,
logs and the ledger read these kinds instead of parsing message text; a settled turn names its `Failure`
(`app.core.settled.SettledTurn`), which doors turn into their own error types. The enums are `StrEnum`s, so
their values are what records and metric labels show.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any


class ErrorKind(enum.StrEnum):
    """Why an upstream attempt failed (`ProviderError.kind`)."""

    HTTP = "http"  # the vendor answered with an HTTP error status
    # The vendor answered a 429 or 5xx that its body says is about this request itself, not its own health (too
    # large for the tokens-per-minute limit: OpenAI's "Request too large"; Anthropic's `request_too_large`; an
    # `invalid_request_error` under a 5xx): a pool does not cool the deployment for it (docs/pools.md).
    REQUEST_AT_FAULT = "request_at_fault"
    UPSTREAM = "upstream"  # an in-band error event from the vendor
    CONNECT = "connect"  # the connection could not be made
    CONNECT_TIMEOUT = "connect_timeout"
    TRANSPORT = "transport"  # the connection broke mid-stream
    TIMEOUT = "timeout"  # a watchdog timeout (first event, idle) or a transport read timeout
    MALFORMED = "malformed"  # bytes, JSON or values the gateway could not read
    EVENT_TOO_LARGE = "event_too_large"  # one SSE event passed GATEWAY_MAX_UPSTREAM_EVENT_BYTES
    TRUNCATED = "truncated"  # the body ended without the vendor's terminal signal
    PROTOCOL = "protocol"  # events out of order
    REFUSAL = "refusal"  # a refusal or safety stop
    STOP_REASON = "stop_reason"  # a stop the gateway cannot present as success
    TOOL_ARGUMENTS = "tool_arguments"  # a tool call's arguments did not parse (or were cut off)
    REQUEST = "request"  # the vendor cannot be sent this request (found while building it)
    INTERNAL = "internal"  # a bug of ours


class Failure(enum.StrEnum):
    """What kind of failure ended a turn, door-agnostic: what a door needs to pick its error type and status."""

    INVALID_REQUEST = "invalid_request"  # the vendor rejected the request (HTTP 400/404/413/422)
    RATE_LIMITED = "rate_limited"  # the vendor said 429 (after the gateway's own retries)
    OVERLOADED = "overloaded"  # the vendor said 503/529
    TIMEOUT = "timeout"  # a gateway timeout fired (connect, first event, idle, total)
    SHUTTING_DOWN = "shutting_down"  # the gateway is stopping
    ABORTED = "aborted"  # the client went away
    REFUSED = "refused"  # the vendor refused, or its safety filter blocked the prompt or stopped the answer
    UPSTREAM = "upstream"  # anything else: the vendor failed, truncated, sent bad tool JSON


class Interrupt(enum.StrEnum):
    """Why a running turn was cancelled from outside its pump. The value is the text error messages use.

    Precedence: when several interrupts arrive before the pump runs (in the same loop iteration), the one
    listed first below wins and none is lost: a turn-ending reason always replaces an attempt-ending one
    (a client that left during a timeout is never answered by a retry). A weaker reason arriving after a
    stronger one is ignored.
    """

    WRITER = "gateway internal error: an event could not be encoded for the client"  # a bug of ours, not the client
    CLIENT = "client disconnected"
    SHUTDOWN = "gateway shutting down"
    TOTAL = "total timeout"
    FIRST_CONTENT = "first-content deadline"  # nothing reached the client in time: ends the turn, retries or not
    FIRST_EVENT = "first-event timeout"  # ends the attempt only (retryable while nothing was sent)
    IDLE = "idle timeout"  # ends the attempt only (retryable while nothing was sent)
    GRACE = "late-frame grace over"  # the turn has settled: stop counting late frames, close the upstream

    @property
    def ends_attempt_only(self) -> bool:
        """A watchdog timeout of one attempt: the turn may go on with the next attempt."""
        return self in (Interrupt.FIRST_EVENT, Interrupt.IDLE)

    def outranks(self, other: "Interrupt") -> bool:
        """True when this reason wins over `other` (see the class docstring)."""
        order = list(Interrupt)
        return order.index(self) < order.index(other)


class AttemptOutcome(enum.StrEnum):
    DONE = "done"
    ERROR = "error"
    ABORTED = "aborted"


@dataclass(slots=True)
class Attempt:
    """One try of one provider/model within a turn (docs/api.md §10 `attempts`). Times are epoch seconds.

    `kind` says why a failed attempt failed, `interrupt` which interrupt ended it (a watchdog timeout, the
    client leaving, shutdown): metrics and logs read these, never the message text. The record shows the
    documented fields only (`record()`, docs/api.md §10)."""

    provider: str
    api: str
    model: str
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    outcome: AttemptOutcome | None = None
    kind: ErrorKind | None = None
    interrupt: Interrupt | None = None
    http_status: int | None = None
    retry_after_ms: int | None = None
    error_message: str | None = None
    response_id: str | None = None  # the vendor's id of its response and the model that answered (not recorded)
    response_model: str | None = None
    deployment: str | None = None  # the pool's deployment this attempt went to (docs/pools.md)
    after_content: bool = False  # failed after content had reached the client: no other attempt could follow
    cooled: str | None = None  # why this attempt's failure cooled its pool deployment (docs/pools.md), if it did
    cloud: str | None = None  # the cloud the provider runs its api on (bedrock | vertex | azure), None at the maker
    region: str | None = None  # that cloud's region (AWS region, Vertex AI location, Azure region)

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def end(self, outcome: AttemptOutcome | str, error_message: str | None = None) -> None:
        """Close the attempt; an error message is kept only for an attempt that did not succeed."""
        self.ended_at = time.time()
        self.outcome = AttemptOutcome(outcome)
        if error_message and self.outcome is not AttemptOutcome.DONE:
            self.error_message = error_message

    def failed_with(
        self, kind: ErrorKind | str, *, http_status: int | None = None, retry_after_ms: int | None = None
    ) -> None:
        """Note why the attempt failed (an unknown kind counts as `upstream`)."""
        try:
            self.kind = ErrorKind(kind)
        except ValueError:
            self.kind = ErrorKind.UPSTREAM
        self.http_status = http_status
        self.retry_after_ms = retry_after_ms

    @property
    def timeout(self) -> str | None:
        """Which timeout ended the attempt, if one did: first_event | idle | total | first_content | connect |
        transport."""
        if self.interrupt is not None and self.interrupt in _TIMEOUT_LABELS:
            return _TIMEOUT_LABELS[self.interrupt]
        if self.kind is ErrorKind.CONNECT_TIMEOUT:
            return "connect"
        if self.kind is ErrorKind.TIMEOUT:
            return "transport"  # a watchdog timeout sets `interrupt` too, so this is the transport's own
        return None

    def record(self) -> dict[str, Any]:
        """The record's camelCase shape (epoch milliseconds), without unset optional fields:
        `{provider, api, model, cloud?, region?, startedAt, endedAt, outcome, deployment?, httpStatus?, errorMessage?,
        failover?, cooled?}`."""
        out: dict[str, Any] = {
            "provider": self.provider,
            "api": self.api,
            "model": self.model,
            **({"cloud": self.cloud, "region": self.region} if self.cloud is not None else {}),
            "startedAt": int(self.started_at * 1000),
            "endedAt": int(self.ended_at * 1000) if self.ended_at is not None else None,
            "outcome": str(self.outcome) if self.outcome is not None else None,
        }
        if self.deployment is not None:
            out["deployment"] = self.deployment
        if self.http_status is not None:
            out["httpStatus"] = self.http_status
        if self.error_message:
            out["errorMessage"] = self.error_message
        if self.after_content:
            out["failover"] = "content_sent"  # why the turn did not move on to another deployment or fallback
        if self.cooled is not None:
            out["cooled"] = self.cooled  # why its pool deployment was cooled down (`cooling_reason`)
        return out


_TIMEOUT_LABELS = {
    Interrupt.FIRST_EVENT: "first_event",
    Interrupt.IDLE: "idle",
    Interrupt.TOTAL: "total",
    Interrupt.FIRST_CONTENT: "first_content",
}
