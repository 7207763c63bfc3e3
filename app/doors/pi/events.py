"""pi's client reads the unified event stream (docs/api.md §11): each event on one `data: ` line of one-line
JSON; it ignores `id:`, `event:` and comment lines, so the unified frames (`app.doors.unified_frames`) serve it
as they are. pi has no non-streaming call: the encoder's `complete` is never used for this door."""

from __future__ import annotations

from app.doors.base import DoorRequest, TurnView
from app.doors.unified_frames import UnifiedEncoder


def encoder(request_id: str, request: DoorRequest, turn: TurnView) -> UnifiedEncoder:
    return UnifiedEncoder()
