"""The unified door's encoder: the gateway's own frames (`app.doors.unified_frames`), each `toolcall_delta` with
`partialArguments` (the arguments parsed so far) when the request asks for them (`options.partialArguments`)."""

from __future__ import annotations

from app.doors.base import DoorRequest, TurnView
from app.doors.unified_frames import UnifiedEncoder
from app.stream.partial_arguments import PartialArguments


def encoder(request_id: str, request: DoorRequest, turn: TurnView) -> UnifiedEncoder:
    return UnifiedEncoder(PartialArguments() if request.unified.options.partial_arguments else None)
