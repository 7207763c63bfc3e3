"""Build the Chat Completions request body from the unified context and options, per the vendor's `Compat`.

History mapping (after `handoff.prepare_history`):
- the system prompt → a `developer` or `system` message (`compat.developerRole`), and so does a system message
  inside the conversation, at its position;
- user text/images → a `user` message (a plain string, or `text` / `image_url` parts with a data URL);
- same-model thinking (`compat.thinkingReplay`): in the field it came in (its signature names it), or with a
  vendor signature as an OpenRouter `reasoning_details` entry (OpenRouter's reasoning knob) or in
  `compat.reasoningField`; or as plain text; or left out;
- text and tool calls → one `assistant` message (`content` and `tool_calls`);
- tool results → `tool` messages (text joined by newlines; `name` where `compat.toolResultName`); images in
  a result follow as a `user` message, since `tool` messages carry text only.
Tool call ids from other models are made valid by the vendor's rules (`compat.toolCallId*`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from app.contract.catalog_entries import ModelInfo
from app.contract.messages import (
    AssistantMessage,
    Context,
    ImageContent,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)
from app.contract.request import StreamOptions, ToolChoiceTool
from app.providers import sampling
from app.providers.checks import TOOL_CHOICE, TOP_P, check_no_gemini_cache, check_tool_choice
from app.providers.handoff import Target, prepare_history, shown_tools, user_blocks
from app.providers.openai_completions.compat import Compat
from app.contract.refusals import RequestRejected

API = "openai-completions"
REASONING_FIELDS = ("reasoning_content", "reasoning")  # a thinking signature naming the field it came in
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_EFFORT_ORDER = ("minimal", "low", "medium", "high", "xhigh")


def tool_call_id_rule(compat: Compat):
    """The function that turns another model's tool call id into one this vendor accepts (deterministic)."""

    def normalize(raw: str) -> str:
        if compat.tool_call_id_alphanumeric:
            length = compat.tool_call_id_length or 9
            clean = re.sub(r"[^A-Za-z0-9]", "", raw)
            if len(clean) == length:
                return clean
            return hashlib.sha256(raw.encode()).hexdigest()[:length]
        clean = _UNSAFE.sub("_", raw) or "call"
        limit = compat.tool_call_id_max_length
        if limit and len(clean) > limit:
            # Keep the ids of one conversation distinct: a prefix plus a hash of the whole id.
            clean = clean[: limit - 9] + "_" + hashlib.sha256(raw.encode()).hexdigest()[:8]
        return clean

    return normalize


def reasoning_level(compat: Compat, level: str) -> str:
    """The unified level, or the nearest one the vendor accepts (never above what was asked, where possible)."""
    if level in compat.reasoning_efforts or not compat.reasoning_efforts:
        return level
    rank = _EFFORT_ORDER.index(level)
    lower = [e for e in compat.reasoning_efforts if e in _EFFORT_ORDER and _EFFORT_ORDER.index(e) <= rank]
    if lower:
        return max(lower, key=_EFFORT_ORDER.index)
    return min(compat.reasoning_efforts, key=lambda e: _EFFORT_ORDER.index(e) if e in _EFFORT_ORDER else 99)


def _image_part(block: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"}}


def _user_content(blocks: list[TextContent | ImageContent]) -> str | list[dict[str, Any]]:
    if all(isinstance(b, TextContent) for b in blocks):
        return "\n".join(b.text for b in blocks if isinstance(b, TextContent))
    return [_image_part(b) if isinstance(b, ImageContent) else {"type": "text", "text": b.text} for b in blocks]


def _assistant(message: AssistantMessage, compat: Compat) -> dict[str, Any] | None:
    texts: list[str] = []
    reasoning: dict[str, list[str]] = {}
    details: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            # Only same-model thinking with a signature reaches here (handoff turns the rest into text).
            if block.redacted or not block.thinking or compat.thinking_replay == "drop":
                continue
            signature = block.thinking_signature or ""
            if compat.thinking_replay == "text":
                texts.append(block.thinking)
            elif signature in REASONING_FIELDS:
                reasoning.setdefault(signature, []).append(block.thinking)
            elif compat.reasoning_param == "openrouter":
                details.append({"type": "reasoning.text", "text": block.thinking, "signature": signature})
            else:
                reasoning.setdefault(compat.reasoning_field, []).append(block.thinking)
        elif isinstance(block, TextContent):
            if block.text:
                texts.append(block.text)
        elif isinstance(block, ToolCall):
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": json.dumps(block.arguments, ensure_ascii=False)},
                }
            )
    if not texts and not calls and not reasoning and not details:
        return None
    content: Any = None
    if len(texts) == 1:
        content = texts[0]
    elif texts:  # blocks stay apart (one text part each) rather than run together
        content = [{"type": "text", "text": text} for text in texts]
    out: dict[str, Any] = {"role": "assistant", "content": content}
    for field, parts in reasoning.items():
        out[field] = "".join(parts)
    if details:
        out["reasoning_details"] = details
    if calls:
        out["tool_calls"] = calls
    return out


