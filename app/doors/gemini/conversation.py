"""The `contents` (and `systemInstruction`) of a Gemini request as the unified conversation.

A model turn's consecutive text parts (and consecutive thought parts) are one block, as a streamed answer comes
back in many parts. Each model turn's `functionCall`s are answered by the `functionResponse` parts of the user
turn after it. Thought signatures come back origin-wrapped (`signatures.py`): one stays only when it comes from
the turn's origin, and one the door did not wrap is never sent to a vendor.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pydantic import ValidationError

from app.contract.messages import (
    DOOR_VALIDATION,
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.doors.fields import fail, list_at, object_at, string_at
from app.doors.gemini.proto_json import field_names, value_of
from app.doors.gemini.signatures import unwrap_signature, unwrap_thinking_signature
from app.doors.signatures import Origin, SignedThinking, Unwrapped


def _text_part(part: dict[str, Any], path: str) -> str:
    return string_at(part.get("text"), f"{path}.text")


def _signature(part: dict[str, Any], path: str) -> Unwrapped | None:
    """A part's `thoughtSignature` when the door wrapped it (`gw1.`…); None for one it did not (say one a client
    got from Gemini directly), which has no known origin and is never sent to a vendor."""
    value = value_of(part, "thoughtSignature")
    if value is None:
        return None
    return unwrap_signature(string_at(value, f"{path}.thoughtSignature"))


def _carried_thinking(part: dict[str, Any], path: str) -> tuple[Origin, list[SignedThinking]] | None:
    """The signed thinking a functionCall part's `thoughtSignature` carries (the encoder put the turn's thinking
    on its first call: `wrap_thinking_signature`); None for any other signature."""
    value = value_of(part, "thoughtSignature")
    if value is None:
        return None
    return unwrap_thinking_signature(string_at(value, f"{path}.thoughtSignature"))


def _image(part: dict[str, Any], path: str) -> ImageContent:
    data = object_at(value_of(part, "inlineData"), f"{path}.inlineData")
    mime = string_at(value_of(data, "mimeType"), f"{path}.inlineData.mimeType", empty=False)
    if not mime.startswith("image/"):
        fail(f"{path}.inlineData.mimeType", f"only images are supported inline, not {mime!r}")
    raw = string_at(data.get("data"), f"{path}.inlineData.data", empty=False)
    standard = raw.replace("-", "+").replace("_", "/")  # proto JSON bytes may come in the URL-safe alphabet
    try:
        base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        fail(f"{path}.inlineData.data", "must be base64")
    raw = standard + "=" * (-len(standard) % 4)
    try:
        return ImageContent.model_validate({"data": raw, "mime_type": mime}, context=DOOR_VALIDATION)
    except ValidationError:
        fail(f"{path}.inlineData.mimeType", f"{mime!r} is not an image type")


def _refuse_part(part: dict[str, Any], path: str) -> NoReturn:
    kinds = sorted(
        field_names(part) - {"thought", "thoughtSignature", "partMetadata", "videoMetadata", "mediaResolution"}
    )
    kind = kinds[0] if kinds else "?"
    if kind == "fileData":
        fail(f"{path}.fileData", "file URIs are not supported: the gateway never fetches files; send inlineData")
    fail(f"{path}.{kind}" if kinds else path, "this part kind is not supported by the gateway")


def _result_text(response: Any, path: str) -> tuple[str, bool]:
    """A `functionResponse.response` as the result text other vendors read and whether it is an error: the text
    of `{"output": …}` or `{"error": …}` (what the Gemini SDKs and the gateway's own Gemini adapter write), any
    other object as JSON."""
    response = object_at(response if response is not None else {}, f"{path}.response")
    if set(response) == {"output"} and isinstance(response["output"], str):
        return response["output"], False
    if set(response) == {"error"} and isinstance(response["error"], str):
        return response["error"], True
    return json.dumps(response, ensure_ascii=False, separators=(",", ":")), False


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    answered: bool = False


class Conversation:
    """Converts `contents` in order: each model turn's calls are answered by the `functionResponse` parts of
    the user turn after it, by id where the client sends one, else in order by name (older Gemini clients)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.open_calls: list[_Call] = []
        self.seen_ids: set[str] = set()

    def add(self, raw: Any, path: str) -> str:
        content = object_at(raw, path)
        role = content.get("role") or "user"
        parts = list_at(content.get("parts"), f"{path}.parts")
        if not parts:
            fail(f"{path}.parts", "must not be empty")
        if role in ("user", "function"):  # `function`: the role older clients give function responses
            self._user(parts, f"{path}.parts")
        elif role == "model":
            self._model(parts, f"{path}.parts", path)
        else:
            fail(f"{path}.role", f"must be 'user' or 'model', not {role!r}")
        return "model" if role == "model" else "user"

    def _user(self, parts: list[Any], path: str) -> None:
        calls, self.open_calls = self.open_calls, []
        results: list[ToolResultMessage] = []
        blocks: list[TextContent | ImageContent] = []
        for index, raw in enumerate(parts):
            where = f"{path}.{index}"
            part = object_at(raw, where)
            if part.get("text") is not None:
                text = _text_part(part, where)
                if text:
                    blocks.append(TextContent(text=text))
            elif value_of(part, "inlineData") is not None:
                blocks.append(_image(part, where))
            elif value_of(part, "functionResponse") is not None:
                results.append(self._result(object_at(value_of(part, "functionResponse"), f"{where}.functionResponse"),
                                            calls, f"{where}.functionResponse"))  # fmt: skip
            else:
                _refuse_part(part, where)
        self.messages.extend(results)
        if blocks:
            self.messages.append(UserMessage(content=blocks))

    def _result(self, response: dict[str, Any], calls: list[_Call], path: str) -> ToolResultMessage:
        name = string_at(response.get("name"), f"{path}.name", empty=False)
        call_id = response.get("id")
        if call_id is not None:
            call_id = string_at(call_id, f"{path}.id")
        call = None
        if call_id:
            call = next((c for c in calls if c.id == call_id and not c.answered), None)
            if call is None:
                fail(f"{path}.id", f"{call_id!r} answers no functionCall of the model turn before")
        else:  # matched by name, in order
            call = next((c for c in calls if c.name == name and not c.answered), None)
            if call is None:
                fail(f"{path}.name", f"{name!r} answers no functionCall of the model turn before")
        call.answered = True
        text, is_error = _result_text(response.get("response"), path)
        content: list[TextContent | ImageContent] = [TextContent(text=text)]
        for index, raw in enumerate(list_at(response.get("parts") or [], f"{path}.parts")):
            where = f"{path}.parts.{index}"
            part = object_at(raw, where)
            if value_of(part, "inlineData") is None:
                fail(where, "a function response's parts must be inlineData images")
            content.append(_image(part, where))
        return ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=content, is_error=is_error)

    def _model(self, parts: list[Any], path: str, content_path: str) -> None:
        """A model turn: consecutive text parts (and consecutive thought parts) are one block, as a streamed
        answer comes back in many parts; a part with a signature ends its block. Signatures are kept only when
        they come from the turn's origin (the first wrapped signature in it)."""
        self.open_calls = []
        origin: Origin | None = None
        blocks: list[_Block | _SignedCall] = []
        open_block: _Block | None = None
        for index, raw in enumerate(parts):
            where = f"{path}.{index}"
            part = object_at(raw, where)
            signed = _signature(part, where)
            if signed is not None and origin is None:
                origin = signed.origin
            call = value_of(part, "functionCall")
            if call is not None:
                open_block = None
                if (carried := _carried_thinking(part, where)) is not None:
                    # The turn's signed thinking, rebuilt before the call unless the client kept its thought parts.
                    carrier, thoughts = carried
                    origin = origin or carrier
                    kept = {b.signed.signature for b in blocks if isinstance(b, _Block) and b.signed is not None}
                    blocks.extend(_Block(True, [t.thinking], Unwrapped(carrier, t.signature), t.redacted)
                                  for t in thoughts if t.signature not in kept)  # fmt: skip
                blocks.append(
                    self._call(
                        object_at(call, f"{where}.functionCall"), signed, f"{where}.functionCall", content_path, index
                    )
                )
                continue
            if part.get("text") is None:
                if value_of(part, "thoughtSignature") is not None and len(field_names(part) - {"thought"}) == 1:
                    text = ""  # a signature on a part of its own
                else:
                    _refuse_part(part, where)
            else:
                text = _text_part(part, where)
            thought = part.get("thought") is True
            if open_block is None or open_block.thought != thought:
                open_block = _Block(thought)
                blocks.append(open_block)
            open_block.text.append(text)
            if signed is not None or value_of(part, "thoughtSignature") is not None:
                open_block.signed = signed
                open_block = None
        content = [b.block(origin) for b in blocks]
        self.messages.append(AssistantMessage(
            content=[b for b in content if b is not None],
            provider=origin.provider if origin else None,
            api=origin.api if origin else None,
            model=origin.model if origin else None,
            stop_reason="toolUse" if self.open_calls else "stop",
        ))  # fmt: skip

    def _call(
        self, call: dict[str, Any], signed: Unwrapped | None, path: str, content_path: str, index: int
    ) -> _SignedCall:
        name = string_at(call.get("name"), f"{path}.name", empty=False)
        call_id = call.get("id")
        call_id = string_at(call_id, f"{path}.id") if call_id is not None else ""
        if not call_id:  # Gemini 2.x names no id: one the conversation keeps on every turn
            call_id = f"call_{content_path.rpartition('.')[2]}_{index}"
        if call_id in self.seen_ids:
            fail(f"{path}.id", f"functionCall id {call_id!r} appears more than once")
        self.seen_ids.add(call_id)
        args = object_at(call.get("args") if call.get("args") is not None else {}, f"{path}.args")
        self.open_calls.append(_Call(call_id, name))
        return _SignedCall(call_id, name, args, signed)


