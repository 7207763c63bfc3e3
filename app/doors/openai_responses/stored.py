"""Stored responses as this door names them (`store`, the API's default; `app.api.stored_responses` keeps them):
the id of the response a turn answers with, the response an output item belongs to, the stored responses a
body builds on (`wanted`: `previous_response_id`, and those an `item_reference`'s id belongs to) and the 404 for
one that is not there."""

from __future__ import annotations

from typing import Any

from app.doors.errors import BadRequest
from app.doors.fields import invalid, string_at


def response_not_found(param: str | None, response_id: str) -> BadRequest:
    """The 404 for a stored response that is not there (another key's, expired, deleted or never stored), in
    OpenAI's words; `error_body` makes the type `invalid_request_error` and the code the kind given here."""
    if param is None:  # GET / DELETE /v1/responses/{id}
        return BadRequest(404, "not_found", f"Response with id {response_id!r} not found.")
    return BadRequest(
        404, "previous_response_not_found", f"Previous response with id {response_id!r} not found.", param
    )


def response_id(request_id: str) -> str:
    """The id of the response that answers request `request_id` (its items' ids embed the request id too)."""
    return f"resp_{request_id}"


def response_id_of_item(item_id: str) -> str | None:
    """The response an output item of this door belongs to (`msg_<request id>_<n>` → `resp_<request id>`)."""
    kind, _, rest = item_id.partition("_")
    request_id, _, index = rest.rpartition("_")
    if kind in ("msg", "rs", "fc") and request_id.startswith("req_") and index.isdigit():
        return response_id(request_id)
    return None


def wanted(body: dict[str, Any]) -> tuple[str | None, frozenset[str]]:
    """The stored response `body` continues (`previous_response_id`) and those its `item_reference`s point into."""
    previous = body.get("previous_response_id")
    if previous is not None:
        previous = string_at(previous, "previous_response_id", max_length=256, empty=False)
    referred: set[str] = set()
    items = body.get("input")
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and item.get("type") == "item_reference" and isinstance(item.get("id"), str):
                response_id = response_id_of_item(item["id"])
                if response_id is not None:
                    referred.add(response_id)
    return previous, frozenset(referred - {previous})


def models(body: dict[str, Any]) -> list[str]:
    """The model a body asks for (this door has no fallbacks), checked as `request.decode` checks it."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model", "a model name is required (a string)")
    return [model]
