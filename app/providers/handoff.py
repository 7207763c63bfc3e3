"""Make a conversation from any provider safe to replay to a target model (cross-provider handoff).

Run by every adapter before it converts the history to its wire format:

- assistant turns that ended in `error` or `aborted` are dropped (and results of their tool calls with them);
- thinking from the same model (same provider, api and id or alias) is kept with its signature; from another model
  it becomes plain text, and empty or redacted thinking is dropped;
- text and tool calls from another model lose their signatures; their tool call ids are normalised by the
  target's rule and the matching tool results follow the new ids;
- a tool call with no result gets a synthetic error result before the conversation moves on;
- lone UTF-16 surrogates are removed from text, never from signed content.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Callable

from app.contract.catalog_entries import ModelInfo
from app.contract.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
NO_RESULT = "No result provided"


@dataclass(frozen=True, slots=True)
class Target:
    """The model a conversation is about to be sent to: provider name (a catalog provider's own name, never a
    vendor name), api, model id, and the catalog's aliases of that id."""

    provider: str
    api: str
    model: str
    aliases: frozenset[str] = frozenset()

    @classmethod
    def of(cls, model: ModelInfo, api: str) -> "Target":
        return cls(model.provider, api, model.id, frozenset(model.aliases))

    def is_same_model(self, message: AssistantMessage) -> bool:
        """Same provider, api and model (by its id or an alias: pi clients name models by dated ids)."""
        return (
            message.provider == self.provider
            and message.api == self.api
            and (message.model == self.model or message.model in self.aliases)
        )


def strip_surrogates(text: str) -> str:
    return _LONE_SURROGATE.sub("", text) if _LONE_SURROGATE.search(text) else text


def _clean_blocks(blocks: list) -> list:
    """`blocks` with lone surrogates removed from text; the same list when there are none (the usual case)."""
    if not any(isinstance(b, TextContent) and _LONE_SURROGATE.search(b.text) for b in blocks):
        return blocks
    return [TextContent(text=strip_surrogates(b.text)) if isinstance(b, TextContent) else b for b in blocks]


def _text(text: str, signature: str | None = None) -> TextContent:
    """A text block built from values that are already valid (no validation: this runs once per block of
    every message of the history)."""
    return TextContent.model_construct(text=text, text_signature=signature)


def _changed(message: Message, **update: object) -> Message:
    """`message` with `update`, or `message` itself when nothing changes (copying every message of a long
    history was most of the cost of replaying it)."""
    if all(getattr(message, name) is value for name, value in update.items()):
        return message
    return message.model_copy(update=update)


def prepare_history(
    messages: list[Message],
    target: Target,
    normalize_id: Callable[[str], str] = lambda i: i,
    keep_expired_system: bool = False,
) -> list[Message]:
    """The history as `target` can take it. `keep_expired_system`: keep system messages the vendor itself stops
    showing (Anthropic's `clear_at`); every other vendor is not sent them."""
    out: list[Message] = []
    id_map: dict[str, str] = {}
    dropped_calls: set[str] = set()
    pending: dict[str, ToolCall] = {}  # calls of the last assistant turn still waiting for a result

    def flush_orphans() -> None:
        for call in pending.values():
            out.append(
                ToolResultMessage(
                    tool_call_id=call.id, tool_name=call.name, content=[TextContent(text=NO_RESULT)], is_error=True
                )
            )
        pending.clear()

    for message in messages:
        if isinstance(message, AssistantMessage):
            if message.stop_reason in ("error", "aborted"):
                dropped_calls.update(b.id for b in message.content if isinstance(b, ToolCall))
                continue
            flush_orphans()
            same = target.is_same_model(message)
            blocks: list = []
            for block in message.content:
                if isinstance(block, ThinkingContent):
                    if same and (block.thinking_signature or block.redacted):
                        blocks.append(block)
                    elif block.redacted or not block.thinking.strip():
                        continue
                    else:
                        blocks.append(_text(strip_surrogates(block.thinking)))
                elif isinstance(block, TextContent):
                    text = strip_surrogates(block.text)
                    if not text:
                        continue
                    signature = block.text_signature if same else None
                    unchanged = text is block.text and signature == block.text_signature
                    blocks.append(block if unchanged else _text(text, signature))
                elif isinstance(block, ToolCall):
                    call = block
                    if not same:
                        new_id = normalize_id(block.id)
                        id_map[block.id] = new_id
                        call = ToolCall(id=new_id, name=block.name, arguments=block.arguments)
                    pending[call.id] = call
                    blocks.append(call)
            if blocks:
                unchanged = len(blocks) == len(message.content) and all(map(operator.is_, blocks, message.content))
                out.append(message if unchanged else message.model_copy(update={"content": blocks}))
        elif isinstance(message, ToolResultMessage):
            if message.tool_call_id in dropped_calls:
                continue
            call_id = id_map.get(message.tool_call_id, message.tool_call_id)
            if call_id not in pending:
                continue  # a result for no call we are sending: the target would reject it
            pending.pop(call_id)
            out.append(_changed(message, tool_call_id=call_id, content=_clean_blocks(message.content)))
        elif isinstance(message, SystemMessage):
            if keep_expired_system or not message.expired:
                out.append(message)  # an instruction at its position; it answers no call, so it flushes none
        else:
            flush_orphans()
            assert isinstance(message, UserMessage)
            content = message.content
            if isinstance(content, str):
                content = strip_surrogates(content)
            else:
                content = _clean_blocks(content)
            out.append(_changed(message, content=content))
    return out


def shown_tools(tools: list[Tool] | None) -> list[Tool]:
    """The tools a vendor without deferred loading is sent: all but those the model has not been shown yet
    (Anthropic `defer_loading` tools no `tool_reference` has loaded), which it could not call anyway."""
    return [t for t in tools or () if not t.deferred]


def user_blocks(content: str | list) -> list[TextContent | ImageContent]:
    """A user message's content as blocks, without empty text blocks (vendors reject those)."""
    if isinstance(content, str):
        return [_text(content)] if content else []
    return [b for b in content if not (isinstance(b, TextContent) and not b.text)]


def sanitize_id(raw: str, limit: int = 64) -> str:
    """Anthropic-style ids: `[A-Za-z0-9_-]`, at most 64 characters."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", raw)[:limit] or "call"