def _tool_results(message: ToolResultMessage, compat: Compat) -> list[dict[str, Any]]:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    result: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": message.tool_call_id,
        "content": text or ("(see image)" if message.content else ""),
    }
    if compat.tool_result_name:
        result["name"] = message.tool_name
    out = [result]
    images = [b for b in message.content if isinstance(b, ImageContent)]
    if images:
        out.append(
            {
                "role": "user",
                "content": [{"type": "text", "text": "Images returned by the tool:"}, *map(_image_part, images)],
            }
        )
    return out


def convert_messages(context: Context, target: Target, compat: Compat) -> list[dict[str, Any]]:
    history = prepare_history(context.messages, target, tool_call_id_rule(compat))
    messages: list[dict[str, Any]] = []
    if context.system_prompt:
        messages.append({"role": "developer" if compat.developer_role else "system", "content": context.system_prompt})
    for message in history:
        if isinstance(message, AssistantMessage):
            if (converted := _assistant(message, compat)) is not None:
                messages.append(converted)
        elif isinstance(message, ToolResultMessage):
            messages.extend(_tool_results(message, compat))
        elif isinstance(message, SystemMessage):
            messages.append({"role": "developer" if compat.developer_role else "system", "content": message.text})
        else:
            blocks = user_blocks(message.content)
            if blocks:
                messages.append({"role": "user", "content": _user_content(blocks)})
    return messages


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, ToolChoiceTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def has_images(context: Context) -> bool:
    for message in context.messages:
        content = getattr(message, "content", None)
        if isinstance(content, list) and any(isinstance(b, ImageContent) for b in content):
            return True
    return False


def check_request(model: ModelInfo, context: Context, options: StreamOptions, compat: Compat) -> None:
    """Raise RequestRejected for what this vendor cannot honour."""
    check_no_gemini_cache(options, "this provider")
    if options.stop:
        if not compat.stop:
            raise RequestRejected("this provider does not accept stop sequences", param="options.stop")
        if len(options.stop) > compat.max_stop:
            raise RequestRejected(
                f"this provider accepts at most {compat.max_stop} stop sequences", param="options.stop"
            )
    choice = options.tool_choice
    if choice is not None and choice != "auto":
        if not compat.tool_choice:
            raise RequestRejected("this provider does not accept toolChoice", param=TOOL_CHOICE)
        if choice == "required" and not compat.tool_choice_required:
            raise RequestRejected('this provider does not accept toolChoice "required"', param=TOOL_CHOICE)
    check_tool_choice(context, options)
    if (
        options.top_p is not None
        and options.reasoning
        and compat.reasoning_param != "none"
        and not compat.temperature_with_reasoning
    ):
        raise RequestRejected(
            "this provider takes no topP while reasoning: drop options.topP or options.reasoning", param=TOP_P
        )
    if not compat.images and has_images(context):
        raise RequestRejected("this provider does not accept images", param="context.messages")


def build_request(model: ModelInfo, context: Context, options: StreamOptions, compat: Compat) -> dict[str, Any]:
    """The JSON body of `POST /chat/completions` with `stream: true`."""
    params: dict[str, Any] = {
        "model": model.id,
        "messages": convert_messages(context, Target.of(model, API), compat),
        "stream": True,
    }
    if compat.stream_usage:
        params["stream_options"] = {"include_usage": True}
    if tools := shown_tools(context.tools):
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters or {"type": "object", "properties": {}},
                },
            }
            for t in tools
        ]
        if options.tool_choice is not None:
            params["tool_choice"] = _tool_choice(options.tool_choice)
        if options.parallel_tool_calls is False:
            params["parallel_tool_calls"] = False
    if options.max_tokens:
        params[compat.max_tokens_field] = min(options.max_tokens, model.max_tokens or options.max_tokens)
    reasoning_on = bool(options.reasoning) and compat.reasoning_param != "none"
    if options.reasoning and compat.reasoning_param == "reasoning_effort":
        params["reasoning_effort"] = reasoning_level(compat, options.reasoning)
    elif options.reasoning and compat.reasoning_param == "openrouter":
        params["reasoning"] = {"effort": reasoning_level(compat, options.reasoning)}
    if options.temperature is not None and (not reasoning_on or compat.temperature_with_reasoning):
        params["temperature"] = options.temperature
    if options.top_p is not None and (not reasoning_on or compat.temperature_with_reasoning):
        params["top_p"] = options.top_p
    if options.stop:
        params["stop"] = list(options.stop)
    for name in sampling.asked(options):  # each with OpenAI's own meaning (app.providers.sampling)
        params[name] = getattr(options, name)
    if options.json_schema is not None:
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": options.json_schema},
        }
    elif options.json_object:
        params["response_format"] = {"type": "json_object"}
    return params
