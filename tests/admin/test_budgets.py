"""Budgets users expect (docs/admin.md, Budgets): `gateway_budget_used_ratio` on /metrics for a team's and a key's
budget, over real loopback HTTP."""

from __future__ import annotations

from tests.conftest import turn
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
