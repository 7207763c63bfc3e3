"""Pools of deployments (docs/pools.md) through a gateway under uvicorn, each deployment a simulator of its own
on its own port: the catalog's checks, the strategies over real turns, cooldowns and failover before the first
byte, conversation affinity, and what records and metrics say. (Sharing across replicas: test_pools_replicas.)"""

from __future__ import annotations

import math
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import pytest

from app.catalog import Catalog, CatalogError
from tests.conftest import marker, turn
from tests.pool_rig import (
    KEY_ENV,
    PROVIDER_KEY,
    SERVER_ERROR,
    SLOW,
    STALLED,
    THROTTLED,
    Deployment,
    base_urls,
    pool_catalog,
    state_of_its_own,
    running_deployments,
)


@pytest.fixture(scope="module")
def deployments() -> Iterator[list[Deployment]]:
    yield from running_deployments("dep-a", "dep-b", "dep-c")


@pytest.fixture(scope="module")
def pooled(gateway_factory, deployments, tmp_path_factory) -> Any:
    a, b, c = (d.name for d in deployments)
    pools = {
        "weighted3": {
            "deployments": [
                {"provider": a, "model": "text", "weight": 1},
                {"provider": b, "model": "text", "weight": 2},
                {"provider": c, "model": "text", "weight": 5},
            ]
        },
        "latency2": {
            "strategy": "lowest-latency",
            "deployments": [{"provider": a, "model": "text"}, {"provider": b, "model": "text"}],
        },
        "evenlatency2": {  # a band wider than this shared machine's noise on a loopback turn (tens of ms)
            "strategy": "lowest-latency",
            "toleranceMs": 250,
            "deployments": [{"provider": a, "model": "text"}, {"provider": b, "model": "text"}],
        },
        "stall2": {
            "deployments": [
                {"provider": a, "model": "text", "weight": 1000},
                {"provider": b, "model": "text", "weight": 1},
            ]
        },
        "content2": {
            "deployments": [
                {"provider": a, "model": "text", "weight": 1000},
                {"provider": b, "model": "text", "weight": 1},
            ]
        },
        **{
            name: {"deployments": [{"provider": a, "model": "text", "weight": 1000}, {"provider": b, "model": "text"}]}
            for name in ("refused401", "refused403", "missing404")
        },
        **{
            name: {"deployments": [{"provider": a, "model": "text", "weight": 1000}, {"provider": b, "model": "text"}]}
            for name in ("toolarge429", "malformed500", "toolarge413")
        },
        "brief1": {"deployments": [{"provider": c, "model": "text"}]},
        "patient1": {"waitMs": 5000, "deployments": [{"provider": b, "model": "text"}]},
        "tolerant2": {
            "failuresToCool": 2,
            "deployments": [
                {"provider": a, "model": "text", "weight": 1000},
                {"provider": b, "model": "text"},
            ],
        },
        "quick2": {
            "deployments": [
                {"provider": a, "model": "text", "weight": 1000, "firstEventTimeoutMs": 300},
                {"provider": b, "model": "text"},
            ]
        },
        "flaky2": {"deployments": [{"provider": a, "model": "text"}, {"provider": b, "model": "text"}]},
        "sticky3": {"deployments": [{"provider": d.name, "model": "text"} for d in deployments]},
        "alone": {"deployments": [{"provider": c, "model": "text"}]},
        "cheap": {
            "strategy": "cost",
            "deployments": [
                {"provider": a, "model": "text", "cost": {"input": 3, "output": 15}},
                {"provider": b, "model": "text", "cost": {"input": 1, "output": 5}},
            ],
        },
    }
    shared = {  # two pools listing dep-a's same provider/model: one state
        name: {
            "deployments": [
                {"provider": a, "model": "text;pool=shared", "name": "dep-a/text", "weight": 1000},
                {"provider": b, "model": "text"},
            ]
        }
        for name in ("sharedx", "sharedy")
    }
    pools = {**state_of_its_own(pools), **shared}
    path = pool_catalog(tmp_path_factory.mktemp("pools") / "catalog.json", pools, deployments)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_ENV, PROVIDER_KEY)
        return gateway_factory(
            catalog=str(path), base_urls=base_urls(deployments), first_event_timeout=1.5, console=True
        )


