"""`input` of a Responses request (and the stored conversation it continues) as the unified conversation.

`input` is a string (one user message) or a list of items. Consecutive assistant-side items (`reasoning`, an
assistant `message`, `function_call`) form one unified assistant message; its origin (provider, api, model)
is the one a `reasoning` item's `encrypted_content` carries (`signatures.py`), so same-model reasoning returns to
its vendor exactly and never reaches another. A `function_call_output` must answer a `function_call` of an
earlier item. `system` / `developer` messages before the conversation join `instructions` as the system prompt;
later ones stay at their position (each adapter sends them as its vendor's own instruction). An
`item_reference` is replaced by the stored item it names. A `compaction_trigger` as the last input item asks
for remote compaction, and a `compaction` item carries a summary the door made earlier (`compaction.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from app.contract.messages import (
    DOOR_VALIDATION,
    AssistantBlock,
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
from app.doors.base import StoredResponse
from app.doors.fields import invalid, list_at, object_at, string_at, unsupported
from app.doors.openai_fields import data_url_image, json_arguments
from app.doors.openai_responses import compaction
from app.doors.openai_responses.signatures import Opaque, unwrap_reasoning
from app.doors.openai_responses.stored import response_id_of_item
from app.doors.signatures import Origin, SignedCall, Unwrapped

NAMESPACE_SEPARATOR = "__"  # a namespaced function's name at the vendor: `<namespace>__<name>`


class Conversation:
    """Reads `input` in order into unified messages (see the module docstring): `messages`, the system text
    before the conversation (`system`), every item read as a wire item (`items`), whether `input` asks for a
    compaction."""

    def __init__(
        self,
        stored: Mapping[str, StoredResponse] | None = None,
        namespaced: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self.stored = stored or {}
        self.namespaces = {pair: flat for flat, pair in (namespaced or {}).items()}  # (namespace, name) → flat
        self.items: list[dict[str, Any]] = []  # every item read, as wire items (references resolved)
        self._by_id: dict[str, dict[str, Any]] = {}  # the items read so far that have an id
        self.messages: list[Message] = []
        self.system: list[str] = []  # system / developer text before the conversation
        self.calls: dict[str, str] = {}  # call id → tool name, of every function_call so far
        self.answered: set[str] = set()
        self._assistant: list[Any] | None = None  # the open assistant message's blocks (reasoning as `_Reasoning`)
        self._origin: Origin | None = None
        self.compaction = False  # `input` ended with a compaction trigger

    def read_stored(self, items: list[dict[str, Any]]) -> None:
        """The conversation of the stored response a request continues (read before its `input`)."""
        for i, item in enumerate(items):
            self._item(item, f"previous_response_id.{i}")
        self._close_assistant()

    def read(self, value: Any) -> None:
        if isinstance(value, str):
            if not value:
                raise invalid("input", "must not be empty")
            self._close_assistant()
            self.items.append({"type": "message", "role": "user", "content": value})
            self.messages.append(UserMessage(content=value))
            return
        if not isinstance(value, list) or not value:
            raise invalid("input", "must be a string or a non-empty array of input items")
        last = len(value) - 1
        for i, raw in enumerate(value):
            if isinstance(raw, dict) and raw.get("type") == compaction.TRIGGER:
                if i != last:
                    raise invalid(f"input.{i}.type", "a compaction_trigger must be the last input item")
                self.compaction = True  # a request control, not part of the conversation: never stored
                continue
            self._item(raw, f"input.{i}")
        self._close_assistant()
        if not self.messages:
            raise invalid("input", "needs at least one user, assistant or tool item besides system messages")

    def _referred(self, item: dict[str, Any], param: str) -> dict[str, Any]:
        """The stored item an `item_reference` names: one read before it (the conversation continued
        included), or an output item of another stored response of the key."""
        item_id = string_at(item.get("id"), f"{param}.id", max_length=256, empty=False)
        found = self._by_id.get(item_id)
        if found is None:
            response_id = response_id_of_item(item_id)
            stored = self.stored.get(response_id) if response_id else None
            found = next((i for i in stored.items if i.get("id") == item_id), None) if stored else None
        if found is None:
            raise invalid(f"{param}.id", f"item_reference {item_id!r} names no stored item of this key (stored "
                          "responses are kept with store: true, and only for the retention period)")  # fmt: skip
        return found

    def _item(self, raw: Any, param: str) -> None:
        item = object_at(raw, param)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "item_reference":
            item = self._referred(item, param)
            kind = item.get("type", "message" if "role" in item else None)
        self.items.append(item)
        if isinstance(item.get("id"), str):
            self._by_id[item["id"]] = item
        if kind == "message":
            self._message(item, param)
        elif kind == "function_call":
            self._function_call(item, param)
        elif kind == "function_call_output":
            self._function_call_output(item, param)
        elif kind == "reasoning":
            self._reasoning(item, param)
        elif kind in compaction.ITEM_TYPES:
            self._compaction(item, param)
        elif kind == "web_search_call":
            pass  # a search the vendor ran for an earlier answer (which holds what it found): nothing to replay
        elif isinstance(kind, str):
            raise invalid(f"{param}.type", f"input items of type {kind!r} are not supported (message, function_call, "
                          "function_call_output, reasoning, compaction, web_search_call and item_reference "
                          "are)")  # fmt: skip
        else:
            raise invalid(f"{param}.type", "must be a string naming the item type")

    # -- assistant-side items join one assistant message

    def _assistant_blocks(self) -> list[Any]:
        if self._assistant is None:
            self._assistant = []
            self._origin = None
        return self._assistant

    def _close_assistant(self) -> None:
        blocks, origin = self._assistant, self._origin
        self._assistant = None
        if blocks is None:
            return
        content: list[AssistantBlock] = []
        for block in blocks:
            if isinstance(block, (_Reasoning, SignedCall)):
                thinking = block.block(origin)
                if thinking is not None:
                    content.append(thinking)
            else:
                content.append(block)
        if not content:  # only reasoning that cannot be replayed (foreign and without text): nothing to send
            return
        has_calls = any(isinstance(b, ToolCall) for b in content)
        self.messages.append(
            AssistantMessage(
                content=content,
                provider=origin.provider if origin else None,
                api=origin.api if origin else None,
                model=origin.model if origin else None,
                stop_reason="toolUse" if has_calls else "stop",
            )
        )

    def _message(self, item: dict[str, Any], param: str) -> None:
        role = item.get("role")
        content = item.get("content")
        if role == "assistant":
            blocks = self._assistant_blocks()
            text = _assistant_text(content, f"{param}.content")
            if text:
                blocks.append(TextContent(text=text))
            return
        self._close_assistant()
        if role in ("system", "developer"):
            text = _input_text(content, f"{param}.content")
            if not self.messages:
                self.system.append(text)
            elif text:
                self.messages.append(
                    SystemMessage.model_validate({"content": [{"text": text}]}, context=DOOR_VALIDATION)
                )
        elif role == "user":
            self.messages.append(UserMessage(content=_user_content(content, f"{param}.content")))
        else:
            raise invalid(f"{param}.role", "must be one of user, assistant, system, developer")

    def _function_call(self, item: dict[str, Any], param: str) -> None:
        call_id = string_at(item.get("call_id"), f"{param}.call_id", max_length=256, empty=False)
        name = string_at(item.get("name"), f"{param}.name", max_length=128, empty=False)
        namespace = item.get("namespace")
        if namespace is not None:  # a function of a namespace group: its name at the vendor
            namespace = string_at(namespace, f"{param}.namespace", max_length=64, empty=False)
            name = self.namespaces.get((namespace, name), f"{namespace}{NAMESPACE_SEPARATOR}{name}")
        if call_id in self.calls:
            raise invalid(f"{param}.call_id", f"function call {call_id!r} appears more than once")
        parsed = json_arguments(item.get("arguments"), f"{param}.arguments")
        self.calls[call_id] = name
        self._assistant_blocks().append(ToolCall(id=call_id, name=name, arguments=parsed))

    def _function_call_output(self, item: dict[str, Any], param: str) -> None:
        self._close_assistant()
        call_id = string_at(item.get("call_id"), f"{param}.call_id", max_length=256, empty=False)
        if call_id not in self.calls:
            raise invalid(f"{param}.call_id", f"{call_id!r} answers no function_call of an earlier item")
        if call_id in self.answered:
            raise invalid(f"{param}.call_id", f"function call {call_id!r} is answered more than once")
        self.answered.add(call_id)
        output = item.get("output")
        if isinstance(output, str):
            content: list[TextContent | ImageContent] = [TextContent(text=output)]
        else:
            content = _parts(output, f"{param}.output", allow_empty=True)
        self.messages.append(ToolResultMessage(tool_call_id=call_id, tool_name=self.calls[call_id], content=content))

    def _compaction(self, item: dict[str, Any], param: str) -> None:
        """A compaction item this door made: its summary stands for the conversation before it."""
        self._close_assistant()
        encrypted = string_at(item.get("encrypted_content"), f"{param}.encrypted_content", max_length=10_000_000)
        summary = compaction.unwrap_summary(encrypted)
        if summary is None:
            raise unsupported(f"{param}.encrypted_content", "this compaction item was not made by this gateway: its "
                              "content is encrypted by the service that made it and cannot be read here")  # fmt: skip
        self.messages.append(UserMessage(content=compaction.SUMMARY_PREFIX + summary))

    def _reasoning(self, item: dict[str, Any], param: str) -> None:
        summary = [_typed_text(p, f"{param}.summary.{j}", "summary_text")
                   for j, p in enumerate(list_at(item.get("summary", []), f"{param}.summary"))]  # fmt: skip
        content = item.get("content")
        texts = [_typed_text(p, f"{param}.content.{j}", "reasoning_text")
                 for j, p in enumerate(list_at(content, f"{param}.content"))] if content is not None else []  # fmt: skip
        encrypted = item.get("encrypted_content")
        opaque = (
            unwrap_reasoning(string_at(encrypted, f"{param}.encrypted_content", max_length=10_000_000))
            if encrypted is not None
            else None
        )
        blocks = self._assistant_blocks()
        if opaque is not None and self._origin is None:
            self._origin = opaque.origin
        if opaque is not None and opaque.call:  # a function call's own signature: it goes on the call before it
            if blocks and isinstance(blocks[-1], ToolCall):
                blocks[-1] = SignedCall(blocks[-1], Unwrapped(opaque.origin, opaque.signature))
            return
        # Raw reasoning text when the item has it, else its summary (what this door sent for the block).
        blocks.append(_Reasoning("\n\n".join(texts) if texts else "\n\n".join(summary), opaque))


@dataclass(frozen=True, slots=True)
class _Reasoning:
    """A reasoning item as the client sent it; what it becomes depends on the assistant message's origin (the
    first origin-wrapped `encrypted_content` in it), known once the whole message is read."""

    text: str
    opaque: Opaque | None

    def block(self, origin: Origin | None) -> ThinkingContent | None:
        """The vendor's state stays only when it comes from the message's origin; redacted reasoning from
        anywhere else cannot be replayed to anyone and is left out."""
        opaque = self.opaque
        signature = opaque.signature if opaque is not None and opaque.origin == origin and opaque.signature else None
        if self.opaque is not None and self.opaque.redacted:
            return ThinkingContent(thinking="", thinking_signature=signature, redacted=True) if signature else None
        if not self.text and signature is None:
            return None
        return ThinkingContent(thinking=self.text, thinking_signature=signature)


def _typed_text(part: Any, param: str, kind: str) -> str:
    part = object_at(part, param)
    if part.get("type") != kind:
        raise invalid(f"{param}.type", f"must be {kind!r}")
    return string_at(part.get("text"), f"{param}.text", max_length=10_000_000)


def _input_text(content: Any, param: str) -> str:
    """System / developer content: a string or `input_text` parts, joined."""
    if isinstance(content, str):
        return content
    parts = list_at(content, param)
    return "".join(_typed_text(p, f"{param}.{j}", "input_text") for j, p in enumerate(parts))


def _assistant_text(content: Any, param: str) -> str:
    """Assistant content: a string or `output_text` / `refusal` parts, joined."""
    if isinstance(content, str):
        return content
    texts = []
    for j, raw in enumerate(list_at(content, param)):
        part = object_at(raw, f"{param}.{j}")
        kind = part.get("type")
        if kind in ("output_text", "input_text"):
            texts.append(string_at(part.get("text"), f"{param}.{j}.text", max_length=10_000_000))
        elif kind == "refusal":
            texts.append(string_at(part.get("refusal"), f"{param}.{j}.refusal", max_length=10_000_000))
        else:
            raise invalid(f"{param}.{j}.type", "must be output_text or refusal")
    return "".join(texts)


def _user_content(content: Any, param: str) -> str | list[TextContent | ImageContent]:
    if isinstance(content, str):
        return content
    return _parts(content, param, allow_empty=False)


def _parts(content: Any, param: str, *, allow_empty: bool) -> list[TextContent | ImageContent]:
    """`input_text` / `input_image` parts (a user message's content, a function call's output)."""
    parts = list_at(content, param)
    if not parts and not allow_empty:
        raise invalid(param, "must be a string or a non-empty array of content parts")
    blocks: list[TextContent | ImageContent] = []
    for j, raw in enumerate(parts):
        where = f"{param}.{j}"
        part = object_at(raw, where)
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            blocks.append(TextContent(text=string_at(part.get("text"), f"{where}.text", max_length=10_000_000)))
        elif kind == "input_image":
            blocks.append(_image(part, where))
        elif kind in ("input_file", "input_audio"):
            raise unsupported(f"{where}.type", f"{kind} content parts are not supported")
        else:
            raise invalid(f"{where}.type", "must be input_text or input_image")
    return blocks


def _image(part: dict[str, Any], param: str) -> ImageContent:
    if part.get("file_id") is not None:
        raise unsupported(f"{param}.file_id", "uploaded files are not supported: send the image as a data: URL")
    return data_url_image(part.get("image_url"), f"{param}.image_url")
