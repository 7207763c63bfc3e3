"""Decode an OpenAI Chat Completions request (`POST /v1/chat/completions`) into the unified request.

Every parameter of the Chat Completions API is either honoured (mapped onto the unified request) or refused
with a 400 naming it in `param`; nothing that would change the answer is dropped silently. The full table,
parameter by parameter, is in docs/doors/openai-chat.md; `PARAMETERS` below is its source of truth in code.

History: `assistant` messages the client sends back carry no provider, so they are replayed as foreign
content (thinking as text, tool call ids normalised to what the serving vendor accepts), which is safe
whatever provider serves the turn. A `tool` message must answer a call of an earlier assistant message.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import orjson
from pydantic import ValidationError

from app.doors.validation import ANY_INDEX, validation_error
from app.doors.errors import BadRequest
from app.contract.messages import (
    DOOR_VALIDATION,
    AssistantMessage,
    Context,
    ImageContent,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.contract.request import StreamOptions, StreamRequest, ToolChoiceTool
from app.doors.base import DoorRequest

# Where a person's text lives in a Chat Completions body (lone surrogates are removed there).
PROSE_PATHS: tuple[tuple[str, ...], ...] = (
    ("messages", ANY_INDEX, "content"),
    ("messages", ANY_INDEX, "content", ANY_INDEX, "text"),
)
REASONING_EFFORTS = ("minimal", "low", "medium", "high", "xhigh")
MAX_STOP, MAX_STOP_LENGTH = 16, 1000
MAX_TOKENS = 1_000_000
_DATA_URL = re.compile(r"^data:(image/[A-Za-z0-9.+-]+);base64,(.*)$", re.S)


@dataclass(frozen=True, slots=True)
class ChatRequest(DoorRequest):
    """The decoded request and what the encoder needs: usage chunk wanted, the model as the client named it."""

    include_usage: bool = False
    client_model: str = ""
    stream_tool_arguments: bool = False  # `X-Gateway-Tool-Arguments: stream`: argument fragments, not whole calls


def invalid(param: str, message: str) -> BadRequest:
    return BadRequest(400, "invalid_request_error", f"{param}: {message}" if param else message, param=param or None)


def unsupported(param: str, message: str) -> BadRequest:
    """A parameter the gateway understands but cannot honour (the answer would differ from what was asked)."""
    return BadRequest(400, "unsupported_parameter", f"{param}: {message}", param=param)


# ---------------------------------------------------------------------------------------------- parameters


def accept_default(*defaults: Any) -> Callable[[str, Any], None]:
    """A parameter accepted only at its default value(s) (or null); anything else is refused."""

    def check(param: str, value: Any) -> None:
        # `True == 1` in Python: a boolean only matches a boolean default, a number only a number.
        if value is not None and not any(value == d and isinstance(value, bool) == isinstance(d, bool) for d in defaults):
            shown = " or ".join(orjson.dumps(d).decode() for d in defaults)
            raise unsupported(param, f"only {shown} is supported by this gateway (got {orjson.dumps(value).decode()})")

    return check


def refuse(reason: str) -> Callable[[str, Any], None]:
    def check(param: str, value: Any) -> None:
        if value is not None:
            raise unsupported(param, reason)

    return check


def ignore(param: str, value: Any) -> None:
    """Accepted; does not change the answer (each door lists these in its page under docs/doors/)."""


# Parameters handled outside this table (mapped onto the unified request) are listed with None.
PARAMETERS: dict[str, Callable[[str, Any], None] | None] = {
    "model": None,
    "messages": None,
    "tools": None,
    "tool_choice": None,
    "max_completion_tokens": None,
    "max_tokens": None,
    "temperature": None,
    "top_p": None,
    "stop": None,
    "reasoning_effort": None,
    "stream": None,
    "stream_options": None,
    "user": None,
    "metadata": None,
    "safety_identifier": None,
    "prompt_cache_key": None,
    "n": accept_default(1),
    "parallel_tool_calls": accept_default(True),
    "logprobs": accept_default(False),
    "top_logprobs": accept_default(0),
    "frequency_penalty": accept_default(0, 0.0),
    "presence_penalty": accept_default(0, 0.0),
    "logit_bias": accept_default({}),
    "seed": refuse("deterministic sampling is not offered across vendors"),
    "response_format": None,
    "modalities": accept_default(["text"]),
    "audio": refuse("audio output is not supported"),
    "prediction": refuse("predicted outputs are not supported"),
    "web_search_options": refuse("web search is not supported"),
    "verbosity": refuse("verbosity is not supported across vendors"),
    "service_tier": accept_default("auto", "default"),
    "store": ignore,  # the gateway keeps its own record of every request (GET /v1/requests/{id})
    "prompt_cache_retention": ignore,
    "prompt_cache_options": ignore,
    "moderation": refuse("moderation policies are not supported"),
    "functions": refuse("the deprecated functions API is not supported: use tools"),
    "function_call": refuse("the deprecated functions API is not supported: use tool_choice"),
}


TOOL_ARGUMENTS_HEADER = "x-gateway-tool-arguments"
TOOL_ARGUMENTS_MODES = {"whole": False, "stream": True}  # header value → stream the argument fragments


def decode(body: dict[str, Any], headers: Mapping[str, str]) -> ChatRequest:
    mode = headers.get(TOOL_ARGUMENTS_HEADER, "whole").strip().lower()
    if mode not in TOOL_ARGUMENTS_MODES:
        raise invalid("X-Gateway-Tool-Arguments", "must be 'whole' (the default: each tool call sent once its "
                      "arguments are complete) or 'stream' (argument fragments as they arrive)")
    try:
        request = _decode(body)
    except ValidationError as exc:  # a limit of the unified request the checks here did not name first
        raise _validation(exc) from None
    return replace(request, stream_tool_arguments=TOOL_ARGUMENTS_MODES[mode])


def _decode(body: dict[str, Any]) -> ChatRequest:
    for key, value in body.items():
        if key not in PARAMETERS:
            raise invalid(key, "unrecognized request argument")
        check = PARAMETERS[key]
        if check is not None:
            check(key, value)

    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model", "a model name is required (a string)")
    stream = _bool(body, "stream", False)
    include_usage = False
    stream_options = body.get("stream_options")
    if stream_options is not None:
        if not isinstance(stream_options, dict):
            raise invalid("stream_options", "must be an object")
        for key in stream_options:
            if key not in ("include_usage", "include_obfuscation"):
                raise invalid(f"stream_options.{key}", "unrecognized stream option")
        include_usage = _bool(stream_options, "include_usage", False, "stream_options.")
        _bool(stream_options, "include_obfuscation", False, "stream_options.")
        if not stream:
            raise invalid("stream_options", "only allowed when stream is true")
    tools = _tools(body.get("tools"))
    system, messages = _messages(body.get("messages"))
    options = _options(body, tools)
    unified = StreamRequest(
        model=model, context=Context(system_prompt=system, messages=messages, tools=tools or None), options=options
    )
    return ChatRequest(unified=unified, stream=stream, include_usage=include_usage, client_model=model)


def _validation(exc: ValidationError) -> BadRequest:
    error = validation_error(exc.errors(include_url=False))
    return BadRequest(400, "invalid_request_error", error.message, param=error.param)


def _bool(body: dict[str, Any], key: str, default: bool, prefix: str = "") -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(prefix + key, "must be a boolean")
    return value


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(key, "must be a number")
    if not low <= value <= high:
        raise invalid(key, f"must be between {low:g} and {high:g}")
    return float(value)


def _int(body: dict[str, Any], key: str, high: int = MAX_TOKENS) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(key, "must be an integer")
    if not 1 <= value <= high:
        raise invalid(key, f"must be between 1 and {high}")
    return value


def _string(value: Any, param: str, *, max_length: int = 512) -> str:
    if not isinstance(value, str):
        raise invalid(param, "must be a string")
    if len(value) > max_length:
        raise invalid(param, f"must be at most {max_length} characters")
    return value


# What `response_format` / `text.format` `{"type": "json_object"}` decodes to: JSON mode, no schema.
JSON_OBJECT: dict[str, Any] = {}


def structured_output(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The unified options that ask every vendor for output following `schema` (None: no structured output;
    `JSON_OBJECT`: JSON mode, the unified `jsonObject`): `json_schema`, and for an Anthropic upstream the Messages
    field it is (`output_config.format`)."""
    if schema is JSON_OBJECT:
        return {"json_object": True}
    if schema is None:
        return {}
    return {"json_schema": schema, "anthropic": {"output_config": {"format": {"type": "json_schema", "schema": schema}}}}


