"""Build the OpenAI Responses request body from the unified context and options.

History mapping (after `handoff.prepare_history`):
- user text/images → a `user` message of `input_text` / `input_image` (data URL) parts;
- same-model thinking whose signature is a serialized reasoning item → that reasoning item, sent back as is;
- text → an assistant `message` item; its id comes from the text signature `{"v":1,"id":…}` when there is
  one (same model), otherwise the text goes as a plain assistant message without an id;
- tool calls → `function_call` items; our ids are `"<call_id>|<item_id>"` and are split back. A call from
  another model is sent without its item id (its reasoning item is not replayed, and OpenAI rejects a
  `function_call` item id whose reasoning item is missing);
- tool results → `function_call_output` (text joined by newlines, or a list of parts when images are present).

Options: `toolChoice` → `tool_choice` "auto" / "none" / "required" / `{type: function, name}` (only sent with
tools, as is `parallel_tool_calls: false` when a door asked for it); `topP` → `top_p` (refused for reasoning
models and with `reasoning`). The Responses API has no stop sequences: `check_request` refuses a request with
`stop`, and `topP` while reasoning. A web search the client asked for and the catalog allows
(`app.providers.hosted`) → the `web_search` tool, with `external_web_access: false` for cached results only.
"""

from __future__ import annotations

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
from app.providers.checks import STOP, TOP_P, check_no_gemini_cache, check_tool_choice
from app.providers import hosted
from app.providers.handoff import Target, prepare_history, shown_tools, user_blocks
from app.contract.refusals import RequestRejected

STRUCTURED_OUTPUT_NAME = "output"  # the name a JSON schema format needs; the client's format has none
API = "openai-responses"
_ID_LIMIT = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_XHIGH_MODELS = re.compile(r"gpt-5\.(?:[2-9]|\d{2,})|codex-max")


def _id_half(raw: str, prefix: str) -> str:
    clean = _UNSAFE.sub("_", raw)
    if not clean.startswith(prefix):
        clean = prefix + clean
    return clean[:_ID_LIMIT].rstrip("_") or prefix.rstrip("_")


def normalize_tool_call_id(raw: str) -> str:
    """A tool call id from another model, made valid for OpenAI: `call_<sanitized>|fc_<sanitized>`,
    each half `[A-Za-z0-9_-]` and at most 64 characters."""
    call, _, item = raw.partition("|")
    return f"{_id_half(call, 'call_')}|{_id_half(item or call, 'fc_')}"


def split_tool_call_id(tool_call_id: str) -> tuple[str, str | None]:
    """`"<call_id>|<item_id>"` → (call_id, item_id); an id without `|` has no item id."""
    call, sep, item = tool_call_id.partition("|")
    return call, (item or None) if sep else None


def reasoning_effort(model_id: str, reasoning: str) -> str:
    """The effort sent for a unified reasoning level: xhigh only where the model takes it, else high."""
    if reasoning == "xhigh" and not _XHIGH_MODELS.search(model_id):
        return "high"
    return reasoning


def _image_url(block: ImageContent) -> str:
    return f"data:{block.mime_type};base64,{block.data}"


def _user_part(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, ImageContent):
        return {"type": "input_image", "detail": "auto", "image_url": _image_url(block)}
    return {"type": "input_text", "text": block.text}


def _reasoning_item(block: ThinkingContent) -> dict[str, Any] | None:
    """The reasoning item a thinking signature holds, or None when it holds none."""
    try:
        item = json.loads(block.thinking_signature or "")
    except ValueError:
        return None
    if isinstance(item, dict) and item.get("type") == "reasoning" and item.get("id"):
        return item
    return None


def _text_item_id(signature: str | None) -> tuple[str | None, str | None]:
    """(message item id, phase) from a text signature: the v1 JSON or a legacy plain id."""
    if not signature:
        return None, None
    try:
        data = json.loads(signature)
    except ValueError:
        data = signature
    if isinstance(data, dict):
        item_id, phase = data.get("id"), data.get("phase")
    else:
        item_id, phase = data, None
    if not isinstance(item_id, str) or not item_id or len(item_id) > _ID_LIMIT or _UNSAFE.search(item_id):
        return None, None
    return item_id, phase if isinstance(phase, str) else None


