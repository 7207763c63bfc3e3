"""The door's entry in the OpenAPI document (`app.api.openapi`): request and response shapes, in brief.

The full field table is docs/doors/anthropic-messages.md; Anthropic's own API reference describes the objects."""

from __future__ import annotations

from typing import Any

from app.doors.openapi import door_operation, ref

PATH = "/v1/messages"

_ERROR = {
    "type": "object",
    "required": ["type", "error"],
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {
                "type": {
                    "type": "string",
                    "description": "invalid_request_error, authentication_error, permission_error, not_found_error, "
                    "request_too_large, rate_limit_error, api_error, overloaded_error, timeout_error",
                },
                "message": {"type": "string", "description": "starts with the field at fault for a refused request"},
            },
        },
        "request_id": {"type": "string"},
    },
}
SCHEMAS: dict[str, Any] = {
    "MessagesRequest": {
        "type": "object",
        "description": "Anthropic's Messages request; every field is honoured or refused with 400 naming it",
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string", "description": '"<provider>/<model id>", a route, an alias or a bare model id'},
            "max_tokens": {"type": "integer", "minimum": 1},
            "system": {"description": "a string or a list of text blocks"},
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["role", "content"],
                    "properties": {
                        "role": {"type": "string", "enum": ["user", "assistant"]},
                        "content": {
                            "description": "a string or blocks: text, image (base64), tool_use, tool_result, "
                            "thinking, redacted_thinking"
                        },
                    },
                },
            },
            "tools": {"type": "array", "items": {"type": "object"}},
            "tool_choice": {"type": "object"},
            "thinking": {
                "type": "object",
                "description": "{type: enabled, budget_tokens} | {type: adaptive} | {type: disabled}",
            },
            "temperature": {"type": "number", "minimum": 0, "maximum": 1},
            "top_p": {"type": "number", "minimum": 0, "maximum": 1},
            "stop_sequences": {"type": "array", "items": {"type": "string"}, "maxItems": 16},
            "metadata": {"type": "object", "properties": {"user_id": {"type": "string"}}},
            "stream": {"type": "boolean"},
        },
    },
    "Message": {
        "type": "object",
        "description": "`message` (not streaming)",
        "required": ["id", "type", "role", "model", "content", "stop_reason", "usage"],
        "properties": {
            "id": {"type": "string", "description": "msg_<requestId>"},
            "type": {"const": "message"},
            "role": {"const": "assistant"},
            "model": {"type": "string", "description": "the provider/model that served the turn"},
            "content": {"type": "array", "items": {"type": "object"}},
            "stop_reason": {"type": "string", "enum": ["end_turn", "max_tokens", "tool_use"]},
            "stop_sequence": {"type": "null"},
            "usage": {"type": "object"},
        },
    },
    "AnthropicErrorBody": _ERROR,
    "MessagesCountTokensRequest": {
        "type": "object",
        "description": "Anthropic's token counting request: a Messages request without `max_tokens` (fields as "
        "for `POST /v1/messages`, decoded the same way)",
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string", "description": '"<provider>/<model id>", a route, an alias or a bare model id'},
            "system": {"description": "a string or a list of text blocks"},
            "messages": {"type": "array", "minItems": 1, "items": {"type": "object"}},
            "tools": {"type": "array", "items": {"type": "object"}},
            "tool_choice": {"type": "object"},
            "thinking": {"type": "object"},
        },
    },
    "MessageTokensCount": {
        "type": "object",
        "description": "The serving vendor's own count of the request's input tokens",
        "required": ["input_tokens"],
        "properties": {"input_tokens": {"type": "integer", "minimum": 0}},
    },
}

_DESCRIPTIONS = {
    "400": "Bad input or a field the gateway cannot honour (named at the start of the message); the upstream "
    "refused the request; the vendor refused, or its safety filter blocked the prompt (the reason in the message)",
    "401": "Missing or invalid API key (`x-api-key` or `Authorization: Bearer`)",
    "403": "The key may not use this model (or, with a budget, the model has no price)",
    "404": "Unknown model; the upstream does not know the model",
    "413": "Body too large or nested too deep",
    "415": "The body is not declared as JSON (`Content-Type: application/json`)",
    "422": "A lone UTF-16 surrogate outside message text",
    "429": "Rate limited: a gateway limit or the upstream's (see `Retry-After`)",
    "502": "The upstream failed before the answer started (or, not streaming, at any point)",
    "503": "Gateway shutting down",
    "504": "A timeout fired before the answer started",
    "529": "The upstream is overloaded",
}


def operation() -> dict[str, Any]:
    return door_operation(
        request_schema="MessagesRequest",
        example={
            "model": "anthropic/claude-sonnet-4-5",
            "max_tokens": 1024,
            "stream": True,
            "messages": [{"role": "user", "content": "Hello"}],
        },
        ok_description="With `stream: true`, Anthropic's events (`message_start`, `content_block_*`, "
        "`message_delta`, `message_stop`, `ping` while idle; an error after the start is one "
        "`event: error`); otherwise one `message`",
        ok_schema="Message",
        error_schema="AnthropicErrorBody",
        errors=_DESCRIPTIONS,
    )


_COUNT_DESCRIPTIONS = {
    "400": "Bad input (the field at the start of the message); the model's api has no counting endpoint "
    "(`model: …`); the upstream refused the request",
    "401": _DESCRIPTIONS["401"],
    "403": _DESCRIPTIONS["403"],
    "404": _DESCRIPTIONS["404"],
    "413": _DESCRIPTIONS["413"],
    "422": _DESCRIPTIONS["422"],
    "429": "The upstream's rate limit (see `Retry-After`)",
    "502": "The upstream failed to count",
    "504": "The upstream did not answer within the first-event timeout",
    "529": _DESCRIPTIONS["529"],
}


def count_operation() -> dict[str, Any]:
    """`POST /v1/messages/count_tokens`: one JSON answer, errors in Anthropic's shape."""

    def error(code: str) -> dict[str, Any]:
        body: dict[str, Any] = {"description": _COUNT_DESCRIPTIONS[code],
                                "content": {"application/json": {"schema": ref("AnthropicErrorBody")}}}  # fmt: skip
        if code == "429":
            body["headers"] = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}}
        return body

    example = {"model": "anthropic/claude-sonnet-4-5", "messages": [{"role": "user", "content": "Hello"}]}
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ref("MessagesCountTokensRequest"), "example": example}},
        },
        "responses": {
            "200": {
                "description": "The serving vendor's count (never an estimate)",
                "content": {"application/json": {"schema": ref("MessageTokensCount")}},
            },
            **{code: error(code) for code in _COUNT_DESCRIPTIONS},
        },
    }
