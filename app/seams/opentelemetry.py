"""Private names of the OpenTelemetry SDK (`opentelemetry.sdk._configuration`), used by `app.telemetry.tracing.setup`.

The SDK's public path from the standard `OTEL_*` variables to a tracer provider is its configurator
(`opentelemetry-instrument`), which installs the provider globally and configures metrics and logs too. The
gateway keeps its own provider (an embedding process keeps its global one), so it calls the configurator's
private steps for traces alone, and gets the same exporters and sampler the SDK would pick:

- `configured_sampler()`: `_import_sampler(_get_sampler())`, the sampler of `OTEL_TRACES_SAMPLER(_ARG)`;
- `span_exporter_classes(names)`: `_import_exporters(traces, metrics, logs)`, the registered exporters;
- `exporter_entry_point(name)`: `_get_exporter_entry_point(name, signal_type)`, an exporter name as the SDK
  maps it by the OTLP protocol variables; `OTLP_HTTP_EXPORTER` (`_EXPORTER_OTLP_PROTO_HTTP`), the entry point of
  OTLP over HTTP/protobuf.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk import _configuration
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

__all__ = ["OTLP_HTTP_EXPORTER", "configured_sampler", "exporter_entry_point", "span_exporter_classes"]

OTLP_HTTP_EXPORTER: str = _configuration._EXPORTER_OTLP_PROTO_HTTP


def configured_sampler() -> Sampler | None:
    """The sampler `OTEL_TRACES_SAMPLER` names (None: none named; the tracer provider then reads it)."""
    return _configuration._import_sampler(_configuration._get_sampler())


def span_exporter_classes(names: Sequence[str]) -> dict[str, type[SpanExporter]]:
    """The span exporter class registered under each entry-point name."""
    exporters, _, _ = _configuration._import_exporters(names, [], [])
    return exporters


def exporter_entry_point(name: str) -> str:
    """The entry-point name of span exporter `name` (`otlp` → the gRPC or HTTP one, as the protocol says)."""
    return _configuration._get_exporter_entry_point(name, "traces")
