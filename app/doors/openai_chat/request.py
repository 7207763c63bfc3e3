"""Decode an OpenAI Chat Completions request (`POST /v1/chat/completions`) into the unified request.

Every parameter of the Chat Completions API is either honoured (mapped onto the unified request) or refused
with a 400 naming it in `param`; nothing that would change the answer is dropped silently. The full table,
parameter by parameter, is in docs/doors/openai-chat.md; `PARAMETERS` below is its source of truth in code.

`messages` is read by `conversation.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from pydantic import ValidationError

from app.contract.messages import DOOR_VALIDATION, Context, Tool
from app.contract.request import HostedToolsOption, StreamOptions, StreamRequest, ToolChoiceTool, WebSearch
from app.doors.base import DoorRequest
from app.doors.errors import BadRequest
from app.doors.fields import bool_or, integer_at, invalid, number_at, object_at, string_at, unsupported
from app.doors.openai_chat.conversation import messages
from app.doors.openai_fields import accept_default, metadata, refuse, session_id, stream_options
from app.doors.structured_output import JSON_OBJECT, structured_output
from app.doors.validation import ANY_INDEX, validation_error

# Where a person's text lives in a Chat Completions body (lone surrogates are removed there).
PROSE_PATHS: tuple[tuple[str, ...], ...] = (
    ("messages", ANY_INDEX, "content"),
    ("messages", ANY_INDEX, "content", ANY_INDEX, "text"),
)
REASONING_EFFORTS = ("minimal", "low", "medium", "high", "xhigh")
MAX_STOP, MAX_STOP_LENGTH = 16, 1000
MAX_TOKENS = 1_000_000


@dataclass(frozen=True, slots=True)
class ChatRequest(DoorRequest):
    """The decoded request and what the encoder needs: usage chunk wanted, the model as the client named it."""

    include_usage: bool = False
    client_model: str = ""
    stream_tool_arguments: bool = False  # `X-Gateway-Tool-Arguments: stream`: argument fragments, not whole calls


# ---------------------------------------------------------------------------------------------- parameters


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
    "n": None,  # `UNHONOURED`
    "parallel_tool_calls": accept_default(True),
    "logprobs": None,
    "top_logprobs": None,
    # The sampling fields (`app.providers.sampling`): to the vendors that honour them, else a 400 or dropped.
    "frequency_penalty": None,
    "presence_penalty": None,
    "logit_bias": None,
    "seed": None,
    "drop_params": None,  # as LiteLLM's: drop what the serving vendor cannot honour instead of a 400
    "response_format": None,
    "modalities": accept_default(["text"]),
    "audio": refuse("audio output is not supported"),
    "prediction": refuse("predicted outputs are not supported"),
    "web_search_options": None,  # the hosted web search (`app.providers.hosted`): served or dropped, never refused
    "verbosity": refuse("verbosity is not supported across vendors"),
    "service_tier": accept_default("auto", "default"),
    "store": ignore,  # the gateway keeps its own record of every request (GET /v1/requests/{id})
    "prompt_cache_retention": ignore,
    "prompt_cache_options": ignore,
    "moderation": refuse("moderation policies are not supported"),
    "functions": refuse("the deprecated functions API is not supported: use tools"),
    "function_call": refuse("the deprecated functions API is not supported: use tool_choice"),
}


# Fields no vendor honours through the gateway (one answer per request; no token log-probabilities on the event
# stream), with the value that asks for nothing: another is refused with a 400, or dropped with `drop_params`.
UNHONOURED: dict[str, Any] = {"n": 1, "logprobs": False, "top_logprobs": 0}


def _unhonoured(body: dict[str, Any]) -> list[str] | None:
    asked = [
        name
        for name, default in UNHONOURED.items()
        if body.get(name) is not None
        and not (body[name] == default and isinstance(body[name], bool) == isinstance(default, bool))
    ]
    return asked or None


def _logit_bias(value: Any) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()
    ):
        raise invalid("logit_bias", "must be an object of token ids to numbers from -100 to 100")
    return {str(k): float(v) for k, v in value.items()} or None


TOOL_ARGUMENTS_HEADER = "x-gateway-tool-arguments"
TOOL_ARGUMENTS_MODES = {"whole": False, "stream": True}  # header value → stream the argument fragments
STREAM_OPTIONS = ("include_usage", "include_obfuscation")


def decode(body: dict[str, Any], headers: Mapping[str, str]) -> ChatRequest:
    mode = headers.get(TOOL_ARGUMENTS_HEADER, "whole").strip().lower()
    if mode not in TOOL_ARGUMENTS_MODES:
        raise invalid(
            "X-Gateway-Tool-Arguments",
            "must be 'whole' (the default: each tool call sent once its "
            "arguments are complete) or 'stream' (argument fragments as they arrive)",
        )
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
    stream = bool_or(body.get("stream"), "stream", False)
    include_usage = stream_options(body.get("stream_options"), stream, STREAM_OPTIONS).get("include_usage", False)
    tools = _tools(body.get("tools"))
    system, conversation = messages(body.get("messages"))
    options = _options(body, tools)
    unified = StreamRequest(
        model=model, context=Context(system_prompt=system, messages=conversation, tools=tools or None), options=options
    )
    return ChatRequest(unified=unified, stream=stream, include_usage=include_usage, client_model=model)


def _validation(exc: ValidationError) -> BadRequest:
    error = validation_error(exc.errors(include_url=False))
    return BadRequest(400, "invalid_request_error", error.message, param=error.param)


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    return None if body.get(key) is None else number_at(body[key], key, low, high)


def _tokens(body: dict[str, Any], key: str) -> int | None:
    return None if body.get(key) is None else integer_at(body[key], key, 1, MAX_TOKENS)


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
    string_at(spec.get("name"), "response_format.json_schema.name", max_length=64)
    if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
        raise invalid("response_format.json_schema.strict", "must be a boolean")
    if spec.get("description") is not None:
        string_at(spec["description"], "response_format.json_schema.description", max_length=4096)
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise invalid("response_format.json_schema.schema", "must be an object (a JSON schema)")
    return schema


def _options(body: dict[str, Any], tools: list[Tool]) -> StreamOptions:
    max_tokens = _tokens(body, "max_completion_tokens")
    legacy = _tokens(body, "max_tokens")
    if max_tokens is not None and legacy is not None and max_tokens != legacy:
        raise invalid("max_tokens", "give max_completion_tokens or max_tokens, not two different values")
    reasoning = body.get("reasoning_effort")
    if reasoning is not None and reasoning not in REASONING_EFFORTS:
        if isinstance(reasoning, str) and reasoning in ("none", "max"):
            raise unsupported(
                "reasoning_effort",
                f"{reasoning!r} is not offered across vendors; use one of {', '.join(REASONING_EFFORTS)}",
            )
        raise invalid("reasoning_effort", f"must be one of {', '.join(REASONING_EFFORTS)}")
    json_schema = _json_schema(body.get("response_format"))
    return StreamOptions.model_validate(
        {
            "max_tokens": max_tokens if max_tokens is not None else legacy,
            "temperature": _number(body, "temperature", 0, 2),
            "top_p": _number(body, "top_p", 0, 1),
            "reasoning": reasoning,
            "stop": _stop(body.get("stop")),
            "tool_choice": _tool_choice(body.get("tool_choice"), tools),
            "metadata": metadata(body),
            "session_id": session_id(body),
            "seed": None if body.get("seed") is None else integer_at(body["seed"], "seed", -(2**63)),
            "frequency_penalty": _number(body, "frequency_penalty", -2, 2),
            "presence_penalty": _number(body, "presence_penalty", -2, 2),
            "logit_bias": _logit_bias(body.get("logit_bias")),
            "drop_params": bool_or(body.get("drop_params"), "drop_params", False),
            "unhonoured": _unhonoured(body),
            "hosted_tools": _web_search(body.get("web_search_options")),
            **structured_output(json_schema),
        },
        context=DOOR_VALIDATION,
    )


def _web_search(value: Any) -> HostedToolsOption | None:
    """`web_search_options`: the serving vendor's own web search where the catalog allows it, else the turn names
    it dropped (`X-Gateway-Dropped-Tools: web_search`); its `search_context_size` and `user_location` are not
    carried (docs/adapters/web-search.md)."""
    if value is None:
        return None
    object_at(value, "web_search_options")
    return HostedToolsOption(web_search=WebSearch())


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
            string_at(description, f"{param}.function.description", max_length=100_000)
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
