"""The door's entry in the OpenAPI document (`app.api.openapi`): request and response shapes, in brief.

Every field and event, and what the gateway does with each per vendor, is in docs/doors/openai-responses.md;
OpenAI's own API reference describes the objects. Errors are OpenAI's shape (`app.doors.openai_errors`)."""

from __future__ import annotations

from typing import Any

from app.doors.openai_errors import ERROR_SCHEMA
from app.doors.openapi import door_operation

PATH = "/v1/responses"

SCHEMAS: dict[str, Any] = {
    "ResponsesRequest": {
        "type": "object",
        "description": "OpenAI's Responses request; each field is honoured, ignored where that cannot change the "
        "answer, or refused with 400 naming it; hosted tools are dropped and named in X-Gateway-Dropped-Tools",
        "required": ["model", "input"],
        "properties": {
            "model": {"type": "string", "description": '"<provider>/<model id>", a route or an alias'},
            "input": {
                "description": "a string, or items: message (user / assistant / system / developer), "
                "function_call, function_call_output, reasoning, item_reference (an item of a stored "
                "response of the key)"
            },
            "instructions": {"type": "string"},
            "stream": {"type": "boolean"},
            "tools": {"type": "array", "items": {"type": "object"}},
            "tool_choice": {},
            "parallel_tool_calls": {"type": "boolean"},
            "max_output_tokens": {"type": "integer", "minimum": 1},
            "reasoning": {
                "type": "object",
                "properties": {
                    "effort": {"type": "string", "enum": ["none", "minimal", "low", "medium", "high", "xhigh"]},
                    "summary": {"type": "string", "enum": ["auto", "concise", "detailed"]},
                },
            },
            "text": {"type": "object", "description": "format: text or json_schema"},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "top_p": {"type": "number", "minimum": 0, "maximum": 1},
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
            "prompt_cache_key": {"type": "string"},
            "include": {"type": "array", "items": {"type": "string"}},
            "store": {
                "type": "boolean",
                "description": "keep the response for previous_response_id, item_reference "
                "and GET (default true), per key, for GATEWAY_RESPONSES_RETENTION_DAYS",
            },
            "previous_response_id": {
                "type": "string",
                "description": "continue a stored response of the key: its "
                "conversation comes before input (404 when not found)",
            },
        },
    },
    "Response": {
        "type": "object",
        "description": "the `response` object (not streaming; also inside the stream's lifecycle events)",
        "required": ["id", "object", "created_at", "status", "model", "output"],
        "properties": {
            "id": {"type": "string", "description": "resp_<requestId>"},
            "object": {"const": "response"},
            "created_at": {"type": "integer"},
            "status": {"type": "string", "enum": ["completed", "incomplete", "failed", "in_progress"]},
            "model": {"type": "string", "description": "the provider/model that served the turn"},
            "output": {"type": "array", "items": {"type": "object"}},
            "usage": {"type": "object"},
            "store": {"type": "boolean"},
            "previous_response_id": {"type": ["string", "null"]},
        },
    },
    "ResponsesInputTokensRequest": {
        "type": "object",
        "description": "a Responses request without its output settings; previous_response_id is refused (400)",
        "required": ["model"],
        "properties": {
            "model": {"type": "string"},
            "input": {},
            "instructions": {"type": "string"},
            "tools": {"type": "array", "items": {"type": "object"}},
            "tool_choice": {},
            "reasoning": {"type": "object"},
            "text": {"type": "object"},
        },
    },
    "ResponsesInputTokens": {
        "type": "object",
        "required": ["object", "input_tokens"],
        "properties": {"object": {"const": "response.input_tokens"}, "input_tokens": {"type": "integer"}},
    },
    "ResponseItemList": {
        "type": "object",
        "description": "a page of a stored response's input items (the conversation it continued and its input)",
        "required": ["object", "data", "has_more"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"type": "object"}},
            "first_id": {"type": ["string", "null"]},
            "last_id": {"type": ["string", "null"]},
            "has_more": {"type": "boolean"},
        },
    },
    "ResponsesCompactRequest": {
        "type": "object",
        "description": "a Responses request to compact (model, input, instructions, tools, reasoning…); not streamed, "
        "not stored; previous_response_id is refused (400)",
        "required": ["model", "input"],
        "properties": {"model": {"type": "string"}, "input": {}, "instructions": {"type": "string"}},
    },
    "CompactedResponse": {
        "type": "object",
        "required": ["id", "object", "created_at", "output", "usage"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "response.compaction"},
            "created_at": {"type": "integer"},
            "output": {
                "type": "array",
                "items": {"type": "object"},
                "description": "the user messages of input, "
                "then one compaction item whose encrypted_content holds the model's summary",
            },
            "usage": {"type": "object"},
        },
    },
    "ResponseDeleted": {
        "type": "object",
        "required": ["id", "object", "deleted"],
        "properties": {"id": {"type": "string"}, "object": {"const": "response.deleted"}, "deleted": {"const": True}},
    },
    "OpenAIErrorBody": ERROR_SCHEMA,
}

