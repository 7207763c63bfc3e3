"""Fault injection: break any scenario of any vendor at a chosen point of its wire stream.

A fault is chosen by model-id params next to the scenario's own: `<scenario>;fault=<fault>;at=<point>`, e.g.
`tools;fault=reset;at=toolargs` or `text;fault=http;at=before_headers;status=503;retry_after=1`.

Points (where in the vendor's stream the fault lands; the *target frame* is the frame the fault acts on):

- `before_headers`  before the first body byte (for `http`/`hang`: before the response headers)
- `after_start`     right after the vendor's start frame (Anthropic `message_start`, Responses
                    `response.created`, Gemini: its first chunk); target = the frame after it
- `text`            inside a text block: target = the block's second text-delta frame (the first one,
                    when the block has only one), so text has already streamed
- `toolargs`        inside a tool call's arguments: target = the call's second argument-delta frame
                    (Anthropic `input_json_delta`, Responses `function_call_arguments.delta`); Gemini sends
                    a call whole, so its target is the first `functionCall` chunk itself
- `after_terminal`  right after the vendor's terminal frame (`message_stop`, `response.completed`/
                    `incomplete`/`failed`, the Gemini chunk with a `finishReason`)

Faults (what happens at the point):

- `reset`          the target frame's first half is sent, then the connection is aborted (incomplete
                   chunked body); at `before_headers`: the headers, then the abort before any body byte
- `close`          the body ends cleanly before the target frame (no terminal event); at `before_headers`:
                   a 200 with an empty body
- `http`           (before_headers only) `status=` (default 503) with the vendor's error body (its error
                   type `type=` and text `message=` when given), and a `retry-after` header when
                   `retry_after=` (seconds) is given
- `error_event`    the vendor's in-band error frame (Anthropic `error`, Responses `response.failed`, Gemini
                   an `{"error": …}` chunk) instead of the target frame; the body then ends
- `bad_framing`    a garbage line, then the target frame with its data line split inside a JSON string
                   across two `data:` lines (no blank line between)
- `bad_json`       the target frame's JSON cut short (invalid JSON in the data line)
- `unknown_event`  an event type no client knows, inserted before the target frame; the stream goes on
- `dup_terminal`   (after_terminal only) the terminal frame sent twice
- `after_terminal` (after_terminal only) a text block and another terminal frame after the terminal frame
- `hang`           stop sending before the target frame and keep the connection open (the gateway's
                   first-event or idle timeout must fire); at `before_headers`: headers never sent
- `drip`           from the target frame on, the next `limit=` bytes (default 600) go out `chunk=` bytes
                   (default 3) every `interval_ms=` (default 2) ms; the rest at normal speed
- `huge_delta`     (text, toolargs) `mb=` MB (default 3) of filler prepended to the target delta's string
                   (inside a JSON string, so arguments stay valid JSON with a longer key)
- `non_utf8`       (text, toolargs) invalid UTF-8 bytes (`\\xff\\xfe`) inside the target delta's string

Applicable matrix (`APPLICABLE`; "-" = not applicable):

    fault           before_headers  after_start  text  toolargs  after_terminal
    reset                 x              x         x       x            x
    close                 x              x         x       x            -
    http                  x              -         -       -            -
    error_event           -              x         x       x            x
    bad_framing           -              x         x       x            x
    bad_json              -              x         x       x            x
    unknown_event         -              x         x       x            x
    dup_terminal          -              -         -       -            x
    after_terminal        -              -         -       -            x
    hang                  x              x         x       x            x
    drip                  -              x         x       x            -
    huge_delta            -              -         x       x*           -
    non_utf8              -              -         x       x*           -

    * not for Gemini: its calls come whole, as parsed `args` (no argument string to extend or corrupt)

A fault whose point never occurs in the scenario (e.g. `toolargs` in `text`) leaves the stream unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

from simulator import scenarios as s

POINTS = ("before_headers", "after_start", "text", "toolargs", "after_terminal")
FAULTS = (
    "reset",
    "close",
    "http",
    "error_event",
    "bad_framing",
    "bad_json",
    "unknown_event",
    "dup_terminal",
    "after_terminal",
    "hang",
    "drip",
    "huge_delta",
    "non_utf8",
)
_MID = ("after_start", "text", "toolargs")
APPLICABLE: dict[str, tuple[str, ...]] = {
    "reset": ("before_headers", *_MID, "after_terminal"),
    "close": ("before_headers", *_MID),
    "http": ("before_headers",),
    "error_event": (*_MID, "after_terminal"),
    "bad_framing": (*_MID, "after_terminal"),
    "bad_json": (*_MID, "after_terminal"),
    "unknown_event": (*_MID, "after_terminal"),
    "dup_terminal": ("after_terminal",),
    "after_terminal": ("after_terminal",),
    "hang": ("before_headers", *_MID, "after_terminal"),
    "drip": _MID,
    "huge_delta": ("text", "toolargs"),
    "non_utf8": ("text", "toolargs"),
}
NOT_FOR_VENDOR = {("google", "huge_delta", "toolargs"), ("google", "non_utf8", "toolargs")}
INVALID_UTF8 = b"\xff\xfe"


def applicable(vendor: str, fault: str, point: str) -> bool:
    return point in APPLICABLE.get(fault, ()) and (vendor, fault, point) not in NOT_FOR_VENDOR


@dataclass
class Fault:
    kind: str
    at: str
    params: dict[str, str] = field(default_factory=dict)

    def number(self, key: str, default: float) -> float:
        try:
            return float(self.params.get(key, default))
        except ValueError:
            return default


@dataclass
class Drip:
    """Bytes to send slowly: `chunk` bytes every `interval` seconds."""

    data: bytes
    chunk: int
    interval: float


def parse(model: str) -> Fault | None:
    """The fault named in a model id's params, or None."""
    _, *raw = model.split(";")
    params = dict(p.split("=", 1) for p in raw if "=" in p)
    kind = params.get("fault")
    if kind not in FAULTS:
        return None
    return Fault(kind, params.get("at", "text"), params)