@pytest.fixture(autouse=True)
def _healthy(deployments):
    for d in deployments:
        d.set("")
    yield
    for d in deployments:
        d.set("")


def complete(gateway, model: str, **extra: Any) -> dict[str, Any]:
    response = gateway.http.post("/v1/complete", json=turn(model, **extra))
    assert response.status_code == 200, response.text
    return response.json()


def served_by(gateway, model: str, **extra: Any) -> str:
    body = complete(gateway, model, **extra)
    return gateway.job(body["requestId"]).attempts[-1].deployment


def counts(deployments: list[Deployment]) -> dict[str, int]:
    return {d.name: d.count for d in deployments}


# ----------------------------------------------------------------- catalog


def _catalog_error(route: dict[str, Any]) -> str:
    catalog = Catalog.load()
    with pytest.raises(CatalogError) as caught:
        catalog.add({"routes": [route]}, "pools.json")
    return str(caught.value)


@pytest.mark.parametrize(
    ("pool", "says"),
    [
        ({"deployments": []}, "pool.deployments must be a non-empty list"),
        (
            {"strategy": "fastest", "deployments": [{"provider": "anthropic", "model": "m"}]},
            "pool strategy 'fastest' must be one of",
        ),
        (
            {"deployments": [{"provider": "anthropic", "model": "m", "weight": 0}]},
            "pool.deployments[0] (anthropic/m): weight must be a positive number",
        ),
        ({"deployments": [{"provider": "anthropic", "model": "m", "rpm": 1.5}]}, "rpm must be a positive integer"),
        (
            {"deployments": [{"provider": "anthropic", "model": "m"}, {"provider": "anthropic", "model": "m"}]},
            "pool.deployments[1] (anthropic/m): two deployments named 'anthropic/m'",
        ),
        ({"deployments": [{"provider": "anthropic", "model": "m", "region": "eu"}]}, "unknown key 'region'"),
        (
            {"waitMs": -1, "deployments": [{"provider": "anthropic", "model": "m"}]},
            "pool.waitMs must be a whole number of milliseconds",
        ),
        (
            {"toleranceMs": "20", "deployments": [{"provider": "anthropic", "model": "m"}]},
            "pool.toleranceMs must be a number, 0 or more",
        ),
        (
            {"healthCheck": {"intervalMs": 0}, "deployments": [{"provider": "anthropic", "model": "m"}]},
            "pool.healthCheck.intervalMs must be a positive integer",
        ),
        (
            {"healthCheck": {"every": 100}, "deployments": [{"provider": "anthropic", "model": "m"}]},
            "pool.healthCheck: unknown key 'every'",
        ),
        ({"deployments": [{"provider": "antropic", "model": "m"}]}, "names unknown provider 'antropic'"),
    ],
)
def test_a_bad_pool_entry_fails_at_start_up_naming_it(pool, says):
    message = _catalog_error({"name": "p", "pool": pool})
    assert "pools.json" in message and says in message, message


def test_a_route_has_a_model_or_a_pool_not_both():
    assert "either model or pool" in _catalog_error(
        {"name": "p", "model": "anthropic/m", "pool": {"deployments": [{"provider": "anthropic", "model": "m"}]}}
    )


def test_models_lists_the_pool_once(pooled, deployments):
    entries = pooled.http.get("/v1/models").json()["data"]
    pools = [e for e in entries if e["id"] == "weighted3"]
    assert len(pools) == 1
    shape = pools[0]["route"]["pool"]
    assert shape["strategy"] == "weighted"
    assert [(d["name"], d["weight"]) for d in shape["deployments"]] == [
        ("dep-a/text", 1),
        ("dep-b/text", 2),
        ("dep-c/text", 5),
    ]


