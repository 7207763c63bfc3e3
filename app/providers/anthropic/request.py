"""Build the Anthropic Messages request body from the unified context and options.

Prompt caching: the breakpoints an Anthropic client placed (`cache_control` on system blocks, message blocks,
tool results and tools, as the Messages door carries them) go where the client put them; a request with none
gets the adapter's own two (the system prompt and the last user block). A system message inside the
conversation is sent as Anthropic's own `role: "system"` message at its position; the client's top-level
`thinking`, `output_config`, `context_management` and `anthropic-beta` flags (what the door passes through to
this api, `options.passthrough_for(API)`) go as they came, `thinking` in place of the one derived from
`options.reasoning`.

Options: `stop` → `stop_sequences`; `toolChoice` "auto" / "none" / "required" / a named tool → `tool_choice`
`{type: auto | none | any | tool}` (only sent with tools), with `disable_parallel_tool_use` when a door asked for
no parallel tool calls (`parallelToolCalls: false`); `topP` → `top_p` (with thinking Anthropic takes
only 0.95–1, and never a forced tool: `check_request` refuses those); a web search the client asked for and the
catalog allows (`app.providers.hosted`) → the `web_search_20250305` server tool, with `max_uses` from the catalog.
"""

from __future__ import annotations

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
    UserMessage,
)
from app.contract.request import StreamOptions, ToolChoiceTool
from app.providers import hosted
from app.providers.checks import TOOL_CHOICE, TOP_P, check_no_gemini_cache, check_tool_choice, forces_a_tool
from app.providers.checks import check_no_json_object
from app.providers.handoff import Target, prepare_history, sanitize_id, user_blocks
from app.contract.refusals import RequestRejected

API = "anthropic-messages"
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
DEFAULT_MAX_TOKENS = 4096
_CACHE = {"type": "ephemeral"}
THINKING_MIN_TOP_P = 0.95
WEB_SEARCH_TOOL = "web_search_20250305"  # Anthropic's server-side web search (`app.providers.hosted`)
_TOOL_CHOICE = {"auto": "auto", "none": "none", "required": "any"}
# Top-level fields of the client's (`options.passthrough_for(API)`) sent as they came, besides `thinking`.
PASSED_AS_SENT = ("output_config", "context_management", "cache_control", "service_tier", "speed", "inference_geo")


def _cached(out: dict[str, Any], cache_control: dict[str, Any] | None) -> dict[str, Any]:
    if cache_control is not None:
        out["cache_control"] = cache_control
    return out


def _user_block(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, ImageContent):
        out = {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}
    elif block.anthropic is not None:
        return block.anthropic  # the client's own block (a tool_reference), as it came
    else:
        out = {"type": "text", "text": block.text}
    return _cached(out, block.cache_control)


def has_client_breakpoints(context: Context) -> bool:
    """Whether the client placed prompt-cache breakpoints of its own (then the adapter adds none)."""
    if any(b.cache_control is not None for b in context.system_blocks or ()):
        return True
    if any(t.anthropic and t.anthropic.get("cache_control") is not None for t in context.tools or ()):
        return True
    for message in context.messages:
        if isinstance(message, ToolResultMessage):
            if message.cache_control is not None or any(b.cache_control is not None for b in message.content):
                return True
        elif isinstance(message, (SystemMessage, UserMessage)) and isinstance(message.content, list):
            if any(b.cache_control is not None for b in message.content):
                return True
    return False


def _assistant_block(block: Any) -> dict[str, Any] | None:
    if isinstance(block, ThinkingContent):
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.thinking_signature or ""}
        if block.thinking_signature:
            return {"type": "thinking", "thinking": block.thinking, "signature": block.thinking_signature}
        return {"type": "text", "text": block.thinking} if block.thinking.strip() else None
    if isinstance(block, ToolCall):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
    return {"type": "text", "text": block.text} if block.text else None


def convert_messages(context: Context, target: Target, own_breakpoints: bool = True) -> list[dict[str, Any]]:
    """The `messages` array; `own_breakpoints`: mark the last user block for prompt caching (when the client
    placed no breakpoints of its own)."""
    history = prepare_history(context.messages, target, sanitize_id, keep_expired_system=True)
    out: list[dict[str, Any]] = []
    for message in history:
        if isinstance(message, AssistantMessage):
            blocks = [b for b in map(_assistant_block, message.content) if b is not None]
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif isinstance(message, SystemMessage):
            system: dict[str, Any] = {"role": "system", "content": [_user_block(b) for b in message.content]}
            system.update(message.anthropic or {})
            out.append(system)
        elif isinstance(message, ToolResultMessage):
            result = _cached(
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": [_user_block(b) for b in message.content] or [{"type": "text", "text": ""}],
                    "is_error": message.is_error,
                },
                message.cache_control,
            )
            previous = out[-1] if out else None
            if previous and previous["role"] == "user" and previous.get("_tool_results"):
                previous["content"].append(result)  # consecutive results go in one user turn
            else:
                out.append({"role": "user", "content": [result], "_tool_results": True})
        elif isinstance(message.content, str):  # the usual user message: no block objects in between
            if message.content:
                out.append({"role": "user", "content": [{"type": "text", "text": message.content}]})
        else:
            blocks = [_user_block(b) for b in user_blocks(message.content)]
            if blocks:
                out.append({"role": "user", "content": blocks})
    for sent in out:
        sent.pop("_tool_results", None)
    if not own_breakpoints:
        return out
    # Prompt caching: mark the last user block so the conversation prefix is cached between turns.
    for sent in reversed(out):
        if sent["role"] == "user":
            sent["content"][-1] = {**sent["content"][-1], "cache_control": _CACHE}
            break
    return out


