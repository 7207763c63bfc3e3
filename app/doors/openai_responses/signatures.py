"""A vendor's opaque reasoning state in a `reasoning` item's `encrypted_content`, wrapped with its origin.

The door hands a client a reasoning item whose `encrypted_content` is the origin-wrapped signature every door
hands out (`app.doors.signatures`):

    gw1.<base64url(JSON ["<provider>", "<api>", "<model>"])>.<the vendor's state, verbatim>

The vendor's state is what the adapter put in the thinking block's signature: an Anthropic thinking
signature, the serialized OpenAI reasoning item (with OpenAI's own `encrypted_content`), a Gemini thought
signature. A redacted block (Anthropic `redacted_thinking`, which has no text and is a different block type
there) is marked by a `r` after the version: `gw1r.<…>`. A function call's own signature (Gemini's
`thoughtSignature` on a `functionCall` part) is a reasoning item of its own, with no text, right after the call,
marked `gw1c.<…>` (`app.doors.signatures.wrap_call`); on the way back it goes on the `function_call` before it.
On the way back the origin becomes the replayed assistant message's provider / api / model, so the adapters'
cross-provider handoff keeps the state only when the conversation is still on the model that made it, and never
sends it to another vendor.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.doors.signatures import PREFIX, Origin, unwrap, unwrap_call, wrap

REDACTED_PREFIX = PREFIX[:-1] + "r."  # "gw1r."


@dataclass(frozen=True, slots=True)
class Opaque:
    """The origin and the vendor's own state of a reasoning item the door handed out."""

    origin: Origin
    signature: str  # "" when the vendor gave no state
    redacted: bool = False
    call: bool = False  # the state of the function call before it (`wrap_call`), not reasoning of its own


def wrap_reasoning(origin: Origin, signature: str | None, *, redacted: bool = False) -> str:
    wrapped = wrap(origin, signature)
    return REDACTED_PREFIX + wrapped[len(PREFIX) :] if redacted else wrapped


def unwrap_reasoning(value: str) -> Opaque | None:
    """The origin and state of an `encrypted_content` the door wrapped; None for anything else (e.g. one a
    client got from OpenAI directly, which has no known origin and is treated as foreign)."""
    if (call := unwrap_call(value)) is not None:
        return Opaque(call.origin, call.signature, call=True)
    redacted = value.startswith(REDACTED_PREFIX)
    unwrapped = unwrap(PREFIX + value[len(REDACTED_PREFIX) :] if redacted else value)
    if unwrapped is None:
        return None
    return Opaque(unwrapped.origin, unwrapped.signature, redacted)


__all__ = ["Opaque", "unwrap_reasoning", "wrap_reasoning"]
