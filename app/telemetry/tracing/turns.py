"""The turn observer that traces upstream attempts: one CLIENT span per attempt, GenAI attributes.

Registered beside metrics, logs and the ledger (`Dispatcher.observers`) only when tracing is on. At
`turn_started` it joins the request's SERVER span (`app.telemetry.tracing.server.CURRENT_REQUEST`, inherited by the
turn's task), and names the door and the client key (its name, never the key) on it. The dispatcher reports
each attempt as it starts (`TurnObserver.attempt_started`), which opens its span, `chat {gen_ai.request.model}`,
before the request is sent, and hands its W3C trace context to the transport (`UPSTREAM_HEADERS`), which
adds `traceparent` to that upstream request. At `turn_finished` every attempt's span ends at the attempt's
own end time, with what the attempt record says (outcome, error type, HTTP status, which attempt and why)
and, for the attempt that served the turn, the response: model, id, finish reason, usage, time to first
chunk. The SERVER span's turn hold is released then, so a streamed request's span ends with its turn.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import baggage, propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from app.contract.failures import Attempt, AttemptOutcome, Interrupt
from app.core.job import Route, TurnJob, TurnObserver
from app.core.settled import SettledTurn, next_step
from app.providers.calls import UPSTREAM_HEADERS
from app.telemetry.tracing import content
from app.telemetry.tracing.server import CURRENT_REQUEST, REQUEST_ID, RequestSpan
from app.telemetry.tracing.setup import Tracing

log = logging.getLogger("gateway.tracing")

# gen_ai.provider.name by the adapter's api; an api not listed (a Chat Completions compatible vendor) is named
# by its catalog provider name.
PROVIDER_NAMES = {"anthropic-messages": "anthropic", "openai-responses": "openai", "google-generative-ai": "gcp.gemini"}
CLIENT_LEFT = "client_disconnected"
INTERRUPT_TYPES = {
    Interrupt.CLIENT: CLIENT_LEFT,
    Interrupt.SHUTDOWN: "gateway_shutdown",
    Interrupt.TOTAL: "total_timeout",
    Interrupt.FIRST_CONTENT: "first_content_deadline",
    Interrupt.FIRST_EVENT: "first_event_timeout",
    Interrupt.IDLE: "idle_timeout",
    Interrupt.WRITER: "internal",
}


def _ns(epoch_seconds: float) -> int:
    return int(epoch_seconds * 1e9)


def error_type(attempt: Attempt) -> str | None:
    """`error.type` of an attempt that did not succeed: the interrupt that ended it, the vendor's HTTP status,
    or the kind of failure (`app.contract.failures.ErrorKind`)."""
    if attempt.outcome is AttemptOutcome.DONE:
        return None
    if attempt.interrupt is not None:
        return INTERRUPT_TYPES.get(attempt.interrupt, str(attempt.interrupt.name).lower())
    if attempt.http_status is not None:
        return str(attempt.http_status)
    if attempt.kind is not None:
        return str(attempt.kind)
    return "_OTHER" if attempt.outcome is not None else None


class _TurnSpans:
    __slots__ = ("request", "attempts")

    def __init__(self, request: RequestSpan | None) -> None:
        self.request = request
        self.attempts: list[tuple[Attempt, Span]] = []  # each attempt with its span


class TurnTracer(TurnObserver):
    """Turn observer: the CLIENT spans of a turn's upstream attempts, and the turn's outcome on its request's
    SERVER span."""

    def __init__(self, tracing: Tracing, *, forward_baggage: bool = False) -> None:
        self.tracer = tracing.tracer
        self.capture_content = tracing.capture_content
        # A client's `baggage` (its tenant's data) goes to vendors only when the operator opts in
        # (`GATEWAY_FORWARD_BAGGAGE`); the trace context always does.
        self.forward_baggage = forward_baggage
        self._turns: dict[TurnJob, _TurnSpans] = {}
        self._servers: dict[str, tuple[str, int] | None] = {}  # provider name → (server.address, server.port)

    def turn_started(self, job: TurnJob) -> None:
        request = CURRENT_REQUEST.get()
        if request is not None and not request.hold():
            request = None
        if request is not None:
            attributes: dict[str, Any] = {"gateway.door": job.request.door, REQUEST_ID: job.turn.request_id}
            if job.request.api_key_id is not None:
                attributes["gateway.api_key.name"] = job.request.api_key_id
            request.span.set_attributes(attributes)
        self._turns[job] = _TurnSpans(request)

    def attempt_started(self, job: TurnJob, route: Route) -> None:
        """The dispatcher is about to send this attempt's request (the last of `job.attempts`)."""
        UPSTREAM_HEADERS.set(None)  # whatever happens below, no earlier attempt's context goes out
        spans = self._turns.get(job)
        if spans is None:
            return
        attempt = job.attempts[-1]
        options = job.request.options
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER_NAMES.get(route.provider.api, route.provider.name),
            "gen_ai.request.model": route.model.id,
            "gen_ai.request.stream": True,
            REQUEST_ID: job.turn.request_id,
            "gateway.provider": route.provider.name,
            "gateway.api": route.provider.api,
            "gateway.attempt": len(job.attempts),
        }
        if options.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = options.max_tokens
        if options.temperature is not None:
            attributes["gen_ai.request.temperature"] = options.temperature
        server = self._server(route)
        if server is not None:
            attributes["server.address"], attributes["server.port"] = server
        if len(job.attempts) > 1:
            previous = job.attempts[-2]
            attributes["gateway.attempt.reason"] = str(next_step(previous, attempt))
            after = error_type(previous)
            if after is not None:
                attributes["gateway.attempt.after_error.type"] = after
        if self.capture_content:
            attributes.update(content.input_attributes(job.request.context))
        span = self.tracer.start_span(
            f"chat {route.model.id}", kind=SpanKind.CLIENT, attributes=attributes, start_time=_ns(attempt.started_at)
        )
        spans.attempts.append((attempt, span))
        carrier: dict[str, str] = {}
        context = trace.set_span_in_context(span)
        if not self.forward_baggage:
            context = baggage.clear(context)  # the propagators (`OTEL_PROPAGATORS`) then write no `baggage`
        propagate.inject(carrier, context=context)
        UPSTREAM_HEADERS.set(carrier)

    def turn_finished(self, job: TurnJob, settled: SettledTurn) -> None:
        spans = self._turns.pop(job, None)
        if spans is None:
            return
        for attempt, span in spans.attempts:
            if attempt is settled.attempts[-1]:
                self._response(job, settled, attempt, span)
            self._end_attempt(attempt, span)
        if spans.request is not None:
            self._settle_request(settled, spans.request)

    def _response(self, job: TurnJob, settled: SettledTurn, attempt: Attempt, span: Span) -> None:
        """What the attempt that served the turn (or failed it last) answered."""
        message = settled.message
        if job.turn.started or settled.outcome == "done":
            usage = message.get("usage") or {}
            cache_read, cache_write = usage.get("cacheRead", 0), usage.get("cacheWrite", 0)
            span.set_attributes(
                {
                    "gen_ai.response.model": message.get("model") or attempt.model,
                    # The conventions count every input token, cached ones included.
                    "gen_ai.usage.input_tokens": usage.get("input", 0) + cache_read + cache_write,
                    "gen_ai.usage.output_tokens": usage.get("output", 0),
                    "gen_ai.usage.cache_read.input_tokens": cache_read,
                    "gen_ai.usage.cache_creation.input_tokens": cache_write,
                }
            )
            if attempt.response_id:
                span.set_attribute("gen_ai.response.id", attempt.response_id)
            if attempt.response_model:
                span.set_attribute("gen_ai.response.model", attempt.response_model)
            if self.capture_content:
                span.set_attributes(content.output_attributes(message))
        reason = content.FINISH_REASONS.get(message.get("stopReason") or "")
        if reason is not None and settled.outcome != "aborted":
            span.set_attribute("gen_ai.response.finish_reasons", (reason,))
        if settled.ttft is not None:
            first = job.request.started_wall + settled.ttft
            span.set_attribute("gen_ai.response.time_to_first_chunk", max(0.0, first - attempt.started_at))
            span.add_event("gen_ai.first_chunk", timestamp=_ns(first))

    @staticmethod
    def _end_attempt(attempt: Attempt, span: Span) -> None:
        if attempt.http_status is not None:
            span.set_attribute("http.response.status_code", attempt.http_status)
        kind = error_type(attempt)
        if kind is not None:
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, kind))
        span.end(end_time=_ns(attempt.ended_at if attempt.ended_at is not None else time.time()))

    @staticmethod
    def _settle_request(settled: SettledTurn, request: RequestSpan) -> None:
        outcome = settled.outcome
        span = request.span
        span.set_attributes({"gateway.turn.outcome": outcome, "gateway.attempts": len(settled.attempts)})
        if outcome != "done":
            kind = CLIENT_LEFT if outcome == "aborted" else str(settled.failure)
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, "client disconnected" if outcome == "aborted" else kind))
        request.release()

    def _server(self, route: Route) -> tuple[str, int] | None:
        """`server.address` and `server.port` of the provider's base URL (`Provider.base_url`), once per provider."""
        name = route.provider.name
        if name not in self._servers:
            self._servers[name] = _address(getattr(route.provider, "base_url", None))
        return self._servers[name]


def _address(base_url: str | None) -> tuple[str, int] | None:
    if not base_url:
        return None
    parts = urlsplit(str(base_url))
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
