"""The invariant checker every streaming test runs its events through (CONTRACT §3, invariants 1–10).

`check_frames(frames)` takes the parsed SSE frames of one response and returns the events, asserting:
ids count 1, 2, 3 …; `event` equals `data.type`; each event validates against the contract models;
exactly one terminal event, last; `start` first; blocks never interleave and `contentIndex` is dense and
equals the block's position in `message.content`; concatenated deltas equal the block's final text;
concatenated tool deltas parse to the `toolcall_end` arguments (an object); every call has a delta;
`done.reason` is `toolUse` iff a call completed; usage totals add up; the final message matches the blocks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from app.contract.events import DELTA_TYPES, TERMINAL_TYPES, StreamEvent

_EVENT = TypeAdapter(StreamEvent)


@dataclass
class Frame:
    id: str | None = None
    event: str | None = None
    data: str = ""
    comments: list[str] = field(default_factory=list)


def parse_sse(text: str) -> list[Frame]:
    """Split an SSE body into frames (comments are attached to the frame they precede)."""
    frames: list[Frame] = []
    current = Frame()
    data_lines: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line == "":
            if data_lines or current.event or current.id:
                current.data = "\n".join(data_lines)
                frames.append(current)
                current, data_lines = Frame(), []
            continue
        if line.startswith(":"):
            current.comments.append(line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            current.event = value
        elif name == "id":
            current.id = value
    return frames


def _usage_ok(usage: dict[str, Any]) -> None:
    parts = usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
    assert usage["totalTokens"] == parts, usage
    cost = usage["cost"]
    assert abs(cost["total"] - (cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"])) < 1e-12


def check_events(events: list[dict[str, Any]], *, require_start: bool = False) -> list[dict[str, Any]]:
    """Assert the invariants over a list of event dicts (already parsed from `data`)."""
    assert events, "no events"
    for event in events:
        _EVENT.validate_python(event)
    terminals = [i for i, e in enumerate(events) if e["type"] in TERMINAL_TYPES]
    assert len(terminals) == 1 and terminals[0] == len(events) - 1, f"terminal events at {terminals} of {len(events)}"
    terminal = events[-1]
    body = events[:-1]
    if body or require_start:
        assert body and body[0]["type"] == "start", "start must come first"
        assert sum(e["type"] == "start" for e in events) == 1
    message = terminal["message"]
    if body:
        start = body[0]
        assert (message["provider"], message["api"], message["model"]) == (
            start["provider"],
            start["api"],
            start["model"],
        )
    open_block: dict[str, Any] | None = None
    blocks: list[dict[str, Any]] = []
    tool_ends = 0
    for event in body[1:]:
        kind = event["type"]
        if kind.endswith("_start"):
            assert open_block is None, f"{kind} while block {open_block} is open (interleaving)"
            assert event["contentIndex"] == len(blocks), f"contentIndex {event['contentIndex']} != {len(blocks)}"
            open_block = {"kind": kind[: -len("_start")], "index": event["contentIndex"], "deltas": [], "event": event}
            blocks.append(open_block)
        elif kind in DELTA_TYPES:
            assert open_block is not None and kind == open_block["kind"] + "_delta", f"{kind} outside its block"
            assert event["contentIndex"] == open_block["index"]
            assert isinstance(event["delta"], str)
            open_block["deltas"].append(event["delta"])
        elif kind.endswith("_end"):
            assert open_block is not None and kind == open_block["kind"] + "_end", f"{kind} without its start"
            assert event["contentIndex"] == open_block["index"]
            joined = "".join(open_block["deltas"])
            if kind == "toolcall_end":
                assert open_block["deltas"], "a tool call without any toolcall_delta"
                arguments = json.loads(joined)
                assert isinstance(arguments, dict)
                assert event["toolCall"]["arguments"] == arguments
                assert event["toolCall"]["id"] == open_block["event"]["id"]
                assert event["toolCall"]["name"] == open_block["event"]["toolName"]
                tool_ends += 1
            elif kind == "websearch_end":  # a hosted search: no deltas, the search whole at its end
                assert not open_block["deltas"] and event["webSearch"]["id"] == open_block["event"]["id"]
            else:
                assert event["content"] == joined, "block text differs from its concatenated deltas"
            open_block["end"] = event
            open_block = None
        else:
            raise AssertionError(f"unexpected event {kind}")
    if terminal["type"] == "done":
        assert open_block is None, "done with a block still open"
        assert (terminal["reason"] == "toolUse") == (tool_ends > 0), (
            f"done.reason {terminal['reason']} with {tool_ends} calls"
        )
        assert message["stopReason"] == terminal["reason"]
    else:
        assert message["stopReason"] == terminal["reason"]
        assert terminal["errorMessage"] and message["errorMessage"] == terminal["errorMessage"]
    _usage_ok(terminal["usage"])
    assert terminal["usage"] == message["usage"]
    # The final message holds exactly the completed blocks (plus a partial text/thinking block on error).
    completed = [b for b in blocks if "end" in b]
    content = message["content"]
    for block in completed:
        entry = content[block["index"]]
        if block["kind"] == "toolcall":
            assert entry["type"] == "toolCall" and entry["arguments"] == block["end"]["toolCall"]["arguments"]
        elif block["kind"] == "websearch":
            assert entry == block["end"]["webSearch"]
        else:
            assert entry["type"] == block["kind"] and entry[block["kind"]] == block["end"]["content"]
    if terminal["type"] == "done":
        assert len(content) == len(blocks)
    return events


def check_frames(frames: list[Frame], **kwargs: Any) -> list[dict[str, Any]]:
    events = []
    for number, frame in enumerate(frames, start=1):
        assert frame.id == str(number), f"frame id {frame.id} != {number}"
        event = json.loads(frame.data)
        assert "\n" not in frame.data
        assert frame.event == event["type"], f"event: {frame.event} != data.type {event['type']}"
        events.append(event)
    return check_events(events, **kwargs)