def prepare(fault: Fault | None, scenario: s.Scenario) -> None:
    """Faults that replace the whole response: an HTTP status, or headers that never come."""
    if fault is None or fault.at != "before_headers":
        return
    if fault.kind == "http":
        status = int(fault.number("status", 503))
        headers = {"retry-after": fault.params["retry_after"]} if "retry_after" in fault.params else {}
        scenario.http_error = s.HttpError(
            status,
            fault.params.get("type") or _ERROR_TYPES.get(status, "api_error"),
            fault.params.get("message") or f"simulated HTTP {status}",
            headers,
        )
    elif fault.kind == "hang":
        scenario.hang_before_headers = True


_ERROR_TYPES = {
    429: "rate_limit_error",
    529: "overloaded_error",
    400: "invalid_request_error",
    401: "authentication_error",
}


# ---------------------------------------------------------------------------------------------- frames


def _data(frame: bytes) -> Any:
    """The JSON of a frame's data line (None when it has none or it does not parse)."""
    for line in frame.splitlines():
        if line.startswith(b"data:"):
            try:
                return json.loads(line[5:])
            except ValueError:
                return None
    return None


def _google_parts(data: Any) -> list[dict[str, Any]]:
    try:
        return data["candidates"][0]["content"]["parts"] or []
    except (KeyError, IndexError, TypeError):
        return []