_DESCRIPTIONS = {
    "400": "Bad input or a field the gateway cannot honour (named in `param`), an unknown `item_reference`; the "
    "upstream refused the request; the vendor refused, or its safety filter blocked the prompt",
    "401": "Missing or invalid API key",
    "403": "The key may not use this model (or, with a budget, the model has no price)",
    "404": "Unknown model; the upstream does not know the model; `previous_response_id` names no stored response "
    "of this key (`previous_response_not_found`)",
    "413": "Body too large or nested too deep",
    "415": "The body is not declared as JSON (`Content-Type: application/json`)",
    "422": "A lone UTF-16 surrogate outside message text",
    "429": "Rate limited: a gateway limit or the upstream's (see `Retry-After`)",
    "502": "The upstream failed before the answer started (or, not streaming, at any point)",
    "503": "Gateway shutting down, or the upstream overloaded (see `Retry-After`)",
    "504": "A timeout fired before the answer started",
}


STORED_PATH = "/v1/responses/{response_id}"


def stored_operation(method: str) -> dict[str, Any]:
    """The responses of `GET` and `DELETE /v1/responses/{response_id}` (a stored response of the key)."""
    ok = ("The stored `response` object", "Response") if method == "get" else ("Deleted", "ResponseDeleted")
    return {"responses": {
        "200": json_body(ok[1], ok[0]),
        "401": json_body("OpenAIErrorBody", _DESCRIPTIONS["401"]),
        "404": json_body("OpenAIErrorBody", "No stored response with this id for this key (never stored, "
                         "deleted, or past GATEWAY_RESPONSES_RETENTION_DAYS)"),
    }}  # fmt: skip


ITEMS_PATH = STORED_PATH + "/input_items"


def items_operation() -> dict[str, Any]:
    """`GET /v1/responses/{response_id}/input_items`: one page of the stored response's input items."""
    query = [
        ("after", {"type": "string"}, "an item id: the page after it"),
        ("before", {"type": "string"}, "an item id: the page before it"),
        ("limit", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, "items per page"),
        ("order", {"type": "string", "enum": ["asc", "desc"], "default": "desc"}, "oldest or newest first"),
        (
            "include",
            {"type": "array", "items": {"type": "string"}},
            "reasoning.encrypted_content: show reasoning state",
        ),
    ]
    return {
        "parameters": [{"name": name, "in": "query", "required": False, "schema": schema, "description": text}
                       for name, schema, text in query],
        "responses": {
            "200": json_body("ResponseItemList", "A page of the input items"),
            "400": json_body("OpenAIErrorBody", "A bad query parameter, or after / before naming no item of the list"),
            **{code: answer for code, answer in stored_operation("get")["responses"].items() if code in ("401", "404")},
        },
    }  # fmt: skip


def input_tokens_operation() -> dict[str, Any]:
    """`POST /v1/responses/input_tokens`: one JSON answer, errors in OpenAI's shape."""
    errors = {
        "400": "Bad input (named in `param`), `previous_response_id`; the model's api has no counting endpoint; "
        "the upstream refused the request",
        **{code: _DESCRIPTIONS[code] for code in ("401", "403", "413", "415", "422")},
        "404": "Unknown model; the upstream does not know the model",
        "429": "The upstream's rate limit (see `Retry-After`)",
        "502": "The upstream failed to count",
        "504": "The upstream did not answer within the first-event timeout",
    }
    example = {"model": "anthropic/claude-sonnet-4-5", "input": "Hello"}
    return {
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/ResponsesInputTokensRequest"}, "example": example}}},
        "responses": {
            "200": json_body("ResponsesInputTokens", "The serving vendor's count (never an estimate)"),
            **{code: json_body("OpenAIErrorBody", text) for code, text in errors.items()},
        },
    }  # fmt: skip


def compact_operation() -> dict[str, Any]:
    """`POST /v1/responses/compact`: one JSON answer, errors in OpenAI's shape."""
    example = {"model": "anthropic/claude-sonnet-4-5", "input": [{"role": "user", "content": "Hello"}]}
    return {
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/ResponsesCompactRequest"}, "example": example}}},
        "responses": {
            "200": json_body("CompactedResponse", "The user messages and one compaction item (the model's summary)"),
            **{code: json_body("OpenAIErrorBody", text) for code, text in _DESCRIPTIONS.items()},
        },
    }  # fmt: skip


def json_body(schema: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }


def operation() -> dict[str, Any]:
    return door_operation(
        request_schema="ResponsesRequest",
        example={"model": "anthropic/claude-sonnet-4-5", "stream": True, "input": "Hello"},
        ok_description="With `stream: true`, the Responses event stream (`event:` and `data:` lines, each with a "
        "`sequence_number`: response.created … response.completed, response.incomplete or response.failed); "
        "otherwise one `response` object",
        ok_schema="Response",
        error_schema="OpenAIErrorBody",
        errors=_DESCRIPTIONS,
    )
