"""A vendor's signed reasoning state in a Gemini part's `thoughtSignature`, wrapped with its origin.

The origin-wrapped signature every door hands out (`app.doors.signatures`, `gw1.<origin>.<the vendor's
signature>`) is bytes on this wire: a `thoughtSignature` is a proto `bytes` field,
which the Google GenAI SDKs decode from base64 (the Python SDK refuses anything else). So the door hands out
the wrapped signature's base64, and reads back either base64 alphabet (the SDKs write the bytes again as they
serialize them). On the way back the origin becomes the replayed model turn's provider / api / model, so the
adapters' cross-provider handoff keeps the vendor's state only when the conversation is still on the model
that made it; a signature the door did not wrap (one from Gemini directly) has no known origin and is dropped.
"""

from __future__ import annotations

import base64
import binascii

from app.doors.signatures import Origin, SignedThinking, Unwrapped, unwrap, unwrap_thinking, wrap, wrap_thinking


def wrap_signature(origin: Origin, signature: str | None) -> str:
    return base64.b64encode(wrap(origin, signature).encode()).decode("ascii")


def wrap_thinking_signature(origin: Origin, blocks: list[SignedThinking]) -> str:
    """A turn's signed thinking as a functionCall part's `thoughtSignature` (`app.doors.signatures.wrap_thinking`)."""
    return base64.b64encode(wrap_thinking(origin, blocks).encode()).decode("ascii")


def _decoded(value: str) -> str | None:
    padded = value + "=" * (-len(value) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            return decode(padded).decode("ascii")
        except (binascii.Error, ValueError):
            continue
    return None


def unwrap_signature(value: str) -> Unwrapped | None:
    """The origin and vendor signature of a `thoughtSignature` the door handed out; None for any other."""
    text = _decoded(value)
    return None if text is None else unwrap(text)


def unwrap_thinking_signature(value: str) -> tuple[Origin, list[SignedThinking]] | None:
    """The origin and thinking blocks a functionCall part's `thoughtSignature` carries; None for any other."""
    text = _decoded(value)
    return None if text is None else unwrap_thinking(text)


__all__ = ["unwrap_signature", "unwrap_thinking_signature", "wrap_signature", "wrap_thinking_signature"]
