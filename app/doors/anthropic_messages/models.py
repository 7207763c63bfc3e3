"""The gateway's model list in Anthropic's shape, for the Anthropic SDKs' `models.list()`, which reads
`GET /v1/models` (the shared route answers a request with an `anthropic-version` header so): the catalog's
entries (`GET /v1/models`'s `data`, built by `app.catalog`) with Anthropic's fields added."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping


def asked(headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
    """Whether a `GET /v1/models` comes from an Anthropic SDK: they send `anthropic-version` on every request."""
    return bool(headers.get("anthropic-version"))


def model_list(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The entries in Anthropic's list shape (`type: model`, `display_name`, `created_at` as RFC 3339,
    `max_input_tokens` / `max_tokens`), one page holding all of them, each with the catalog's fields too."""
    data = []
    for entry in entries:
        created = datetime.fromtimestamp(entry["created"], timezone.utc).isoformat().replace("+00:00", "Z")
        extra = {k: v for k, v in entry.items() if k not in ("object", "created", "owned_by")}
        data.append(
            {
                **extra,
                "type": "model",
                "display_name": entry.get("description") or entry["id"],
                "created_at": created,
                "lifecycle": "active",
                "max_input_tokens": entry.get("contextWindow"),
                "max_tokens": entry.get("maxTokens"),
            }
        )
    return {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }
