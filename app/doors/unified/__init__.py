"""The gateway's own door: `/v1/stream` (SSE of normalized events) and `/v1/complete` (docs/api.md §3-§8)."""

from app.contract.request import StreamRequest
from app.doors.base import Door, DoorRequest, DoorRoute, TurnView
from app.doors.unified import openapi
from app.doors.unified.events import UnifiedEncoder
from app.doors.unified.request import decode, error_body
from app.stream.partial_arguments import PartialArguments


def _encoder(request_id: str, request: DoorRequest, _turn: TurnView) -> UnifiedEncoder:
    return UnifiedEncoder(PartialArguments() if request.unified.options.partial_arguments else None)


DOOR = Door(
    name="unified",
    routes=(
        DoorRoute(
            "/v1/stream", "stream_turn", "One assistant turn, streamed as server-sent events", ("turns",),
            openapi.stream_operation, stream=True, listed=0,
        ),
        DoorRoute(
            "/v1/complete", "complete_turn", "One assistant turn, answered as one AssistantMessage", ("turns",),
            openapi.complete_operation, stream=False, listed=2,
        ),
    ),
    decode=decode,
    encoder=_encoder,
    error_body=error_body,
    frames_carry_ids=True,  # `id: N` on every frame (the event's sequence number)
    prose_paths=StreamRequest.PROSE_PATHS,
)

__all__ = ["DOOR"]