def _assistant_items(message: AssistantMessage, same_model: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            # Only same-model thinking reaches here (handoff turns the rest into text); a signature that
            # holds no reasoning item cannot be replayed to OpenAI and is left out.
            item = _reasoning_item(block)
            if item is not None:
                items.append(item)
        elif isinstance(block, TextContent):
            if not block.text:
                continue
            item_id, phase = _text_item_id(block.text_signature) if same_model else (None, None)
            if item_id is None:
                items.append({"role": "assistant", "content": block.text})
                continue
            item = {
                "type": "message",
                "role": "assistant",
                "id": item_id,
                "status": "completed",
                "content": [{"type": "output_text", "text": block.text, "annotations": []}],
            }
            if phase:
                item["phase"] = phase
            items.append(item)
        elif isinstance(block, ToolCall):
            call_id, item_id = split_tool_call_id(block.id)
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": call_id,
                "name": block.name,
                "arguments": json.dumps(block.arguments, ensure_ascii=False),
            }
            if item_id and same_model:
                call["id"] = item_id
            items.append(call)
    return items


def _tool_output(message: ToolResultMessage) -> dict[str, Any]:
    call_id, _ = split_tool_call_id(message.tool_call_id)
    if any(isinstance(b, ImageContent) for b in message.content):
        output: Any = [_user_part(b) for b in message.content]
    else:
        output = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def convert_input(context: Context, target: Target) -> list[dict[str, Any]]:
    history = prepare_history(context.messages, target, normalize_tool_call_id)
    items: list[dict[str, Any]] = []
    for message in history:
        if isinstance(message, AssistantMessage):
            items.extend(_assistant_items(message, target.is_same_model(message)))
        elif isinstance(message, ToolResultMessage):
            items.append(_tool_output(message))
        elif isinstance(message, SystemMessage):
            items.append({"role": "developer", "content": message.text})  # an instruction at its position
        else:
            parts = [_user_part(b) for b in user_blocks(message.content)]
            if parts:
                items.append({"role": "user", "content": parts})
    return items


def check_request(model: ModelInfo, context: Context, options: StreamOptions) -> None:
    """Raise RequestRejected for what the Responses API cannot do."""
    if options.stop:
        raise RequestRejected(
            "OpenAI's Responses API has no stop sequences: drop options.stop or choose another model", param=STOP
        )
    if options.top_p is not None and (options.reasoning or model.reasoning):
        raise RequestRejected(
            f"OpenAI reasoning models take no topP ({model.id} {'is one' if model.reasoning else 'reasons here'})",
            param=TOP_P,
        )
    check_tool_choice(context, options)
    check_no_gemini_cache(options, "OpenAI")


def tool_choice(options: StreamOptions) -> str | dict[str, Any] | None:
    choice = options.tool_choice
    if isinstance(choice, ToolChoiceTool):
        return {"type": "function", "name": choice.name}
    return choice


def build_request(model: ModelInfo, context: Context, options: StreamOptions) -> dict[str, Any]:
    """Keyword arguments for `client.responses.create(..., stream=True)`."""
    params: dict[str, Any] = {
        "model": model.id,
        "input": convert_input(context, Target.of(model, API)),
        "stream": True,
        "store": False,
    }
    if context.system_prompt:
        params["instructions"] = context.system_prompt
    if tools := shown_tools(context.tools):
        params["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters or {"type": "object", "properties": {}},
                "strict": False,
            }
            for t in tools
        ]
        if (choice := tool_choice(options)) is not None:
            params["tool_choice"] = choice
        if options.parallel_tool_calls is False:
            params["parallel_tool_calls"] = False
    if options.max_tokens:
        # A request above the model's limit would only fail upstream.
        params["max_output_tokens"] = min(options.max_tokens, model.max_tokens or options.max_tokens)
    if options.reasoning:
        params["reasoning"] = {"effort": reasoning_effort(model.id, options.reasoning), "summary": "auto"}
    else:
        if options.temperature is not None:
            params["temperature"] = options.temperature
        if options.top_p is not None:
            params["top_p"] = options.top_p
    if options.reasoning or model.reasoning:
        # Without stored responses, reasoning can only be replayed from its encrypted content.
        params["include"] = ["reasoning.encrypted_content"]
    if (web := hosted.plan(API, model, options).web_search) is not None:
        search: dict[str, Any] = {"type": "web_search"}
        if not web.external_web_access:
            search["external_web_access"] = False  # cached results only, as the client asked
        params.setdefault("tools", []).append(search)
        params["include"] = [*params.get("include", ()), "web_search_call.action.sources"]  # what it found
    if options.session_id:
        params["prompt_cache_key"] = options.session_id
    if options.json_schema is not None:
        params["text"] = {
            "format": {
                "type": "json_schema",
                "name": STRUCTURED_OUTPUT_NAME,
                "schema": options.json_schema,
                "strict": False,
            }
        }
    elif options.json_object:
        params["text"] = {"format": {"type": "json_object"}}
    return params
