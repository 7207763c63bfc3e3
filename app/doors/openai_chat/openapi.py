"""The door's entry in the OpenAPI document (`app.api.openapi`): request and response shapes, in brief.

The full parameter table is docs/doors/openai-chat.md; OpenAI's own API reference describes the objects."""

from __future__ import annotations

from typing import Any

from app.doors.openai_errors import ERROR_SCHEMA
from app.doors.openapi import door_operation

PATH = "/v1/chat/completions"

_MESSAGE = {
    "type": "object",
    "required": ["role"],
    "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"description": "a string or a list of content parts (text; image_url with a data: URL)"},
        "tool_calls": {"type": "array", "items": {"type": "object"}},
        "tool_call_id": {"type": "string"},
    },
}
SCHEMAS: dict[str, Any] = {
    "ChatCompletionRequest": {
        "type": "object",
        "description": "OpenAI's Chat Completions request; every parameter is honoured or refused with 400 naming it",
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string", "description": '"<provider>/<model id>", a route or an alias'},
            "messages": {"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/ChatMessage"}},
            "stream": {"type": "boolean"},
            "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
            "tools": {"type": "array", "items": {"type": "object"}},
            "tool_choice": {},
            "max_completion_tokens": {"type": "integer", "minimum": 1},
            "max_tokens": {"type": "integer", "minimum": 1},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "top_p": {"type": "number", "minimum": 0, "maximum": 1},
            "stop": {"description": "a string or a list of strings"},
            "reasoning_effort": {"type": "string", "enum": ["minimal", "low", "medium", "high", "xhigh"]},
            "user": {"type": "string"},
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
    "ChatMessage": _MESSAGE,
    "ChatCompletion": {
        "type": "object",
        "description": "`chat.completion` (not streaming)",
        "required": ["id", "object", "created", "model", "choices"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "chat.completion"},
            "created": {"type": "integer"},
            "model": {"type": "string", "description": "the provider/model that served the turn"},
            "choices": {"type": "array", "items": {"type": "object"}},
            "usage": {"type": "object"},
        },
    },
    "OpenAIErrorBody": ERROR_SCHEMA,
}

_DESCRIPTIONS = {
    "400": "Bad input or a parameter the gateway cannot honour (named in `param`); the upstream refused the "
    "request; the vendor refused, or its safety filter blocked the prompt (`code` `refusal`)",
    "401": "Missing or invalid API key",
    "403": "The key may not use this model (or, with a budget, the model has no price)",
    "404": "Unknown model; the upstream does not know the model",
    "413": "Body too large or nested too deep",
    "415": "The body is not declared as JSON (`Content-Type: application/json`)",
    "422": "A lone UTF-16 surrogate outside message text",
    "429": "Rate limited: a gateway limit or the upstream's (see `Retry-After`)",
    "502": "The upstream failed before the answer started (or, not streaming, at any point)",
    "503": "Gateway shutting down, or the upstream overloaded (see `Retry-After`)",
    "504": "A timeout fired before the answer started",
}


def operation() -> dict[str, Any]:
    return door_operation(
        request_schema="ChatCompletionRequest",
        example={
            "model": "anthropic/claude-sonnet-4-5",
            "stream": True,
            "messages": [{"role": "user", "content": "Hello"}],
        },
        ok_description="With `stream: true`, `data:` lines of `chat.completion.chunk` objects, then "
        '`data: [DONE]` (an error after the start is one `data: {"error": …}` line instead); '
        "otherwise one `chat.completion`",
        ok_schema="ChatCompletion",
        error_schema="OpenAIErrorBody",
        errors=_DESCRIPTIONS,
    )
