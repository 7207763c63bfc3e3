"""A team's limits and budgets are shared by its keys, on top of each key's own (CONTRACT §11): the team's
requests per minute are counted across two keys, and once the team's budget is spent both keys are refused
while a key outside the team is not."""

from __future__ import annotations

from tests.conftest import turn

ADMIN = {"Authorization": "Bearer adm-SECRET"}


def _key(gw, name: str, team: str | None = None) -> dict[str, str]:
    body = {"name": name, **({"team": team} if team else {})}
    created = gw.http.post("/v1/admin/keys", json=body, headers=ADMIN)
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['secret']}"}


def _turn(gw, headers: dict[str, str]):
    response = gw.http.post("/v1/complete", json=turn("anthropic/text"), headers=headers)
    if response.status_code == 200:
        gw.job(response.headers["x-request-id"])
        gw.server.call(gw.state.limits.idle())  # the turn's charge has reached the limit store
    return response


def test_team_requests_per_minute_are_shared_by_its_keys(gateway_factory):
    gw = gateway_factory(admin_keys="root:adm-SECRET")
    team = {"name": "squad", "limits": {"requests_per_minute": 3}}
    assert gw.http.post("/v1/admin/teams", json=team, headers=ADMIN).status_code == 201
    a, b, outsider = _key(gw, "sq-a", "squad"), _key(gw, "sq-b", "squad"), _key(gw, "solo")
    assert [_turn(gw, k).status_code for k in (a, a, b)] == [200, 200, 200]
    refused = _turn(gw, b)
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "rate_limit_rpm"
    assert "#team:squad" in refused.json()["error"]["message"]
    assert _turn(gw, a).status_code == 429
    assert _turn(gw, outsider).status_code == 200


def test_team_budget_refuses_every_key_of_the_team_once_spent(gateway_factory):
    gw = gateway_factory(admin_keys="root:adm-SECRET")
    team = {"name": "tight", "budgets": {"budget_usd_per_day": 0.000001}}
    assert gw.http.post("/v1/admin/teams", json=team, headers=ADMIN).status_code == 201
    a, b = _key(gw, "t-a", "tight"), _key(gw, "t-b", "tight")
    assert _turn(gw, a).status_code == 200  # nothing spent yet: admitted
    for key in (a, b):
        refused = _turn(gw, key)
        assert refused.status_code == 429 and refused.json()["error"]["type"] == "budget_exceeded"
    # Lifting the team's budget lets them through again (the change reaches the limits at once).
    lifted = gw.http.patch("/v1/admin/teams/tight", json={"budgets": {"budget_usd_per_day": 1000}}, headers=ADMIN)
    assert lifted.status_code == 200
    assert _turn(gw, b).status_code == 200
