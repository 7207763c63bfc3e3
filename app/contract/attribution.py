"""Who a turn is for (docs/admin.md, Attribution): the key's team, the end user, tags and the agent session,
each bounded, as every record carries them (`key`, `team`, `user`, `tags`, `session`) and the spend report
groups them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

MAX_USER = 256
MAX_SESSION = 256
MAX_TAGS = 10
MAX_TAG = 64
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/=-]*$")


@dataclass(frozen=True, slots=True)
class Attribution:
    team: str | None = None
    user: str | None = None
    tags: tuple[str, ...] = ()
    session: str | None = None

    def record(self) -> dict[str, Any]:
        return {"team": self.team, "user": self.user, "tags": list(self.tags), "session": self.session}


@dataclass(frozen=True, slots=True)
class Asked:
    """What a request's headers say (read at the edge): `X-Gateway-User`, `X-Gateway-Tags`,
    `X-Gateway-Session`, and the session header an agent sends on its own (Claude Code's, Codex CLI's)."""

    user: str | None = None
    tags: tuple[str, ...] | None = None
    session: str | None = None
    agent_session: str | None = None


def bounded(value: str | None, limit: int) -> str | None:
    """`value` stripped and cut to `limit` characters; None when empty."""
    if value is None:
        return None
    value = value.strip()[:limit]
    return value or None


def tags_of(raw: Iterable[str]) -> tuple[str, ...]:
    """At most `MAX_TAGS` distinct tags of at most `MAX_TAG` characters (`A-Za-z0-9._:/=-`); others dropped."""
    kept: list[str] = []
    for given in raw:
        tag = given.strip()
        if tag and len(tag) <= MAX_TAG and _TAG.match(tag) and tag not in kept:
            kept.append(tag)
        if len(kept) == MAX_TAGS:
            break
    return tuple(kept)


def attribute(
    asked: Asked, *, team: str | None, key_tags: tuple[str, ...], user_id: str | None, session_id: str | None
) -> Attribution:
    """A turn's attribution: the key's team; the user from `X-Gateway-User`, else the body's end-user id
    (`user_id`: OpenAI `user` / `safety_identifier`, Anthropic `metadata.user_id`); the tags from
    `X-Gateway-Tags`, else the key's default tags; the session from `X-Gateway-Session`, else the agent's session
    header, else the body's session (`session_id`: pi's `sessionId`, OpenAI's `prompt_cache_key`, the Anthropic
    and Gemini doors' conversation key)."""
    return Attribution(
        team=team,
        user=bounded(asked.user, MAX_USER) or bounded(user_id, MAX_USER),
        tags=tags_of(asked.tags) if asked.tags is not None else tags_of(key_tags),
        session=bounded(asked.session, MAX_SESSION)
        or bounded(asked.agent_session, MAX_SESSION)
        or bounded(session_id, MAX_SESSION),
    )
