"""`GET /v1/models`: OpenAI's model list, each entry with the catalog's fields (built by `app.catalog`), or
Anthropic's list for a client that sends `anthropic-version` (the Anthropic SDKs' `models.list()`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ModelCost(BaseModel):
    """USD per million tokens."""

    input: float
    output: float
    cacheRead: float
    cacheWrite: float


class RouteTarget(BaseModel):
    model: str = Field(description='"<provider>/<model id>" tried first')
    fallback: list[str] = Field(description="then these, in order")


class ModelObject(BaseModel):
    """OpenAI's model object (`id`, `object`, `created`, `owned_by`) plus the catalog's fields."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description='"<provider>/<model id>", or a route name')
    object: Literal["model"] = "model"
    created: int = Field(description="epoch seconds: when the gateway loaded its catalog")
    owned_by: str = Field(description='the provider, or "gateway" for a route')
    provider: str = Field(description="the provider that serves it (a route: its first model's)")
    model: str = Field(description="the model id at that provider")
    api: str
    reasoning: bool
    contextWindow: int | None
    maxTokens: int | None
    cost: ModelCost
    aliases: list[str]
    hostedTools: dict[str, Any] | None = Field(
        default=None, description='only when the catalog allows hosted tools for it: {"webSearch": true | {"maxUses"}}'
    )
    route: RouteTarget | None = Field(default=None, description="only for routes")
    description: str | None = Field(default=None, description="only for routes, when the catalog gives one")


class ProviderObject(BaseModel):
    name: str
    api: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelObject]
    providers: list[ProviderObject] = Field(description="configured providers, also those without catalog models")


def anthropic_model_list(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The same entries in Anthropic's list shape (`type: model`, `display_name`, `created_at` as RFC 3339,
    `max_input_tokens` / `max_tokens`), one page holding all of them, each with the catalog's fields too."""
    data = []
    for entry in entries:
        created = datetime.fromtimestamp(entry["created"], timezone.utc).isoformat().replace("+00:00", "Z")
        extra = {k: v for k, v in entry.items() if k not in ("object", "created", "owned_by")}
        data.append({
            **extra,
            "type": "model",
            "display_name": entry.get("description") or entry["id"],
            "created_at": created,
            "lifecycle": "active",
            "max_input_tokens": entry.get("contextWindow"),
            "max_tokens": entry.get("maxTokens"),
        })
    return {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }
