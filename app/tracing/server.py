"""The SERVER span of every HTTP request, opened around the whole app.

`TracedGatewayApp` is the gateway's app when tracing is on: its `__call__` wraps `GatewayApp.__call__`, so
the turn routes that `app.api.edge` answers outside FastAPI get their span like every other route (a
Starlette middleware would only see the others). Off, the app is the plain `GatewayApp` and nothing here runs.

The span is the child of the caller's W3C `traceparent` / `tracestate` (the global propagator, so
`OTEL_PROPAGATORS` applies). While the request runs, it is the current span: the turn the request starts
inherits it (its task copies the context) and opens its upstream attempts' CLIENT spans under it. A streamed
turn may settle after the response has ended (a client that left) or before: the span ends when both the
request and its turn are over (`RequestSpan`), so its status says how the turn ended.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import Message, Receive, Scope, Send

from app.api.edge import GatewayApp
from app.tracing.setup import Tracing

log = logging.getLogger("gateway.tracing")

REQUEST_ID = "gateway.request.id"
_CONTEXT_HEADERS = frozenset({b"traceparent", b"tracestate", b"baggage"})


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
CURRENT_REQUEST: contextvars.ContextVar[RequestSpan | None] = contextvars.ContextVar("gateway_request_span", default=None)


class _SendNotingStatus:
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


class TracedGatewayApp(GatewayApp):
    """`GatewayApp` with a SERVER span around every HTTP request (`tracing` is set by `app.main`)."""

    tracing: Tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        method = scope["method"]
        carrier = {
            name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"] if name in _CONTEXT_HEADERS
        }
        parent = propagate.extract(carrier) if carrier else otel_context.Context()
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.path": scope["path"],
            "url.scheme": scope.get("scheme", "http"),
            "network.protocol.version": scope.get("http_version", "1.1"),
        }
        if scope.get("client"):
            attributes["client.address"] = scope["client"][0]
        span = self.tracing.tracer.start_span(method, context=parent, kind=SpanKind.SERVER, attributes=attributes)
        request = RequestSpan(span)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        request_token = CURRENT_REQUEST.set(request)
        try:
            await super().__call__(scope, receive, _SendNotingStatus(send, request))
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR))
            raise
        finally:
            CURRENT_REQUEST.reset(request_token)
            otel_context.detach(token)
            try:
                self._finish(scope, request)
            except Exception:  # tracing must never break a request
                log.exception("tracing: the server span of %s could not be ended", scope.get("path"))

    def _finish(self, scope: Scope, request: RequestSpan) -> None:
        span = request.span
        route = self.route_of(scope)
        if route is not None:
            span.set_attribute("http.route", route)
            span.update_name(f"{scope['method']} {route}")
        status = request.status_code
        if status is not None:
            span.set_attribute("http.response.status_code", status)
            # A 5xx is an error; its type is the status unless the turn named the failure already.
            if status >= 500 and "error.type" not in (getattr(span, "attributes", None) or {}):
                span.set_attribute("error.type", str(status))
                span.set_status(Status(StatusCode.ERROR))
        request.release()

    def route_of(self, scope: Scope) -> str | None:
        """The route template the request matched: the turn route's path on the fast path, else the route
        FastAPI's router matched (it notes it in the scope; None for a 404)."""
        turn_routes = self.turn_routes
        if turn_routes is not None and turn_routes.endpoint(scope) is not None:
            return "/" + scope["path"].lstrip("/")
        return getattr(scope.get("route"), "path", None)