# ----------------------------------------------------------------- strategies


def test_weights_hold_within_a_binomial_bound_over_2000_turns(pooled, deployments):
    before = counts(deployments)
    with ThreadPoolExecutor(8) as workers:
        served = list(workers.map(lambda _: served_by(pooled, "weighted3"), range(2000)))
    total = len(served)
    for name, weight in (("dep-a/text", 1), ("dep-b/text", 2), ("dep-c/text", 5)):
        p = weight / 8
        mean, sigma = total * p, math.sqrt(total * p * (1 - p))
        got = served.count(name)
        assert abs(got - mean) < 4.5 * sigma, (name, got, mean, sigma)
    after = counts(deployments)
    assert sum(after.values()) - sum(before.values()) == total  # one upstream request per turn, no retries


def test_lowest_latency_moves_new_turns_to_the_fast_deployment(pooled, deployments):
    pooled.state.pools.rng = random.Random(20261205)  # the strategy's own exploration, made repeatable
    a = deployments[0]
    for _ in range(10):
        served_by(pooled, "latency2")
    a.set(SLOW)
    moving = [served_by(pooled, "latency2") for _ in range(20)]  # the estimates catch up within these
    after = [served_by(pooled, "latency2") for _ in range(40)]
    share = after.count("dep-b/text") / len(after)
    assert share >= 0.9, (moving, after)


def test_lowest_latency_shares_turns_between_equally_fast_deployments(pooled, deployments):
    served = [served_by(pooled, "evenlatency2") for _ in range(40)]
    # Both answer alike (the same simulator, the same loopback): within the tolerance band, by weight (1:1).
    assert min(served.count("dep-a/text"), served.count("dep-b/text")) >= 6, served


def test_cost_picks_the_cheapest_healthy_deployment(pooled, deployments):
    assert {served_by(pooled, "cheap") for _ in range(10)} == {"dep-b/text"}
    deployments[1].set(THROTTLED.format(seconds=30))
    body = complete(pooled, "cheap")  # b answers 429: the turn moves to a, and b is cooled
    attempts = pooled.job(body["requestId"]).attempts
    assert [(x.deployment, x.http_status) for x in attempts] == [("dep-b/text", 429), ("dep-a/text", None)]
    deployments[1].set("")
    seen = counts(deployments)["dep-b"]
    assert {served_by(pooled, "cheap") for _ in range(5)} == {"dep-a/text"}  # b sits out its Retry-After
    assert counts(deployments)["dep-b"] == seen


# ----------------------------------------------------------------- failure


def test_a_stall_before_the_first_byte_moves_to_another_deployment_in_one_clean_stream(pooled, deployments):
    deployments[0].set(STALLED)
    result = pooled.stream(turn("stall2"))  # check_frames: one start, valid order, one terminal
    assert result.status == 200 and result.terminal["type"] == "done", result.text
    assert [e for e in result.events if e["type"] == "start"][0]["provider"] == "dep-b"
    job = pooled.job(result.events[0]["requestId"])
    assert [(a.deployment, a.timeout) for a in job.attempts] == [("dep-a/text", "first_event"), ("dep-b/text", None)]
    assert job.settled.steps[0].then == "fallback"
    # dep-a is cooled now: the next turn goes straight to dep-b despite its weight of 1 in 1001.
    job = pooled.job(complete(pooled, "stall2")["requestId"])
    assert [a.deployment for a in job.attempts] == ["dep-b/text"]
    metrics = pooled.http.get("/metrics").text
    assert (
        'gateway_pool_cooldowns_total{deployment="dep-a/text",pool="stall2",reason="first_event_timeout"} 1.0'
        in metrics
    )


