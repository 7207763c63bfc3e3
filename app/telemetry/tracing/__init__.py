"""OpenTelemetry traces with the GenAI semantic conventions, configured by the standard `OTEL_*` variables.

Off unless configured (`tracing_configured`): without an OTLP endpoint or `OTEL_TRACES_EXPORTER` the
OpenTelemetry SDK is not even imported, no observer is registered and the app is the plain `GatewayApp`, so
the hot path pays nothing. On, `start_tracing` builds an SDK `TracerProvider` from the environment
(`app.telemetry.tracing.setup`), and the gateway gets:

- a SERVER span per HTTP request, around the whole app so that the turn routes' fast path is covered too
  (`app.telemetry.tracing.server`, opened by `app.api.traced`), parented to an incoming W3C `traceparent`;
- a CLIENT span per upstream attempt, from a turn observer beside metrics, logs and the ledger
  (`app.telemetry.tracing.turns`), whose trace context every upstream request carries (`traceparent`; a
  client's `baggage` only with `GATEWAY_FORWARD_BAGGAGE=true`);
- message content in the conventions' shape only with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`
  (`app.telemetry.tracing.content`).

docs/operations.md lists the variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.telemetry.tracing.setup import Tracing

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
# The variables the gateway's tracing honours (read by the OpenTelemetry SDK and its exporters; docs/operations.md).
OTEL_VARIABLES = frozenset(
    {
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
        *ENDPOINT_VARIABLES,
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_COMPRESSION",
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_INSECURE",
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_TRACES_SAMPLER",
        "OTEL_TRACES_SAMPLER_ARG",
        "OTEL_PROPAGATORS",
        "OTEL_BSP_SCHEDULE_DELAY",
        "OTEL_BSP_MAX_QUEUE_SIZE",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        "OTEL_BSP_EXPORT_TIMEOUT",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    }
)


def tracing_configured(environ: Mapping[str, str] = os.environ) -> bool:
    """True when the environment asks for traces: an OTLP endpoint, or `OTEL_TRACES_EXPORTER` naming an
    exporter (`otlp`, `console`, …; `none` turns tracing off, as does `OTEL_SDK_DISABLED=true`)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return exporters != "none"
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def start_tracing(environ: Mapping[str, str] = os.environ) -> "Tracing | None":
    """The process's tracing, set up from the environment; None (and nothing imported) when not configured."""
    if not tracing_configured(environ):
        return None
    from app.telemetry.tracing.setup import build_tracing

    return build_tracing(environ)
