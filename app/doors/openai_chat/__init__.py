"""The OpenAI Chat Completions door: `POST /v1/chat/completions` (docs/doors/openai-chat.md): `request.py` decodes
the request (its `messages` in `conversation.py`), `events.py` encodes the normalized events as chunks or one
`chat.completion`, `openapi.py` describes the route; errors are OpenAI's shape (`app.doors.openai_errors`)."""

from app.doors.base import Door, DoorRoute, TurnView
from app.doors.openai_chat import openapi
from app.doors.openai_chat.events import ChatEncoder
from app.doors.openai_chat.request import PROSE_PATHS, ChatRequest, decode
from app.doors.openai_errors import error_body


def _encoder(request_id: str, request: ChatRequest, turn: TurnView) -> ChatEncoder:
    return ChatEncoder(request_id, request.client_model, request.include_usage, turn, request.stream_tool_arguments)


DOOR = Door(
    name="openai-chat",
    routes=(
        DoorRoute(
            openapi.PATH,
            "chat_completions",
            "OpenAI Chat Completions door: streamed chat.completion.chunk lines or one chat.completion",
            ("doors",),
            openapi.operation,
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
