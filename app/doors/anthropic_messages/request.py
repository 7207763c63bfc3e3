"""Decode an Anthropic Messages request body (`POST /v1/messages`) into the unified `StreamRequest`.

Pure: a JSON object in, a `DoorRequest` out, or a `BadRequest` whose message starts with the field at fault. Everything
the gateway cannot honour for every vendor it fronts (server tools, URL images, documents, prefill, `top_k`,
…) is refused here, before any upstream call. What only Anthropic understands travels in the unified request's
door-only fields for the Anthropic adapter to send as it came (system messages inside the conversation,
`cache_control` breakpoints, tool definitions with `defer_loading`, `thinking`, `output_config`,
`context_management`, the `anthropic-beta` flags); the unified fields carry its translation for the other
vendors. docs/doors/anthropic-messages.md lists every field.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping

import orjson
from pydantic import ValidationError

from app.doors.errors import BadRequest
from app.doors.fields import bool_at, fail, integer_at, kind, list_at, number_at, object_at, string_at
from app.contract.messages import (
    DOOR_VALIDATION,
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.contract.request import Reasoning, StreamOptions, StreamRequest, ToolChoiceTool
from app.doors.anthropic_messages.signatures import Origin, SignedCall, Unwrapped, unwrap, unwrap_call
from app.doors.base import DoorRequest

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# `thinking.budget_tokens` → the unified reasoning level: the highest level whose budget the request reaches.
# These are the budgets the Anthropic adapter sends for each level, so a budget of exactly one of them
# reaches an Anthropic model unchanged.
BUDGET_LEVELS: tuple[tuple[int, Reasoning], ...] = (
    (32768, "xhigh"),
    (16384, "high"),
    (8192, "medium"),
    (2048, "low"),
    (0, "minimal"),
)
ADAPTIVE_LEVEL: Reasoning = "medium"
# The unified request's bounds (`app.contract.request.StreamOptions`), checked here to name Anthropic's fields.
MAX_TOKENS = 1_000_000
MAX_STOP, MAX_STOP_LENGTH = 16, 1000
EFFORT_LEVELS: dict[str, Reasoning] = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}
# Top-level fields that would change the answer and that the gateway cannot honour on every vendor.
UNSUPPORTED_FIELDS = {
    "top_k": "top_k is not supported by the gateway (not every vendor has it)",
    "container": "code-execution containers are Anthropic server features the gateway does not offer",
    "mcp_servers": "MCP servers are an Anthropic server feature the gateway does not offer",
    "compaction": "compaction requests are an Anthropic server feature the gateway does not offer",
    "thread": "server-held conversation threads are an Anthropic feature the gateway does not offer",
}
# Top-level fields an Anthropic upstream gets as they came (`options.anthropic`); the other vendors get their
# translation (thinking, effort) or nothing where nothing changes in the answer (docs/doors/anthropic-messages.md).
ANTHROPIC_ONLY_FIELDS = (
    "thinking", "output_config", "context_management", "cache_control", "service_tier", "speed", "inference_geo"
)
# `context_management` edits (docs/doors/anthropic-messages.md): Anthropic applies them itself; for the other
# vendors the door applies `clear_thinking` (old thinking left out of the history, the last `keep` assistant
# turns with thinking keep theirs; Anthropic's default keeps one).
CLEAR_THINKING = "clear_thinking_20251015"
DEFAULT_THINKING_TURNS_KEPT = 1


def _block_type(block: Any, path: str) -> str:
    return string_at(object_at(block, path).get("type"), f"{path}.type")


# ----------------------------------------------------------------------------- content blocks


def _cache_control(block: dict[str, Any], path: str) -> dict[str, Any] | None:
    """A block's `cache_control` breakpoint (`{"type": "ephemeral", "ttl"?}`), kept for an Anthropic upstream."""
    value = block.get("cache_control")
    return None if value is None else object_at(value, f"{path}.cache_control")


def _text(block: dict[str, Any], path: str) -> TextContent:
    text = string_at(block.get("text"), f"{path}.text")
    cache = _cache_control(block, path)
    if cache is None:
        return TextContent(text=text)
    return TextContent.model_validate({"text": text, "cache_control": cache}, context=DOOR_VALIDATION)


def _image(block: dict[str, Any], path: str) -> ImageContent:
    source = object_at(block.get("source"), f"{path}.source")
    kind = source.get("type")
    if kind == "url":
        fail(f"{path}.source", "URL images are not supported: the gateway never fetches URLs; send base64 data")
    if kind != "base64":
        fail(f"{path}.source.type", f"image source {kind!r} is not supported; send base64 data")
    media_type = string_at(source.get("media_type"), f"{path}.source.media_type")
    if media_type not in IMAGE_TYPES:
        fail(f"{path}.source.media_type", f"must be one of {', '.join(sorted(IMAGE_TYPES))}")
    return ImageContent.model_validate(
        {
            "data": string_at(source.get("data"), f"{path}.source.data", empty=False),
            "mime_type": media_type,
            "cache_control": _cache_control(block, path),
        },
        context=DOOR_VALIDATION,
    )


def _tool_reference(block: dict[str, Any], path: str) -> tuple[TextContent, str]:
    """A `tool_reference` (what a tool search tool returns to load a deferred tool): for Anthropic the block
    as it came; for the other vendors a line of text, while the tool itself joins the tools they are sent."""
    name = string_at(block.get("tool_name"), f"{path}.tool_name", empty=False)
    text = TextContent.model_validate(
        {"text": f"Tool loaded: {name}", "anthropic": block}, context=DOOR_VALIDATION
    )
    return text, name


def _result_content(value: Any, path: str, loaded: set[str]) -> list[TextContent | ImageContent]:
    if value is None:
        return []
    if isinstance(value, str):
        return [TextContent(text=value)] if value else []
    blocks: list[TextContent | ImageContent] = []
    for index, block in enumerate(list_at(value, path)):
        where = f"{path}.{index}"
        kind = _block_type(block, where)
        if kind == "text":
            blocks.append(_text(block, where))
        elif kind == "image":
            blocks.append(_image(block, where))
        elif kind == "tool_reference":
            text, name = _tool_reference(block, where)
            blocks.append(text)
            loaded.add(name)
        else:
            fail(f"{where}.type", f"{kind!r} blocks are not supported in a tool result (text, image and tool_reference are)")
    return blocks


