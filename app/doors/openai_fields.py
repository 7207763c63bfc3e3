"""The OpenAI request fields the Chat Completions and Responses doors both read, read the same way: parameters
accepted only at their default (`accept_default`) or refused (`refuse`), `stream_options`, the end user's
`metadata`, `prompt_cache_key`, an image as a `data:` URL and a function call's `arguments`. Each refuses what
it cannot take with a 400 naming the field (`app.doors.fields`)."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Callable

import orjson

from app.contract.messages import ImageContent
from app.doors.fields import bool_or, invalid, object_at, string_at, unsupported

_DATA_URL = re.compile(r"^data:(image/[A-Za-z0-9.+-]+);base64,(.*)$", re.S)


def accept_default(*defaults: Any) -> Callable[[str, Any], None]:
    """A parameter accepted only at its default value(s) (or null); anything else is refused."""

    def check(param: str, value: Any) -> None:
        # `True == 1` in Python: a boolean only matches a boolean default, a number only a number.
        if value is not None and not any(
            value == d and isinstance(value, bool) == isinstance(d, bool) for d in defaults
        ):
            shown = " or ".join(orjson.dumps(d).decode() for d in defaults)
            raise unsupported(param, f"only {shown} is supported by this gateway (got {orjson.dumps(value).decode()})")

    return check


def refuse(reason: str) -> Callable[[str, Any], None]:
    """A parameter refused whenever it is set (not null)."""

    def check(param: str, value: Any) -> None:
        if value is not None:
            raise unsupported(param, reason)

    return check


def stream_options(value: Any, stream: bool, known: tuple[str, ...]) -> dict[str, bool]:
    """`stream_options`: only with `stream: true`, each of its `known` booleans (absent or null: false)."""
    if value is None:
        return {}
    options = object_at(value, "stream_options")
    for key in options:
        if key not in known:
            raise invalid(f"stream_options.{key}", "unrecognized stream option")
    read = {key: bool_or(options.get(key), f"stream_options.{key}", False) for key in known}
    if not stream:
        raise invalid("stream_options", "only allowed when stream is true")
    return read


def metadata(body: dict[str, Any]) -> dict[str, Any] | None:
    """`metadata` (string values), and the end user's id (`user`, `safety_identifier`) as `userId`, which the
    vendors that take one get (Anthropic `metadata.user_id`)."""
    found: dict[str, Any] = {}
    raw = body.get("metadata")
    if raw is not None:
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise invalid("metadata", "must be an object of string values")
        found.update(raw)
    for key in ("user", "safety_identifier"):
        if body.get(key) is not None:
            found.setdefault("userId", string_at(body[key], key, max_length=512))
    return found or None


def session_id(body: dict[str, Any]) -> str | None:
    """`prompt_cache_key`: the unified `sessionId`."""
    key = body.get("prompt_cache_key")
    return None if key is None else string_at(key, "prompt_cache_key", max_length=256)


def data_url_image(url: Any, param: str) -> ImageContent:
    """An image sent inline as a `data:image/<type>;base64,` URL (`param` names the URL's field); the gateway never
    fetches a URL."""
    url = string_at(url, param)
    if url.startswith(("http://", "https://")):
        raise unsupported(
            param, "the gateway never fetches URLs: send the image inline as a data:image/...;base64, URL"
        )
    match = _DATA_URL.match(url)
    if match is None:
        raise invalid(param, "must be a data:image/<type>;base64,<data> URL")
    data = match.group(2)
    if not data:
        raise invalid(param, "the data URL is empty")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(param, "the data URL's payload is not valid base64") from None
    return ImageContent(data=data, mime_type=match.group(1).lower())


def json_arguments(value: Any, param: str) -> dict[str, Any]:
    """A function call's `arguments`: a string of one JSON object (empty: no arguments)."""
    if not isinstance(value, str):
        raise invalid(param, "must be a string of JSON")
    try:
        parsed = orjson.loads(value) if value.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise invalid(param, f"is not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise invalid(param, "must be a JSON object")
    return parsed
