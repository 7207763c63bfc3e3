"""Attribution on every record (CONTRACT §11): the key, its team, the end user, tags and the agent session,
from the gateway's own headers, the body's end-user fields and the agents' session headers, each bounded."""

from __future__ import annotations

from tests.conftest import marker, turn

ADMIN = {"Authorization": "Bearer adm-SECRET"}


def _record(gw, response, secret: str) -> dict:
    assert response.status_code == 200, response.text
    request_id = response.headers["x-request-id"]
    gw.job(request_id)
    record = gw.http.get(f"/v1/requests/{request_id}", headers={"Authorization": f"Bearer {secret}"})
    assert record.status_code == 200
    return record.json()


def test_records_carry_key_team_user_tags_and_session(gateway_factory):
    gw = gateway_factory(admin_keys="root:adm-SECRET")
    assert gw.http.post("/v1/admin/teams", json={"name": "platform"}, headers=ADMIN).status_code == 201
    created = gw.http.post(
        "/v1/admin/keys", json={"name": "ann", "team": "platform", "tags": ["default-tag"]}, headers=ADMIN
    )
    secret = created.json()["secret"]
    auth = {"Authorization": f"Bearer {secret}"}

    # The gateway's own headers win; over-long values are cut, bad tags dropped.
    headers = {**auth, "X-Gateway-User": "u" * 1000, "X-Gateway-Tags": "a, b ,bad tag,a", "X-Gateway-Session": "s1"}
    record = _record(gw, gw.http.post("/v1/complete", json=turn("anthropic/text"), headers=headers), secret)
    assert (record["key"], record["team"], record["tags"], record["session"]) == ("ann", "platform", ["a", "b"], "s1")
    assert record["user"] == "u" * 256

    # Without them: the key's default tags, the body's end user, the agent's session header.
    chat = {"model": "anthropic/text", "messages": [{"role": "user", "content": marker()}], "user": "end-user-1"}
    codex = {**auth, "session_id": "codex-session"}
    record = _record(gw, gw.http.post("/v1/chat/completions", json=chat, headers=codex), secret)
    assert (record["user"], record["tags"], record["session"]) == ("end-user-1", ["default-tag"], "codex-session")

    messages = {
        "model": "anthropic/text",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": marker()}],
        "metadata": {"user_id": "claude-user"},
    }
    claude = {**auth, "X-Claude-Code-Session-Id": "cc-session", "anthropic-version": "2023-06-01"}
    record = _record(gw, gw.http.post("/v1/messages", json=messages, headers=claude), secret)
    assert (record["user"], record["session"], record["team"]) == ("claude-user", "cc-session", "platform")
