"""Validate a parsed request body against a door's pydantic model: one 422 `BadRequest` listing every problem
(`param` naming the first), and a long conversation validated in slices so that a worker thread lets the event
loop run between them (`app.api.body.parse_off_loop`). Also the helpers doors use to word a pydantic error."""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from app.doors.errors import BadRequest

M = TypeVar("M", bound=BaseModel)

SLICE = 500  # items of a bulk list validated in one pydantic call (a few milliseconds)
ANY_INDEX = "*"  # in a prose path: any list index


def validation_error(errors: list[ErrorDetails]) -> BadRequest:
    """One 422 listing every problem; `param` names the first."""
    problems = [_describe(e) for e in errors] or [("", "invalid request")]
    message = "; ".join(f"{param}: {text}" if param else text for param, text in problems)
    return BadRequest(422, "validation_error", message, param=problems[0][0] or None)


def _describe(error: ErrorDetails) -> tuple[str, str]:
    param = ".".join(str(p) for p in error["loc"])
    ctx = error.get("ctx") or {}
    if error["type"] == "system_role":
        return ".".join(str(p) for p in error["loc"][:-1]), error["msg"]
    if error["type"] == "union_tag_invalid" and ctx.get("tag") == "system":
        return param, (
            "there is no system role: the system prompt goes in context.systemPrompt; messages are user, "
            "assistant or toolResult"
        )
    return param, error["msg"]


def validate(data: dict[str, Any], model: type[M]) -> M:
    """`data` as the pydantic contract `model` (422 listing every problem, `param` naming the first).

    A long `BULK_LIST` (the conversation's messages) is validated `SLICE` items at a time: one pydantic call
    holds the interpreter throughout, and in a worker thread (`parse_off_loop`) the event loop's thread runs
    between slices."""
    bulk_path: tuple[str, ...] = getattr(model, "BULK_LIST", ())
    bulk = _bulk_list(data, bulk_path)
    if bulk is None or len(bulk) <= SLICE:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise validation_error(exc.errors(include_url=False)) from None
    return _validate_sliced(data, model, bulk_path, bulk)


def _bulk_list(data: dict[str, Any], path: tuple[str, ...]) -> list[Any] | None:
    node: Any = data
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node if path and isinstance(node, list) else None


def _validate_sliced(data: dict[str, Any], model: type[M], path: tuple[str, ...], items: list[Any]) -> M:
    """Validate `model` with the bulk list cut to its first item, then the list itself slice by slice, then put
    the validated list in place. Problems are reported as one validation would (the list's item paths)."""
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = items[:1]
    errors: list[ErrorDetails] = []
    try:
        result = model.model_validate(data)
    except ValidationError as exc:
        first_item = (*path, 0)  # validated again with its slice below
        errors.extend(e for e in exc.errors(include_url=False) if tuple(e["loc"][: len(first_item)]) != first_item)
        result = None
    finally:
        parent[path[-1]] = items
    adapter = _list_adapter(model, path)
    validated: list[Any] = []
    for start in range(0, len(items), SLICE):
        time.sleep(0)  # let the event loop's thread take the interpreter between slices
        chunk = items[start : start + SLICE]
        try:
            validated.extend(adapter.validate_python(chunk))
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                index, *rest = error["loc"]
                error["loc"] = (*path, start + int(index), *rest)
                errors.append(error)
        # Free the parsed JSON slice by slice too: freeing it all at once also holds the interpreter.
        items[start : start + SLICE] = [None] * len(chunk)
        del chunk
    if errors or result is None:
        raise validation_error(errors)
    owner: Any = result
    for key in path[:-1]:
        owner = getattr(owner, _attribute(type(owner), key))
    setattr(owner, _attribute(type(owner), path[-1]), validated)
    return result


def _attribute(model: type[BaseModel], key: str) -> str:
    """The attribute of `model` that the body's `key` (an alias or a field name) fills."""
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return name
    raise KeyError(key)


@lru_cache(maxsize=None)
def _list_adapter(model: type[BaseModel], path: tuple[str, ...]) -> TypeAdapter[list[Any]]:
    owner: Any = model
    for key in path[:-1]:
        owner = owner.model_fields[_attribute(owner, key)].annotation
    return TypeAdapter(owner.model_fields[_attribute(owner, path[-1])].annotation)
