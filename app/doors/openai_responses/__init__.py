"""The OpenAI Responses door (`POST /v1/responses`, docs/doors/openai-responses.md): `request.py` decodes a
Responses request into the unified request (its `input` items in `conversation.py`), `events.py` encodes the
normalized events as the Responses stream and `response` object, `signatures.py` wraps a vendor's reasoning
state with its origin in `encrypted_content`, `stored.py` names stored responses, `compaction.py` and
`compact.py` compact a conversation, `count_tokens.py` answers `POST /v1/responses/input_tokens`,
`input_items.py` lists a stored response's input items, `openapi.py` describes the routes; errors are OpenAI's
shape (`app.doors.openai_errors`)."""

from typing import Any

from app.core.settled import SettledTurn
from app.doors.base import Door, DoorRoute, StoredResponse, StoredResponses, TokenCountDoor, TurnView
from app.doors.errors import BadRequest
from app.doors.openai_errors import error_body
from app.doors.openai_responses import compact, count_tokens, input_items, openapi
from app.doors.openai_responses.events import ResponsesEncoder
from app.doors.openai_responses.request import PROSE_PATHS, ResponsesRequest, decode
from app.doors.openai_responses.stored import models as stored_models
from app.doors.openai_responses.stored import response_id, response_not_found, wanted


def _encoder(request_id: str, request: ResponsesRequest, turn: TurnView) -> ResponsesEncoder:
    return ResponsesEncoder(request_id, request, turn)


def _keep(
    request: ResponsesRequest, encoder: ResponsesEncoder, result: SettledTurn
) -> tuple[str, StoredResponse] | None:
    """With `store` (the default), a turn that settled `done` is kept: the response object as the client got it
    (completed or incomplete) and the conversation — the request's items and the response's output."""
    if not request.store or result.outcome != "done":
        return None
    response = encoder.response_of(result.message, result.message.get("usage"))
    items = [*request.items, *encoder.stored_output(result.message)]
    return encoder.response_id, StoredResponse(response=response, items=items)


def _deleted(response_id: str) -> dict[str, Any]:
    return {"id": response_id, "object": "response.deleted", "deleted": True}


COUNT = TokenCountDoor(
    route=DoorRoute(
        count_tokens.PATH,
        "count_response_input_tokens",
        "OpenAI Responses door: the serving vendor's own count of a request's input tokens",
        ("doors",),
        openapi.input_tokens_operation,
    ),
    decode=count_tokens.decode,
    answer=count_tokens.answer,
    failed=count_tokens.failed,
    error_body=error_body,
    prose_paths=PROSE_PATHS,
)

# The Codex CLI opens `GET /v1/responses` as a WebSocket first when its provider allows it (the built-in OpenAI
# provider does, also with `openai_base_url` pointing here). A 426 makes it fall back to HTTP at once; a 403,
# 404 or 405 makes it try the upgrade again with back-off (7 attempts over 7 s) before it falls back.
WEBSOCKET_REFUSED = BadRequest(
    426,
    "websocket_not_supported",
    "This gateway does not offer the Responses WebSocket transport: POST /v1/responses (with stream: true) instead.",
)

DOOR = Door(
    name="openai-responses",
    routes=(
        DoorRoute(
            openapi.PATH,
            "responses",
            "OpenAI Responses door: the Responses event stream or one response object",
            ("doors",),
            openapi.operation,
        ),
        DoorRoute(
            compact.PATH,
            "compact_response",
            "OpenAI Responses door: a conversation compacted by its model (the user messages and one compaction item)",
            ("doors",),
            openapi.compact_operation,
            stream=False,
            decode=compact.decode,
        ),
    ),
    decode=decode,
    encoder=_encoder,
    error_body=error_body,
    frames_carry_ids=False,
    prose_paths=PROSE_PATHS,
    schemas=openapi.SCHEMAS,
    count_tokens=COUNT,
    stored=StoredResponses(
        wanted=wanted,
        models=stored_models,
        response_id=response_id,
        decode=decode,
        keep=_keep,
        not_found=response_not_found,
        path=openapi.STORED_PATH,
        deleted=_deleted,
        operation=openapi.stored_operation,
        items_path=openapi.ITEMS_PATH,
        input_items=input_items.listing,
        items_operation=openapi.items_operation,
    ),
    websocket_refused=(openapi.PATH, WEBSOCKET_REFUSED),
)

__all__ = ["DOOR"]
