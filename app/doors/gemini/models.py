"""The gateway's model list in Gemini's shape (the Google GenAI SDKs' `models.list()` and `models.get()`), on the
door's own `GET /v1beta/models` and `GET /v1beta/models/{model}` (also under `/v1/`) and on the shared
`GET /v1/models` for a Google SDK's request: the catalog's entries (`GET /v1/models`'s `data`, built by
`app.catalog`) as Gemini `Model` objects, `name` being `models/<gateway model name>` so that a client can send
it back as is."""

from __future__ import annotations

from typing import Any, Mapping

from app.doors.errors import BadRequest
from app.doors.gemini.request import MODEL_PREFIX

METHODS = ["generateContent", "streamGenerateContent", "countTokens"]


def asked(headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
    """Whether a `GET /v1/models` comes from a Gemini client: the Google GenAI SDKs send their key as
    `x-goog-api-key` (and `x-goog-api-client`), and send a custom base URL's requests to `/v1/`; a `key` query
    parameter is Google's way too."""
    return "x-goog-api-key" in headers or "x-goog-api-client" in headers or "key" in query


def gemini_model(entry: dict[str, Any]) -> dict[str, Any]:
    """One `/v1/models` entry as a Gemini `Model`, with the catalog's fields kept beside Gemini's."""
    model: dict[str, Any] = {
        "name": MODEL_PREFIX + entry["id"],
        "baseModelId": entry["id"],
        "version": entry.get("model") or entry["id"],
        "displayName": entry.get("description") or entry["id"],
        "description": entry.get("description") or f"{entry['model']} served by {entry['provider']}",
        "supportedGenerationMethods": METHODS,
        "thinking": bool(entry.get("reasoning")),
    }
    if entry.get("contextWindow"):
        model["inputTokenLimit"] = entry["contextWindow"]
    if entry.get("maxTokens"):
        model["outputTokenLimit"] = entry["maxTokens"]
    return {**model, "provider": entry["provider"], "api": entry["api"], "aliases": entry.get("aliases", [])}


def model_list(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Gemini's `ListModelsResponse`, all models on one page (no `nextPageToken`)."""
    return {"models": [gemini_model(entry) for entry in entries]}


def model_of(entries: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The `Model` a path's `{model}` names (with or without `models/`, by its name or one of its aliases); a
    404 in Google's shape when none does."""
    wanted = name[len(MODEL_PREFIX) :] if name.startswith(MODEL_PREFIX) else name
    for entry in entries:
        if wanted == entry["id"] or wanted in (entry.get("aliases") or ()):
            return gemini_model(entry)
    raise BadRequest(404, "not_found_error", f"model: models/{wanted} is not a model this gateway lists", param="model")
