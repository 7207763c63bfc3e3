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

from app.doors.signatures import Origin, Unwrapped, unwrap, wrap


def wrap_signature(origin: Origin, signature: str | None) -> str:
    return base64.b64encode(wrap(origin, signature).encode()).decode("ascii")


def unwrap_signature(value: str) -> Unwrapped | None:
    """The origin and vendor signature of a `thoughtSignature` the door handed out; None for any other."""
    padded = value + "=" * (-len(value) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            text = decode(padded).decode("ascii")
        except (binascii.Error, ValueError):
            continue
        return unwrap(text)
    return None


__all__ = ["unwrap_signature", "wrap_signature"]
