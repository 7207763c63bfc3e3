"""The door's entry in the OpenAPI document (`app.api.openapi`): request and response shapes, in brief.

The full field table is docs/doors/gemini.md; Google's Gemini API reference describes the objects."""

from __future__ import annotations

from typing import Any

from app.doors.openapi import door_operation, ref

MODEL_PATH = "/{version}/models/{model}"  # the documented form; the routes below spell out each version
STREAM_PATHS = ("/v1beta/models/{model:path}:streamGenerateContent", "/v1/models/{model:path}:streamGenerateContent")
ANSWER_PATHS = ("/v1beta/models/{model:path}:generateContent", "/v1/models/{model:path}:generateContent")
COUNT_PATHS = ("/v1beta/models/{model:path}:countTokens", "/v1/models/{model:path}:countTokens")
LIST_PATH = "/v1beta/models"  # `/v1/models` answers in Gemini's shape too, to the Google GenAI SDKs
GET_PATHS = ("/v1beta/models/{model:path}", "/v1/models/{model:path}")

_MODEL_PARAMETER = {
    "name": "model", "in": "path", "required": True, "schema": {"type": "string"},
    "description": 'a gateway model name after "models/": "<provider>/<model id>" (its "/" as is or %2F), a route, '
                   "an alias or a bare model id",
}  # fmt: skip
_KEY_PARAMETER = {"name": "key", "in": "query", "required": False, "schema": {"type": "string"},
                  "description": "the gateway client key (or x-goog-api-key, or Authorization: Bearer)"}  # fmt: skip
_ALT_PARAMETER = {"name": "alt", "in": "query", "required": False, "schema": {"enum": ["sse", "json"]},
                  "description": "sse: the chunks as server-sent events (what the Google SDKs ask for); json (the "
                                 "default): the chunks as one JSON array streamed element by element"}  # fmt: skip

SCHEMAS: dict[str, Any] = {
    "GenerateContentRequest": {
        "type": "object",
        "description": "Gemini's request; every field is honoured or refused with 400 naming it",
        "required": ["contents"],
        "properties": {
            "contents": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "role": {"type": "string", "enum": ["user", "model"]},
                        "parts": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "description": "text (thought, thoughtSignature), inlineData (images), functionCall, functionResponse",
                            },
                        },
                    },
                },
            },
            "systemInstruction": {"type": "object", "description": "a content of text parts"},
            "tools": {"type": "array", "items": {"type": "object", "description": "{functionDeclarations: [...]}"}},
            "toolConfig": {"type": "object", "description": "{functionCallingConfig: {mode, allowedFunctionNames}}"},
            "generationConfig": {
                "type": "object",
                "description": "maxOutputTokens, temperature, topP, stopSequences, "
                "responseMimeType, responseSchema, responseJsonSchema, thinkingConfig",
            },
            "safetySettings": {"type": "array", "items": {"type": "object"}, "description": "sent to Gemini only"},
        },
    },
    "GenerateContentResponse": {
        "type": "object",
        "properties": {
            "candidates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "object"},
                        "finishReason": {"type": "string"},
                        "index": {"type": "integer"},
                    },
                },
            },
            "usageMetadata": {
                "type": "object",
                "properties": {
                    "promptTokenCount": {"type": "integer"},
                    "cachedContentTokenCount": {"type": "integer"},
                    "candidatesTokenCount": {"type": "integer"},
                    "totalTokenCount": {"type": "integer"},
                },
            },
            "modelVersion": {"type": "string"},
            "responseId": {"type": "string"},
        },
    },
    "CountTokensResponse": {
        "type": "object",
        "required": ["totalTokens"],
        "properties": {"totalTokens": {"type": "integer"}},
    },
    "GeminiModel": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": '"models/<gateway model name>"'},
            "baseModelId": {"type": "string"},
            "version": {"type": "string"},
            "displayName": {"type": "string"},
            "description": {"type": "string"},
            "inputTokenLimit": {"type": "integer"},
            "outputTokenLimit": {"type": "integer"},
            "supportedGenerationMethods": {"type": "array", "items": {"type": "string"}},
            "thinking": {"type": "boolean"},
        },
    },
    "GeminiModelList": {"type": "object", "properties": {"models": {"type": "array", "items": ref("GeminiModel")}}},
    "GeminiErrorBody": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "status"],
                "properties": {
                    "code": {"type": "integer"},
                    "message": {
                        "type": "string",
                        "description": "starts with the field at fault for a refused request",
                    },
                    "status": {
                        "type": "string",
                        "description": "INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, "
                        "RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED",
                    },
                    "details": {"type": "array", "items": {"type": "object"}},
                },
            }
        },
    },
}

ERRORS = {
    "400": "Bad request, or a refusal or safety stop of the vendor (status INVALID_ARGUMENT)",
    "401": "Missing or unknown client key (UNAUTHENTICATED)",
    "403": "The key may not use this model (PERMISSION_DENIED)",
    "404": "The model names nothing this gateway serves (NOT_FOUND)",
    "413": "Request body too large",
    "415": "The body is not declared as JSON (`Content-Type: application/json`)",
    "429": "Rate limit, budget or stream cap (RESOURCE_EXHAUSTED)",
    "502": "The vendor failed (UNAVAILABLE)",
    "503": "Overloaded or shutting down (UNAVAILABLE)",
    "504": "A gateway timeout fired (DEADLINE_EXCEEDED)",
}
_EXAMPLE = {"contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
            "generationConfig": {"maxOutputTokens": 256}}  # fmt: skip
# The model routes' answers (`ModelRoute.responses`).
LIST_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Gemini's ListModelsResponse",
        "content": {"application/json": {"schema": ref("GeminiModelList")}},
    },
}
MODEL_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "Gemini's Model", "content": {"application/json": {"schema": ref("GeminiModel")}}},
    404: {"description": "No such model", "content": {"application/json": {"schema": ref("GeminiErrorBody")}}},
}


def _operation(stream: bool) -> dict[str, Any]:
    operation = door_operation(
        request_schema="GenerateContentRequest", example=_EXAMPLE,
        ok_description="Gemini's chunks as server-sent events (alt=sse) or one JSON array of them" if stream
        else "One GenerateContentResponse",
        ok_schema="GenerateContentResponse", error_schema="GeminiErrorBody", errors=ERRORS,
    )  # fmt: skip
    if stream:
        operation["responses"]["200"]["content"]["application/json"] = {
            "schema": {"type": "array", "items": ref("GenerateContentResponse")}
        }
    operation["parameters"] = [_MODEL_PARAMETER, *([_ALT_PARAMETER] if stream else []), _KEY_PARAMETER]
    return operation


def stream_operation() -> dict[str, Any]:
    return _operation(True)


def answer_operation() -> dict[str, Any]:
    return _operation(False)


def count_operation() -> dict[str, Any]:
    operation = door_operation(
        request_schema="GenerateContentRequest", example=_EXAMPLE,
        ok_description="The serving vendor's count (never an estimate)", ok_schema="CountTokensResponse",
        error_schema="GeminiErrorBody", errors=ERRORS,
    )  # fmt: skip
    operation["responses"]["200"]["content"].pop("text/event-stream")
    operation["parameters"] = [_MODEL_PARAMETER, _KEY_PARAMETER]
    return operation
