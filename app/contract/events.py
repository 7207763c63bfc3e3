"""The normalized event vocabulary (docs/api.md §5).

At run time events are plain dicts built by `app.stream` (no per-event validation on the hot path). These
models document the shapes for the OpenAPI spec, and the conformance checker in the tests validates every
event it sees against them, so a drift between the two fails a test.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field

from app.contract.messages import AssistantMessage, Usage, WebSearchContent, WireModel

DELTA_TYPES = frozenset({"text_delta", "thinking_delta", "toolcall_delta"})
TERMINAL_TYPES = frozenset({"done", "error"})


class StartEvent(WireModel):
    type: Literal["start"] = "start"
    request_id: str
    provider: str
    api: str
    model: str


class TextStartEvent(WireModel):
    type: Literal["text_start"] = "text_start"
    content_index: int


class ThinkingStartEvent(WireModel):
    type: Literal["thinking_start"] = "thinking_start"
    content_index: int


class TextDeltaEvent(WireModel):
    type: Literal["text_delta"] = "text_delta"
    content_index: int
    delta: str


class ThinkingDeltaEvent(WireModel):
    type: Literal["thinking_delta"] = "thinking_delta"
    content_index: int
    delta: str


class TextEndEvent(WireModel):
    type: Literal["text_end"] = "text_end"
    content_index: int
    content: str
    content_signature: str | None = None


class ThinkingEndEvent(WireModel):
    type: Literal["thinking_end"] = "thinking_end"
    content_index: int
    content: str
    content_signature: str | None = None
    redacted: bool | None = None


class ToolCallStartEvent(WireModel):
    type: Literal["toolcall_start"] = "toolcall_start"
    content_index: int
    id: str
    tool_name: str


class ToolCallDeltaEvent(WireModel):
    type: Literal["toolcall_delta"] = "toolcall_delta"
    content_index: int
    delta: str = Field(description="a raw fragment of the arguments' JSON text")
    partial_arguments: Any = Field(
        default=None,
        description="only with `options.partialArguments`: the arguments parsed so far (partial JSON completed)",
    )


class ToolCallPayload(WireModel):
    id: str
    name: str
    arguments: dict[str, Any]
    thought_signature: str | None = None


class ToolCallEndEvent(WireModel):
    type: Literal["toolcall_end"] = "toolcall_end"
    content_index: int
    tool_call: ToolCallPayload


class WebSearchStartEvent(WireModel):
    """The vendor began a web search of its own (only when the request set `options.hostedTools`)."""

    type: Literal["websearch_start"] = "websearch_start"
    content_index: int
    id: str


class WebSearchEndEvent(WireModel):
    """The vendor's web search ended: what it searched for and found (the message's `webSearch` block)."""

    type: Literal["websearch_end"] = "websearch_end"
    content_index: int
    web_search: WebSearchContent


class DoneEvent(WireModel):
    type: Literal["done"] = "done"
    reason: Literal["stop", "length", "toolUse"]
    usage: Usage
    message: AssistantMessage


class ErrorEvent(WireModel):
    type: Literal["error"] = "error"
    reason: Literal["aborted", "error"]
    error_message: str
    usage: Usage
    message: AssistantMessage


StreamEvent = Annotated[
    Union[
        StartEvent,
        TextStartEvent,
        ThinkingStartEvent,
        TextDeltaEvent,
        ThinkingDeltaEvent,
        TextEndEvent,
        ThinkingEndEvent,
        ToolCallStartEvent,
        ToolCallDeltaEvent,
        ToolCallEndEvent,
        WebSearchStartEvent,
        WebSearchEndEvent,
        DoneEvent,
        ErrorEvent,
    ],
    Field(discriminator="type"),
]