def classify(vendor: str, frame: bytes, first: bool) -> str | None:
    """`start` | `text` | `toolargs` | `terminal` | None for one encoded frame of `vendor`."""
    data = _data(frame)
    if not isinstance(data, dict):
        return None
    if vendor == "anthropic":
        kind = data.get("type")
        delta = (data.get("delta") or {}).get("type") if kind == "content_block_delta" else None
        return {"message_start": "start", "message_stop": "terminal"}.get(kind or "") or {
            "text_delta": "text",
            "input_json_delta": "toolargs",
        }.get(delta or "")
    if vendor == "openai":
        kind = data.get("type")
        return {
            "response.created": "start",
            "response.output_text.delta": "text",
            "response.function_call_arguments.delta": "toolargs",
            "response.completed": "terminal",
            "response.incomplete": "terminal",
            "response.failed": "terminal",
        }.get(kind or "")
    if vendor == "compat":
        choice = (data.get("choices") or [{}])[0]
        delta = choice.get("delta") or {}
        if data.get("usage") and (choice.get("finish_reason") or data.get("choices") == []):
            return "terminal"  # the turn is complete once finish_reason and usage are in
        if choice.get("finish_reason"):
            return None
        if delta.get("tool_calls") and any((c.get("function") or {}).get("arguments") for c in delta["tool_calls"]):
            return "toolargs"
        if first:
            return "start"
        return "text" if isinstance(delta.get("content"), str) and delta["content"] else None
    # google
    candidates = data.get("candidates") or [{}]
    if candidates[0].get("finishReason"):
        return "terminal"
    parts = _google_parts(data)
    if any("functionCall" in p for p in parts):
        return "toolargs"
    if first:
        return "start"
    if any(p.get("text") and not p.get("thought") for p in parts):
        return "text"
    return None


def _target(vendor: str, frames: list[bytes], point: str) -> int | None:
    """Index of the frame the fault acts on (len(frames) = at the end), or None when the point never occurs."""
    kinds = [classify(vendor, f, i == 0) for i, f in enumerate(frames)]
    if point == "after_start":
        return kinds.index("start") + 1 if "start" in kinds else None
    if point == "after_terminal":
        return kinds.index("terminal") + 1 if "terminal" in kinds else None
    wanted = "text" if point == "text" else "toolargs"
    found = [i for i, k in enumerate(kinds) if k == wanted]
    if vendor == "google" and point == "text":
        # The last text chunk of a block may carry the finishReason; a text chunk is what follows a text one.
        found = [
            i
            for i, f in enumerate(frames)
            if any(p.get("text") and not p.get("thought") for p in _google_parts(_data(f)))
        ]
        found = [i for i in found if kinds[i] != "terminal"] or found
    if not found:
        return None
    if vendor == "google" and point == "toolargs":
        return found[0]
    if len(found) > 1 and found[1] == found[0] + 1:
        return found[1]
    return found[0]


def _split_data_line(frame: bytes) -> bytes:
    """The frame with its data line broken inside the first JSON string: `data: {"` / `data: rest`."""
    head, sep, rest = frame.partition(b'data: {"')
    return head + b'data: {"\ndata: ' + rest


