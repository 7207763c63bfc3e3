"""Logs on stderr, one line each: JSON objects for machines, or text for a person at a terminal
(`GATEWAY_LOG_FORMAT`: `json`, `text`; by default text when stderr is a terminal, else JSON), and one line per
settled request.

`configure_logging(level, line_format)` installs the formatter on the root logger and returns a `logging.config`
dict for uvicorn, so its own lines have the same format. `RequestLog` is a turn observer that writes the per-request
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

__all__ = [
    "JsonFormatter",
    "TextFormatter",
    "RequestLog",
    "configure_logging",
    "log_format",
    "redact",
    "register_secrets",
    "request_fields",
]

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


class TextFormatter(logging.Formatter):
    """`HH:MM:SS.mmm LEVEL logger: msg key=value …` on one line, for a person reading a terminal: the same
    fields as the JSON lines, the extra ones after the message."""

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created).strftime("%H:%M:%S.%f")[:-3]
        parts = [f"{ts} {record.levelname.lower():<7} {record.name}: {record.getMessage()}"]
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_") and value is not None:
                shown = (
                    value if isinstance(value, (str, int, float, bool)) else orjson.dumps(value, default=str).decode()
                )
                parts.append(f"{key}={shown}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return redact(line)


LOG_FORMATS = {"json": JsonFormatter, "text": TextFormatter}


def log_format(setting: str | None = None) -> str:
    """`GATEWAY_LOG_FORMAT`, or when it is not set: `text` when stderr is a terminal, else `json`."""
    if setting:
        return setting
    try:
        return "text" if sys.stderr.isatty() else "json"
    except (AttributeError, ValueError):  # a closed or replaced stderr
        return "json"


def logging_config(level: str = "info", line_format: str | None = None) -> dict[str, Any]:
    """A `logging.config.dictConfig` dict: everything (ours and uvicorn's) on stderr, as JSON or text."""
    level = level.upper()
    formatter = LOG_FORMATS[log_format(line_format)]
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"lines": {"()": f"{formatter.__module__}.{formatter.__qualname__}"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "lines", "stream": "ext://sys.stderr"}},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["stderr"], "level": level, "propagate": False},
        },
        "root": {"handlers": ["stderr"], "level": level},
    }


def configure_logging(level: str = "info", line_format: str | None = None) -> dict[str, Any]:
    import logging.config

    config = logging_config(level, line_format)
    logging.config.dictConfig(config)
    return config


def ensure_configured(level: str = "info", line_format: str | None = None) -> None:
    """Configure the logs unless someone (a test runner, an embedding app) already set up the root logger."""
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(LOG_FORMATS[log_format(line_format)]())
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
