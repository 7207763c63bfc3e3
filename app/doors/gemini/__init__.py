"""The Gemini door (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`, `:generateContent`, also under
`/v1/`, and `:countTokens`; docs/doors/gemini.md): `request.py` decodes Gemini's request body (with the model
of the URL, `bind_url`; its `contents` in `conversation.py`, read as proto JSON, `proto_json.py`) into the unified
request, `events.py` encodes the normalized events as Gemini's chunks and `GenerateContentResponse`,
`signatures.py` wraps thought signatures with their origin, `errors.py` gives errors Google's shape,
`count_tokens.py` answers `:countTokens`, `models.py` lists the gateway's models in Gemini's shape (`GET
/v1beta/models`, and `GET /v1/models` for the Google SDKs), `openapi.py` describes the routes."""

from __future__ import annotations

from functools import partial

from app.doors.base import Door, DoorRoute, ModelListing, ModelRoute, TokenCountDoor, TurnView
from app.doors.gemini import count_tokens, models, openapi
from app.doors.gemini.errors import refusal_body
from app.doors.gemini.events import GeminiArrayEncoder, GeminiEncoder
from app.doors.gemini.request import GeminiRequest, bind_url, decode
from app.doors.validation import ANY_INDEX

# Where a person's text lives in a Gemini body (not in thought parts, whose text may be signed).
PROSE_PATHS: tuple[tuple[str, ...], ...] = (
    ("contents", ANY_INDEX, "parts", ANY_INDEX, "text"),
    ("systemInstruction", "parts", ANY_INDEX, "text"),
    ("systemInstruction",),
)
COUNT_PROSE_PATHS = PROSE_PATHS + tuple(("generateContentRequest", *path) for path in PROSE_PATHS)


def _encoder(request_id: str, request: GeminiRequest, turn: TurnView) -> GeminiEncoder:
    return (GeminiArrayEncoder if request.array else GeminiEncoder)(request_id, request, turn)


def _route(path: str, stream: bool) -> DoorRoute:
    name = "stream_generate_content" if stream else "generate_content"
    summary = ("Gemini door: Gemini's chunks as server-sent events (?alt=sse)" if stream
               else "Gemini door: one GenerateContentResponse")  # fmt: skip
    operation = openapi.stream_operation if stream else openapi.answer_operation
    version = path.split("/")[1]
    return DoorRoute(path, f"gemini_{name}_{version}", summary, ("doors",), operation, stream=stream,
                     from_url=partial(bind_url, stream=stream), key_in_query=True)  # fmt: skip


COUNT = TokenCountDoor(
    route=DoorRoute(
        openapi.COUNT_PATHS[0],
        "gemini_count_tokens",
        "Gemini door: the serving vendor's own count of a request's tokens",
        ("doors",),
        openapi.count_operation,
        from_url=bind_url,
        key_in_query=True,
        more_paths=openapi.COUNT_PATHS[1:],
    ),
    decode=count_tokens.decode,
    answer=count_tokens.answer,
    failed=count_tokens.failed,
    error_body=refusal_body,
    prose_paths=COUNT_PROSE_PATHS,
)

MODELS = ModelListing(
    answer=models.model_list,
    asked=models.asked,
    routes=(
        ModelRoute(
            openapi.LIST_PATH,
            "list_gemini_models",
            "Models and routes this gateway serves (Gemini's list shape)",
            "`{\"models\": [Model]}` as Gemini's `GET /v1beta/models` answers (the Google GenAI SDKs' `models.list()`),\n"
            "each `name` a gateway model name after `models/`; the key may come as `?key=` as on the Gemini door.",
            openapi.LIST_RESPONSES,
        ),
        *(
            ModelRoute(
                path,
                f"get_gemini_model_{path.split('/')[1]}",
                "One model this gateway serves (Gemini's Model shape)",
                "Gemini's `GET /v1beta/models/{model}` (the SDKs' `models.get()`, also under `/v1/`); errors in Google's\n"
                "shape.",
                openapi.MODEL_RESPONSES,
            )
            for path in openapi.GET_PATHS
        ),
    ),
    model=models.model_of,
    key_in_query=True,
)

DOOR = Door(
    name="gemini",
    routes=(
        *(_route(path, True) for path in openapi.STREAM_PATHS),
        *(_route(path, False) for path in openapi.ANSWER_PATHS),
    ),
    decode=decode,
    encoder=_encoder,
    error_body=refusal_body,
    frames_carry_ids=False,
    prose_paths=PROSE_PATHS,
    schemas=openapi.SCHEMAS,
    count_tokens=COUNT,
    models=MODELS,
)

__all__ = ["COUNT", "DOOR"]
