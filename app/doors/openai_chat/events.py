"""Encode normalized events as OpenAI Chat Completions: `chat.completion.chunk` lines and `data: [DONE]` when
streaming, one `chat.completion` object when not.

Streaming, per event:

| normalized event | chunk |
|---|---|
| `start` | `delta: {"role": "assistant", "content": ""}` |
| `text_delta` | `delta: {"content": …}` |
| `thinking_delta` | `delta: {"reasoning_content": …}` |
| `toolcall_end` | `delta: {"tool_calls": [{"index", "id", "type": "function", "function": {"name", "arguments": <the whole JSON>}}]}` |
| `toolcall_start`, `toolcall_delta` | nothing: a call goes out whole, once its arguments parsed |
| `done` | `delta: {}` with `finish_reason` `stop` / `length` / `tool_calls`; the usage chunk (`choices: []`) when `stream_options.include_usage`; `data: [DONE]` |
| `error` | one `data: {"error": {"message", "type", "code"}}` line, no `[DONE]` |

Block starts and ends produce nothing (the deltas carry everything), except a tool call's end, which carries the
whole call: clients built on the Vercel AI SDK run, when a stream ends, every call whose arguments arrived in
part, so a call cut off inside its arguments must never reach them (the turn's error message names such a
call: `app/stream/message.py`). A client that wants the fragments (`X-Gateway-Tool-Arguments: stream`) gets
`toolcall_start` as the call's first chunk (`id`, `name`, `arguments: ""`) and each `toolcall_delta` as an
`arguments` fragment, and nothing at `toolcall_end`. `id` is `chatcmpl-<requestId>` on every
chunk, `model` the `provider/model` that serves the turn (from `start`). Tool call ids are the ones the
vendor gave (stable across chunks); `index` counts the turn's tool calls from 0, in the order they are sent.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from app.contract.failures import Failure
from app.core.settled import SettledTurn
from app.doors.base import TurnView
from app.doors.openai_errors import error_of

DONE = b"data: [DONE]\n\n"
PING = b": ping\n\n"
FINISH_REASONS = {"stop": "stop", "length": "length", "toolUse": "tool_calls"}


def usage_of(usage: dict[str, Any]) -> dict[str, Any]:
    """Unified usage in OpenAI's sense: `prompt_tokens` includes cached (read and written) tokens; reasoning
    tokens are part of `completion_tokens`, counted in its details where the vendor counts them apart."""
    cached = usage.get("cacheRead", 0)
    prompt = usage.get("input", 0) + cached + usage.get("cacheWrite", 0)
    completion = usage.get("output", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": usage.get("reasoning", 0)},
    }


class ChatEncoder:
    """One request's encoder (see the module docstring)."""

    # An error before the turn starts is an HTTP error (429, 502, 504 …), as OpenAI answers, not a 200 stream
    # that fails at once: the SDKs raise their status-specific error types (and retry where they would).
    hold_until_start = True

    __slots__ = (
        "completion_id",
        "created",
        "model",
        "include_usage",
        "stream_tool_arguments",
        "_head",
        "_tail",
        "_tool_index",
        "_usage_null",
        "_turn",
    )

    def __init__(
        self,
        request_id: str,
        client_model: str,
        include_usage: bool = False,
        turn: TurnView | None = None,
        stream_tool_arguments: bool = False,
    ) -> None:
        """`turn`: the running turn, read once it has settled to type an error line by what ended it.
        `stream_tool_arguments`: send tool calls' argument fragments as they come, not each call whole."""
        self.completion_id = f"chatcmpl-{request_id}"
        self.created = int(time.time())
        self.model = client_model
        self.include_usage = include_usage
        self.stream_tool_arguments = stream_tool_arguments
        self._tool_index: dict[int, int] = {}  # contentIndex → tool call index
        self._usage_null = b',"usage":null' if include_usage else b""
        self._turn = turn
        self._set_frame()

    def _set_frame(self) -> None:
        # Every chunk is `head + delta JSON + tail`: the constant parts are encoded once per request.
        head = orjson.dumps(
            {"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created, "model": self.model}
        )
        self._head = b"data: " + head[:-1] + b',"choices":[{"index":0,"delta":'
        self._tail = b',"logprobs":null,"finish_reason":null}]' + self._usage_null + b"}\n\n"

    def _chunk(self, delta: dict[str, Any]) -> bytes:
        return self._head + orjson.dumps(delta) + self._tail

    def encode(self, event: dict[str, Any]) -> bytes:
        kind = event["type"]
        if kind == "text_delta":
            return self._chunk({"content": event["delta"]})
        if kind == "thinking_delta":
            return self._chunk({"reasoning_content": event["delta"]})
        if kind == "toolcall_delta":
            if not self.stream_tool_arguments:
                return b""
            index = self._tool_index[event["contentIndex"]]
            return self._chunk({"tool_calls": [{"index": index, "function": {"arguments": event["delta"]}}]})
        if kind == "toolcall_start":
            if not self.stream_tool_arguments:
                return b""
            return self._call_chunk(event["contentIndex"], event["id"], event["toolName"], "")
        if kind == "toolcall_end":
            if self.stream_tool_arguments:
                return b""
            call = event["toolCall"]
            return self._call_chunk(
                event["contentIndex"], call["id"], call["name"], orjson.dumps(call["arguments"]).decode()
            )
        if kind == "start":
            self.model = f"{event['provider']}/{event['model']}"
            self._set_frame()
            return self._chunk({"role": "assistant", "content": ""})
        if kind == "done":
            return self._finish(event)
        if kind == "error":
            # Typed as the HTTP error before the start would be (timeout_error, rate_limit_error, …).
            failure = self._turn.result().failure if self._turn is not None else None
            if failure is None and event.get("reason") == "aborted":
                failure = Failure.ABORTED
            return b"data: " + orjson.dumps({"error": error_of(failure, event.get("errorMessage") or "")}) + b"\n\n"
        return b""  # block starts and other ends: the deltas carry everything

    def _call_chunk(self, content_index: int, call_id: str, name: str, arguments: str) -> bytes:
        index = self._tool_index[content_index] = len(self._tool_index)
        call = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        return self._chunk({"tool_calls": [call]})

    def _finish(self, event: dict[str, Any]) -> bytes:
        finish = FINISH_REASONS.get(event["reason"], "stop")
        head = self._head
        out = head + b'{},"logprobs":null,"finish_reason":"' + finish.encode() + b'"}]' + self._usage_null + b"}\n\n"
        if self.include_usage:
            usage = {"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                     "model": self.model, "choices": [], "usage": usage_of(event.get("usage") or {})}  # fmt: skip
            out += b"data: " + orjson.dumps(usage) + b"\n\n"
        return out + DONE

    def ping(self) -> bytes:
        return PING

    def complete(self, result: SettledTurn) -> tuple[int, Any]:
        """One `chat.completion`, or the OpenAI error shape with the status of the failure."""
        if result.outcome != "done":
            return result.status, {"error": error_of(result.failure, result.error_message)}
        message = result.message
        text = "".join(b["text"] for b in message["content"] if b["type"] == "text")
        thinking = "".join(
            b["thinking"] for b in message["content"] if b["type"] == "thinking" and not b.get("redacted")
        )
        calls = [
            {"id": b["id"], "type": "function",
             "function": {"name": b["name"], "arguments": orjson.dumps(b["arguments"]).decode()}}
            for b in message["content"] if b["type"] == "toolCall"
        ]  # fmt: skip
        reply: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
        if thinking:
            reply["reasoning_content"] = thinking
        if calls:
            reply["tool_calls"] = calls
        model = f"{message['provider']}/{message['model']}" if message.get("provider") else self.model
        return 200, {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": model,
            "choices": [{"index": 0, "message": reply, "logprobs": None,
                         "finish_reason": FINISH_REASONS.get(message.get("stopReason") or "stop", "stop")}],
            "usage": usage_of(message.get("usage") or {}),
        }  # fmt: skip

    def refuse(self, result: SettledTurn) -> tuple[int, Any] | None:
        return result.status, {"error": error_of(result.failure, result.error_message)}
