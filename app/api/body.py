"""Read and validate a request body: size limit, JSON, nesting depth, then the pydantic contract model."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from app.api.errors import ApiError

M = TypeVar("M", bound=BaseModel)


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "payload_too_large", f"request body exceeds {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "payload_too_large", f"request body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, walked iteratively; stops counting once past `limit`."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _lenient_loads(raw: bytes, error: orjson.JSONDecodeError) -> Any:
    """JSON with lone UTF-16 surrogate escapes (`"\\ud83d"`, which JavaScript clients send when a string was
    cut inside an emoji) is valid JSON that orjson refuses; parse it with the standard library, and let the
    adapters strip the lone surrogates (app.providers.handoff)."""
    if "surrogate" not in str(error):
        raise ApiError(400, "invalid_json", f"request body is not valid JSON: {error}")
    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(413, "payload_too_deep", "request body nests too deeply") from None
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"request body is not valid JSON: {exc}") from None


def parse_model(raw: bytes, model: type[M], max_depth: int) -> M:
    try:
        data = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError as exc:
        data = _lenient_loads(raw, exc)
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_request", "request body must be a JSON object")
    if json_depth(data, max_depth) > max_depth:
        raise ApiError(413, "payload_too_deep", f"request body nests deeper than {max_depth} levels")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        param = ".".join(str(p) for p in first["loc"])
        count = exc.error_count()
        more = f" (and {count - 1} more)" if count > 1 else ""
        raise ApiError(422, "validation_error", f"{param}: {first['msg']}{more}", param=param) from None
