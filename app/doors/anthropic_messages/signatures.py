"""Signed thinking that round-trips through an Anthropic Messages client, without leaking across vendors.

The door hands a client a `thinking` block's `signature` (and a `redacted_thinking` block's `data`) as an
*origin-wrapped* string:

    gw1.<base64url(JSON ["<provider>", "<api>", "<model>"]), no padding>.<the vendor's signature, verbatim>

and unwraps it when the client sends the block back. The origin becomes the replayed assistant message's
`provider` / `api` / `model`, so the adapter's cross-provider handoff (`app.providers.handoff`) keeps the
vendor's signature only when the conversation is still on the model that made it, and otherwise replays the
thinking as plain text (or drops redacted thinking) instead of sending a foreign signature to a vendor.

A tool call's own signature (Gemini's `thoughtSignature` on a `functionCall` part, which Gemini 3 wants back on
that call) has no block of its own on this wire: the door hands it out in a `thinking` block with empty text
right after the call's `tool_use`, its signature marked `gw1c.` instead of `gw1.` (`wrap_call`), and on the way
back puts it on the `tool_use` just before (`unwrap_call`); the Responses door carries it the same way in a
`reasoning` item.

A signature without the `gw1.` prefix (say one a client got from Anthropic directly) has no known origin and
is treated as foreign. The wrapper is provenance, not a security boundary: a forged origin can only make the
gateway hand a client-supplied string to a vendor as a signature, which the vendor verifies itself.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import orjson

from app.contract.messages import ToolCall

PREFIX = "gw1."
CALL_PREFIX = "gw1c."  # a tool call's own signature, which goes back on the call before it


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
    return CALL_PREFIX + wrap(origin, signature)[len(PREFIX):]


def unwrap_call(value: str) -> Unwrapped | None:
    """The origin and vendor signature of a call's signature the door wrapped (`wrap_call`); None for any other."""
    return unwrap(PREFIX + value[len(CALL_PREFIX):]) if value.startswith(CALL_PREFIX) else None


def unwrap(value: str) -> Unwrapped | None:
    """The origin and vendor signature of a wrapped signature; None for anything the door did not wrap."""
    if not value.startswith(PREFIX):
        return None
    header, dot, signature = value[len(PREFIX):].partition(".")
    if not dot or not header:
        return None
    try:
        fields = orjson.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (binascii.Error, ValueError):
        return None
    if not (isinstance(fields, list) and len(fields) == 3 and all(isinstance(f, str) and f for f in fields)):
        return None
    return Unwrapped(Origin(*fields), signature)
