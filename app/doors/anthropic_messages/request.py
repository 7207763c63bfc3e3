"""Decode an Anthropic Messages request body (`POST /v1/messages`) into the unified `StreamRequest`.

Pure: a JSON object in, a `DoorRequest` out, or an `ApiError` whose message starts with the field at fault. Everything
the gateway cannot honour for every vendor it fronts (server tools, URL images, documents, prefill, `top_k`,
…) is refused here, before any upstream call; fields that change nothing in the answer (`cache_control`,
`citations`, `service_tier`, …) are accepted and ignored. docs/doors/anthropic-messages.md lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, NoReturn

from pydantic import ValidationError

from app.api.errors import ApiError
from app.contract.messages import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.contract.request import Reasoning, StreamOptions, StreamRequest, ToolChoiceTool
from app.doors.anthropic_messages.signatures import Origin, Unwrapped, unwrap
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
}
# Accepted and ignored (docs/doors/anthropic-messages.md): `context_management` asks Anthropic to clear old tool
# results or thinking once a context grows past a trigger; the gateway sends every request whole (coding agents
# such as Claude Code send it, and refusing it would shut them out).


def _fail(path: str, problem: str) -> NoReturn:
    raise ApiError(400, "invalid_request_error", f"{path}: {problem}", param=path)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(path, f"must be an object, not {_kind(value)}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        _fail(path, f"must be an array, not {_kind(value)}")
    return value


def _string(value: Any, path: str, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        _fail(path, f"must be a string, not {_kind(value)}")
    if not empty and not value:
        _fail(path, "must not be empty")
    return value


def _integer(value: Any, path: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(path, f"must be an integer, not {_kind(value)}")
    if value < minimum:
        _fail(path, f"must be at least {minimum}")
    return value


def _number(value: Any, path: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(path, f"must be a number, not {_kind(value)}")
    if not low <= value <= high:
        _fail(path, f"must be between {low:g} and {high:g}")
    return float(value)


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        _fail(path, f"must be a boolean, not {_kind(value)}")
    return value


def _block_type(block: Any, path: str) -> str:
    return _string(_object(block, path).get("type"), f"{path}.type")


# ----------------------------------------------------------------------------- content blocks


def _text(block: dict[str, Any], path: str) -> TextContent:
    return TextContent(text=_string(block.get("text"), f"{path}.text"))


def _image(block: dict[str, Any], path: str) -> ImageContent:
    source = _object(block.get("source"), f"{path}.source")
    kind = source.get("type")
    if kind == "url":
        _fail(f"{path}.source", "URL images are not supported: the gateway never fetches URLs; send base64 data")
    if kind != "base64":
        _fail(f"{path}.source.type", f"image source {kind!r} is not supported; send base64 data")
    media_type = _string(source.get("media_type"), f"{path}.source.media_type")
    if media_type not in IMAGE_TYPES:
        _fail(f"{path}.source.media_type", f"must be one of {', '.join(sorted(IMAGE_TYPES))}")
    return ImageContent(data=_string(source.get("data"), f"{path}.source.data", empty=False), mime_type=media_type)


def _result_content(value: Any, path: str) -> list[TextContent | ImageContent]:
    if value is None:
        return []
    if isinstance(value, str):
        return [TextContent(text=value)] if value else []
    blocks: list[TextContent | ImageContent] = []
    for index, block in enumerate(_list(value, path)):
        where = f"{path}.{index}"
        kind = _block_type(block, where)
        if kind == "text":
            blocks.append(_text(block, where))
        elif kind == "image":
            blocks.append(_image(block, where))
        else:
            _fail(f"{where}.type", f"{kind!r} blocks are not supported in a tool result (text and image are)")
    return blocks


class _Conversation:
    """Converts `messages` in order, checking that each tool_result answers a tool_use of the turn before."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.system: list[str] = []
        self.open_calls: dict[str, str] = {}  # tool_use id → tool name, of the latest assistant message
        self.seen_calls: set[str] = set()

    def add(self, raw: Any, path: str) -> None:
        message = _object(raw, path)
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            self._user(content, f"{path}.content")
        elif role == "assistant":
            self._assistant(content, f"{path}.content")
        elif role == "system":
            if self.messages:
                _fail(f"{path}.role", "a system message after the conversation has begun is not supported")
            self.system.append(_system_text(content, f"{path}.content"))
        else:
            _fail(f"{path}.role", f"must be 'user' or 'assistant', not {role!r}")

    def _user(self, content: Any, path: str) -> None:
        answered = self.open_calls
        self.open_calls = {}
        if isinstance(content, str):
            if not content:
                _fail(path, "must not be empty")
            self.messages.append(UserMessage(content=content))
            return
        if not _list(content, path):
            _fail(path, "must not be empty")
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
                call_id = _string(block.get("tool_use_id"), f"{where}.tool_use_id", empty=False)
                if call_id not in answered:
                    _fail(f"{where}.tool_use_id", f"{call_id!r} answers no tool_use of the previous assistant message")
                results.append(
                    ToolResultMessage(
                        tool_call_id=call_id,
                        tool_name=answered.pop(call_id),
                        content=_result_content(block.get("content"), f"{where}.content"),
                        is_error=_bool(block.get("is_error", False), f"{where}.is_error"),
                    )
                )
            else:
                _fail(f"{where}.type", f"{kind!r} blocks are not supported in a user message")
        self.messages.extend(results)
        if blocks:
            self.messages.append(UserMessage(content=blocks))

    def _assistant(self, content: Any, path: str) -> None:
        self.open_calls = {}
        if isinstance(content, str):
            self.messages.append(AssistantMessage(content=[TextContent(text=content)], stop_reason="stop"))
            return
        origin: Origin | None = None
        blocks: list[TextContent | ToolCall | _Thinking] = []
        for index, block in enumerate(_list(content, path)):
            where = f"{path}.{index}"
            kind = _block_type(block, where)
            if kind == "text":
                blocks.append(_text(block, where))
            elif kind == "tool_use":
                call_id = _string(block.get("id"), f"{where}.id", empty=False)
                name = _string(block.get("name"), f"{where}.name", empty=False)
                if call_id in self.seen_calls:
                    _fail(f"{where}.id", f"tool_use id {call_id!r} appears more than once")
                arguments = _object(block.get("input", {}), f"{where}.input")
                self.seen_calls.add(call_id)
                self.open_calls[call_id] = name
                blocks.append(ToolCall(id=call_id, name=name, arguments=arguments))
            elif kind in ("thinking", "redacted_thinking"):
                field = "signature" if kind == "thinking" else "data"
                signed = unwrap(_string(block.get(field, ""), f"{where}.{field}"))
                if signed is not None and origin is None:
                    origin = signed.origin
                text = _string(block.get("thinking"), f"{where}.thinking") if kind == "thinking" else ""
                blocks.append(_Thinking(kind == "redacted_thinking", text, signed))
            else:
                _fail(f"{where}.type", f"{kind!r} blocks are not supported in an assistant message")
        self.messages.append(
            AssistantMessage(
                content=[b for b in (b.block(origin) if isinstance(b, _Thinking) else b for b in blocks) if b is not None],
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


def _system_text(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    parts = []
    for index, block in enumerate(_list(value, path)):
        where = f"{path}.{index}"
        kind = _block_type(block, where)
        if kind != "text":
            _fail(f"{where}.type", f"system blocks must be text, not {kind!r}")
        parts.append(_string(block.get("text"), f"{where}.text"))
    return "\n\n".join(p for p in parts if p)


# ----------------------------------------------------------------------------- tools and options


def _tools(value: Any) -> list[Tool]:
    tools: list[Tool] = []
    names: set[str] = set()
    for index, raw in enumerate(_list(value, "tools")):
        path = f"tools.{index}"
        tool = _object(raw, path)
        kind = tool.get("type")
        if kind not in (None, "custom"):
            _fail(f"{path}.type", f"server tool {kind!r} is not supported by the gateway; define a custom tool")
        name = _string(tool.get("name"), f"{path}.name", empty=False)
        if len(name) > 128:
            _fail(f"{path}.name", "must be at most 128 characters")
        if name in names:
            _fail(f"{path}.name", f"tool {name!r} is defined twice")
        names.add(name)
        schema = _object(tool.get("input_schema"), f"{path}.input_schema")
        description = tool.get("description")
        tools.append(
            Tool(
                name=name,
                description="" if description is None else _string(description, f"{path}.description"),
                parameters=schema,
            )
        )
    return tools


def _tool_choice(value: Any, tools: list[Tool]) -> str | ToolChoiceTool:
    choice = _object(value, "tool_choice")
    if choice.get("disable_parallel_tool_use"):
        _fail("tool_choice.disable_parallel_tool_use", "is not supported by the gateway")
    kind = choice.get("type")
    if kind == "auto":
        return "auto"
    if kind == "none":
        return "none"
    if kind not in ("any", "tool"):
        _fail("tool_choice.type", f"must be 'auto', 'any', 'tool' or 'none', not {kind!r}")
    if not tools:
        _fail("tool_choice", f"type {kind!r} needs tools")
    if kind == "any":
        return "required"
    name = _string(choice.get("name"), "tool_choice.name", empty=False)
    if name not in {t.name for t in tools}:
        _fail("tool_choice.name", f"names no tool in tools: {name!r}")
    return ToolChoiceTool(type="tool", name=name)


def _reasoning(body: dict[str, Any]) -> Reasoning | None:
    effort: Reasoning | None = None
    if body.get("output_config") is not None:
        config = _object(body["output_config"], "output_config")
        if config.get("format") is not None:
            _fail("output_config.format", "structured output formats are not supported by the gateway")
        if config.get("effort") is not None:
            raw = config["effort"]
            if raw not in EFFORT_LEVELS:
                _fail("output_config.effort", f"must be one of {', '.join(EFFORT_LEVELS)}")
            effort = EFFORT_LEVELS[raw]
    if body.get("thinking") is None:
        return effort
    thinking = _object(body["thinking"], "thinking")
    kind = thinking.get("type")
    if kind == "disabled":
        return None
    if kind == "adaptive":
        return effort or ADAPTIVE_LEVEL
    if kind != "enabled":
        _fail("thinking.type", f"must be 'enabled', 'adaptive' or 'disabled', not {kind!r}")
    budget = _integer(thinking.get("budget_tokens"), "thinking.budget_tokens", 1024)
    if effort is not None:
        return effort
    return next(level for floor, level in BUDGET_LEVELS if budget >= floor)


def _options(body: dict[str, Any], tools: list[Tool]) -> StreamOptions:
    options: dict[str, Any] = {"reasoning": _reasoning(body)}
    if body.get("max_tokens") is None:
        _fail("max_tokens", "Field required")  # as Anthropic answers
    options["max_tokens"] = _integer(body["max_tokens"], "max_tokens", 1)
    if options["max_tokens"] > MAX_TOKENS:
        _fail("max_tokens", f"must be at most {MAX_TOKENS}")
    if body.get("temperature") is not None:
        options["temperature"] = _number(body["temperature"], "temperature", 0.0, 1.0)
    if body.get("top_p") is not None:
        options["top_p"] = _number(body["top_p"], "top_p", 0.0, 1.0)
    if body.get("stop_sequences") is not None:
        stops = [_string(s, f"stop_sequences.{i}", empty=False) for i, s in enumerate(_list(body["stop_sequences"], "stop_sequences"))]
        if len(stops) > MAX_STOP:
            _fail("stop_sequences", f"at most {MAX_STOP} stop sequences are supported")
        for index, stop in enumerate(stops):
            if len(stop) > MAX_STOP_LENGTH:
                _fail(f"stop_sequences.{index}", f"must be at most {MAX_STOP_LENGTH} characters")
        options["stop"] = stops or None
    if body.get("tool_choice") is not None:
        options["tool_choice"] = _tool_choice(body["tool_choice"], tools)
    if body.get("metadata") is not None:
        metadata = _object(body["metadata"], "metadata")
        user_id = metadata.get("user_id")
        if user_id is not None:
            options["metadata"] = {"userId": _string(user_id, "metadata.user_id")}
    return StreamOptions(**options)


# ----------------------------------------------------------------------------- the request


def decode(body: dict[str, Any], headers: Mapping[str, str] | None = None) -> DoorRequest:
    """The unified request for an Anthropic Messages body; raises `ApiError` (400, or 404 for a model name
    that cannot name anything). The `anthropic-version` and `anthropic-beta` headers change nothing."""
    model = _string(body.get("model"), "model", empty=False)
    for name, problem in UNSUPPORTED_FIELDS.items():
        if body.get(name) is not None:
            _fail(name, problem)
    conversation = _Conversation()
    if body.get("system") is not None:
        conversation.system.append(_system_text(body["system"], "system"))
    raw_messages = _list(body.get("messages"), "messages")
    if not raw_messages:
        _fail("messages", "must not be empty")
    for index, message in enumerate(raw_messages):
        conversation.add(message, f"messages.{index}")
    if isinstance(conversation.messages[-1] if conversation.messages else None, AssistantMessage):
        _fail(f"messages.{len(raw_messages) - 1}.role", "a final assistant message (prefill) is not supported")
    if not conversation.messages:
        _fail("messages", "must contain a user message")
    tools = _tools(body["tools"]) if body.get("tools") is not None else []
    stream = _bool(body.get("stream", False), "stream")
    options = _options(body, tools)
    system = "\n\n".join(s for s in conversation.system if s) or None
    try:
        context = Context(system_prompt=system, messages=conversation.messages, tools=tools or None)
        unified = StreamRequest(model=model, context=context, options=options)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        if where == "model":
            raise ApiError(404, "not_found_error", f"model: {model!r} names no model", param="model") from None
        raise ApiError(400, "invalid_request_error", f"{where}: {first['msg']}", param=where) from None
    return DoorRequest(unified=unified, stream=stream)
