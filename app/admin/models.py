"""The admin API's bodies (docs/admin.md): a managed key's and a team's fields, as they are sent, stored and listed.

Top-level fields are camelCase as in the rest of the API (`expiresAt`, `overlapSeconds`); the fields inside
`limits` and `budgets` are the keys file's own names (`requests_per_minute`, `budget_usd_per_day`, …), so a key
moves between the file and the API unchanged. Times are epoch milliseconds, like the records'.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from app.policy.keys import KeyPolicy

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,99}$"
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/=-]{0,63}$"
MAX_METADATA_BYTES = 4096
MAX_COUNT = 10**12
MAX_TIME_MS = 2**53  # epoch milliseconds JSON numbers carry exactly


def _utf8(value: str) -> str:
    value.encode()  # a lone surrogate raises UnicodeEncodeError, a ValueError: the body's 422
    return value


ModelPattern = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_utf8)]


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests_per_minute: int = Field(default=0, ge=0, le=MAX_COUNT)
    tokens_per_minute: int = Field(default=0, ge=0, le=MAX_COUNT)
    concurrent_streams: int = Field(default=0, ge=0, le=MAX_COUNT)


class Budgets(BaseModel):
    model_config = ConfigDict(extra="forbid")

    budget_usd_per_day: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    budget_usd_per_month: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    user_budget_usd_per_day: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    user_budget_usd_per_month: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    allow_unpriced_models: bool = False


class _Bounded(BaseModel):
    """What keys and teams share: bounded metadata."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("metadata", check_fields=False)
    @classmethod
    def _metadata_bounded(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        try:
            encoded = orjson.dumps(value)
        except TypeError:  # an integer beyond 64 bits
            raise ValueError("metadata holds a number JSON cannot carry") from None
        if len(encoded) > MAX_METADATA_BYTES:
            raise ValueError(f"metadata is limited to {MAX_METADATA_BYTES} bytes of JSON")
        return value


class KeyFields(_Bounded):
    """A managed key's fields (never its secret): the create body, and what is stored and listed."""

    name: str = Field(pattern=NAME_PATTERN)
    team: str | None = Field(default=None, pattern=NAME_PATTERN)
    limits: Limits = Field(default_factory=Limits)
    budgets: Budgets = Field(default_factory=Budgets)
    models: list[ModelPattern] = Field(default_factory=list, max_length=50)
    expiresAt: int | None = Field(default=None, ge=0, le=MAX_TIME_MS, description="epoch milliseconds; absent: never")
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list, max_length=10)

    @field_validator("tags")
    @classmethod
    def _tags_valid(cls, tags: list[str]) -> list[str]:
        return _valid_tags(tags)

    def policy(self) -> KeyPolicy:
        return KeyPolicy(
            **self.limits.model_dump(),
            **self.budgets.model_dump(),
            models=tuple(self.models),
            team=self.team,
            tags=tuple(self.tags),
        )


class KeyPatch(_Bounded):
    """`PATCH /v1/admin/keys/{name}`: the fields to change (a field sent as null is cleared where it may be)."""

    name: str | None = Field(default=None, pattern=NAME_PATTERN)
    team: str | None = Field(default=None, pattern=NAME_PATTERN)
    limits: Limits | None = None
    budgets: Budgets | None = None
    models: list[ModelPattern] | None = Field(default=None, max_length=50)
    expiresAt: int | None = Field(default=None, ge=0, le=MAX_TIME_MS)
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = Field(default=None, max_length=10)

    @field_validator("tags")
    @classmethod
    def _tags_valid(cls, tags: list[str] | None) -> list[str] | None:
        return None if tags is None else _valid_tags(tags)


class Rotate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    overlapSeconds: int = Field(default=0, ge=0, le=30 * 86400)


class TeamFields(_Bounded):
    """A team: limits and budgets its keys share, on top of each key's own."""

    name: str = Field(pattern=NAME_PATTERN)
    limits: Limits = Field(default_factory=Limits)
    budgets: Budgets = Field(default_factory=Budgets)
    metadata: dict[str, Any] = Field(default_factory=dict)


class TeamPatch(_Bounded):
    limits: Limits | None = None
    budgets: Budgets | None = None
    metadata: dict[str, Any] | None = None


def _valid_tags(tags: list[str]) -> list[str]:
    for tag in tags:
        if not re.fullmatch(TAG_PATTERN, tag):
            raise ValueError(f"a tag is 1-64 letters, digits or ._:/=- (got {tag[:70]!r})")
    return list(dict.fromkeys(tags))