def _json_schema(value: Any) -> dict[str, Any] | None:
    """`response_format`: `text` (the default) or `json_schema`, whose schema every vendor's structured output
    gets (as the Responses door's `text.format`); `json_object` is JSON mode (`JSON_OBJECT`, the unified
    `jsonObject`), which a vendor without it refuses."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise invalid("response_format", 'must be an object with a "type"')
    kind = value["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return JSON_OBJECT
    if kind != "json_schema":
        raise invalid("response_format.type", "must be text, json_object or json_schema")
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise invalid("response_format.json_schema", "must be an object with a name and a schema")
    for key in spec:
        if key not in ("name", "schema", "strict", "description"):
            raise invalid(f"response_format.json_schema.{key}", "unrecognized json_schema option")
    _string(spec.get("name"), "response_format.json_schema.name", max_length=64)
    if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
        raise invalid("response_format.json_schema.strict", "must be a boolean")
    if spec.get("description") is not None:
        _string(spec["description"], "response_format.json_schema.description", max_length=4096)
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise invalid("response_format.json_schema.schema", "must be an object (a JSON schema)")
    return schema


def _options(body: dict[str, Any], tools: list[Tool]) -> StreamOptions:
    max_tokens = _int(body, "max_completion_tokens")
    legacy = _int(body, "max_tokens")
    if max_tokens is not None and legacy is not None and max_tokens != legacy:
        raise invalid("max_tokens", "give max_completion_tokens or max_tokens, not two different values")
    reasoning = body.get("reasoning_effort")
    if reasoning is not None and reasoning not in REASONING_EFFORTS:
        if isinstance(reasoning, str) and reasoning in ("none", "max"):
            raise unsupported("reasoning_effort", f"{reasoning!r} is not offered across vendors; use one of {', '.join(REASONING_EFFORTS)}")
        raise invalid("reasoning_effort", f"must be one of {', '.join(REASONING_EFFORTS)}")
    metadata: dict[str, Any] = {}
    raw_metadata = body.get("metadata")
    if raw_metadata is not None:
        if not isinstance(raw_metadata, dict) or not all(isinstance(v, str) for v in raw_metadata.values()):
            raise invalid("metadata", "must be an object of string values")
        metadata.update(raw_metadata)
    for key in ("user", "safety_identifier"):
        if body.get(key) is not None:
            # The end user's id, passed to vendors that take one (Anthropic metadata.user_id).
            metadata.setdefault("userId", _string(body[key], key))
    session = body.get("prompt_cache_key")
    json_schema = _json_schema(body.get("response_format"))
    return StreamOptions.model_validate(
        {
            "max_tokens": max_tokens if max_tokens is not None else legacy,
            "temperature": _number(body, "temperature", 0, 2),
            "top_p": _number(body, "top_p", 0, 1),
            "reasoning": reasoning,
            "stop": _stop(body.get("stop")),
            "tool_choice": _tool_choice(body.get("tool_choice"), tools),
            "metadata": metadata or None,
            "session_id": _string(session, "prompt_cache_key", max_length=256) if session is not None else None,
            **structured_output(json_schema),
        },
        context=DOOR_VALIDATION,
    )


def _stop(value: Any) -> list[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_LENGTH for s in items):
        raise invalid("stop", f"must be a string or a list of strings of 1-{MAX_STOP_LENGTH} characters")
    if len(items) > MAX_STOP:
        raise invalid("stop", f"at most {MAX_STOP} stop sequences")
    return items or None


def _tool_choice(value: Any, tools: list[Tool]) -> Any:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        if value == "required" and not tools:
            raise invalid("tool_choice", '"required" needs tools')
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise invalid("tool_choice.function.name", "must name a tool")
        if name not in {t.name for t in tools}:
            raise invalid("tool_choice.function.name", f"no tool named {name!r} in tools")
        return ToolChoiceTool(type="tool", name=name)
    if isinstance(value, dict) and value.get("type") in ("allowed_tools", "custom"):
        raise unsupported("tool_choice", f"type {value['type']!r} is not supported")
    raise invalid("tool_choice", 'must be "auto", "none", "required" or {"type": "function", "function": {"name"}}')


def _tools(value: Any) -> list[Tool]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("tools", "must be a list")
    tools: list[Tool] = []
    names: set[str] = set()
    for i, item in enumerate(value):
        param = f"tools.{i}"
        if not isinstance(item, dict):
            raise invalid(param, "must be an object")
        if item.get("type") != "function":
            if item.get("type") == "custom":
                raise unsupported(f"{param}.type", "custom tools are not supported: use function tools")
            raise invalid(f"{param}.type", 'must be "function"')
        function = item.get("function")
        if not isinstance(function, dict):
            raise invalid(f"{param}.function", "must be an object")
        name = function.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", name):
            raise invalid(f"{param}.function.name", "must be 1-128 letters, digits, _ . : or -")
        if name in names:
            raise invalid(f"{param}.function.name", f"tool {name!r} is defined twice")
        names.add(name)
        description = function.get("description")
        if description is not None:
            _string(description, f"{param}.function.description", max_length=100_000)
        parameters = function.get("parameters")
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        elif not isinstance(parameters, dict):
            raise invalid(f"{param}.function.parameters", "must be a JSON Schema object")
        strict = function.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise invalid(f"{param}.function.strict", "must be a boolean")
        tools.append(Tool(name=name, description=description or "", parameters=parameters))
    return tools


# ---------------------------------------------------------------------------------------------- messages


def _messages(value: Any) -> tuple[str | None, list[Any]]:
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
                raise invalid(f"{param}.tool_call_id", f"{call_id!r} answers no tool call of an earlier assistant message")
            text = _text_only(message.get("content"), f"{param}.content", allow_empty=True)
            out.append(ToolResultMessage(tool_call_id=call_id, tool_name=calls.pop(call_id), content=[TextContent(text=text)]))
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
    url = value.get("url") if isinstance(value, dict) else None
    if not isinstance(url, str):
        raise invalid(f"{param}.url", "must be a string")
    if url.startswith(("http://", "https://")):
        raise unsupported(
            f"{param}.url", "the gateway never fetches URLs: send the image inline as a data:image/...;base64, URL"
        )
    match = _DATA_URL.match(url)
    if match is None:
        raise invalid(f"{param}.url", "must be a data:image/<type>;base64,<data> URL")
    data = match.group(2)
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(f"{param}.url", "the data URL's payload is not valid base64") from None
    if not data:
        raise invalid(f"{param}.url", "the data URL is empty")
    return ImageContent(data=data, mime_type=match.group(1).lower())


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
        blocks.append(TextContent(text=_string(refusal, f"{param}.refusal", max_length=1_000_000)))
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
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        raise invalid(f"{param}.function.arguments", "must be a string of JSON")
    try:
        parsed = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise invalid(f"{param}.function.arguments", f"is not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise invalid(f"{param}.function.arguments", "must be a JSON object")
    return ToolCall(id=call_id, name=name, arguments=parsed)


def error_body(error: BadRequest) -> dict[str, Any]:
    """OpenAI's error shape: `{"error": {"message", "type", "param", "code"}}`."""
    return {"error": {"message": error.message, "type": _ERROR_TYPES.get(error.status, error.type), "param": error.param,
                      "code": error.type}}  # fmt: skip


# The `type` OpenAI uses per status; the gateway's own kind goes in `code`.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "invalid_request_error", 413: "invalid_request_error", 422: "invalid_request_error",
                429: "rate_limit_error", 503: "server_error"}  # fmt: skip
