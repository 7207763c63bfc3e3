"""Structured logs: one JSON object per line on stderr, and one line per settled request.

`configure_logging(level)` installs the JSON formatter on the root logger and returns a `logging.config`
dict for uvicorn, so its own lines are JSON too. `RequestLog` is a turn observer that writes the per-request
line (logger `gateway.requests`). Keys never appear: the request line names a key by its id, and the
formatter replaces any registered secret (provider and client keys, `app.redaction`) that slips into a
message. Message content is logged only when `GATEWAY_LOG_CONTENT=true`.
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime, timezone
from typing import Any

import orjson

from app.core.job import TurnJob
from app.redaction import has_secrets, redact, register_secrets

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
        line = orjson.dumps(entry, default=str).decode()
        return redact(line) if has_secrets() else line


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


class RequestLog:
    """Turn observer: one `gateway.requests` line per settled turn."""

    def __init__(self, log_content: bool = False, logger: logging.Logger | None = None) -> None:
        self.log_content = log_content
        self.log = logger or logging.getLogger(REQUEST_LOGGER)

    def turn_started(self, job: TurnJob) -> None:
        pass

    def turn_finished(self, job: TurnJob) -> None:
        level = logging.WARNING if job.turn.outcome == "error" else logging.INFO
        if not self.log.isEnabledFor(level):
            return
        fields = request_fields(job, self.log_content)
        self.log.log(level, "request %s %s", fields["requestId"], fields["outcome"], extra=fields)


def request_fields(job: TurnJob, log_content: bool = False) -> dict[str, Any]:
    """The per-request log fields of a settled turn (no keys; content only when `log_content`); its times come
    from the turn's summary (`app.core.summary`)."""
    turn = job.turn
    summary = job.summary
    assert summary is not None  # set by the dispatcher before it tells the observers
    message = turn.message
    usage = message.get("usage") or {}
    fields: dict[str, Any] = {
        "requestId": turn.request_id,
        "apiKeyId": job.api_key_id,
        "door": job.door,
        "requestedModel": job.requested_model,
        "provider": message.get("provider"),
        "model": message.get("model"),
        "cloud": job.attempts[-1].cloud if job.attempts else None,
        "region": job.attempts[-1].region if job.attempts else None,
        "outcome": summary.outcome,
        "stopReason": message.get("stopReason"),
        "ttftMs": None if summary.ttft is None else round(summary.ttft * 1000, 1),
        "durationMs": round(summary.duration * 1000, 1),
        "tokens": {k: usage.get(k, 0) for k in ("input", "output", "cacheRead", "cacheWrite")},
        "cost": (usage.get("cost") or {}).get("total", 0),
        "attempts": len(job.attempts),
        "upstreamFrames": job.upstream_frames,
        "clientDisconnected": job.client_disconnected,
        "errorMessage": message.get("errorMessage"),
    }
    if turn.outcome != "done" and job.attempts:
        # Typed failure data for log queries (app.contract.failures), instead of matching message text.
        last = job.attempts[-1]
        fields["errorKind"] = str(last.kind) if last.kind is not None else None
        fields["interrupt"] = last.interrupt.name.lower() if last.interrupt is not None else None
    if log_content:
        fields["content"] = message.get("content")
        fields["context"] = job.context.model_dump(mode="json", by_alias=True, exclude_none=True)
    return fields
