"""Anthropic Messages streaming wire format (`POST /v1/messages`, `stream: true`).

A `WebSearch` step renders as the server tool's blocks, as the API streams them: `server_tool_use` (its
`input` as one `input_json_delta`) and `web_search_tool_result` (whole in its `content_block_start`); the
usage then counts `server_tool_use.web_search_requests`."""

from __future__ import annotations

import json
from typing import Any, Iterator

from simulator import scenarios as s

ROUTE = "/anthropic/v1/messages"
COUNT_ROUTE = "/anthropic/v1/messages/count_tokens"
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "toolUse": "tool_use",
    "refusal": "refusal",
    "pause": "pause_turn",
    "safety": "refusal",
    "malformed_call": "end_turn",
    "blocked": "refusal",
}


_CUTS = (s.ErrorEvent, s.Truncate, s.Reset, s.Hang)


def frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {s.wire_json(data)}\n\n".encode()


def prompt_of(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
            if texts:
                return " ".join(texts)
    return ""


def tool_results_of(body: dict[str, Any]) -> list[str]:
    """The texts of the tool_result blocks of the last message, when it is a user message that has them."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if not isinstance(last, dict) or last.get("role") != "user" or not isinstance(last.get("content"), list):
        return []
    return [
        _result_text(b.get("content"))
        for b in last["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def error_body(error: s.HttpError) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error.type, "message": error.message}}


def encode(scenario: s.Scenario, model: str, steps: list[s.Step] | None = None) -> Iterator[bytes | s.Step]:
    index = 0
    searches = 0  # web searches run (the usage's `server_tool_use`)
    steps = scenario.steps if steps is None else steps
    for position, step in enumerate(steps):
        # A block followed by a failure is cut inside the block (no content_block_stop), as real cuts are.
        cut_after = position + 1 < len(steps) and isinstance(steps[position + 1], _CUTS)
        if isinstance(step, s.Usage):
            usage: dict[str, Any] = {
                "input_tokens": step.input,
                "output_tokens": 1,
                "cache_read_input_tokens": step.cache_read,
                "cache_creation_input_tokens": step.cache_write,
            }
            if step.cache_write:  # the writes by duration, as the Messages API reports them
                usage["cache_creation"] = {
                    "ephemeral_5m_input_tokens": step.cache_write - step.cache_write_1h,
                    "ephemeral_1h_input_tokens": step.cache_write_1h,
                }
            yield frame(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_sim_0001",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                },
            )
        elif isinstance(step, s.TextBlock):
            yield frame(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            )
            yield frame("ping", {"type": "ping"})
            for chunk in step.chunks:
                yield frame(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": chunk}},
                )
            if not cut_after:
                yield frame("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        elif isinstance(step, s.ThinkingBlock):
            yield frame(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            )
            for chunk in step.chunks:
                yield frame(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": chunk},
                    },
                )
            half = len(step.signature) // 2
            for part in (step.signature[:half], step.signature[half:]):
                yield frame(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": part},
                    },
                )
            yield frame("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        elif isinstance(step, s.RedactedThinking):
            yield frame(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "redacted_thinking", "data": step.data},
                },
            )
            yield frame("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        elif isinstance(step, s.ToolCallBlock):
            yield frame(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": step.id, "name": step.name, "input": {}},
                },
            )
            for fragment in step.fragments or [""]:
                yield frame(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": fragment},
                    },
                )
            if not step.cut:
                yield frame("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        elif isinstance(step, s.WebSearch):
            searches += 1
            tool_id = f"srvtoolu_sim_{index:04d}"
            yield frame(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "server_tool_use", "id": tool_id, "name": "web_search", "input": {}},
                },
            )
            yield frame(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps({"query": step.query})},
                },
            )
            yield frame("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
            results = [
                {
                    "type": "web_search_result",
                    "title": title,
                    "url": url,
                    "encrypted_content": "EncSim==",
                    "page_age": None,
                }
                for url, title in step.sources
            ]
            yield frame(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "web_search_tool_result", "tool_use_id": tool_id, "content": results},
                },
            )
            yield frame("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        elif isinstance(step, s.Stop):
            usage_delta: dict[str, Any] = {"output_tokens": step.output}
            if searches:
                usage_delta["server_tool_use"] = {"web_search_requests": searches}
            yield frame(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": STOP_REASONS[step.reason], "stop_sequence": None},
                    "usage": usage_delta,
                },
            )
            yield frame("message_stop", {"type": "message_stop"})
        elif isinstance(step, s.ErrorEvent):
            yield frame("error", {"type": "error", "error": {"type": step.type, "message": step.message}})
        elif isinstance(step, s.UnknownEvent):
            yield frame("future_event", {"type": "future_event", "detail": {"anything": [1, 2, 3]}})
        else:
            yield step


def request_error(scenario: s.Scenario, body: dict[str, Any]) -> s.HttpError | None:
    """What Anthropic refuses in the request itself: with a model that thinks before its calls
    (`Scenario.signed_thinking`), an assistant turn with a tool_use must start with that signed thinking block."""
    if not scenario.signed_thinking:
        return None
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        if not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content):
            continue
        first = content[0] if content and isinstance(content[0], dict) else {}
        if first.get("type") != "thinking" or first.get("signature") != s.AGENT_EXEC_SIGNATURE:
            return s.HttpError(400, "invalid_request_error", f"messages.{index}.content.0.type: Expected `thinking` or "
                               "`redacted_thinking`, but found `" + str(first.get("type")) + "`. When `thinking` is "
                               "enabled, a final `assistant` message must start with a thinking block")  # fmt: skip
    return None
