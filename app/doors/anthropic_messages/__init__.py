"""The Anthropic Messages door (`POST /v1/messages`, docs/doors/anthropic-messages.md): `request.py` decodes
Anthropic's request body into the unified request (its `system` and `messages` in `conversation.py`),
`events.py` encodes the normalized events as Anthropic's stream and `message` object (signed thinking
origin-wrapped, `app.doors.signatures`), `errors.py` gives errors Anthropic's shape, `count_tokens.py` answers
`POST /v1/messages/count_tokens` (`COUNT`), `models.py` lists the gateway's models in Anthropic's shape,
`openapi.py` describes the routes."""

from app.doors.anthropic_messages import count_tokens, models, openapi
from app.doors.anthropic_messages.errors import refusal_body
from app.doors.anthropic_messages.events import MessagesEncoder
from app.doors.anthropic_messages.request import decode
from app.doors.base import Door, DoorRoute, ModelListing, TokenCountDoor
from app.doors.validation import ANY_INDEX

# Where a person's text lives in a Messages body (not in thinking blocks, whose text is signed).
PROSE_PATHS: tuple[tuple[str, ...], ...] = (
    ("system",),
    ("system", ANY_INDEX, "text"),
    ("messages", ANY_INDEX, "content"),
    ("messages", ANY_INDEX, "content", ANY_INDEX, "text"),
    ("messages", ANY_INDEX, "content", ANY_INDEX, "content"),
    ("messages", ANY_INDEX, "content", ANY_INDEX, "content", ANY_INDEX, "text"),
)

COUNT = TokenCountDoor(
    route=DoorRoute(
        count_tokens.PATH,
        "count_message_tokens",
        "Anthropic Messages door: the serving vendor's own count of a request's input tokens",
        ("doors",),
        openapi.count_operation,
    ),
    decode=count_tokens.decode,
    answer=count_tokens.answer,
    failed=count_tokens.failed,
    error_body=refusal_body,
    prose_paths=PROSE_PATHS,
)

DOOR = Door(
    name="anthropic-messages",
    routes=(
        DoorRoute(
            openapi.PATH,
            "messages",
            "Anthropic Messages door: Anthropic's event stream or one message object",
            ("doors",),
            openapi.operation,
        ),
    ),
    decode=decode,
    encoder=MessagesEncoder,
    error_body=refusal_body,
    frames_carry_ids=False,
    prose_paths=PROSE_PATHS,
    schemas=openapi.SCHEMAS,
    count_tokens=COUNT,
    models=ModelListing(answer=models.model_list, asked=models.asked),
)

__all__ = ["COUNT", "DOOR"]
