"""`POST /v1/responses/compact`: OpenAI's first remote compaction (`client.responses.compact`, which Codex CLIs
used before compaction triggers), served as a turn whose input ends with a compaction trigger
(`compaction.py`), not streamed, keeping nothing, answered as OpenAI's compacted response: `{"id", "object":
"response.compaction", "created_at", "output": [the user messages of input, then the compaction item],
"usage"}` (the encoder's `complete`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from app.doors.fields import invalid, unsupported
from app.doors.openai_responses import compaction, request

PATH = "/v1/responses/compact"


def decode(body: dict[str, Any], headers: Mapping[str, str]) -> request.ResponsesRequest:
    """`POST /v1/responses/compact`: the body is a Responses request (`model`, `input`, `instructions`, …); it is
    decoded as a turn whose input ends with a compaction trigger, not streamed, keeping nothing."""
    if body.get("previous_response_id") is not None:
        raise unsupported("previous_response_id", "compaction reads no stored response: send the whole "
                          "conversation in input")  # fmt: skip
    for key in ("stream", "store"):
        if body.get(key):
            raise invalid(key, "a compaction is answered as one JSON object and is not stored")
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise invalid("input", "must be a string or a non-empty array of input items")
    turn = {**body, "input": [*items, {"type": compaction.TRIGGER}], "stream": False, "store": False}
    decoded = request.decode(turn, headers)
    kept = [_user_message(item) for item in decoded.items
            if item.get("type", "message") == "message" and item.get("role") == "user"]  # fmt: skip
    return dataclasses.replace(decoded, compacted=kept)


def _user_message(item: dict[str, Any]) -> dict[str, Any]:
    """A user message of the input as the compacted output lists it (its text as an `input_text` part)."""
    content = item.get("content")
    parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
    return {**item, "type": "message", "role": "user", "content": parts}
