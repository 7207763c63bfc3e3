"""The adapter event vocabulary: what a vendor adapter's `Translator` hands the event stream.

Not public (clients never see these; `app.contract.events` is what they see): this is the contract between
the adapters (`app.providers`) and the dispatcher and message builder (`app.core.dispatcher`, `app.stream`), written
down once as types. At run time adapter events stay plain dicts (TypedDicts cost nothing: no class is built
per event, nothing is validated on the hot path); these types are for readers and type checkers.

`contentIndex`, block text, tool argument parsing and settlement are the event stream's job, so an adapter
only translates: it opens a block, streams its deltas, closes it, reports usage and ends with `finish`.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict, Union


class BlockStart(TypedDict):
    """A text or thinking block opens."""

    type: Literal["text_start", "thinking_start"]


DeltaType = Literal["text_delta", "thinking_delta", "toolcall_delta"]


class Delta(TypedDict):
    """More text of the open block (for a tool call: more of its JSON arguments, as the vendor sent them)."""

    type: DeltaType
    delta: str


class BlockEnd(TypedDict):
    """The open text or thinking block closes; `signature` is what the vendor needs to see the block again
    (thinking signature, or the text item's id), `redacted` marks a thinking block the vendor keeps hidden."""

    type: Literal["text_end", "thinking_end"]
    signature: NotRequired[str]
    redacted: NotRequired[bool]


class ToolCallStart(TypedDict):
    """A tool call opens."""

    type: Literal["toolcall_start"]
    id: str
    toolName: str


class ToolCallEnd(TypedDict):
    """The open tool call closes; Gemini's `thoughtSignature` rides on it."""

    type: Literal["toolcall_end"]
    thoughtSignature: NotRequired[str]


class UsageEvent(TypedDict):
    """Token counts so far (a later usage event replaces an earlier one)."""

    type: Literal["usage"]
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    cacheWrite1h: NotRequired[int]  # of `cacheWrite`, the tokens written to a 1-hour cache (absent: not reported)
    reasoning: NotRequired[int]  # of `output`, where the vendor counts reasoning tokens apart (absent: not counted)


class WebSearchStart(TypedDict):
    """The vendor began a web search of its own (a hosted tool, `app.providers.hosted`); no block may be open.
    The event stream passes it on only when the request asked for hosted tools."""

    type: Literal["websearch_start"]
    id: str


class WebSearchEnd(TypedDict):
    """The vendor's web search `id` ended (one whose start was never seen opens and ends at once)."""

    type: Literal["websearch_end"]
    id: str
    query: str
    status: Literal["completed", "failed"]
    sources: list[dict[str, str]]  # {url, title?}


StopReason = Literal["stop", "length", "toolUse"]


class Finish(TypedDict):
    """The vendor's terminal signal, its stop reason mapped through the vendor module's `STOP_REASONS`."""

    type: Literal["finish"]
    reason: StopReason


# The event types of a text or thinking block by the block's kind ("text", "thinking"), for an adapter that
# learns the kind from the wire.
BLOCK_START: dict[str, Literal["text_start", "thinking_start"]] = {"text": "text_start", "thinking": "thinking_start"}
BLOCK_DELTA: dict[str, Literal["text_delta", "thinking_delta"]] = {"text": "text_delta", "thinking": "thinking_delta"}
BLOCK_END: dict[str, Literal["text_end", "thinking_end"]] = {"text": "text_end", "thinking": "thinking_end"}

AdapterEvent = Union[
    BlockStart, Delta, BlockEnd, ToolCallStart, ToolCallEnd, UsageEvent, Finish, WebSearchStart, WebSearchEnd
]
"""One adapter event: a `Translator` returns a list of these for each wire event."""
