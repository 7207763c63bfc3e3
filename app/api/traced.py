"""The gateway's app with a SERVER span around every HTTP request (`app.telemetry.tracing.server`), the app `app.main`
builds when tracing is on. Its `__call__` wraps `GatewayApp.__call__`, the outermost layer, so the turn routes
answered on the fast path (`app.api.edge`) get their span like every other route (a Starlette middleware
would only see the others)."""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import Receive, Scope, Send

from app.api.edge import GatewayApp
from app.telemetry.tracing.server import CURRENT_REQUEST, RequestSpan, SendNotingStatus
from app.telemetry.tracing.setup import Tracing

log = logging.getLogger("gateway.tracing")

_CONTEXT_HEADERS = frozenset({b"traceparent", b"tracestate", b"baggage"})


# Paths that get no SERVER span unless `GATEWAY_TRACE_PROBES=true`: the probes and the metrics scrape (a trace
# every few seconds per replica, saying nothing about requests), and the demo simulator mounted in the gateway
# (the vendor side of the demo's own calls: their CLIENT spans are the turns').
UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
UNTRACED_PREFIXES = ("/_simulator/",)


class TracedGatewayApp(GatewayApp):
    """`GatewayApp` with a SERVER span around every HTTP request (`tracing` is set by `app.main`), except the
    probes and the demo simulator's routes unless `trace_probes` (`GATEWAY_TRACE_PROBES`)."""

    tracing: Tracing
    trace_probes: bool = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (not self.trace_probes and _untraced(scope["path"])):
            await super().__call__(scope, receive, send)
            return
        method = scope["method"]
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in _CONTEXT_HEADERS
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
            await super().__call__(scope, receive, SendNotingStatus(send, request))
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


def _untraced(path: str) -> bool:
    return path in UNTRACED_PATHS or path.startswith(UNTRACED_PREFIXES)