@pytest.mark.parametrize(
    ("pool", "status", "reason"),
    [("refused401", 401, "credentials"), ("refused403", 403, "credentials"), ("missing404", 404, "model_not_found")],
)
def test_a_refused_key_or_missing_model_fails_over_and_cools_the_deployment_longer(
    pooled, deployments, pool, status, reason
):
    deployments[0].set(f";fault=http;at=before_headers;status={status}")
    body = complete(pooled, pool)  # dep-a (weight 1000 to 1) refuses: dep-b serves the turn
    record = pooled.http.get(f"/v1/requests/{body['requestId']}").json()
    assert [(a["deployment"], a.get("httpStatus"), a.get("cooled")) for a in record["attempts"]] == [
        ("dep-a/text", status, reason),
        ("dep-b/text", None, None),
    ]
    deployments[0].set("")
    seen = counts(deployments)["dep-a"]
    assert {served_by(pooled, pool) for _ in range(5)} == {"dep-b/text"}  # dep-a sits out its cooldown
    assert counts(deployments)["dep-a"] == seen
    [state] = [d for d in pooled.http.get("/v1/console/pools").json()["pools"] if d["name"] == pool]
    until = {d["name"]: d["cooldown"]["until"] for d in state["deployments"]}["dep-a/text"]
    assert until - body_time(record) >= 25_000  # the long backoff (30 s), not a 5xx's first second
    metrics = pooled.http.get("/metrics").text
    assert f'gateway_pool_cooldowns_total{{deployment="dep-a/text",pool="{pool}",reason="{reason}"}} 1.0' in metrics


def body_time(record: dict[str, Any]) -> int:
    """When a record's first attempt ended (epoch ms)."""
    return int(record["attempts"][0]["endedAt"])


@pytest.mark.parametrize(
    ("pool", "fault", "fails_over"),
    [
        ("toolarge429", "status=429;message=Request too large for text on tokens per min (TPM): Limit 9", True),
        ("malformed500", "status=500;type=invalid_request_error", True),
        ("toolarge413", "status=413;type=request_too_large", False),
    ],
)
def test_a_failure_about_the_request_itself_does_not_cool_the_deployment(pooled, deployments, pool, fault, fails_over):
    deployments[0].set(f";fault=http;at=before_headers;{fault}")
    response = pooled.http.post("/v1/complete", json=turn(pool))  # dep-a weighs 1000 to dep-b's 1
    record = pooled.http.get(f"/v1/requests/{response.headers['x-request-id']}").json()
    tried = [(a["deployment"], "cooled" in a) for a in record["attempts"]]
    if fails_over:  # too large for dep-a's limit may fit dep-b's: the turn moves on, without cooling dep-a
        assert response.status_code == 200 and tried == [("dep-a/text", False), ("dep-b/text", False)], tried
    else:
        assert response.status_code != 200 and tried == [("dep-a/text", False)], tried
    deployments[0].set("")
    assert served_by(pooled, pool) == "dep-a/text"  # the next tenant's turn goes to dep-a as ever
    metrics = pooled.http.get("/metrics").text.splitlines()
    assert not [x for x in metrics if x.startswith("gateway_pool_cooldowns_total") and f'pool="{pool}"' in x]


def test_a_cooldown_in_one_pool_holds_in_every_pool_listing_the_same_provider_and_model(pooled, deployments):
    deployments[0].set(THROTTLED.format(seconds=30))
    body = complete(pooled, "sharedx")  # dep-a (weight 1000) answers 429 and is cooled; dep-b serves
    assert [a.http_status for a in pooled.job(body["requestId"]).attempts] == [429, None]
    deployments[0].set("")
    seen = counts(deployments)["dep-a"]
    assert {served_by(pooled, "sharedy") for _ in range(5)} == {"dep-b/text"}  # the other pool: dep-a cooled too
    assert counts(deployments)["dep-a"] == seen