class _Conversation:
    """Converts `messages` in order, checking that each tool_result answers a tool_use of the turn before."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.system_blocks: list[TextContent] = []
        self.open_calls: dict[str, str] = {}  # tool_use id → tool name, of the latest assistant message
        self.seen_calls: set[str] = set()
        self.loaded_tools: set[str] = set()  # tools a tool_reference has shown the model

    def add(self, raw: Any, path: str) -> None:
        message = object_at(raw, path)
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            self._user(content, f"{path}.content")
        elif role == "assistant":
            self._assistant(content, f"{path}.content")
        elif role == "system":
            blocks = _system_blocks(content, f"{path}.content")
            if not self.messages:  # before the conversation: part of the system prompt
                self.system_blocks.extend(blocks)
                return
            extras = {}
            for field in ("output_config", "clear_at"):
                if message.get(field) is not None:
                    extras[field] = message[field]
            if "output_config" in extras:
                object_at(extras["output_config"], f"{path}.output_config")
            if extras.get("clear_at", "never") not in ("never", "next_user_message"):
                fail(f"{path}.clear_at", "must be 'next_user_message' or 'never'")
            if not blocks:
                if "output_config" not in extras:
                    fail(f"{path}.content", "must not be empty")
                blocks = [TextContent(text="")]
            self.messages.append(
                SystemMessage.model_validate({"content": blocks, "anthropic": extras or None}, context=DOOR_VALIDATION)
            )
        else:
            fail(f"{path}.role", f"must be 'user', 'assistant' or 'system', not {role!r}")

    def _user(self, content: Any, path: str) -> None:
        answered = self.open_calls
        self.open_calls = {}
        if isinstance(content, str):
            if not content:
                fail(path, "must not be empty")
            self.messages.append(UserMessage(content=content))
            return
        if not list_at(content, path):
            fail(path, "must not be empty")
        results: list[ToolResultMessage] = []
        blocks: list[TextContent | ImageContent] = []
        for index, block in enumerate(content):
            where = f"{path}.{index}"
            kind = _block_type(block, where)
            if kind == "text":
                blocks.append(_text(block, where))
            elif kind == "image":
                blocks.append(_image(block, where))
            elif kind == "tool_result":
                call_id = string_at(block.get("tool_use_id"), f"{where}.tool_use_id", empty=False)
                if call_id not in answered:
                    fail(f"{where}.tool_use_id", f"{call_id!r} answers no tool_use of the previous assistant message")
                results.append(
                    ToolResultMessage.model_validate(
                        dict(
                        tool_call_id=call_id,
                        tool_name=answered.pop(call_id),
                        content=_result_content(block.get("content"), f"{where}.content", self.loaded_tools),
                        is_error=bool_at(block.get("is_error", False), f"{where}.is_error"),
                        cache_control=_cache_control(block, where),
                        ),
                        context=DOOR_VALIDATION,
                    )
                )
            else:
                fail(f"{where}.type", f"{kind!r} blocks are not supported in a user message")
        self.messages.extend(results)
        if blocks:
            self.messages.append(UserMessage(content=blocks))

    def _assistant(self, content: Any, path: str) -> None:
        self.open_calls = {}
        if isinstance(content, str):
            self.messages.append(AssistantMessage(content=[TextContent(text=content)], stop_reason="stop"))
            return
        origin: Origin | None = None
        blocks: list[TextContent | ToolCall | _Thinking | SignedCall] = []
        for index, block in enumerate(list_at(content, path)):
            where = f"{path}.{index}"
            kind = _block_type(block, where)
            if kind == "text":
                blocks.append(_text(block, where))
            elif kind == "tool_use":
                call_id = string_at(block.get("id"), f"{where}.id", empty=False)
                name = string_at(block.get("name"), f"{where}.name", empty=False)
                if call_id in self.seen_calls:
                    fail(f"{where}.id", f"tool_use id {call_id!r} appears more than once")
                arguments = object_at(block.get("input", {}), f"{where}.input")
                self.seen_calls.add(call_id)
                self.open_calls[call_id] = name
                blocks.append(ToolCall(id=call_id, name=name, arguments=arguments))
            elif kind == "thinking" and (own := unwrap_call(string_at(block.get("signature", ""), f"{where}.signature"))):
                # A tool call's own signature (Gemini's), handed out right after that call's tool_use.
                if origin is None:
                    origin = own.origin
                if blocks and isinstance(blocks[-1], ToolCall):
                    blocks[-1] = SignedCall(blocks[-1], own)
            elif kind in ("thinking", "redacted_thinking"):
                field = "signature" if kind == "thinking" else "data"
                signed = unwrap(string_at(block.get(field, ""), f"{where}.{field}"))
                if signed is not None and origin is None:
                    origin = signed.origin
                text = string_at(block.get("thinking"), f"{where}.thinking") if kind == "thinking" else ""
                blocks.append(_Thinking(kind == "redacted_thinking", text, signed))
            else:
                fail(f"{where}.type", f"{kind!r} blocks are not supported in an assistant message")
        self.messages.append(
            AssistantMessage(
                content=[b for b in (b if isinstance(b, (TextContent, ToolCall)) else b.block(origin) for b in blocks)
                         if b is not None],  # fmt: skip
                provider=origin.provider if origin else None,
                api=origin.api if origin else None,
                model=origin.model if origin else None,
                stop_reason="toolUse" if self.open_calls else "stop",
            )
        )


@dataclass(frozen=True, slots=True)
class _Thinking:
    """A thinking or redacted_thinking block as the client sent it; its fate depends on the message's origin
    (the first origin-wrapped signature in the message), known once the whole message is read."""

    redacted: bool
    text: str
    signed: Unwrapped | None

    def block(self, origin: Origin | None) -> ThinkingContent | None:
        """The vendor signature stays only when it comes from the message's origin; redacted thinking from
        anywhere else cannot be replayed to anyone and is left out."""
        own = self.signed is not None and self.signed.origin == origin
        signature = self.signed.signature if own and self.signed.signature else None
        if self.redacted:
            return ThinkingContent(thinking="", thinking_signature=signature, redacted=True) if signature else None
        return ThinkingContent(thinking=self.text, thinking_signature=signature)


def _system_blocks(value: Any, path: str) -> list[TextContent]:
    """`system` (or a system message's `content`): a string or `text` blocks, each keeping its cache breakpoint."""
    if isinstance(value, str):
        return [TextContent(text=value)] if value else []
    blocks = []
    for index, block in enumerate(list_at(value, path)):
        where = f"{path}.{index}"
        kind = _block_type(block, where)
        if kind != "text":
            fail(f"{where}.type", f"system blocks must be text, not {kind!r}")
        blocks.append(_text(block, where))
    return blocks


# ----------------------------------------------------------------------------- tools and options


def _tools(value: Any, loaded: set[str]) -> list[Tool]:
    """Custom tools; each keeps its Anthropic definition as sent (`defer_loading`, `cache_control`, `strict`,
    …) for an Anthropic upstream. A `defer_loading` tool no `tool_reference` has loaded is `deferred`."""
    tools: list[Tool] = []
    names: set[str] = set()
    for index, raw in enumerate(list_at(value, "tools")):
        path = f"tools.{index}"
        tool = object_at(raw, path)
        kind = tool.get("type")
        if kind not in (None, "custom"):
            fail(f"{path}.type", f"server tool {kind!r} is not supported by the gateway; define a custom tool")
        name = string_at(tool.get("name"), f"{path}.name", empty=False)
        if len(name) > 128:
            fail(f"{path}.name", "must be at most 128 characters")
        if name in names:
            fail(f"{path}.name", f"tool {name!r} is defined twice")
        names.add(name)
        schema = object_at(tool.get("input_schema"), f"{path}.input_schema")
        description = tool.get("description")
        _cache_control(tool, path)
        deferred = bool_at(tool.get("defer_loading", False), f"{path}.defer_loading") and name not in loaded
        tools.append(
            Tool.model_validate(
                {
                    "name": name,
                    "description": "" if description is None else string_at(description, f"{path}.description"),
                    "parameters": schema,
                    "deferred": deferred,
                    "anthropic": tool,
                },
                context=DOOR_VALIDATION,
            )
        )
    return tools


def _tool_choice(value: Any, tools: list[Tool]) -> str | ToolChoiceTool:
    choice = object_at(value, "tool_choice")
    if choice.get("disable_parallel_tool_use") is not None:
        bool_at(choice["disable_parallel_tool_use"], "tool_choice.disable_parallel_tool_use")
    kind = choice.get("type")
    if kind == "auto":
        return "auto"
    if kind == "none":
        return "none"
    if kind not in ("any", "tool"):
        fail("tool_choice.type", f"must be 'auto', 'any', 'tool' or 'none', not {kind!r}")
    if not tools:
        fail("tool_choice", f"type {kind!r} needs tools")
    if kind == "any":
        return "required"
    name = string_at(choice.get("name"), "tool_choice.name", empty=False)
    if name not in {t.name for t in tools}:
        fail("tool_choice.name", f"names no tool in tools: {name!r}")
    return ToolChoiceTool(type="tool", name=name)


def _reasoning(body: dict[str, Any]) -> Reasoning | None:
    effort: Reasoning | None = None
    if body.get("output_config") is not None:
        config = object_at(body["output_config"], "output_config")
        if config.get("effort") is not None:
            raw = config["effort"]
            if raw not in EFFORT_LEVELS:
                fail("output_config.effort", f"must be one of {', '.join(EFFORT_LEVELS)}")
            effort = EFFORT_LEVELS[raw]
    if body.get("thinking") is None:
        return effort
    thinking = object_at(body["thinking"], "thinking")
    if thinking.get("display") not in (None, "summarized", "omitted", "updates"):
        fail("thinking.display", "must be 'summarized', 'omitted' or 'updates'")
    kind = thinking.get("type")
    if kind == "disabled":
        return None
    if kind == "adaptive":
        return effort or ADAPTIVE_LEVEL
    if kind != "enabled":
        fail("thinking.type", f"must be 'enabled', 'adaptive' or 'disabled', not {kind!r}")
    budget = integer_at(thinking.get("budget_tokens"), "thinking.budget_tokens", 1024)
    if effort is not None:
        return effort
    return next(level for floor, level in BUDGET_LEVELS if budget >= floor)


def _betas(headers: Mapping[str, str] | None) -> list[str]:
    raw = (headers or {}).get("anthropic-beta") or ""
    return [flag.strip() for flag in raw.split(",") if flag.strip()]


def _anthropic_fields(body: dict[str, Any], headers: Mapping[str, str] | None) -> dict[str, Any] | None:
    """The top-level fields (and beta flags) an Anthropic upstream is sent as they came."""
    native: dict[str, Any] = {}
    for field in ANTHROPIC_ONLY_FIELDS:
        if body.get(field) is not None:
            native[field] = body[field]
    if betas := _betas(headers):
        native["betas"] = betas
    return native or None


def conversation_key(system: list[TextContent], first: Any) -> str:
    """A key that stays the same on every turn of one conversation and differs between conversations: a hash of
    the system prompt and the first message, which a conversation never changes. It becomes
    `options.sessionId`, which OpenAI gets as `prompt_cache_key` (requests with the same key are routed to the
    same prompt cache); an Anthropic client has no such field of its own."""
    digest = hashlib.sha256()
    for block in system:
        digest.update(block.text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    digest.update(orjson.dumps(first, option=orjson.OPT_SORT_KEYS))
    return "msgs-" + digest.hexdigest()[:32]


def _json_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """`output_config.format` (`{type: json_schema, schema}`): the schema every vendor's structured output gets."""
    config = body.get("output_config")
    if not isinstance(config, dict) or config.get("format") is None:
        return None
    form = object_at(config["format"], "output_config.format")
    if form.get("type") != "json_schema":
        fail("output_config.format.type", f"must be 'json_schema', not {form.get('type')!r}")
    return object_at(form.get("schema"), "output_config.format.schema")


def _options(body: dict[str, Any], tools: list[Tool], headers: Mapping[str, str] | None) -> StreamOptions:
    options: dict[str, Any] = {
        "reasoning": _reasoning(body),
        "anthropic": _anthropic_fields(body, headers),
        "json_schema": _json_schema(body),
    }
    if body.get("max_tokens") is None:
        fail("max_tokens", "Field required")  # as Anthropic answers
    options["max_tokens"] = integer_at(body["max_tokens"], "max_tokens", 1)
    if options["max_tokens"] > MAX_TOKENS:
        fail("max_tokens", f"must be at most {MAX_TOKENS}")
    if body.get("temperature") is not None:
        options["temperature"] = number_at(body["temperature"], "temperature", 0.0, 1.0)
    if body.get("top_p") is not None:
        options["top_p"] = number_at(body["top_p"], "top_p", 0.0, 1.0)
    if body.get("stop_sequences") is not None:
        stops = [string_at(s, f"stop_sequences.{i}", empty=False) for i, s in enumerate(list_at(body["stop_sequences"], "stop_sequences"))]
        if len(stops) > MAX_STOP:
            fail("stop_sequences", f"at most {MAX_STOP} stop sequences are supported")
        for index, stop in enumerate(stops):
            if len(stop) > MAX_STOP_LENGTH:
                fail(f"stop_sequences.{index}", f"must be at most {MAX_STOP_LENGTH} characters")
        options["stop"] = stops or None
    if body.get("tool_choice") is not None:
        options["tool_choice"] = _tool_choice(body["tool_choice"], tools)
        if body["tool_choice"].get("disable_parallel_tool_use") is True:  # one call at a time, as each vendor takes it
            options["parallel_tool_calls"] = False
    if body.get("metadata") is not None:
        metadata = object_at(body["metadata"], "metadata")
        user_id = metadata.get("user_id")
        if user_id is not None:
            options["metadata"] = {"userId": string_at(user_id, "metadata.user_id")}
    return StreamOptions.model_validate(options, context=DOOR_VALIDATION)


def _thinking_turns_kept(body: dict[str, Any]) -> int | None:
    """How many of the latest assistant turns with thinking keep it, when `context_management` asks to clear
    thinking (`clear_thinking_20251015`, `keep: {type: thinking_turns, value}` or `"all"`); None: keep all."""
    if body.get("context_management") is None:
        return None
    edits = object_at(body["context_management"], "context_management").get("edits") or []
    for index, raw in enumerate(list_at(edits, "context_management.edits")):
        path = f"context_management.edits.{index}"
        edit = object_at(raw, path)
        if string_at(edit.get("type"), f"{path}.type") != CLEAR_THINKING:
            continue  # clear_tool_uses: applied by Anthropic; see docs/doors/anthropic-messages.md
        keep = edit.get("keep")
        if keep is None:
            return DEFAULT_THINKING_TURNS_KEPT
        if keep == "all":
            return None
        keep = object_at(keep, f"{path}.keep")
        return integer_at(keep.get("value"), f"{path}.keep.value", 0)
    return None


def _clear_thinking(messages: list[Message], kept: int) -> list[Message]:
    """`messages` without the thinking of all but the last `kept` assistant turns that have some (what Anthropic
    does for `clear_thinking`; done here so that every vendor sees the same history)."""
    with_thinking = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)
                     and any(isinstance(b, ThinkingContent) for b in m.content)]
    clear = set(with_thinking[: max(0, len(with_thinking) - kept)])
    return [
        m.model_copy(update={"content": [b for b in m.content if not isinstance(b, ThinkingContent)]}) if i in clear else m
        for i, m in enumerate(messages)
    ]


