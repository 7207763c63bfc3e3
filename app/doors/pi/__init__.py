"""pi's `streamProxy()` door: `/api/stream` (docs/api.md §11). The events are the unified ones."""

from app.contract.request import PiStreamRequest
from app.doors.base import Door, DoorRoute
from app.doors.pi import events, openapi
from app.doors.pi.errors import error_body
from app.doors.pi.request import decode

DOOR = Door(
    name="pi",
    routes=(
        DoorRoute(
            "/api/stream",
            "pi_stream",
            "pi-compatible stream (pi's streamProxy client)",
            ("turns",),
            openapi.operation,
            stream=True,
            listed=1,
        ),
    ),
    decode=decode,
    encoder=events.encoder,
    error_body=error_body,
    frames_carry_ids=True,  # the unified frames, `id: N` included (a resumable stream once had a second one)
    prose_paths=PiStreamRequest.PROSE_PATHS,
)

__all__ = ["DOOR"]
