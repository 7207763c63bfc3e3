"""The `system` and `messages` of an Anthropic Messages request as the unified conversation.

Blocks keep what only Anthropic reads in the unified request's door-only fields (`cache_control` breakpoints,
system messages inside the conversation, a `tool_reference` as it came), for the Anthropic adapter to send as
they came. Each `tool_result` must answer a `tool_use` of the assistant message before. Signed thinking comes
back origin-wrapped (`app.doors.signatures`): a signature stays only when it comes from the message's origin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.contract.messages import (
    DOOR_VALIDATION,
    AssistantMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.doors.fields import bool_at, fail, list_at, object_at, string_at
from app.doors.signatures import Origin, SignedCall, Unwrapped, unwrap, unwrap_call

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def _block_type(block: Any, path: str) -> str:
    return string_at(object_at(block, path).get("type"), f"{path}.type")


def cache_control(block: dict[str, Any], path: str) -> dict[str, Any] | None:
    """A block's `cache_control` breakpoint (`{"type": "ephemeral", "ttl"?}`), kept for an Anthropic upstream."""
    value = block.get("cache_control")
    return None if value is None else object_at(value, f"{path}.cache_control")


def _text(block: dict[str, Any], path: str) -> TextContent:
    text = string_at(block.get("text"), f"{path}.text")
    cache = cache_control(block, path)
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
            "cache_control": cache_control(block, path),
        },
        context=DOOR_VALIDATION,
    )


def _tool_reference(block: dict[str, Any], path: str) -> tuple[TextContent, str]:
    """A `tool_reference` (what a tool search tool returns to load a deferred tool): for Anthropic the block
    as it came; for the other vendors a line of text, while the tool itself joins the tools they are sent."""
    name = string_at(block.get("tool_name"), f"{path}.tool_name", empty=False)
    text = TextContent.model_validate({"text": f"Tool loaded: {name}", "anthropic": block}, context=DOOR_VALIDATION)
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
            fail(
                f"{where}.type",
                f"{kind!r} blocks are not supported in a tool result (text, image and tool_reference are)",
            )
    return blocks


class Conversation:
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
            blocks = system_blocks(content, f"{path}.content")
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
                            cache_control=cache_control(block, where),
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
            elif kind == "thinking" and (
                own := unwrap_call(string_at(block.get("signature", ""), f"{where}.signature"))
            ):
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
                content=[
                    b
                    for b in (b if isinstance(b, (TextContent, ToolCall)) else b.block(origin) for b in blocks)
                    if b is not None
                ],
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
        signed = self.signed
        signature = signed.signature if signed is not None and signed.origin == origin and signed.signature else None
        if self.redacted:
            return ThinkingContent(thinking="", thinking_signature=signature, redacted=True) if signature else None
        return ThinkingContent(thinking=self.text, thinking_signature=signature)


def system_blocks(value: Any, path: str) -> list[TextContent]:
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


def clear_thinking(messages: list[Message], kept: int) -> list[Message]:
    """`messages` without the thinking of all but the last `kept` assistant turns that have some (what Anthropic
    does for `clear_thinking`; done here so that every vendor sees the same history)."""
    with_thinking = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, AssistantMessage) and any(isinstance(b, ThinkingContent) for b in m.content)
    ]
    clear = set(with_thinking[: max(0, len(with_thinking) - kept)])
    return [
        m.model_copy(update={"content": [b for b in m.content if not isinstance(b, ThinkingContent)]})
        if i in clear
        else m
        for i, m in enumerate(messages)
    ]


def expire_system_messages(messages: list[Message]) -> None:
    """Mark system messages with `clear_at: next_user_message` that a later user message follows."""
    user_after = False
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            user_after = True
        elif isinstance(message, SystemMessage) and user_after:
            if (message.anthropic or {}).get("clear_at") == "next_user_message":
                message.expired = True
