"""The `messages` of a Chat Completions request as the unified conversation.

`system` and `developer` messages are the system prompt. `assistant` messages the client sends back carry no
provider, so they are replayed as foreign content (thinking as text, tool call ids normalised to what the serving
vendor accepts), which is safe whatever provider serves the turn. A `tool` message must answer a call of an
earlier assistant message.
"""

from __future__ import annotations

from typing import Any

from app.contract.messages import AssistantMessage, ImageContent, TextContent, ToolCall, ToolResultMessage, UserMessage
from app.doors.fields import invalid, string_at, unsupported
from app.doors.openai_fields import data_url_image, json_arguments


def messages(value: Any) -> tuple[str | None, list[Any]]:
    """`messages`: the system prompt (its `system` and `developer` messages joined) and the conversation."""
    if not isinstance(value, list) or not value:
        raise invalid("messages", "must be a non-empty list")
    system: list[str] = []
    out: list[Any] = []
    calls: dict[str, str] = {}  # tool call id → tool name, for calls not answered yet
    for i, message in enumerate(value):
        param = f"messages.{i}"
        if not isinstance(message, dict):
            raise invalid(param, "must be an object")
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text_only(message.get("content"), f"{param}.content", allow_empty=True))
        elif role == "user":
            out.append(UserMessage(content=_user_content(message.get("content"), f"{param}.content")))
        elif role == "assistant":
            assistant = _assistant(message, param)
            calls.update({block.id: block.name for block in assistant.content if isinstance(block, ToolCall)})
            out.append(assistant)
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise invalid(f"{param}.tool_call_id", "is required (the id of the tool call this answers)")
            if call_id not in calls:
                raise invalid(
                    f"{param}.tool_call_id", f"{call_id!r} answers no tool call of an earlier assistant message"
                )
            text = _text_only(message.get("content"), f"{param}.content", allow_empty=True)
            out.append(
                ToolResultMessage(tool_call_id=call_id, tool_name=calls.pop(call_id), content=[TextContent(text=text)])
            )
        elif role == "function":
            raise unsupported(f"{param}.role", "the deprecated function role is not supported: use tool")
        else:
            raise invalid(f"{param}.role", "must be one of system, developer, user, assistant, tool")
    if not out:
        raise invalid("messages", "needs at least one user, assistant or tool message besides system messages")
    return ("\n\n".join(s for s in system if s) or None), out


def _text_only(content: Any, param: str, *, allow_empty: bool = False) -> str:
    """String content, or a list of `text` parts joined."""
    if content is None and allow_empty:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(param, "must be a string or a list of text parts")
    parts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise invalid(f"{param}.{j}", 'must be a {"type": "text", "text": "..."} part')
        parts.append(part["text"])
    return "".join(parts)


def _user_content(content: Any, param: str) -> str | list[TextContent | ImageContent]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise invalid(param, "must be a string or a non-empty list of content parts")
    blocks: list[TextContent | ImageContent] = []
    for j, part in enumerate(content):
        where = f"{param}.{j}"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise invalid(f"{where}.text", "must be a string")
            blocks.append(TextContent(text=part["text"]))
        elif kind == "image_url":
            blocks.append(_image(part.get("image_url"), f"{where}.image_url"))
        elif kind in ("input_audio", "file"):
            raise unsupported(f"{where}.type", f"{kind} content parts are not supported")
        else:
            raise invalid(f"{where}.type", 'must be "text" or "image_url"')
    return blocks


def _image(value: Any, param: str) -> ImageContent:
    return data_url_image(value.get("url") if isinstance(value, dict) else None, f"{param}.url")


def _assistant(message: dict[str, Any], param: str) -> AssistantMessage:
    blocks: list[Any] = []
    content = message.get("content")
    if content is not None:
        if isinstance(content, list):
            texts = []
            for j, part in enumerate(content):
                kind = part.get("type") if isinstance(part, dict) else None
                key = "refusal" if kind == "refusal" else "text"
                if kind not in ("text", "refusal") or not isinstance(part.get(key), str):
                    raise invalid(f"{param}.content.{j}", 'must be a "text" or "refusal" part')
                texts.append(part[key])
            text = "".join(texts)
        else:
            text = _text_only(content, f"{param}.content")
        if text:
            blocks.append(TextContent(text=text))
    refusal = message.get("refusal")
    if refusal is not None:
        blocks.append(TextContent(text=string_at(refusal, f"{param}.refusal", max_length=1_000_000)))
    tool_calls = message.get("tool_calls")
    if tool_calls is not None:
        if not isinstance(tool_calls, list):
            raise invalid(f"{param}.tool_calls", "must be a list")
        for k, call in enumerate(tool_calls):
            blocks.append(_tool_call(call, f"{param}.tool_calls.{k}"))
    if message.get("function_call") is not None:
        raise unsupported(f"{param}.function_call", "the deprecated functions API is not supported: use tool_calls")
    has_calls = any(isinstance(b, ToolCall) for b in blocks)
    # No provider: replayed as foreign content to whichever vendor serves the turn (app.providers.handoff).
    return AssistantMessage(content=blocks, stop_reason="toolUse" if has_calls else "stop")


def _tool_call(call: Any, param: str) -> ToolCall:
    if not isinstance(call, dict):
        raise invalid(param, "must be an object")
    if call.get("type", "function") != "function":
        raise unsupported(f"{param}.type", "only function tool calls are supported")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{param}.id", "must be a non-empty string")
    function = call.get("function")
    if not isinstance(function, dict):
        raise invalid(f"{param}.function", "must be an object")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise invalid(f"{param}.function.name", "must be a non-empty string")
    arguments = json_arguments(function.get("arguments"), f"{param}.function.arguments")
    return ToolCall(id=call_id, name=name, arguments=arguments)