def _expire_system_messages(messages: list[Message]) -> None:
    """Mark system messages with `clear_at: next_user_message` that a later user message follows."""
    user_after = False
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            user_after = True
        elif isinstance(message, SystemMessage) and user_after:
            if (message.anthropic or {}).get("clear_at") == "next_user_message":
                message.expired = True


# ----------------------------------------------------------------------------- the request


def decode(body: dict[str, Any], headers: Mapping[str, str] | None = None) -> DoorRequest:
    """The unified request for an Anthropic Messages body; raises `BadRequest` (400, or 404 for a model name
    that cannot name anything). `anthropic-beta` flags go to an Anthropic upstream; `anthropic-version` changes
    nothing."""
    model = string_at(body.get("model"), "model", empty=False)
    for name, problem in UNSUPPORTED_FIELDS.items():
        if body.get(name) is not None:
            fail(name, problem)
    conversation = _Conversation()
    if body.get("system") is not None:
        conversation.system_blocks.extend(_system_blocks(body["system"], "system"))
    raw_messages = list_at(body.get("messages"), "messages")
    if not raw_messages:
        fail("messages", "must not be empty")
    for index, message in enumerate(raw_messages):
        conversation.add(message, f"messages.{index}")
    turns = [m for m in conversation.messages if not isinstance(m, SystemMessage)]
    if isinstance(turns[-1] if turns else None, AssistantMessage):
        fail(f"messages.{len(raw_messages) - 1}.role", "a final assistant message (prefill) is not supported")
    if not turns:
        fail("messages", "must contain a user message")
    messages = conversation.messages
    if (kept := _thinking_turns_kept(body)) is not None:
        messages = _clear_thinking(messages, kept)
    _expire_system_messages(messages)
    tools = _tools(body["tools"], conversation.loaded_tools) if body.get("tools") is not None else []
    stream = bool_at(body.get("stream", False), "stream")
    options = _options(body, tools, headers)
    system_blocks = conversation.system_blocks
    options.session_id = conversation_key(system_blocks, raw_messages[0])
    system = "\n\n".join(b.text for b in system_blocks if b.text) or None
    try:
        context = Context.model_validate(
            {"system_prompt": system, "system_blocks": system_blocks or None, "messages": messages, "tools": tools or None},
            context=DOOR_VALIDATION,
        )
        unified = StreamRequest(model=model, context=context, options=options)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        if where == "model":
            raise BadRequest(404, "not_found_error", f"model: {model!r} names no model", param="model") from None
        raise BadRequest(400, "invalid_request_error", f"{where}: {first['msg']}", param=where) from None
    return DoorRequest(unified=unified, stream=stream)
