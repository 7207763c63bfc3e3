"""Messages, content blocks, tools and usage: the shapes a client sends and receives.

These are the same shapes pi-ai uses, camelCase on the wire. Unknown fields are ignored so that newer
clients (and newer pi-ai versions with extra optional fields) are never rejected.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

# The validation context under which a door builds a unified request: it may then carry what only doors produce
# (system messages inside `messages`, door-only fields). `/v1/stream` and `/api/stream` validate without it.
DOOR_VALIDATION: dict[str, bool] = {"door": True}
SYSTEM_ROLE_REFUSED = "there is no system role: the system prompt goes in context.systemPrompt; messages are user, assistant or toolResult"


def from_door(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("door"))


def door_only(value: Any, info: ValidationInfo) -> Any:
    """A door-only field keeps its value only when a door builds the request; a `/v1/stream` client that sends
    one gets its default (the fields are not part of the public schema)."""
    return value if from_door(info) else None


class WireModel(BaseModel):
    """Base for every contract model: camelCase aliases, snake_case attributes, unknown fields ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict a client sees (camelCase, no nulls)."""
        return self.model_dump(by_alias=True, exclude_none=True)


# A prompt-cache breakpoint as an Anthropic Messages client placed it (`{"type": "ephemeral", "ttl": "1h"}`):
# door-only (absent from the public schema, never serialized); the Anthropic adapter sends it where it was put.
CacheControl = SkipJsonSchema[dict[str, Any] | None]


class TextContent(WireModel):
    type: Literal["text"] = "text"
    text: str
    text_signature: str | None = None
    cache_control: CacheControl = Field(default=None, exclude=True)
    # Door-only: an Anthropic block this text stands for on the other vendors (a `tool_reference`), which the
    # Anthropic adapter sends instead of the text.
    anthropic: SkipJsonSchema[dict[str, Any] | None] = Field(default=None, exclude=True)

    _door_fields = field_validator("cache_control", "anthropic", mode="before")(door_only)


class ThinkingContent(WireModel):
    type: Literal["thinking"] = "thinking"
    thinking: str
    thinking_signature: str | None = None
    redacted: bool | None = None


class ImageContent(WireModel):
    type: Literal["image"] = "image"
    data: str = Field(description="base64 without the data: prefix", min_length=1)
    mime_type: str = Field(pattern=r"^image/[a-z0-9.+-]+$")
    cache_control: CacheControl = Field(default=None, exclude=True)

    _door_fields = field_validator("cache_control", mode="before")(door_only)


class ToolCall(WireModel):
    type: Literal["toolCall"] = "toolCall"
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    thought_signature: str | None = Field(default=None, description="Gemini's signature of the call part")


class WebSearchSource(WireModel):
    url: str
    title: str | None = None


class WebSearchContent(WireModel):
    """A web search the vendor ran itself (`options.hostedTools.webSearch`, docs/adapters/web-search.md): what
    it searched for and the sources it found. Only in answers to a request that asked for hosted tools; a
    vendor is never sent one again (its search state is its own): the history sent upstream leaves it out."""

    type: Literal["webSearch"] = "webSearch"
    id: str = Field(min_length=1)
    query: str = ""
    status: Literal["searching", "completed", "failed"] = "completed"
    sources: list[WebSearchSource] = Field(default_factory=list)


UserBlock = Annotated[Union[TextContent, ImageContent], Field(discriminator="type")]
AssistantBlock = Annotated[Union[TextContent, ThinkingContent, ToolCall, WebSearchContent], Field(discriminator="type")]


class Cost(WireModel):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


class Usage(WireModel):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int | None = Field(
        default=None,
        alias="cacheWrite1h",
        description="of `cacheWrite`, the tokens written to a 1-hour prompt cache, where the vendor reports it "
        "(Anthropic's `cache_creation.ephemeral_1h_input_tokens`; absent otherwise)",
    )
    total_tokens: int = 0
    cost: Cost = Field(default_factory=Cost)
    reasoning: int | None = Field(
        default=None,
        description="of `output`, the reasoning tokens, where the vendor counts them apart (absent otherwise)",
    )


class UserMessage(WireModel):
    role: Literal["user"] = "user"
    content: Union[str, list[UserBlock]]
    timestamp: int | None = None


class AssistantMessage(WireModel):
    role: Literal["assistant"] = "assistant"
    content: list[AssistantBlock] = Field(default_factory=list)
    provider: str | None = None
    api: str | None = None
    model: str | None = None
    usage: Usage | None = None
    stop_reason: Literal["stop", "length", "toolUse", "error", "aborted"] | None = None
    error_message: str | None = None
    timestamp: int | None = None
    request_id: str | None = None


class ToolResultMessage(WireModel):
    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str = Field(min_length=1)
    tool_name: str = ""
    content: list[UserBlock] = Field(default_factory=list)
    is_error: bool = False
    timestamp: int | None = None
    cache_control: CacheControl = Field(default=None, exclude=True)

    _door_fields = field_validator("cache_control", mode="before")(door_only)


class SystemMessage(WireModel):
    """An instruction inside the conversation, at its position (Anthropic's `role: "system"` messages, as Claude
    Code sends them after the first turn). Only a door produces one: each adapter sends it as its vendor's own
    system/developer instruction (docs/doors/anthropic-messages.md); `/v1/stream` refuses the role (422)."""

    role: Literal["system"] = "system"
    content: list[TextContent] = Field(min_length=1)
    anthropic: dict[str, Any] | None = Field(
        default=None,
        exclude=True,
        description="the message's other Anthropic fields (output_config, clear_at), sent as is to Anthropic",
    )
    expired: bool = Field(
        default=False,
        exclude=True,
        description="`clear_at: next_user_message` and a user message follows: Anthropic keeps it in the array but "
        "no longer shows it to the model, so the other vendors are not sent it",
    )

    @model_validator(mode="before")
    @classmethod
    def _only_from_a_door(cls, data: Any, info: ValidationInfo) -> Any:
        if not from_door(info):
            raise PydanticCustomError("system_role", SYSTEM_ROLE_REFUSED)
        return data

    @property
    def text(self) -> str:
        return "\n\n".join(b.text for b in self.content if b.text)


Message = Annotated[
    Union[UserMessage, AssistantMessage, ToolResultMessage, SkipJsonSchema[SystemMessage]], Field(discriminator="role")
]


class Tool(WireModel):
    name: str = Field(min_length=1, max_length=128)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    # Door-only (absent from the public schema, never serialized): a tool whose definition the model has not
    # been shown yet (Anthropic `defer_loading` and no `tool_reference` to it so far); the Anthropic adapter
    # sends it with `defer_loading`, the others leave it out, which changes nothing the model can do.
    deferred: SkipJsonSchema[bool | None] = Field(default=None, exclude=True)
    anthropic: SkipJsonSchema[dict[str, Any] | None] = Field(
        default=None, exclude=True, description="the tool as an Anthropic client defined it, sent as is to Anthropic"
    )

    _door_fields = field_validator("deferred", "anthropic", mode="before")(door_only)


class Context(WireModel):
    system_prompt: str | None = None
    # Door-only: the system prompt's blocks as an Anthropic client sent them (with their cache breakpoints);
    # the Anthropic adapter sends these, every adapter else `system_prompt` (their text joined).
    system_blocks: SkipJsonSchema[list[TextContent] | None] = Field(default=None, exclude=True)
    messages: list[Message] = Field(min_length=1)
    tools: list[Tool] | None = None

    _door_fields = field_validator("system_blocks", mode="before")(door_only)
