"""Active health checks of cooling deployments (`pool.healthCheck`, docs/pools.md) through a gateway under
uvicorn, each deployment a simulator of its own on its own port: a cooled deployment is probed with the
adapter's cheapest request (Anthropic's token count) and, once it answers, used again before its cooldown would
have ended."""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from tests.conftest import turn
from tests.pool_rig import KEY_ENV, PROVIDER_KEY, THROTTLED, Deployment, base_urls, pool_catalog, running_deployments


@pytest.fixture(scope="module")
def deployments() -> Iterator[list[Deployment]]:
    yield from running_deployments("dep-h", "dep-i")


@pytest.fixture(scope="module")
def gateway(gateway_factory, deployments, tmp_path_factory) -> Any:
    h, i = (d.name for d in deployments)
    pools = {
        "probed": {
            "healthCheck": {"intervalMs": 100},
            "deployments": [{"provider": h, "model": "text", "weight": 1000}, {"provider": i, "model": "text"}],
        }
    }
    path = pool_catalog(tmp_path_factory.mktemp("health") / "catalog.json", pools, deployments)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_ENV, PROVIDER_KEY)
        return gateway_factory(catalog=str(path), base_urls=base_urls(deployments), first_event_timeout=1.5)


def served_by(gateway, model: str) -> str:
    response = gateway.http.post("/v1/complete", json=turn(model))
    assert response.status_code == 200, response.text
    return gateway.job(response.json()["requestId"]).attempts[-1].deployment


def test_a_cooled_deployment_that_answers_its_health_check_is_used_again_before_its_cooldown_ends(gateway, deployments):
    h = deployments[0]
    h.set(THROTTLED.format(seconds=60))  # dep-h (weight 1000) answers 429: cooled for 60 s
    response = gateway.http.post("/v1/complete", json=turn("probed"))
    attempts = gateway.job(response.json()["requestId"]).attempts
    assert [(a.deployment, a.http_status, a.cooled) for a in attempts] == [
        ("dep-h/text", 429, "rate_limited"),
        ("dep-i/text", None, None),
    ]
    probed = h.count
    deadline = time.monotonic() + 15  # well inside the 60 s cooldown
    while h.count < probed + 2:  # probes reach it, and fail while it throttles
        assert time.monotonic() < deadline, "no health check reached the cooling deployment"
        time.sleep(0.02)  # polling for the probe to arrive, not a timed wait
    assert served_by(gateway, "probed") == "dep-i/text"  # failed probes leave it cooling
    h.set("")  # it recovers: the next probe ends its cooldown
    while served_by(gateway, "probed") != "dep-h/text":
        assert time.monotonic() < deadline, "the recovered deployment was not used again before its cooldown ended"
        time.sleep(0.02)  # polling for the probe to arrive, not a timed wait
    h.set("")
