"""The attribution headers of a turn request (docs/admin.md, Attribution), read at the edge into `Asked`."""

from __future__ import annotations

from typing import Mapping

from app.contract.attribution import Asked
from app.pools.balancer import session_header

USER_HEADER = "x-gateway-user"
TAGS_HEADER = "x-gateway-tags"
SESSION_HEADER = "x-gateway-session"
# Besides the pools' agent session headers (Claude Code `X-Claude-Code-Session-Id`, Codex CLI `session_id`):
# older Codex CLI versions send `conversation_id`.
MORE_AGENT_HEADERS = ("conversation_id",)


def asked(headers: Mapping[str, str]) -> Asked:
    tags = headers.get(TAGS_HEADER)
    agent = session_header(headers)
    if agent is None:
        agent = next((headers[name] for name in MORE_AGENT_HEADERS if headers.get(name)), None)
    return Asked(
        user=headers.get(USER_HEADER),
        tags=None if tags is None else tuple(tags.split(",")),
        session=headers.get(SESSION_HEADER),
        agent_session=agent,
    )
