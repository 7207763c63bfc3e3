"""Budgets users expect (docs/admin.md, Budgets): `gateway_budget_used_ratio` on /metrics for a team's and a key's
budget, an end user's own budget, and the 80 % / 100 % webhook, over real loopback HTTP."""

from __future__ import annotations

import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import turn
from tests.redisproc import RedisServer
from tests.servers import ServerThread
from tests.telemetry.test_metrics import scrape, value

ADMIN = {"Authorization": "Bearer adm-SECRET"}


def _key(gw, name: str, team: str | None = None, **budgets: float) -> dict[str, str]:
    body = {"name": name, **({"team": team} if team else {}), **({"budgets": budgets} if budgets else {})}
    created = gw.http.post("/v1/admin/keys", json=body, headers=ADMIN)
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['secret']}"}


def _team(gw, name: str, **budgets: float) -> None:
    created = gw.http.post("/v1/admin/teams", json={"name": name, "budgets": budgets}, headers=ADMIN)
    assert created.status_code == 201, created.text


def _cost(gw, headers: dict[str, str], **extra: object) -> float:
    """Serve one turn; answer its cost once its charge has reached the limit store."""
    response = gw.http.post("/v1/complete", json=turn("anthropic/text"), headers={**headers, **extra})
    assert response.status_code == 200, response.text
    job = gw.job(response.headers["x-request-id"])
    gw.server.call(gw.state.limits.idle())
    return float(job.settled.message["usage"]["cost"]["total"])


def test_budget_used_ratio_of_a_team_and_a_key_on_metrics(gateway_factory):
    gw = gateway_factory(admin_keys="root:adm-SECRET")
    _team(gw, "ratio-team", budget_usd_per_day=2.0, budget_usd_per_month=4.0)
    key = _key(gw, "ratio-key", "ratio-team", budget_usd_per_day=1.0)
    spent = _cost(gw, key) + _cost(gw, key)
    assert spent > 0
    m = scrape(gw.url)
    ratio = "gateway_budget_used_ratio"
    assert value(m, ratio, team="ratio-team", key="", period="day") == spent / 2.0
    assert value(m, ratio, team="ratio-team", key="", period="month") == spent / 4.0
    assert value(m, ratio, team="ratio-team", key="ratio-key", period="day") == spent / 1.0
    assert (ratio, (("key", "ratio-key"), ("period", "month"), ("team", "ratio-team"))) not in m  # no such budget


def test_budget_used_ratio_has_no_key_series_without_key_labels(gateway_factory):
    gw = gateway_factory(admin_keys="root:adm-SECRET", metrics_key_labels=False)
    _team(gw, "quiet-team", budget_usd_per_day=2.0)
    spent = _cost(gw, _key(gw, "quiet-key", "quiet-team", budget_usd_per_day=1.0))
    series = {labels for name, labels in scrape(gw.url) if name == "gateway_budget_used_ratio"}
    assert series == {(("key", ""), ("period", "day"), ("team", "quiet-team"))}
    assert value(scrape(gw.url), "gateway_budget_used_ratio", team="quiet-team", key="", period="day") == spent / 2


def _user_turn(gw, headers: dict[str, str], user: str):
    response = gw.http.post("/v1/complete", json=turn("anthropic/text"), headers={**headers, "X-Gateway-User": user})
    if response.status_code == 200:
        gw.job(response.headers["x-request-id"])
        gw.server.call(gw.state.limits.idle())
    return response


def test_end_user_over_budget_is_refused_while_another_end_user_is_served(gateway_factory, tmp_path):
    database = f"sqlite:///{tmp_path}/users.db"
    gw = gateway_factory(admin_keys="root:adm-SECRET", database_url=database)
    key = _key(gw, "per-user", user_budget_usd_per_day=0.000001)
    assert _user_turn(gw, key, "ann").status_code == 200  # nothing spent yet: admitted
    refused = _user_turn(gw, key, "ann")
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "budget_exceeded"
    assert _user_turn(gw, key, "bob").status_code == 200  # the key and the other end user are not spent
    # A replica whose limit store is empty rebuilds each end user's spend from the records' `user`.
    fresh = gateway_factory(admin_keys="root:adm-SECRET", database_url=database)
    assert _user_turn(fresh, key, "ann").status_code == 429
    assert _user_turn(fresh, key, "cid").status_code == 200


def test_budget_webhook_posts_once_at_80_and_once_at_100_percent(gateway_factory):
    received: list[dict] = []

    async def alert(request: Request) -> Response:
        received.append(await request.json())
        return Response(status_code=204)

    receiver = ServerThread(Starlette(routes=[Route("/alerts", alert, methods=["POST"])]), "webhook").start()
    try:
        gw = gateway_factory(admin_keys="root:adm-SECRET", budget_webhook_url=f"{receiver.url}/alerts")
        _team(gw, "alerting", budget_usd_per_day=0.0001)
        created = gw.http.post("/v1/admin/keys", json={"name": "alert-key", "team": "alerting"}, headers=ADMIN)
        secret = created.json()["secret"]
        key = {"Authorization": f"Bearer {secret}"}
        spent = _cost(gw, key)  # the period's first turn is admitted whatever it costs: past 80 % and 100 %
        assert spent > 0.0001
        assert sorted(body["threshold"] for body in received) == [0.8, 1.0]
        for body in received:
            assert body["team"] == "alerting" and body["key"] is None and body["period"] == "day"
            assert body["spentUsd"] == spent and body["budgetUsd"] == 0.0001
        # A higher budget, passed 80 % again in the same day: each threshold is sent once per period.
        lifted = {"budgets": {"budget_usd_per_day": 2.2 * spent}}
        assert gw.http.patch("/v1/admin/teams/alerting", json=lifted, headers=ADMIN).status_code == 200
        assert (spent + _cost(gw, key)) / (2.2 * spent) >= 0.8
        assert len(received) == 2
        assert secret not in str(received)
    finally:
        receiver.stop()


def test_budget_webhook_is_sent_by_one_replica_of_two_sharing_redis(gateway_factory, tmp_path):
    received: list[dict] = []

    async def alert(request: Request) -> Response:
        received.append(await request.json())
        return Response(status_code=204)

    receiver = ServerThread(Starlette(routes=[Route("/alerts", alert, methods=["POST"])]), "webhook").start()
    redis_server = RedisServer().start()
    try:
        shared = dict(
            admin_keys="root:adm-SECRET",
            budget_webhook_url=f"{receiver.url}/alerts",
            database_url=f"sqlite:///{tmp_path}/replicas.db",
            redis_url=redis_server.url,
            admin_sync_interval=0.1,
        )
        a, b = gateway_factory(**shared), gateway_factory(**shared)
        _team(a, "shared-alerts", budget_usd_per_day=0.0001)
        key = _key(a, "shared-alert-key", "shared-alerts")
        spent = _cost(a, key)  # replica a: past 80 % and 100 %, both sent
        assert sorted(body["threshold"] for body in received) == [0.8, 1.0]
        lifted = {"budgets": {"budget_usd_per_day": 2.2 * spent}}
        assert a.http.patch("/v1/admin/teams/shared-alerts", json=lifted, headers=ADMIN).status_code == 200
        for _ in range(100):  # replica b learns the key and the lifted budget within its admin sync interval
            response = b.http.post("/v1/complete", json=turn("anthropic/text"), headers=key)
            if response.status_code == 200:
                b.job(response.headers["x-request-id"])
                b.server.call(b.state.limits.idle())
                break
            time.sleep(0.05)
        else:
            raise AssertionError("replica b never served the key after the budget was lifted")
        assert len(received) == 2  # replica b passed 80 % again: already claimed in Redis, not sent twice
    finally:
        redis_server.stop()
        receiver.stop()
