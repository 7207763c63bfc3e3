"""Every door the gateway serves, in one tuple: the route table (`app.api.routes`), the OpenAPI document
(`app.api.openapi`), the error shapes of the HTTP edge and the records' `door` names are all read from it.
Adding a door is one package under `app/doors/` and one entry here (docs/internals.md, Adding a door)."""

from __future__ import annotations

import re
from typing import Literal

from app.doors import anthropic_messages, gemini, openai_chat, openai_responses, pi, unified
from app.doors.base import Door, DoorRoute, TokenCountDoor

DOORS: tuple[Door, ...] = (
    unified.DOOR, pi.DOOR, openai_chat.DOOR, anthropic_messages.DOOR, openai_responses.DOOR, gemini.DOOR
)

# The records' `door` and the metrics' `door` label: one of the doors' names (in `DOORS` order).
DoorName = Literal[tuple(door.name for door in DOORS)]  # type: ignore[valid-type]


def turn_routes() -> list[tuple[Door, DoorRoute]]:
    """Every door's turn routes, in the order the route table lists them (`DoorRoute.listed`, then `DOORS`)."""
    routes = [(door, route) for door in DOORS for route in door.routes]
    return sorted(routes, key=lambda pair: pair[1].listed)


def count_routes() -> list[TokenCountDoor]:
    """The doors' token counting endpoints, in `DOORS` order."""
    return [door.count_tokens for door in DOORS if door.count_tokens is not None]


def door_at(path: str) -> Door | None:
    """The door whose turn route `path` is (pi's `//api/stream` and a trailing slash included; a route with
    path parameters, e.g. the Gemini door's `/v1beta/models/{model:path}:generateContent`, matched as a
    pattern), or None."""
    path = "/" + path.strip("/")
    door = _BY_PATH.get(path)
    if door is None:
        door = next((door for pattern, door in _PATTERNS if pattern.fullmatch(path)), None)
    return door


def path_pattern(template: str) -> re.Pattern[str]:
    """A route template as a pattern: `{name}` one path segment, `{name:path}` any text."""
    parts = re.split(r"(\{[^}]+\})", template)
    return re.compile("".join(
        (".+" if part.endswith(":path}") else "[^/]+") if part.startswith("{") else re.escape(part) for part in parts
    ))  # fmt: skip


_ROUTES = [(door, route) for door, route in turn_routes()] + [
    (door, door.count_tokens.route) for door in DOORS if door.count_tokens is not None
]
_BY_PATH = {route.path: door for door, route in turn_routes() if "{" not in route.path}
_PATTERNS = [(path_pattern(path), door) for door, route in _ROUTES for path in route.paths() if "{" in path]
