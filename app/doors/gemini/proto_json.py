"""Gemini's request body is proto JSON, read as Google's own parser reads it: a field in its JSON spelling
(camelCase) or in the proto's (snake_case), a 64-bit integer as a number or a string, an unknown field refused."""

from __future__ import annotations

from typing import Any

from app.doors.fields import fail, integer_at


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def value_of(obj: dict[str, Any], name: str) -> Any:
    """A field in Gemini's JSON spelling (camelCase), or in the proto's (snake_case)."""
    value = obj.get(name)
    return obj.get(_snake(name)) if value is None else value


def field_names(obj: dict[str, Any]) -> set[str]:
    """The object's field names in camelCase."""
    return {"".join(w.capitalize() if i else w for i, w in enumerate(k.split("_"))) for k in obj}


def integer_of(value: Any, path: str, minimum: int) -> int:
    if isinstance(value, str) and value.lstrip("-").isdigit():  # proto JSON: 64-bit integers may be strings
        value = int(value)
    return integer_at(value, path, minimum)


def refuse_unknown(obj: dict[str, Any], known: frozenset[str], path: str) -> None:
    """Google's parser refuses a field it does not know; so does the door (a typo would change nothing)."""
    for name in sorted(field_names(obj) - known):
        fail(f"{path}.{name}" if path else name, "unknown field")
