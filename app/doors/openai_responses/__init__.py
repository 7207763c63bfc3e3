"""The OpenAI Responses door (`POST /v1/responses`, docs/doors/openai-responses.md): `request.py` decodes a
Responses request into the unified request, `events.py` encodes the normalized events as the Responses
stream and `response` object, `reasoning.py` wraps a vendor's reasoning state with its origin in
`encrypted_content`, `openapi.py` describes the route."""

from app.doors.base import Door, DoorRoute, TurnView
from app.doors.openai_responses import openapi
from app.doors.openai_responses.events import ResponsesEncoder
from app.doors.openai_responses.request import PROSE_PATHS, ResponsesRequest, decode, error_body


def _encoder(request_id: str, request: ResponsesRequest, turn: TurnView) -> ResponsesEncoder:
    return ResponsesEncoder(request_id, request, turn)


DOOR = Door(
    name="openai-responses",
    routes=(
        DoorRoute(
            openapi.PATH, "responses", "OpenAI Responses door: the Responses event stream or one response object",
            ("doors",), openapi.operation,
        ),
    ),
    decode=decode,
    encoder=_encoder,
    error_body=error_body,
    frames_carry_ids=False,
    prose_paths=PROSE_PATHS,
    schemas=openapi.SCHEMAS,
)

__all__ = ["DOOR"]
