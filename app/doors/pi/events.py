"""pi's client reads the unified event stream (docs/api.md §11): each event on one `data: ` line of one-line
JSON; it ignores `id:`, `event:` and comment lines, so the unified frames serve it as they are."""

from __future__ import annotations

from app.doors.unified.events import UnifiedEncoder


class PiEncoder(UnifiedEncoder):
    """The unified frames. pi has no non-streaming call; `complete` is never used for this door."""

    __slots__ = ()