def test_a_pool_with_failures_to_cool_counts_a_lone_5xx_without_cooling(pooled, deployments):
    deployments[0].next(SERVER_ERROR)  # one 500 from dep-a (weight 1000 to 1)
    first = pooled.job(complete(pooled, "tolerant2")["requestId"]).attempts
    assert [(a.deployment, a.http_status, a.cooled) for a in first] == [
        ("dep-a/text", 500, None),  # counted, not cooled: the retry goes to dep-a again
        ("dep-a/text", None, None),
    ]
    deployments[0].next(SERVER_ERROR, SERVER_ERROR)  # two within the window: now it cools
    second = pooled.job(complete(pooled, "tolerant2")["requestId"]).attempts
    assert [(a.http_status, a.cooled) for a in second][0] == (500, "server_error")
    assert second[-1].deployment == "dep-b/text"


def test_a_transient_5xx_on_a_pool_of_one_is_retried_and_served(pooled, deployments):
    deployments[2].next(SERVER_ERROR)  # one 500, then healthy
    body = complete(pooled, "alone")
    attempts = pooled.job(body["requestId"]).attempts
    assert [(a.deployment, a.http_status) for a in attempts] == [("dep-c/text", 500), ("dep-c/text", None)]


def test_a_pool_of_two_where_each_fails_once_keeps_the_route_retry_budget(pooled, deployments):
    deployments[0].next(SERVER_ERROR)
    deployments[1].next(SERVER_ERROR)
    body = complete(pooled, "flaky2")  # GATEWAY_RETRIES=1 here: one deployment is tried again
    attempts = pooled.job(body["requestId"]).attempts
    assert [a.http_status for a in attempts] == [500, 500, None]
    assert attempts[2].deployment == attempts[0].deployment


def test_a_deployment_with_its_own_first_event_timeout_is_left_after_it(pooled, deployments):
    deployments[0].set(STALLED)
    job = pooled.job(complete(pooled, "quick2")["requestId"])  # the gateway's own timeout is 1.5 s
    [stalled, served] = job.attempts
    assert (stalled.deployment, stalled.timeout, served.deployment) == ("dep-a/text", "first_event", "dep-b/text")
    assert stalled.error_message.endswith("first-event timeout fired after 0.3s"), stalled.error_message
    assert stalled.cooled == "first_event_timeout"


