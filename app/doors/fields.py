"""The one reader of hand-read request fields, for every door that reads its body by hand (OpenAI Chat
Completions and Responses, Anthropic Messages, Gemini): each check returns the value, or raises a 400
`BadRequest` whose `param` is the field's path and whose message says what the value is and what it must be
(`max_tokens: must be an integer, not a string`)."""

from __future__ import annotations

from typing import Any, NoReturn

from app.doors.errors import BadRequest


def invalid(param: str, message: str) -> BadRequest:
    """A field the door cannot read: 400 `invalid_request_error`, the message starting with the field."""
    return BadRequest(400, "invalid_request_error", f"{param}: {message}" if param else message, param=param or None)


def unsupported(param: str, message: str) -> BadRequest:
    """A field the door understands but cannot honour (the answer would differ from what was asked)."""
    return BadRequest(400, "unsupported_parameter", f"{param}: {message}", param=param)


def fail(path: str, problem: str, status: int = 400) -> NoReturn:
    raise BadRequest(status, "invalid_request_error", f"{path}: {problem}", param=path)


def kind(value: Any) -> str:
    """What a JSON value is, for a message (`an object`, `a string`, …)."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def object_at(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        fail(path, f"must be an object, not {kind(value)}")
    return value


def list_at(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        fail(path, f"must be an array, not {kind(value)}")
    return value


def string_at(value: Any, path: str, *, empty: bool = True, max_length: int | None = None) -> str:
    if not isinstance(value, str):
        fail(path, f"must be a string, not {kind(value)}")
    if max_length is not None and len(value) > max_length:
        fail(path, f"must be at most {max_length} characters")
    if not empty and not value:
        fail(path, "must not be empty")
    return value


def integer_at(value: Any, path: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        fail(path, f"must be an integer, not {kind(value)}")
    if maximum is not None and not minimum <= value <= maximum:
        fail(path, f"must be between {minimum} and {maximum}")
    if value < minimum:
        fail(path, f"must be at least {minimum}")
    return value


def number_at(value: Any, path: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(path, f"must be a number, not {kind(value)}")
    if not low <= value <= high:
        fail(path, f"must be between {low:g} and {high:g}")
    return float(value)


def bool_at(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        fail(path, f"must be a boolean, not {kind(value)}")
    return value


def bool_or(value: Any, path: str, default: bool) -> bool:
    """A boolean field that may be absent or null (`default` then)."""
    return default if value is None else bool_at(value, path)
