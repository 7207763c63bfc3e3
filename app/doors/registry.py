"""Every door the gateway serves, in one tuple: the route table (`app.api.routes`), the OpenAPI document
(`app.api.openapi`), the error shapes of the HTTP edge and the records' `door` names are all read from it.
Adding a door is one package under `app/doors/` and one entry here (docs/internals.md, Adding a door).

An app serves the doors of its `DoorTable` (`create_app(doors=...)`, `DOORS` by default): the edge reads routes
and error shapes from the table it was built with, never a door by name."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, Sequence

from app.doors import anthropic_messages, gemini, openai_chat, openai_responses, pi, unified
from app.doors.base import Door, DoorRoute, ModelListing, ModelRoute, TokenCountDoor

DOORS: tuple[Door, ...] = (
    unified.DOOR,
    pi.DOOR,
    openai_chat.DOOR,
    anthropic_messages.DOOR,
    openai_responses.DOOR,
    gemini.DOOR,
)

# The records' `door` and the metrics' `door` label: one of the doors' names (in `DOORS` order). Built from
# `DOORS` at run time (the OpenAPI document lists the names); to the type checker a plain string.
if TYPE_CHECKING:
    DoorName = str
else:
    DoorName = Literal[tuple(door.name for door in DOORS)]


class DoorTable:
    """The doors one app serves, indexed for the edge: their turn routes in the order the route table lists
    them, their token counting and model routes, and the door whose route a path is (for its error shape)."""

    def __init__(self, doors: Sequence[Door] = DOORS) -> None:
        names = [door.name for door in doors]
        if len(set(names)) != len(names):
            raise ValueError(f"two doors share a name: {sorted(n for n in names if names.count(n) > 1)}")
        self.doors = tuple(doors)
        routes = [(door, route) for door in self.doors for route in door.routes]
        self._turn_routes = sorted(routes, key=lambda pair: pair[1].listed)
        counted = [(door, door.count_tokens.route) for door in self.doors if door.count_tokens is not None]
        self._by_path = {route.path: door for door, route in self._turn_routes if "{" not in route.path}
        self._patterns = [
            (path_pattern(path), door)
            for door, route in [*self._turn_routes, *counted]
            for path in route.paths()
            if "{" in path
        ]

    def turn_routes(self) -> list[tuple[Door, DoorRoute]]:
        """Every door's turn routes, in the order the route table lists them (`DoorRoute.listed`, then the
        table's order)."""
        return list(self._turn_routes)

    def count_routes(self) -> list[TokenCountDoor]:
        """The doors' token counting endpoints, in the table's order."""
        return [door.count_tokens for door in self.doors if door.count_tokens is not None]

    def model_lists(self) -> list[tuple[Door, ModelListing]]:
        """The doors that list the gateway's models in their own shape, in the table's order: the first whose
        `asked` claims a `GET /v1/models` answers it."""
        return [(door, door.models) for door in self.doors if door.models is not None]

    def model_routes(self) -> list[tuple[Door, ModelListing, ModelRoute]]:
        """The doors' own model routes, in the table's order."""
        return [(door, models, route) for door, models in self.model_lists() for route in models.routes]

    def door_at(self, path: str) -> Door | None:
        """The door whose turn route `path` is (pi's `//api/stream` and a trailing slash included; a route with
        path parameters, e.g. the Gemini door's `/v1beta/models/{model:path}:generateContent`, matched as a
        pattern), or None."""
        path = "/" + path.strip("/")
        door = self._by_path.get(path)
        if door is None:
            door = next((door for pattern, door in self._patterns if pattern.fullmatch(path)), None)
        return door


def path_pattern(template: str) -> re.Pattern[str]:
    """A route template as a pattern: `{name}` one path segment, `{name:path}` any text."""
    parts = re.split(r"(\{[^}]+\})", template)
    return re.compile("".join(
        (".+" if part.endswith(":path}") else "[^/]+") if part.startswith("{") else re.escape(part) for part in parts
    ))  # fmt: skip
