"""The gateway's own SSE frames of normalized events (docs/api.md §5) and `/v1/complete` answers (§8): what the
unified door writes, and pi's door too (pi's client reads the unified frames as they are). `PING` is the SSE
comment that keeps an idle stream open, also on a resumed stream (`GET /v1/stream/{requestId}`)."""

from __future__ import annotations

from typing import Any, Callable

import orjson

from app.core.settled import SettledTurn

PING = b": ping\n\n"


class UnifiedEncoder:
    """`id: N` / `event: <type>` / `data: <event JSON>` per event; `: ping` comments while idle."""

    hold_until_start = False  # the stream always starts; an error before `start` is its `error` event

    __slots__ = ("sequence", "transform")

    def __init__(self, transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        """`transform` maps each event before it is written (e.g. `partialArguments` on request)."""
        self.sequence = 0
        self.transform = transform

    def encode(self, event: dict[str, Any]) -> bytes:
        if self.transform is not None:
            event = self.transform(event)
        data = orjson.dumps(event)  # may raise: the SSE writer settles the turn as an internal error
        self.sequence += 1
        # orjson escapes every control character, so `data` is always one line: the frame is safe to write
        # as bytes, without re-encoding the JSON.
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (self.sequence, event["type"].encode(), data)

    def ping(self) -> bytes:
        return PING

    def complete(self, result: SettledTurn) -> tuple[int, Any]:
        """`200` with the AssistantMessage, or `502` with the error, the partial message and the request id."""
        if result.outcome == "done":
            return 200, result.message
        error = {"type": "upstream_error", "message": result.error_message, "param": None}
        return 502, {"error": error, "message": result.message, "requestId": result.request_id}

    def refuse(self, result: SettledTurn) -> tuple[int, Any] | None:
        return None
