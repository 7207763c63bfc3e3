"""pi's `streamProxy()` door: `/api/stream` (docs/api.md §11). The events are the unified ones."""

from app.contract.request import PiStreamRequest
from app.doors.base import Door, DoorRoute
from app.doors.pi import openapi
from app.doors.pi.events import PiEncoder
from app.doors.pi.request import decode, error_body

DOOR = Door(
    name="pi",
    routes=(
        DoorRoute(
            "/api/stream", "pi_stream", "pi-compatible stream (pi's streamProxy client)", ("turns",),
            openapi.operation, stream=True, listed=1,
        ),
    ),
    decode=decode,
    encoder=lambda request_id, _request, _turn: PiEncoder(),
    error_body=error_body,
    frames_carry_ids=True,  # the unified frames, `id: N` included (a resumable stream once had a second one)
    prose_paths=PiStreamRequest.PROSE_PATHS,
)

__all__ = ["DOOR"]
