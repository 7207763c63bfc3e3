"""Signed reasoning that round-trips through a client, without leaking across vendors: the origin wrapping
every door uses for a vendor's signature (each door carries the wrapped string in its own wire's place for it).

A door hands a client a signature (the Messages door's `thinking` block `signature` and `redacted_thinking`
`data`, the Responses door's reasoning item `encrypted_content`, the Gemini door's `thoughtSignature`) as an
*origin-wrapped* string:

    gw1.<base64url(JSON ["<provider>", "<api>", "<model>"]), no padding>.<the vendor's signature, verbatim>

and unwraps it when the client sends it back. The origin becomes the replayed assistant message's
`provider` / `api` / `model`, so the adapter's cross-provider handoff (`app.providers.handoff`) keeps the
vendor's signature only when the conversation is still on the model that made it, and otherwise replays the
thinking as plain text (or drops redacted thinking) instead of sending a foreign signature to a vendor.

A tool call's own signature (Gemini's `thoughtSignature` on a `functionCall` part, which Gemini 3 wants back on
that call) is marked `gw1c.` instead of `gw1.` (`wrap_call`): a wire with no place for it on the call (the
Messages door's `tool_use`, the Responses door's `function_call`) hands it out in a block of its own right after
the call, and on the way back puts it on the call just before (`unwrap_call`, `SignedCall`).

A turn's signed thinking can also ride on its first tool call (`wrap_thinking`, marked `gw1t.`): a client that keeps
the calls of a turn but drops its thought parts (the Gemini CLI) still sends back what the vendor that thought
needs (Anthropic wants the signed thinking block before the tool_use in a tool loop with thinking on); the door
rebuilds the thinking blocks from it (`unwrap_thinking`).

A signature without the `gw1.` prefix (say one a client got from a vendor directly) has no known origin and
is treated as foreign. The wrapper is provenance, not a security boundary: a forged origin can only make the
gateway hand a client-supplied string to a vendor as a signature, which the vendor verifies itself.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson

from app.contract.messages import ToolCall

PREFIX = "gw1."
CALL_PREFIX = "gw1c."  # a tool call's own signature, which goes back on the call before it
THINKING_PREFIX = "gw1t."  # a turn's signed thinking blocks, carried on its first tool call


@dataclass(frozen=True, slots=True)
class Origin:
    """The provider, api and model that produced a signed block."""

    provider: str
    api: str
    model: str


@dataclass(frozen=True, slots=True)
class Unwrapped:
    origin: Origin
    signature: str  # the vendor's own signature ("" when the vendor signed nothing)


def origin_of(source: dict[str, Any]) -> Origin:
    """The origin named by a normalized event or message (`start`, the final `AssistantMessage`)."""
    return Origin(source.get("provider") or "", source.get("api") or "", source.get("model") or "")


def wrap(origin: Origin, signature: str | None) -> str:
    header = orjson.dumps([origin.provider, origin.api, origin.model])
    return PREFIX + base64.urlsafe_b64encode(header).rstrip(b"=").decode() + "." + (signature or "")


@dataclass(frozen=True, slots=True)
class SignedCall:
    """A tool call a client sent back with its own signature (the block after it, `wrap_call`): the signature
    stays only when it comes from the assistant message's origin (known once the whole message is read)."""

    call: ToolCall
    signed: Unwrapped

    def block(self, origin: Origin | None) -> ToolCall:
        if self.signed.origin != origin or not self.signed.signature:
            return self.call
        return self.call.model_copy(update={"thought_signature": self.signed.signature})


def wrap_call(origin: Origin, signature: str) -> str:
    """A tool call's own signature, wrapped with its origin and marked as the call's (`CALL_PREFIX`)."""
    return CALL_PREFIX + wrap(origin, signature)[len(PREFIX) :]


def unwrap_call(value: str) -> Unwrapped | None:
    """The origin and vendor signature of a call's signature the door wrapped (`wrap_call`); None for any other."""
    return unwrap(PREFIX + value[len(CALL_PREFIX) :]) if value.startswith(CALL_PREFIX) else None


def unwrap(value: str) -> Unwrapped | None:
    """The origin and vendor signature of a wrapped signature; None for anything the door did not wrap."""
    if not value.startswith(PREFIX):
        return None
    header, dot, signature = value[len(PREFIX) :].partition(".")
    if not dot or not header:
        return None
    try:
        fields = orjson.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (binascii.Error, ValueError):
        return None
    if not (isinstance(fields, list) and len(fields) == 3 and all(isinstance(f, str) and f for f in fields)):
        return None
    return Unwrapped(Origin(*fields), signature)


@dataclass(frozen=True, slots=True)
class SignedThinking:
    """A thinking block as the vendor signed it: its text, its signature, and whether it was redacted."""

    thinking: str
    signature: str
    redacted: bool = False


def wrap_thinking(origin: Origin, blocks: list[SignedThinking]) -> str:
    """A turn's signed thinking blocks, wrapped with their origin, to ride on a tool call (`THINKING_PREFIX`)."""
    payload = orjson.dumps([[b.thinking, b.signature, b.redacted] for b in blocks])
    return THINKING_PREFIX + wrap(origin, base64.urlsafe_b64encode(payload).decode())[len(PREFIX) :]


def unwrap_thinking(value: str) -> tuple[Origin, list[SignedThinking]] | None:
    """The origin and thinking blocks a tool call carries (`wrap_thinking`); None for anything else."""
    if not value.startswith(THINKING_PREFIX):
        return None
    unwrapped = unwrap(PREFIX + value[len(THINKING_PREFIX) :])
    if unwrapped is None:
        return None
    try:
        blocks = orjson.loads(base64.urlsafe_b64decode(unwrapped.signature))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(blocks, list) or not all(
        isinstance(b, list) and len(b) == 3 and isinstance(b[0], str) and isinstance(b[1], str) and b[1]
        and isinstance(b[2], bool) for b in blocks
    ):  # fmt: skip
        return None
    return unwrapped.origin, [SignedThinking(*b) for b in blocks]
