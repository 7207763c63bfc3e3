"""One deployment, one state, whichever way the traffic comes (docs/pools.md): a plain route to a provider/model
that a pool lists counts in that deployment's state (its rpm, its cooldowns), through a gateway under uvicorn,
each deployment a simulator of its own on its own port."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.conftest import turn
from tests.pool_rig import KEY_ENV, PROVIDER_KEY, THROTTLED, Deployment, base_urls, pool_catalog, running_deployments


@pytest.fixture(scope="module")
def deployments() -> Iterator[list[Deployment]]:
    yield from running_deployments("dep-p", "dep-q", "dep-r")


@pytest.fixture(scope="module")
def gateway(gateway_factory, deployments, tmp_path_factory) -> Any:
    p, q, r = (d.name for d in deployments)
    pools = {
        "capped": {
            "deployments": [
                {"provider": p, "model": "text", "weight": 1000, "rpm": 3},
                {"provider": q, "model": "text"},
            ]
        },
        "steered": {
            "deployments": [{"provider": r, "model": "text", "weight": 1000}, {"provider": q, "model": "text"}]
        },
    }
    path = pool_catalog(tmp_path_factory.mktemp("plain") / "catalog.json", pools, deployments)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_ENV, PROVIDER_KEY)
        return gateway_factory(catalog=str(path), base_urls=base_urls(deployments), first_event_timeout=1.5)


@pytest.fixture(autouse=True)
def _healthy(deployments):
    for d in deployments:
        d.set("")
    yield
    for d in deployments:
        d.set("")


def served_by(gateway, model: str) -> str:
    response = gateway.http.post("/v1/complete", json=turn(model))
    assert response.status_code == 200, response.text
    return gateway.job(response.json()["requestId"]).attempts[-1].deployment


def test_direct_calls_count_against_the_pool_deployment_rpm(gateway, deployments):
    p = deployments[0]
    for _ in range(3):  # dep-p's rpm in the pool is 3: a plain route uses it up
        response = gateway.http.post("/v1/complete", json=turn("dep-p/text"))
        assert response.status_code == 200, response.text
    sent = p.count
    assert {served_by(gateway, "capped") for _ in range(3)} == {"dep-q/text"}  # dep-p at its quota (weight 1000)
    assert p.count == sent
    direct = gateway.http.post("/v1/complete", json=turn("dep-p/text"))  # the plain route itself is not refused
    assert direct.status_code == 200, direct.text


def test_a_cooldown_caused_by_direct_traffic_steers_the_pool(gateway, deployments):
    r = deployments[2]
    r.next(THROTTLED.format(seconds=30))  # one 429 to the plain route, which retries and is served
    response = gateway.http.post("/v1/complete", json=turn("dep-r/text"))
    assert response.status_code == 200, response.text
    attempts = gateway.job(response.json()["requestId"]).attempts
    assert [(a.http_status, a.cooled) for a in attempts] == [(429, "rate_limited"), (None, None)]
    sent = r.count
    assert {served_by(gateway, "steered") for _ in range(3)} == {"dep-q/text"}  # dep-r cooled for the pool too
    assert r.count == sent
