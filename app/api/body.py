"""Read and validate a request body: size limit, JSON, nesting depth, what strings may contain, then the
pydantic contract model.

This is the one place that decides what a request may contain (every door parses its body here):

- `Content-Type: application/json` (415 otherwise, `require_json`);
- at most `GATEWAY_MAX_BODY_BYTES` bytes (413) of JSON (400) nested at most `GATEWAY_MAX_JSON_DEPTH` levels
  (413, also for JSON deeper than the parser's own limit of 1,024);
- lone UTF-16 surrogate escapes (`"\\ud83d"`, which JavaScript clients send when they cut a string inside an
  emoji) are removed from the text a person wrote (the paths a door's model names in `PROSE_PATHS`: message
  text, the system prompt) and refused with 422 naming the field anywhere else (ids, tool schemas, metadata,
  tool-call arguments, thinking, which may be signed), since no vendor and no record can carry them;
- then the door's model (`app.doors.validation.validate`: 422 listing every problem, `param` naming the first).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel
from starlette.requests import ClientDisconnect, Request

from app.api.error_responses import ApiError
from app.doors.validation import ANY_INDEX, validate
from app.gc_pause import gc_paused

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

OFF_LOOP_BYTES = 256 * 1024
log = logging.getLogger("gateway")

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_INT64 = (-(2**63), 2**64 - 1)  # orjson reads integers beyond 64 bits as floats; the fallback parser does too


def require_json(headers: Mapping[str, str]) -> None:
    """A turn's body must say it is JSON (`Content-Type: application/json`, parameters allowed): a web page can
    POST `text/plain` (or a body with no type) to another site without asking first, JSON it cannot (415)."""
    declared = headers.get("content-type")
    media_type = (declared or "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        shown = f"Content-Type {declared!r}" if declared is not None else "no Content-Type"
        raise ApiError(
            415, "unsupported_media_type", f"request body must be application/json (the request has {shown})"
        )


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "payload_too_large", f"request body exceeds {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, "payload_too_large", f"request body exceeds {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        # The client's doing, not an error of ours: one info line; the answer goes nowhere.
        log.info("request %s: client disconnected after %d bytes of its body", _request_id(request), size)
        raise ApiError(400, "client_disconnected", "client disconnected while sending the request body") from None
    return b"".join(chunks)


def _request_id(request: Request) -> str:
    return request.scope.get("state", {}).get("request_id", "?")


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, walked level by level; stops counting once past `limit`."""
    depth = 0
    level = [value]
    while level:
        depth += 1
        if depth > limit:
            return depth
        below: list[Any] = []
        for item in level:
            if type(item) is dict:
                below.extend(v for v in item.values() if type(v) is dict or type(v) is list)
            elif type(item) is list:
                below.extend(v for v in item if type(v) is dict or type(v) is list)
        level = below
    return depth


def _too_deep(limit: int) -> ApiError:
    return ApiError(413, "payload_too_deep", f"request body nests deeper than {limit} levels")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is out of range")
    return value


def _int_like_orjson(text: str) -> int | float:
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else float(value)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(raw: bytes, max_depth: int) -> tuple[Any, bool]:
    """The parsed body, and whether it may hold lone surrogates (then it came from the fallback parser).

    orjson refuses lone surrogate escapes, which are valid JSON; such a body is parsed again by the standard
    library, told to read numbers as orjson does."""
    try:
        return (orjson.loads(raw) if raw else None), False
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise _too_deep(max_depth) from None
        if "surrogate" not in str(exc):
            raise ApiError(400, "invalid_json", f"request body is not valid JSON: {exc}") from None
    try:
        data = json.loads(raw, parse_float=_finite_float, parse_int=_int_like_orjson, parse_constant=_refuse_constant)
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"request body is not valid JSON: {exc}") from None
    return data, True


def _is_prose(path: tuple[str | int, ...], prose_paths: tuple[tuple[str, ...], ...]) -> bool:
    for pattern in prose_paths:
        if len(pattern) == len(path) and all(
            p == ANY_INDEX and isinstance(step, int) or p == step for p, step in zip(pattern, path)
        ):
            return True
    return False


def clean_surrogates(data: Any, prose_paths: tuple[tuple[str, ...], ...]) -> None:
    """Remove lone surrogates from prose in place; refuse them anywhere else, keys included (422 naming
    the field)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        item, where = stack.pop()
        children = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in children:
            if isinstance(key, str) and _LONE_SURROGATE.search(key):
                _refuse_surrogate(where)
            if isinstance(child, (dict, list)):
                stack.append((child, (*where, key)))
            elif isinstance(child, str) and _LONE_SURROGATE.search(child):
                path = (*where, key)
                if not _is_prose(path, prose_paths):
                    _refuse_surrogate(path)
                item[key] = _LONE_SURROGATE.sub("", child)


def _refuse_surrogate(path: tuple[str | int, ...]) -> None:
    param = ".".join(str(p) for p in path)
    raise ApiError(
        422,
        "validation_error",
        f"{param}: contains a lone UTF-16 surrogate (half of a character); only message text and the system "
        "prompt may, and there it is removed",
        param=param,
    )


def parse_json(raw: bytes, max_depth: int, prose_paths: tuple[tuple[str, ...], ...] = ()) -> dict[str, Any]:
    """The body as a JSON object within the nesting limit, lone surrogates removed from the `prose_paths`
    (and refused anywhere else): 400 not JSON or not an object, 413 too deep, 422 a misplaced surrogate."""
    data, may_hold_surrogates = _loads(raw, max_depth)
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_request", "request body must be a JSON object")
    if json_depth(data, max_depth) > max_depth:
        raise _too_deep(max_depth)
    if may_hold_surrogates:
        clean_surrogates(data, prose_paths)
    return data


def parse_model(raw: bytes, model: type[M], max_depth: int) -> M:
    return validate(parse_json(raw, max_depth, getattr(model, "PROSE_PATHS", ())), model)


async def parse_off_loop(raw: bytes, parse: Callable[[bytes], T]) -> T:
    """`parse(raw)`, in a worker thread for a body of `OFF_LOOP_BYTES` or more, with the cyclic collector
    paused (its rescans of the objects just built were two thirds of the time spent validating 120,000
    messages), so that no request holds the other streams while it is parsed. What a large body costs is the
    client's business; that it costs the other streams nothing is the gateway's."""
    return await off_loop(len(raw), lambda: parse(raw))


async def off_loop(size: int, work: Callable[[], T]) -> T:
    """`work()`, in a worker thread with the cyclic collector paused when what it reads or builds is `size` bytes,
    `OFF_LOOP_BYTES` or more (a body, a stored conversation), else at once: no request holds the event loop
    (and so the other streams, and every admission's Redis deadline) for longer than a small body takes."""
    if size < OFF_LOOP_BYTES:
        return work()
    return await asyncio.to_thread(_paused, work)


def _paused(work: Callable[[], T]) -> T:
    with gc_paused():
        return work()