def _cut_json(frame: bytes) -> bytes:
    head, sep, rest = frame.partition(b"data: ")
    line, _, tail = rest.partition(b"\n")
    return head + sep + line[: max(len(line) // 2, 2)] + b"\n" + (b"\r\n" if frame.endswith(b"\r\n\r\n") else b"\n")


def _edit_delta(vendor: str, frame: bytes, edit: Any) -> bytes:
    """The frame with `edit(str) -> str` applied to its delta text (re-encoded the vendor's way)."""
    data = _data(frame)
    if vendor == "anthropic":
        delta = data["delta"]
        key = "text" if "text" in delta else "partial_json"
        delta[key] = edit(delta[key])
    elif vendor == "openai":
        data["delta"] = edit(data["delta"])
    elif vendor == "compat":
        delta = data["choices"][0]["delta"]
        if delta.get("tool_calls"):
            function = delta["tool_calls"][0]["function"]
            function["arguments"] = edit(function["arguments"])
        else:
            delta["content"] = edit(delta["content"])
    else:
        part = next(p for p in _google_parts(data) if "text" in p)
        part["text"] = edit(part["text"])
    body = json.dumps(data, ensure_ascii=False).encode()
    prefix = frame[: frame.index(b"data: ") + len(b"data: ")]
    end = b"\r\n\r\n" if frame.endswith(b"\r\n\r\n") else b"\n\n"
    return prefix + body + end


_MARK = "\u0000FAULT\u0000"


def _with_invalid_utf8(vendor: str, frame: bytes) -> bytes:
    edited = _edit_delta(vendor, frame, lambda text: text[:1] + _MARK + text[1:])
    # json.dumps escapes NUL as \\u0000: replace the whole escaped marker by raw invalid bytes.
    return edited.replace(json.dumps(_MARK, ensure_ascii=False)[1:-1].encode(), INVALID_UTF8)


def _in_band(vendor_encode: Any, model: str, steps: list[s.Step]) -> list[bytes | s.Step]:
    return list(vendor_encode(s.Scenario("fault", steps), model, steps))


def apply(
    fault: Fault | None, vendor: str, vendor_encode: Any, model: str, items: Iterator[bytes | s.Step]
) -> Iterator[bytes | s.Step | Drip]:
    """The scenario's items with the fault applied (items unchanged when there is no fault)."""
    if fault is None:
        yield from items
        return
    if fault.at == "before_headers":
        if fault.kind == "reset":
            yield s.Reset()
            return
        if fault.kind == "close":
            yield s.Truncate()
            return
        yield from items  # http / hang were applied by `prepare`
        return
    frames = list(items)
    byte_frames = [f for f in frames if isinstance(f, bytes)]
    if len(byte_frames) != len(frames):  # a scenario that breaks itself: leave it alone
        yield from frames
        return
    at = _target(vendor, byte_frames, fault.at)
    if at is None:
        yield from frames
        return
    before, target, after = byte_frames[:at], byte_frames[at] if at < len(byte_frames) else None, byte_frames[at + 1 :]
    yield from before
    kind = fault.kind
    if kind == "reset":
        if target is not None:
            yield target[: len(target) // 2]
        yield s.Reset()
    elif kind == "close":
        yield s.Truncate()
    elif kind == "hang":
        yield s.Hang()
    elif kind == "error_event":
        yield from _in_band(vendor_encode, model, [s.ErrorEvent("overloaded_error", "simulated in-band error")])
        yield s.Truncate()
    elif kind == "unknown_event":
        yield from _in_band(vendor_encode, model, [s.UnknownEvent()])
        yield from _rest(target, after)
    elif kind == "dup_terminal":
        yield before[-1]
        yield from _rest(target, after)
    elif kind == "after_terminal":
        yield from _in_band(vendor_encode, model, [s.TextBlock(["late ", "frame"]), s.Stop("stop")])
        yield from _rest(target, after)
    elif kind == "bad_framing":
        yield b"this line is not server-sent events\n"
        yield _split_data_line(target) if target is not None else b'data: {"\ndata: broken"}\n\n'
        yield from after
    elif kind == "bad_json":
        yield _cut_json(target) if target is not None else b'data: {"type": \n\n'
        yield from after
    elif kind == "drip":
        rest = b"".join(_rest(target, after))
        limit = int(fault.number("limit", 600))
        yield Drip(rest[:limit], max(int(fault.number("chunk", 3)), 1), fault.number("interval_ms", 2) / 1000)
        if rest[limit:]:
            yield rest[limit:]
    elif kind == "huge_delta" and target is not None:
        filler = "x" * int(fault.number("mb", 3) * 1024 * 1024)
        yield _edit_delta(vendor, target, lambda text: text[:1] + filler + text[1:])
        yield from after
    elif kind == "non_utf8" and target is not None:
        yield _with_invalid_utf8(vendor, target)
        yield from after
    else:
        yield from _rest(target, after)


def _rest(target: bytes | None, after: list[bytes]) -> Iterator[bytes]:
    if target is not None:
        yield target
    yield from after
