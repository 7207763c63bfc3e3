"""The gateway's own door: `/v1/stream` (SSE of normalized events) and `/v1/complete` (docs/api.md §3-§8)."""

from app.contract.request import StreamRequest
from app.doors.base import Door, DoorRequest, TurnView
from app.doors.unified.events import UnifiedEncoder
from app.doors.unified.request import decode, error_body
from app.stream.partial_arguments import PartialArguments


def _encoder(request_id: str, request: DoorRequest, _turn: TurnView) -> UnifiedEncoder:
    return UnifiedEncoder(PartialArguments() if request.unified.options.partial_arguments else None)


DOOR = Door(
    name="unified", decode=decode, encoder=_encoder, error_body=error_body, prose_paths=StreamRequest.PROSE_PATHS
)

__all__ = ["DOOR"]
