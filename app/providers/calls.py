"""What the current task's upstream calls carry besides the SDK's own, set outside the adapters (by tracing and by
the gateway) and read by the clients' request hooks (`app.providers.transport`). A module of its own so that
those who set them do not import the HTTP clients (start-up time, docs/performance.md)."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar

# Headers the current task's next upstream request carries besides the SDK's own: the attempt's W3C trace
# context (`traceparent`), set by `app.telemetry.tracing` before each attempt when tracing is on; None otherwise.
UPSTREAM_HEADERS: ContextVar[Mapping[str, str] | None] = ContextVar("upstream_headers", default=None)

# Demo mode only (`GATEWAY_DEMO=1`, the gateway's own simulator upstream): the client key name of the turn
# whose upstream requests are being sent, set by the gateway for the turn's task. The transport's request hook
# sends it as `X-Gateway-Caller`, so that the simulator's request log shows each key only its own requests.
# Outside demo mode it is never set and nothing is added.
DEMO_CALLER: ContextVar[str | None] = ContextVar("demo_caller", default=None)
DEMO_CALLER_HEADER = "x-gateway-caller"
