"""Build the `generate_content_stream` call (model, contents, config) from the unified context and options.

Contents and config are given to the SDK as dicts of its own (snake_case) types; the SDK validates them and
writes the camelCase wire body. Byte fields (signatures, image data) are passed decoded, as the SDK expects.

Options: `stop` → `stopSequences` (Gemini takes at most 5); `toolChoice` → `toolConfig.functionCallingConfig`
mode AUTO / NONE / ANY, a named tool as ANY with `allowedFunctionNames` (only sent with tools); `topP` → `topP`. A web search the client asked for and the catalog allows
(`app.providers.hosted`) → the `google_search` tool (grounding with Google Search).
"""

from __future__ import annotations

import base64
import binascii
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
from app.contract.failures import ErrorKind
from app.contract.request import StreamOptions, ToolChoiceTool
from app.providers.base import ProviderError
from app.providers.checks import check_stop_count, check_tool_choice
from app.providers import hosted, sampling
from app.providers.handoff import Target, prepare_history, shown_tools, user_blocks
from app.contract.refusals import RequestRejected

API = "google-generative-ai"
# Gemini 3 accepts calls replayed without their signature only with this documented placeholder.
SKIP_SIGNATURE = "skip_thought_signature_validator"
THINKING_BUDGETS = {
    "2.5-pro": {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768},
    "2.5-flash": {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576},
}
GEMINI3_PRO_LEVELS = {"minimal": "LOW", "low": "LOW", "medium": "HIGH", "high": "HIGH"}
GEMINI3_LEVELS = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH"}
MAX_STOP_SEQUENCES = 5
_CALLING_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def is_gemini3(model_id: str) -> bool:
    return "gemini-3" in model_id.lower()


def signature_bytes(signature: str | None) -> bytes | None:
    """A stored signature as the bytes the SDK sends (base64 again); None when it is not base64."""
    if not signature:
        return None
    for decode in (lambda s: base64.b64decode(s, validate=True), lambda s: base64.urlsafe_b64decode(s)):
        try:
            return decode(signature)
        except (binascii.Error, ValueError):
            continue
    return None


def thinking_config(model_id: str, reasoning: str) -> dict[str, Any]:
    effort = "high" if reasoning == "xhigh" else reasoning
    lowered = model_id.lower()
    if is_gemini3(lowered):
        levels = GEMINI3_PRO_LEVELS if "pro" in lowered else GEMINI3_LEVELS
        return {"include_thoughts": True, "thinking_level": levels[effort]}
    budget = -1  # dynamic: the model decides
    for family, budgets in THINKING_BUDGETS.items():
        if family in lowered:
            budget = budgets[effort]
            break
    return {"include_thoughts": True, "thinking_budget": budget}


def _image(block: ImageContent) -> dict[str, Any]:
    try:
        data = base64.b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        raise ProviderError("cannot send an image whose data is not base64", kind="request") from None
    return {"inline_data": {"mime_type": block.mime_type, "data": data}}


def _user_parts(content: str | list) -> list[dict[str, Any]]:
    return [_image(b) if isinstance(b, ImageContent) else {"text": b.text} for b in user_blocks(content)]


def _model_parts(message: AssistantMessage, gemini3: bool) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            # prepare_history kept it as thinking: same model, signed (Gemini never redacts)
            if block.redacted:
                continue
            signature = signature_bytes(block.thinking_signature)
            if signature is not None:
                parts.append({"text": block.thinking, "thought": True, "thought_signature": signature})
            elif block.thinking.strip():
                parts.append({"text": block.thinking})
        elif isinstance(block, TextContent):
            part: dict[str, Any] = {"text": block.text}
            if (signature := signature_bytes(block.text_signature)) is not None:
                part["thought_signature"] = signature
            parts.append(part)
        elif isinstance(block, ToolCall):
            part = {"function_call": {"name": block.name, "args": block.arguments}}
            signature = signature_bytes(block.thought_signature)
            if signature is None and gemini3:
                signature = signature_bytes(SKIP_SIGNATURE)
            if signature is not None:
                part["thought_signature"] = signature
            parts.append(part)
    return parts


def _tool_result_parts(message: ToolResultMessage, name: str) -> list[dict[str, Any]]:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    response = {"error": text} if message.is_error else {"output": text}
    parts = [{"function_response": {"name": name, "response": response}}]
    parts += [_image(b) for b in message.content if isinstance(b, ImageContent)]
    return parts


def convert_contents(context: Context, target: Target) -> list[dict[str, Any]]:
    history = prepare_history(context.messages, target)
    gemini3 = is_gemini3(target.model)
    names: dict[str, str] = {}  # tool call id -> name, for results that do not say
    out: list[dict[str, Any]] = []
    merging = False  # the last user turn holds tool results: the next result joins it
    for message in history:
        if isinstance(message, AssistantMessage):
            names.update((b.id, b.name) for b in message.content if isinstance(b, ToolCall))
            parts = _model_parts(message, gemini3)
            if parts:
                out.append({"role": "model", "parts": parts})
            merging = False
        elif isinstance(message, ToolResultMessage):
            name = message.tool_name or names.get(message.tool_call_id, "tool")
            parts = _tool_result_parts(message, name)
            if merging:
                out[-1]["parts"].extend(parts)
            else:
                out.append({"role": "user", "parts": parts})
                merging = True
        elif isinstance(message, SystemMessage):
            continue  # folded into the system instruction (`system_instruction`)
        else:
            parts = _user_parts(message.content)
            if parts:
                out.append({"role": "user", "parts": parts})
            merging = False
    return out


