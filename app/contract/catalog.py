"""`GET /v1/models`: OpenAI's model list, each entry with the catalog's fields (built by `app.catalog`); a door
whose clients list models in their own shape builds it from the same entries (`Door.models`)."""

from __future__ import annotations

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
