"""`GET /v1/spend`, `GET /v1/sessions` and `GET /v1/sessions/{id}` (CONTRACT §11), on SQLite and PostgreSQL:
the figures equal the records' own (costs summed exactly), grouped as asked, as JSON and CSV; an admin key sees
every key, a client key only itself; a session lists its turns in order with its totals."""

from __future__ import annotations

import csv
import io
import math

from tests.conftest import turn

ADMIN = {"Authorization": "Bearer adm-SECRET"}


def _turn(gw, secret: str, **headers: str) -> str:
    response = gw.http.post(
        "/v1/complete", json=turn("anthropic/text"), headers={"Authorization": f"Bearer {secret}", **headers}
    )
    assert response.status_code == 200, response.text
    gw.job(response.headers["x-request-id"])
    return response.headers["x-request-id"]


def test_spend_and_sessions_equal_the_records(ledger_gateway):
    gw = ledger_gateway(admin_keys="root:adm-SECRET", api_keys="observer:env-SECRET")
    gw.http.post("/v1/admin/teams", json={"name": "web"}, headers=ADMIN)
    ann = gw.http.post("/v1/admin/keys", json={"name": "ann", "team": "web"}, headers=ADMIN).json()["secret"]
    bob = gw.http.post("/v1/admin/keys", json={"name": "bob", "tags": ["batch"]}, headers=ADMIN).json()["secret"]
    ids = {
        "ann": [_turn(gw, ann, **{"X-Gateway-Session": "task-1", "X-Gateway-Tags": "fix"}) for _ in range(3)],
        "bob": [_turn(gw, bob, **{"X-Gateway-Session": "task-2"}) for _ in range(2)],
    }
    by_admin = gw.http.get("/v1/spend", params={"groupBy": "key"}, headers=ADMIN)
    assert by_admin.status_code == 200
    groups = {row["group"]: row for row in by_admin.json()["groups"]}
    assert set(groups) == {"ann", "bob"}
    every_cost: list[float] = []
    for key, request_ids in ids.items():
        # The records are read through a key that is not theirs: with auth on, each key reads its own only.
        costs = [gw.http.get(f"/v1/requests/{r}", headers={"Authorization": f"Bearer {ann if key == 'ann' else bob}"}).json()["usage"]["cost"]["total"] for r in request_ids]  # fmt: skip
        assert groups[key]["costUsd"] == math.fsum(costs) and groups[key]["turns"] == len(request_ids)
        assert groups[key]["costUsd"] > 0
        every_cost += costs
    assert by_admin.json()["total"]["costUsd"] == math.fsum(every_cost)

    by_team = {
        row["group"]: row["turns"] for row in gw.http.get("/v1/spend?groupBy=team", headers=ADMIN).json()["groups"]
    }
    assert by_team == {"web": 3, None: 2}
    by_tag = {
        row["group"]: row["turns"] for row in gw.http.get("/v1/spend?groupBy=tag", headers=ADMIN).json()["groups"]
    }
    assert by_tag == {"fix": 3, "batch": 2}

    own = gw.http.get("/v1/spend", params={"groupBy": "day"}, headers={"Authorization": f"Bearer {bob}"}).json()
    assert own["key"] == "bob" and own["total"]["turns"] == 2

    as_csv = gw.http.get("/v1/spend", params={"groupBy": "key", "format": "csv"}, headers=ADMIN)
    assert as_csv.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert {row["key"]: float(row["costUsd"]) for row in rows} == {k: v["costUsd"] for k, v in groups.items()}

    listed = gw.http.get("/v1/sessions", headers=ADMIN).json()["sessions"]
    assert {s["session"]: s["turns"] for s in listed} == {"task-1": 3, "task-2": 2}
    session = gw.http.get("/v1/sessions/task-1", headers=ADMIN).json()
    assert [t["requestId"] for t in session["turns"]] == ids["ann"]
    assert session["totals"]["costUsd"] == groups["ann"]["costUsd"] and session["totals"]["keys"] == ["ann"]
    assert all(t["model"] and t["outcome"] == "done" and t["toolCalls"] == [] for t in session["turns"])
    # A client key never sees another key's session.
    assert gw.http.get("/v1/sessions/task-1", headers={"Authorization": f"Bearer {bob}"}).status_code == 404
    assert gw.http.get("/v1/spend", params={"from": "yesterday"}, headers=ADMIN).status_code == 400
