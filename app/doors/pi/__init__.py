"""pi's `streamProxy()` door: `/api/stream` (docs/api.md §11). The events are the unified ones."""

from app.contract.request import PiStreamRequest
from app.doors.base import Door
from app.doors.pi.events import PiEncoder
from app.doors.pi.request import decode, error_body

DOOR = Door(
    name="pi",
    decode=decode,
    encoder=lambda request_id, _request, _turn: PiEncoder(),
    error_body=error_body,
    prose_paths=PiStreamRequest.PROSE_PATHS,
)

__all__ = ["DOOR"]
