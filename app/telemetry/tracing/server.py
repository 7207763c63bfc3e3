"""The SERVER span of every HTTP request: what it holds (`RequestSpan`) and how the response's status reaches
it (`SendNotingStatus`). The HTTP edge opens it around the whole app (`app.api.traced.TracedGatewayApp`, the
gateway's app when tracing is on); off, nothing here runs.

The span is the child of the caller's W3C `traceparent` / `tracestate` (the global propagator, so
`OTEL_PROPAGATORS` applies). While the request runs, it is the current span: the turn the request starts
inherits it (its task copies the context) and opens its upstream attempts' CLIENT spans under it. A streamed
turn may settle after the response has ended (a client that left) or before: the span ends when both the
request and its turn are over (`RequestSpan`), so its status says how the turn ended.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable

from opentelemetry import trace
from starlette.types import Message, Send

REQUEST_ID = "gateway.request.id"


class RequestSpan:
    """A request's SERVER span, ended when the request and the turn it started (if any) are both over."""

    __slots__ = ("span", "holds", "status_code")

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.holds = 1  # the request itself; a turn adds one (`hold`)
        self.status_code: int | None = None

    @property
    def ended(self) -> bool:
        return self.holds <= 0

    def hold(self) -> bool:
        """The request's turn keeps the span open until it settles. False when the span has already ended."""
        if self.holds <= 0:
            return False
        self.holds += 1
        return True

    def release(self) -> None:
        self.holds -= 1
        if self.holds == 0:
            self.span.end()


# The SERVER span of the request the current task serves (inherited by the task of the turn it starts).
CURRENT_REQUEST: contextvars.ContextVar[RequestSpan | None] = contextvars.ContextVar(
    "gateway_request_span", default=None
)


class SendNotingStatus:
    """`send`, noting the response's status and request id on the span (a plain callable: every frame of a
    stream passes through it)."""

    __slots__ = ("send", "request")

    def __init__(self, send: Send, request: RequestSpan) -> None:
        self.send = send
        self.request = request

    def __call__(self, message: Message) -> Awaitable[None]:
        if message["type"] == "http.response.start":
            request = self.request
            request.status_code = message["status"]
            for name, value in message.get("headers", ()):
                if name == b"x-request-id":
                    request.span.set_attribute(REQUEST_ID, value.decode("latin-1"))
        return self.send(message)