def test_every_deployment_cooled_answers_429_with_the_soonest_retry_after(pooled, deployments):
    deployments[2].set(THROTTLED.format(seconds=40))
    first = pooled.http.post("/v1/complete", json=turn("alone"))  # the vendor's 429: the deployment cools for 40 s
    assert "retry-after-ms=40000" in first.json()["error"]["message"], first.text
    deployments[2].set("")
    sent = deployments[2].count
    # A door that answers with the turn's status (OpenAI Chat): 429, Retry-After the soonest deployment's.
    second = pooled.http.post(
        "/v1/chat/completions", json={"model": "alone", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert second.status_code == 429, second.text
    assert 35 <= int(second.headers["retry-after"]) <= 40
    assert "cooling down" in second.json()["error"]["message"]
    assert deployments[2].count == sent  # nothing was sent to the cooled deployment
    record = pooled.http.get(f"/v1/requests/{second.headers['x-request-id']}").json()
    assert record["attempts"] == [] and record["outcome"] == "error"


def cool_for_a_second(gateway, pool: str, deployment: Deployment) -> None:
    """Make `deployment` answer 429 with Retry-After 1 s to a turn of `pool` (and its retry), then heal it:
    it is cooled for about a second from now."""
    deployment.set(THROTTLED.format(seconds=1))
    response = gateway.http.post("/v1/complete", json=turn(pool))
    assert "retry-after-ms=1000" in response.json()["error"]["message"], response.text
    deployment.set("")


def test_a_pool_cooling_for_less_than_the_first_event_timeout_answers_429_at_once(pooled, deployments):
    cool_for_a_second(pooled, "brief1", deployments[2])  # shorter than the 1.5 s first-event timeout
    sent = deployments[2].count
    response = pooled.http.post(
        "/v1/chat/completions", json={"model": "brief1", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert response.status_code == 429, response.text  # not a silent wait for the cooldown
    assert response.headers["retry-after"] == "1" and "cooling down" in response.json()["error"]["message"]
    assert deployments[2].count == sent


def test_a_pool_with_wait_ms_waits_for_the_soonest_recovery_and_serves(pooled, deployments):
    cool_for_a_second(pooled, "patient1", deployments[1])  # patient1 asks for waits up to 5 s
    sent = deployments[1].count
    body = complete(pooled, "patient1")
    assert [a.http_status for a in pooled.job(body["requestId"]).attempts] == [None]
    assert deployments[1].count == sent + 1


def test_a_failure_after_content_never_switches_and_the_record_says_why(pooled, deployments):
    deployments[0].set(";fault=reset;at=text")
    result = pooled.stream(turn("content2"))
    assert result.terminal["type"] == "error"
    request_id = result.events[0]["requestId"]
    record = pooled.http.get(f"/v1/requests/{request_id}").json()
    [attempt] = record["attempts"]
    assert attempt["deployment"] == "dep-a/text" and attempt["failover"] == "content_sent"
    assert record["deployment"] == "dep-a/text"


# ----------------------------------------------------------------- affinity


def test_a_conversation_stays_on_its_deployment_and_moves_when_it_is_cooled(pooled, deployments):
    session = {"throttleMs": 0, "sessionId": f"conv-{marker()}"}
    home = {served_by(pooled, "sticky3", options=session) for _ in range(10)}
    assert len(home) == 1, home
    [first] = home
    by_name = {f"{d.name}/text": d for d in deployments}
    by_name[first].set(THROTTLED.format(seconds=30))
    job = pooled.job(complete(pooled, "sticky3", options=session)["requestId"])
    moved = job.attempts[-1].deployment
    assert job.attempts[0].deployment == first and moved != first
    by_name[first].set("")
    assert {served_by(pooled, "sticky3", options=session) for _ in range(8)} == {moved}


TENANTS = "tenant-a:sk-tenant-a-0001,tenant-b:sk-tenant-b-0002"
TENANT_A = {"Authorization": "Bearer sk-tenant-a-0001"}
TENANT_B = {"Authorization": "Bearer sk-tenant-b-0002"}
TOO_LARGE = ";fault=http;at=before_headers;status=429;message=Request too large for text on tokens per min"


@pytest.fixture(scope="module")
def keyed(gateway_factory, deployments, tmp_path_factory) -> Any:
    """A gateway with two client keys in front of a `cost` pool: dep-b (cheaper) first, dep-a second."""
    a, b = deployments[0].name, deployments[1].name
    pools = {
        "private2": {
            "strategy": "cost",
            "deployments": [
                {"provider": a, "model": "text", "cost": {"input": 3, "output": 15}},
                {"provider": b, "model": "text", "cost": {"input": 1, "output": 5}},
            ],
        }
    }
    path = pool_catalog(tmp_path_factory.mktemp("keyed") / "catalog.json", pools, deployments)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(KEY_ENV, PROVIDER_KEY)
        return gateway_factory(catalog=str(path), base_urls=base_urls(deployments), api_keys=TENANTS)


def test_a_conversation_key_is_scoped_by_client_key(keyed, deployments):
    key = f"pck-{marker()}"

    def chat(headers: dict[str, str]) -> str:
        body = {"model": "private2", "prompt_cache_key": key, "messages": [{"role": "user", "content": "hi"}]}
        response = keyed.http.post("/v1/chat/completions", json=body, headers=headers)
        assert response.status_code == 200, response.text
        return keyed.job(response.headers["x-request-id"]).attempts[-1].deployment

    deployments[1].next(TOO_LARGE)  # dep-b refuses tenant A's first turn (without cooling): A lands on dep-a
    assert chat(TENANT_A) == "dep-a/text"
    assert chat(TENANT_A) == "dep-a/text"  # A's conversation stays on dep-a
    # Tenant B sends A's key: B's own conversation, on the deployment the strategy picks (the cheaper dep-b),
    # which tells B nothing of where A's conversation lives.
    assert chat(TENANT_B) == "dep-b/text"
    assert chat(TENANT_A) == "dep-a/text"


def converse(gateway, model: str, turns: int, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A conversation of `turns` turns through `/v1/complete`, each sending the whole conversation so far:
    per turn, the deployment that served it and its usage."""
    messages: list[dict[str, Any]] = []
    served = []
    for index in range(turns):
        messages.append({"role": "user", "content": f"turn {index + 1}: {marker()} " + "tell me more. " * 40})
        body = complete(gateway, model, prompt=None, context={"messages": messages}, options=options)
        served.append((gateway.job(body["requestId"]).attempts[-1].deployment, body["usage"]))
        messages.append({k: v for k, v in body.items() if k != "requestId"})
    return served


def test_a_sticky_conversation_reads_the_vendor_prompt_cache_from_turn_2_on(pooled, deployments):
    for d in deployments:
        d.set(";prompt_cache=1")  # each deployment's simulator remembers the prompts it served
    served = converse(pooled, "sticky3", 5, {"throttleMs": 0, "sessionId": f"conv-{marker()}"})
    assert len({name for name, _ in served}) == 1, served  # one deployment: its cache stays warm
    first, *later = [usage for _, usage in served]
    assert first["cacheRead"] == 0 and first["input"] > 0
    # From turn 2 on, the prompt the deployment served last turn comes from its cache: only the reply it gave
    # and the new message are input (the same size each turn), and the cached part grows by that each turn.
    reads = [u["cacheRead"] for u in later]
    assert reads[0] == first["input"], later
    assert all(b - a == later[0]["input"] for a, b in zip(reads, reads[1:])), later
    assert len({u["input"] for u in later}) == 1 and later[-1]["cacheRead"] > 3 * later[-1]["input"], later


def test_prompt_cache_key_keeps_an_openai_chat_conversation_on_its_deployment(pooled):
    key = f"pck-{marker()}"
    seen = set()
    for _ in range(8):
        response = pooled.http.post(
            "/v1/chat/completions",
            json={"model": "sticky3", "prompt_cache_key": key, "messages": [{"role": "user", "content": marker()}]},
        )
        assert response.status_code == 200, response.text
        record = pooled.http.get(f"/v1/requests/{response.headers['x-request-id']}").json()
        seen.add(record["deployment"])
    assert len(seen) == 1, seen


def test_an_agent_session_header_keeps_the_conversation_on_its_deployment(pooled):
    headers = {"X-Claude-Code-Session-Id": f"session-{marker()}"}
    seen = set()
    for _ in range(8):
        response = pooled.http.post("/v1/complete", json=turn("sticky3"), headers=headers)
        assert response.status_code == 200, response.text
        seen.add(pooled.job(response.json()["requestId"]).attempts[-1].deployment)
    assert len(seen) == 1, seen


def test_records_name_the_deployment_and_the_records_api_filters_by_it(pooled):
    body = complete(pooled, "weighted3")
    record = pooled.http.get(f"/v1/requests/{body['requestId']}").json()
    assert record["deployment"] == record["attempts"][-1]["deployment"]
    assert record["deployment"] == f"{record['provider']}/text" and record["model"] == "text;pool=weighted3"
    listed = pooled.http.get("/v1/requests", params={"model": record["deployment"], "limit": 200}).json()["records"]
    assert body["requestId"] in {r["requestId"] for r in listed}
