"""Prompts and completions in the GenAI semantic conventions' shape, for spans that may carry content
(`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` only).

`gen_ai.system_instructions`, `gen_ai.input.messages` and `gen_ai.output.messages` are JSON text: a list of
messages `{"role", "parts": [...]}` (output messages add `finish_reason`), each part typed `text`,
`reasoning`, `tool_call` (`id`, `name`, `arguments`), `tool_call_response` (`id`, `response`) or `blob`
(an image: `modality`, `mime_type`; its bytes are left out).
"""

from __future__ import annotations

from typing import Any

import orjson

from app.contract.messages import AssistantMessage, Context, SystemMessage, ToolResultMessage, UserMessage

FINISH_REASONS = {"stop": "stop", "length": "length", "toolUse": "tool_call", "error": "error"}


def input_attributes(context: Context) -> dict[str, str]:
    """`gen_ai.system_instructions` (when there is a system prompt) and `gen_ai.input.messages`."""
    attributes = {"gen_ai.input.messages": _json([_input_message(message) for message in context.messages])}
    if context.system_prompt:
        attributes["gen_ai.system_instructions"] = _json([{"type": "text", "content": context.system_prompt}])
    return attributes


def output_attributes(message: dict[str, Any]) -> dict[str, str]:
    """`gen_ai.output.messages` for the turn's AssistantMessage (the public dict)."""
    parts = [_output_part(block) for block in message.get("content") or ()]
    output: dict[str, Any] = {"role": "assistant", "parts": parts}
    reason = FINISH_REASONS.get(message.get("stopReason") or "")
    if reason is not None:
        output["finish_reason"] = reason
    return {"gen_ai.output.messages": _json([output])}


def _input_message(message: UserMessage | AssistantMessage | ToolResultMessage | SystemMessage) -> dict[str, Any]:
    if isinstance(message, SystemMessage):  # an instruction at its place in the conversation (from a door)
        return {"role": "system", "parts": [{"type": "text", "content": block.text} for block in message.content]}
    if isinstance(message, UserMessage):
        content = message.content
        parts = [{"type": "text", "content": content}] if isinstance(content, str) else [_user_part(b) for b in content]
        return {"role": "user", "parts": parts}
    if isinstance(message, ToolResultMessage):
        text = "".join(block.text for block in message.content if block.type == "text")
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": message.tool_call_id, "response": text}]}
    return {"role": "assistant", "parts": [_output_part(block.wire()) for block in message.content]}


def _user_part(block: Any) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "content": block.text}
    return {"type": "blob", "modality": "image", "mime_type": block.mime_type}


def _output_part(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "content": block.get("text", "")}
    if kind == "thinking":
        return {"type": "reasoning", "content": block.get("thinking", "")}
    if kind == "toolCall":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("arguments"),
        }
    return {"type": str(kind)}


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
