"""Structured logs: one JSON object per line on stderr, and one line per settled request.

`configure_logging(level)` installs the JSON formatter on the root logger and returns a `logging.config`
dict for uvicorn, so its own lines are JSON too. `RequestLog` is a turn observer that writes the per-request
line (logger `gateway.requests`). Keys never appear: the request line names a key by its id, and the
formatter replaces any registered secret (provider and client keys, `app.redaction`) that slips into a
message, and the value of any `key` query parameter (the access log's `?key=`, any key, known or not). Message content is logged only when `GATEWAY_LOG_CONTENT=true`.
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime, timezone
from typing import Any

import orjson

from app.core.job import TurnJob, TurnObserver
from app.core.settled import SettledTurn
from app.redaction import redact, register_secrets

__all__ = ["JsonFormatter", "RequestLog", "configure_logging", "redact", "register_secrets", "request_fields"]

REQUEST_LOGGER = "gateway.requests"
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "msg", ...extra fields, "exc"?}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return redact(orjson.dumps(entry, default=str).decode())


def logging_config(level: str = "info") -> dict[str, Any]:
    """A `logging.config.dictConfig` dict: everything (ours and uvicorn's) as JSON on stderr."""
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "app.telemetry.logs.JsonFormatter"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["stderr"], "level": level, "propagate": False},
        },
        "root": {"handlers": ["stderr"], "level": level},
    }


def configure_logging(level: str = "info") -> dict[str, Any]:
    import logging.config

    config = logging_config(level)
    logging.config.dictConfig(config)
    return config


def ensure_configured(level: str = "info") -> None:
    """Configure JSON logs unless someone (a test runner, an embedding app) already set up the root logger."""
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(level.upper())


class RequestLog(TurnObserver):
    """Turn observer: one `gateway.requests` line per settled turn."""

    def __init__(self, log_content: bool = False, logger: logging.Logger | None = None) -> None:
        self.log_content = log_content
        self.log = logger or logging.getLogger(REQUEST_LOGGER)

    def turn_finished(self, job: TurnJob, settled: SettledTurn) -> None:
        level = logging.WARNING if settled.outcome == "error" else logging.INFO
        if not self.log.isEnabledFor(level):
            return
        fields = request_fields(job, settled, self.log_content)
        self.log.log(level, "request %s %s", fields["requestId"], fields["outcome"], extra=fields)


def request_fields(job: TurnJob, settled: SettledTurn, log_content: bool = False) -> dict[str, Any]:
    """The per-request log fields of a settled turn, from its settled record (`app.core.settled`; no keys,
    content only when `log_content`)."""
    request = job.request
    message = settled.message
    usage = message.get("usage") or {}
    last = settled.attempts[-1] if settled.attempts else None
    fields: dict[str, Any] = {
        "requestId": settled.request_id,
        "apiKeyId": request.api_key_id,
        "door": request.door,
        "requestedModel": request.requested_model,
        "provider": message.get("provider"),
        "model": message.get("model"),
        "cloud": last.cloud if last is not None else None,
        "region": last.region if last is not None else None,
        "outcome": settled.outcome,
        "stopReason": message.get("stopReason"),
        "ttftMs": None if settled.ttft is None else round(settled.ttft * 1000, 1),
        "durationMs": round(settled.duration * 1000, 1),
        "tokens": {k: usage.get(k, 0) for k in ("input", "output", "cacheRead", "cacheWrite")},
        "cost": (usage.get("cost") or {}).get("total", 0),
        "attempts": len(settled.attempts),
        "upstreamFrames": settled.upstream_frames,
        "clientDisconnected": settled.client_disconnected,
        "errorMessage": message.get("errorMessage"),
    }
    if settled.outcome != "done" and last is not None:
        # Typed failure data for log queries (app.contract.failures), instead of matching message text.
        fields["errorKind"] = str(last.kind) if last.kind is not None else None
        fields["interrupt"] = last.interrupt.name.lower() if last.interrupt is not None else None
    if log_content:
        fields["content"] = message.get("content")
        fields["context"] = request.context.model_dump(mode="json", by_alias=True, exclude_none=True)
    return fields