def check_request(model: ModelInfo, context: Context, options: StreamOptions) -> None:
    """Raise RequestRejected for what the Messages API refuses."""
    check_tool_choice(context, options)
    check_no_gemini_cache(options, "Anthropic")
    check_no_json_object(options, "Anthropic")
    if options.reasoning and forces_a_tool(options):
        raise RequestRejected(
            "Anthropic does not force a tool while thinking: drop options.reasoning or toolChoice", param=TOOL_CHOICE
        )
    if options.reasoning and options.top_p is not None and options.top_p < THINKING_MIN_TOP_P:
        raise RequestRejected(f"Anthropic takes topP between {THINKING_MIN_TOP_P} and 1 while thinking", param=TOP_P)


def tool_choice(options: StreamOptions) -> dict[str, Any] | None:
    """`tool_choice`, with `disable_parallel_tool_use` when the client asked for one call at a time (Anthropic
    takes it on auto, any and a named tool; with none no tool is called at all)."""
    choice = options.tool_choice
    serial = {"disable_parallel_tool_use": True} if options.parallel_tool_calls is False else {}
    if choice is None:
        return {"type": "auto", **serial} if serial else None
    if isinstance(choice, ToolChoiceTool):
        return {"type": "tool", "name": choice.name, **serial}
    kind = _TOOL_CHOICE[choice]
    return {"type": kind} if kind == "none" else {"type": kind, **serial}


def request_headers(options: StreamOptions) -> dict[str, str] | None:
    """The client's `anthropic-beta` flags, as it sent them (they name the beta fields the request carries)."""
    betas = options.passthrough_for(API).get("betas")
    return {"anthropic-beta": ",".join(betas)} if betas else None


def build_request(model: ModelInfo, context: Context, options: StreamOptions) -> dict[str, Any]:
    """Keyword arguments for `client.messages.create(..., stream=True)`."""
    max_tokens = options.max_tokens or (model.max_tokens // 3 if model.max_tokens else DEFAULT_MAX_TOKENS)
    if model.max_tokens:
        max_tokens = min(max_tokens, model.max_tokens)  # a request above the model's limit would only fail upstream
    native = options.passthrough_for(API)
    # The client's breakpoints (on blocks, tools, or the top-level automatic one) replace the adapter's own two.
    own_breakpoints = native.get("cache_control") is None and not has_client_breakpoints(context)
    params: dict[str, Any] = {
        "model": model.id,
        "messages": convert_messages(context, Target.of(model, API), own_breakpoints),
        "stream": True,
    }
    if context.system_blocks:
        params["system"] = [_user_block(b) for b in context.system_blocks]
    elif context.system_prompt:
        params["system"] = [{"type": "text", "text": context.system_prompt}]
    if own_breakpoints and params.get("system"):
        params["system"][-1] = {**params["system"][-1], "cache_control": _CACHE}
    if context.tools:
        params["tools"] = [
            t.anthropic
            or {"name": t.name, "description": t.description, "input_schema": t.parameters or {"type": "object"}}
            for t in context.tools
        ]
        if (choice := tool_choice(options)) is not None:
            params["tool_choice"] = choice
    if (web := hosted.plan(API, model, options).web_search) is not None:
        search: dict[str, Any] = {"type": WEB_SEARCH_TOOL, "name": "web_search"}
        if web.max_uses is not None:
            search["max_uses"] = web.max_uses
        params.setdefault("tools", []).append(search)
    if options.stop:
        params["stop_sequences"] = list(options.stop)
    if options.top_p is not None:
        params["top_p"] = options.top_p
    if options.reasoning:
        budget = THINKING_BUDGETS[options.reasoning]
        if not options.max_tokens:
            max_tokens = max_tokens + budget
            if model.max_tokens:
                max_tokens = min(max_tokens, model.max_tokens)
        if max_tokens <= budget:
            budget = max(1024, max_tokens - 1024)
            max_tokens = max(max_tokens, budget + 1024)
        params["thinking"] = {"type": "enabled", "budget_tokens": budget}
    elif options.temperature is not None:
        # Anthropic rejects temperature with thinking. This SDK version no longer types `temperature`, but the
        # Messages API still takes it for the models that support it, so it goes in the body as is.
        params["extra_body"] = {"temperature": options.temperature}
    params["max_tokens"] = max_tokens
    if native.get("thinking") is not None:
        params["thinking"] = native["thinking"]
    extra = params.setdefault("extra_body", {})
    for field in PASSED_AS_SENT:
        if native.get(field) is not None:
            extra[field] = native[field]
    if not extra:
        del params["extra_body"]
    user_id = (options.metadata or {}).get("userId")
    if isinstance(user_id, str) and user_id:
        params["metadata"] = {"user_id": user_id}
    return params
