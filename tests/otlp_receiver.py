"""A loopback OTLP/HTTP trace receiver for tests: decodes each protobuf `ExportTraceServiceRequest` (with
`opentelemetry-proto`) into plain span dicts a test can wait for. `hold()` makes it a receiver that does not
answer (exports wait until `release()`), to show a slow receiver never holds a turn up."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

KINDS = {PbSpan.SPAN_KIND_SERVER: "server", PbSpan.SPAN_KIND_CLIENT: "client", PbSpan.SPAN_KIND_INTERNAL: "internal"}
STATUS = {0: "unset", 1: "ok", 2: "error"}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _span(span: PbSpan, resource: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": span.name,
        "kind": KINDS.get(span.kind, str(span.kind)),
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex() or None,
        "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
        "events": [
            {"name": e.name, "attributes": {kv.key: _value(kv.value) for kv in e.attributes}} for e in span.events
        ],
        "status": STATUS.get(span.status.code, str(span.status.code)),
        "status_message": span.status.message,
        "start_ns": span.start_time_unix_nano,
        "end_ns": span.end_time_unix_nano,
        "resource": resource,
    }


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.exports = 0  # export requests that arrived (also those still held)
        self._cond = threading.Condition()
        self._open = threading.Event()
        self._open.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the stdlib's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver._cond:
                    receiver.exports += 1
                    receiver._cond.notify_all()
                receiver._open.wait(120)
                request = ExportTraceServiceRequest.FromString(body)
                spans = []
                for resource_spans in request.resource_spans:
                    resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        spans.extend(_span(span, resource) for span in scope_spans.spans)
                with receiver._cond:
                    receiver.spans.extend(spans)
                    receiver._cond.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()

    def hold(self) -> None:
        """Stop answering: exports wait (the exporter's thread with them) until `release()`."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def wait_exports(self, count: int, timeout: float = 30) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.exports >= count, timeout), f"fewer than {count} exports arrived"

    def wait(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 30) -> list[dict[str, Any]]:
        """The spans received so far, once `predicate(spans)` holds (bounded by `timeout`)."""
        with self._cond:
            ok = self._cond.wait_for(lambda: predicate(self.spans), timeout)
            assert ok, f"spans never matched; received {[(s['name'], s['trace_id'][:8]) for s in self.spans]}"
            return list(self.spans)

    def trace(self, trace_id: str, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        """The spans of one trace, once at least `count` have arrived."""
        spans = self.wait(lambda spans: sum(s["trace_id"] == trace_id for s in spans) >= count, timeout)
        return [s for s in spans if s["trace_id"] == trace_id]

    def stop(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()