@dataclass(frozen=True, slots=True)
class _SignedCall:
    """A functionCall part with its signature, whose fate depends on the turn's origin (known at its end)."""

    id: str
    name: str
    arguments: dict[str, Any]
    signed: Unwrapped | None

    def block(self, origin: Origin | None) -> ToolCall:
        own = self.signed is not None and self.signed.origin == origin and self.signed.signature
        signature = self.signed.signature if own and self.signed is not None else None
        return ToolCall(id=self.id, name=self.name, arguments=self.arguments, thought_signature=signature)


@dataclass(slots=True)
class _Block:
    thought: bool
    text: list[str] = field(default_factory=list)
    signed: Unwrapped | None = None
    redacted: bool = False  # rebuilt from a call's carried thinking: Anthropic's redacted thinking

    def block(self, origin: Origin | None) -> TextContent | ThinkingContent | None:
        signed = self.signed
        signature = signed.signature if signed is not None and signed.origin == origin and signed.signature else None
        text = "".join(self.text)
        if self.thought:
            if self.redacted:
                return (
                    ThinkingContent(thinking=text, thinking_signature=signature, redacted=True) if signature else None
                )
            return ThinkingContent(thinking=text, thinking_signature=signature) if text or signature else None
        return TextContent(text=text, text_signature=signature) if text or signature else None


def system_instruction(value: Any) -> str | None:
    """`systemInstruction`: a string or a content of text parts, joined."""
    if isinstance(value, str):
        return value or None
    content = object_at(value, "systemInstruction")
    texts = []
    for index, raw in enumerate(list_at(content.get("parts") or [], "systemInstruction.parts")):
        part = object_at(raw, f"systemInstruction.parts.{index}")
        if part.get("text") is None:
            fail(f"systemInstruction.parts.{index}", "system instruction parts must be text")
        texts.append(_text_part(part, f"systemInstruction.parts.{index}"))
    return "\n\n".join(t for t in texts if t) or None
