"""`GET /v1/responses/{id}/input_items`: the input items of a stored response, as OpenAI lists them
(`client.responses.input_items.list`): `{"object": "list", "data", "first_id", "last_id", "has_more"}`.

The input items are the stored conversation before the response's own output: the conversation it continued
(`previous_response_id`, whose output items are there too) and its `input`, with `item_reference`s replaced by
the items they named. Each is shown in the shape the SDK's `ResponseItem` has (a string `content` as one text
part, a `status`); an item the client sent without an `id` gets one from its position
(`<msg|fc|fco|rs>_<request id>_in<n>`), the same on every listing. A reasoning item's `encrypted_content` is
shown only with `include=reasoning.encrypted_content`.

Query: `order` `asc` or `desc` (the default, newest first), `limit` 1–100 (default 20), `after` / `before` an
item id of the list (the page after or before it in that order), `include`; anything else is a 400 naming the
parameter, as is an `after` / `before` naming no item of the list."""

from __future__ import annotations

from typing import Any, Sequence

from app.doors.base import StoredResponse
from app.doors.fields import invalid
from app.doors.openai_responses.request import ENCRYPTED_REASONING

DEFAULT_LIMIT, MAX_LIMIT = 20, 100
_PARAMS = frozenset({"after", "before", "limit", "order", "include", "include[]"})
_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


def _query(query: Sequence[tuple[str, str]]) -> tuple[str | None, str | None, int, str, bool]:
    values: dict[str, str] = {}
    include: list[str] = []
    for name, value in query:
        if name not in _PARAMS:
            raise invalid(name, "unrecognized query parameter (after, before, limit, order and include are)")
        if name.startswith("include"):
            include.extend(v for v in value.split(",") if v)
        else:
            values[name] = value
    order = values.get("order", "desc")
    if order not in ("asc", "desc"):
        raise invalid("order", "must be asc or desc")
    raw_limit = values.get("limit", str(DEFAULT_LIMIT))
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LIMIT:
        raise invalid("limit", f"must be an integer between 1 and {MAX_LIMIT}")
    if "after" in values and "before" in values:
        raise invalid("before", "give after or before, not both")
    return values.get("after"), values.get("before"), int(raw_limit), order, ENCRYPTED_REASONING in include


def _parts(content: Any, kind: str) -> Any:
    """A string content as one text part of `kind`; an `output_text` part gets the `annotations` it must have."""
    parts = [{"type": kind, "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list):
        return parts
    return [{"annotations": [], **p} if isinstance(p, dict) and p.get("type") == "output_text" else p for p in parts]


def shown(item: dict[str, Any], item_id: str, encrypted: bool) -> dict[str, Any]:
    """One stored input item in the shape of the SDK's `ResponseItem`."""
    kind = item.get("type", "message")
    shaped = {key: value for key, value in item.items() if key != "encrypted_content" or encrypted}
    shaped.update(id=item_id, type=kind)
    if kind == "message":
        assistant = item.get("role") == "assistant"
        shaped["content"] = _parts(item.get("content"), "output_text" if assistant else "input_text")
    if kind != "reasoning":
        shaped.setdefault("status", "completed")
    return shaped


def _item_id(item: dict[str, Any], request_id: str, position: int) -> str:
    """The item's own id, or one from its position in the stored conversation."""
    if isinstance(item.get("id"), str):
        return item["id"]
    return f"{_PREFIX.get(item.get('type', 'message'), 'item')}_{request_id}_in{position}"


def listing(stored: StoredResponse, query: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The list answer for one page of the stored response's input items (see the module docstring)."""
    after, before, limit, order, encrypted = _query(query)
    request_id = str(stored.response.get("id", "")).removeprefix("resp_")
    inputs = stored.items[: len(stored.items) - len(stored.response.get("output") or [])]
    items = [shown(item, _item_id(item, request_id, n), encrypted) for n, item in enumerate(inputs)]
    if order == "desc":
        items.reverse()
    ids = [item["id"] for item in items]
    start, end = 0, len(items)
    for name, cursor in (("after", after), ("before", before)):
        if cursor is not None and cursor not in ids:
            raise invalid(name, f"{cursor!r} names no input item of this response")
    if after is not None:
        start = ids.index(after) + 1
        page = items[start : start + limit]
        more = start + limit < end
    elif before is not None:
        end = ids.index(before)
        page = items[max(0, end - limit) : end]
        more = end - limit > 0
    else:
        page = items[:limit]
        more = limit < end
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": more,
    }


__all__ = ["listing", "shown"]
