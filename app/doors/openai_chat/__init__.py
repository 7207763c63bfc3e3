"""The OpenAI Chat Completions door: `POST /v1/chat/completions` (docs/doors/openai-chat.md)."""

from app.doors.base import Door, TurnView
from app.doors.openai_chat.events import ChatEncoder
from app.doors.openai_chat.request import PROSE_PATHS, ChatRequest, decode, error_body


def _encoder(request_id: str, request: ChatRequest, turn: TurnView) -> ChatEncoder:
    return ChatEncoder(request_id, request.client_model, request.include_usage, turn, request.stream_tool_arguments)


DOOR = Door(name="openai-chat", decode=decode, encoder=_encoder, error_body=error_body, prose_paths=PROSE_PATHS)

__all__ = ["DOOR"]
