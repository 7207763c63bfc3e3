"""The gateway's own door: `/v1/stream` (SSE of normalized events) and `/v1/complete` (docs/api.md §3-§8)."""

from app.contract.request import StreamRequest
from app.doors.base import Door, DoorRoute
from app.doors.unified import events, openapi
from app.doors.unified.errors import error_body
from app.doors.unified.request import decode

DOOR = Door(
    name="unified",
    routes=(
        DoorRoute(
            "/v1/stream",
            "stream_turn",
            "One assistant turn, streamed as server-sent events",
            ("turns",),
            openapi.stream_operation,
            stream=True,
            listed=0,
        ),
        DoorRoute(
            "/v1/complete",
            "complete_turn",
            "One assistant turn, answered as one AssistantMessage",
            ("turns",),
            openapi.complete_operation,
            stream=False,
            listed=2,
        ),
    ),
    decode=decode,
    encoder=events.encoder,
    error_body=error_body,
    frames_carry_ids=True,  # `id: N` on every frame (the event's sequence number)
    prose_paths=StreamRequest.PROSE_PATHS,
)

__all__ = ["DOOR"]
