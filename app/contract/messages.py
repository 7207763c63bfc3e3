"""Messages, content blocks, tools and usage: the shapes a client sends and receives.

These are the same shapes pi-ai uses, camelCase on the wire. Unknown fields are ignored so that newer
clients (and newer pi-ai versions with extra optional fields) are never rejected.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """Base for every contract model: camelCase aliases, snake_case attributes, unknown fields ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict a client sees (camelCase, no nulls)."""
        return self.model_dump(by_alias=True, exclude_none=True)


class TextContent(WireModel):
    type: Literal["text"] = "text"
    text: str
    text_signature: str | None = None


class ThinkingContent(WireModel):
    type: Literal["thinking"] = "thinking"
    thinking: str
    thinking_signature: str | None = None
    redacted: bool | None = None


class ImageContent(WireModel):
    type: Literal["image"] = "image"
    data: str = Field(description="base64 without the data: prefix", min_length=1)
    mime_type: str = Field(pattern=r"^image/[a-z0-9.+-]+$")


class ToolCall(WireModel):
    type: Literal["toolCall"] = "toolCall"
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    thought_signature: str | None = Field(default=None, description="Gemini's signature of the call part")


UserBlock = Annotated[Union[TextContent, ImageContent], Field(discriminator="type")]
AssistantBlock = Annotated[Union[TextContent, ThinkingContent, ToolCall], Field(discriminator="type")]


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
    total_tokens: int = 0
    cost: Cost = Field(default_factory=Cost)


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


Message = Annotated[Union[UserMessage, AssistantMessage, ToolResultMessage], Field(discriminator="role")]


class Tool(WireModel):
    name: str = Field(min_length=1, max_length=128)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Context(WireModel):
    system_prompt: str | None = None
    messages: list[Message] = Field(min_length=1)
    tools: list[Tool] | None = None
