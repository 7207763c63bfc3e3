"""The OpenTelemetry SDK set up from the standard environment variables, by the SDK's own code.

- exporters: `OTEL_TRACES_EXPORTER` (default `otlp`), resolved by the SDK's configurator to its registered
  exporters; `otlp` speaks HTTP/protobuf or gRPC as `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` /
  `OTEL_EXPORTER_OTLP_PROTOCOL` say, HTTP/protobuf when neither is set (the specification's default; the
  Python SDK alone would pick gRPC). Each exporter reads its own `OTEL_EXPORTER_OTLP_*` (endpoint, headers,
  timeout, compression, certificates);
- the resource: `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME` (`Resource.create`), with the service
  name `llm-gateway` when neither names one;
- the sampler: `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (the SDK's built-in samplers, or one
  registered as an entry point);
- the batch span processor: `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_QUEUE_SIZE`,
  `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, `OTEL_BSP_EXPORT_TIMEOUT`. Spans are exported from its own thread: an
  exporter that is slow or whose receiver is down never holds a turn up (a full queue drops spans).

The provider is the gateway's own (not installed as the global one), so an embedding process keeps its own.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from app.seams.opentelemetry import OTLP_HTTP_EXPORTER, configured_sampler, exporter_entry_point, span_exporter_classes

log = logging.getLogger("gateway.tracing")

DEFAULT_SERVICE_NAME = "llm-gateway"
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SCOPE = "llm_gateway"
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


@dataclass(frozen=True)
class Tracing:
    """The gateway's tracer and what it may record."""

    provider: TracerProvider
    tracer: Tracer
    capture_content: bool  # prompts and completions on the spans (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Export what is queued and stop, waiting at most `timeout` seconds (a receiver that is down must not
        hold the process's exit: the rest is left to a daemon thread)."""
        worker = threading.Thread(target=self.provider.shutdown, name="otel-shutdown", daemon=True)
        worker.start()
        worker.join(timeout)


def build_tracing(environ: Mapping[str, str] = os.environ) -> Tracing:
    """A `TracerProvider` with a batch processor per configured exporter (the SDK reads `os.environ`)."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    sampler = configured_sampler()  # None: the provider reads it
    provider = TracerProvider(resource=resource, sampler=sampler)
    exporters = span_exporter_classes(exporter_names(environ))
    for name, exporter_class in exporters.items():
        provider.add_span_processor(BatchSpanProcessor(exporter_class()))
        log.info("tracing: exporting spans with %s", name)
    capture = environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"
    return Tracing(provider, provider.get_tracer(SCOPE), capture)


def exporter_names(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The SDK's exporter entry-point names for `OTEL_TRACES_EXPORTER` (default `otlp`). A bare `otlp` with no
    protocol variable is HTTP/protobuf; otherwise the SDK maps it by the protocol."""
    if not environ.get("OTEL_TRACES_EXPORTER", "").strip():
        names = ["otlp"]
    else:
        names = [name.strip() for name in environ["OTEL_TRACES_EXPORTER"].split(",") if name.strip()]
    protocol_set = any(environ.get(variable, "").strip() for variable in PROTOCOL_VARIABLES)
    return [
        OTLP_HTTP_EXPORTER if name == "otlp" and not protocol_set else exporter_entry_point(name)
        for name in names
        if name != "none"
    ]