# What the SDK refuses in a model id before sending anything (`google.genai._transformers.t_model`).
_MODEL_ID_REFUSED = ("..", "?", "&")
NOTHING_TO_SEND = (
    "the conversation has nothing Gemini can read: it needs a user message with text or an image, or an "
    "assistant turn (tool results count only after the assistant turn that called the tool)"
)


def check_request(model: ModelInfo, context: Context, options: StreamOptions) -> None:
    """Raise RequestRejected for what Gemini or its SDK refuses, before any upstream call."""
    model_id = model.id
    if not model_id or any(part in model_id for part in _MODEL_ID_REFUSED):
        raise RequestRejected(
            f"Gemini model id {model_id!r} cannot be sent: it may not be empty or contain '..', '?' or '&'",
            param="model",
        )
    if not any(_yields_content(message) for message in context.messages):
        raise RequestRejected(NOTHING_TO_SEND, param="context.messages")
    check_stop_count(options, MAX_STOP_SEQUENCES, "Gemini")
    check_tool_choice(context, options)


def _yields_content(message: Any) -> bool:
    """Whether `convert_contents` makes a content of this message (cheap: usually true of the first one). A
    tool result alone never does: it is sent only after the assistant turn that called it, which does."""
    if isinstance(message, AssistantMessage):
        if message.stop_reason in ("error", "aborted"):
            return False
        return any(
            isinstance(b, ToolCall)
            or (isinstance(b, TextContent) and b.text)
            or (isinstance(b, ThinkingContent) and not b.redacted and (b.thinking.strip() or b.thinking_signature))
            for b in message.content
        )
    if isinstance(message, (ToolResultMessage, SystemMessage)):
        return False
    return bool(user_blocks(message.content))


def tool_config(options: StreamOptions) -> dict[str, Any] | None:
    choice = options.tool_choice
    if choice is None:
        return None
    if isinstance(choice, ToolChoiceTool):
        return {"function_calling_config": {"mode": "ANY", "allowed_function_names": [choice.name]}}
    return {"function_calling_config": {"mode": _CALLING_MODES[choice]}}


def system_instruction(context: Context) -> list[str]:
    """The system instruction's parts: the system prompt, then each system message of the conversation in
    order. Gemini has no system role inside `contents`, so an instruction given mid-conversation joins the
    system instruction (it holds for the whole request, which is where the client's conversation stands)."""
    texts = [context.system_prompt] if context.system_prompt else []
    texts.extend(m.text for m in context.messages if isinstance(m, SystemMessage) and m.text and not m.expired)
    return texts


def _gemini_fields(native: dict[str, Any], config: dict[str, Any]) -> None:
    """What a Gemini door client sent for Gemini alone (`options.passthrough_for(API)`): its `safetySettings`,
    `cachedContent`, `topK`, a `topP` sent with thinking, and its own `thinkingConfig` budget or level instead of
    the one derived from the unified level (thoughts are always asked for: the door shows them or not)."""
    if native.get("safetySettings"):
        config["safety_settings"] = native["safetySettings"]
    if native.get("cachedContent"):
        config["cached_content"] = native["cachedContent"]
    if native.get("topK") is not None:
        config["top_k"] = native["topK"]
    if native.get("topP") is not None:
        config["top_p"] = native["topP"]
    thinking = native.get("thinkingConfig") or {}
    budget = thinking.get("thinkingBudget", thinking.get("thinking_budget"))
    level = thinking.get("thinkingLevel", thinking.get("thinking_level"))
    if budget is not None:
        config["thinking_config"] = {"include_thoughts": budget != 0, "thinking_budget": int(budget)}
    elif level is not None:
        config["thinking_config"] = {"include_thoughts": True, "thinking_level": str(level).upper()}


def build_request(model: ModelInfo, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The `generate_content_stream` arguments (model, contents, config), which `wire.sdk_request` converts."""
    config: dict[str, Any] = {
        # The gateway retries and runs tools itself: no SDK-side follow-up requests of any kind.
        "automatic_function_calling": {"disable": True},
        "automatic_continuation": False,
    }
    if instruction := system_instruction(context):
        config["system_instruction"] = {"parts": [{"text": text} for text in instruction]}
    if tools := shown_tools(context.tools):
        config["tools"] = [
            {
                "function_declarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parameters_json_schema": t.parameters or {"type": "object"},
                    }
                    for t in tools
                ]
            }
        ]
        if (calling := tool_config(options)) is not None:
            config["tool_config"] = calling
    if hosted.plan(API, model, options).web_search is not None:
        config.setdefault("tools", []).append({"google_search": {}})  # grounding with Google Search
    if options.stop:
        config["stop_sequences"] = list(options.stop)
    if options.top_p is not None:
        config["top_p"] = options.top_p
    if options.max_tokens:
        config["max_output_tokens"] = options.max_tokens
    if options.temperature is not None:
        config["temperature"] = options.temperature
    honoured = sampling.SAMPLING_APIS[API]
    for name in sampling.asked(options):  # Gemini's seed and penalties mean what OpenAI's do (app.providers.sampling)
        if name in honoured:
            config[name] = getattr(options, name)
    if options.reasoning:
        config["thinking_config"] = thinking_config(model.id, options.reasoning)
    if options.json_schema is not None:
        config["response_mime_type"] = "application/json"
        config["response_json_schema"] = options.json_schema
    elif options.json_object:
        config["response_mime_type"] = "application/json"
    if native := options.passthrough_for(API):
        _gemini_fields(native, config)
    contents = convert_contents(context, Target.of(model, API))
    if not contents:  # `check_request` refuses what it can see cheaply; this is the exact rule
        raise ProviderError(f"cannot be sent this request: {NOTHING_TO_SEND}", kind=ErrorKind.REQUEST)
    return {"model": model.id, "contents": contents, "config": config}
