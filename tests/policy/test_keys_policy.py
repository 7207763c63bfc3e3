"""Keys with a policy (GATEWAY_KEYS_FILE) in one process: identification, model allowance (403), rpm, tpm,
concurrency and spend budgets (429 naming the limit, with Retry-After), budget rebuilt from the ledger after a
restart, reload on file change, and GATEWAY_API_KEYS still working next to the file."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.policy.keyring import ClientKey
from app.policy.keys import ClientKeys, KeysFileError, load_keys_file
from app.policy.memory_store import MemoryLimitStore
from tests.conftest import marker, turn
from tests.procs import GatewayProcess

LEGACY = "legacy:sk-legacy-key-0000"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def write_keys(path: Path, **policies: dict[str, Any]) -> None:
    """One entry per name; the bearer key of `name` is `sk-<name>`."""
    keys = [{"name": name, "sha256": digest(f"sk-{name}"), **policy} for name, policy in policies.items()]
    path.write_text(json.dumps({"keys": keys}))


def post(gw, key: str, model: str = "anthropic/text", **extra: Any) -> httpx.Response:
    return gw.http.post("/v1/stream", json=turn(model, marker(), **extra), headers=bearer(key))


def settle(gw) -> None:
    """Wait until the gateway has charged its settled turns to the limit store."""
    gw.server.call(gw.state.limits.idle())


def test_keys_file_formats_and_errors(tmp_path):
    toml = tmp_path / "keys.toml"
    toml.write_text(
        f'[[keys]]\nname = "a"\nsha256 = "{digest("sk-a")}"\nrequests_per_minute = 5\nmodels = ["anthropic/*"]\n'
    )
    loaded = load_keys_file(toml)
    assert loaded.keys[0].requests_per_minute == 5 and loaded.keys[0].models == ("anthropic/*",)
    keys = ClientKeys([], str(toml))
    assert keys.identify("Bearer sk-a") == "a"
    assert keys.policy("a").allows_model("anthropic/text") and not keys.policy("a").allows_model("openai/x")
    bad = tmp_path / "bad.json"
    for text in (
        "{",
        '{"keys": [{"name": "x", "sha256": "nothex"}]}',
        '{"keys": [{"name": "x", "sha256": "%s", "rpm": 1}]}' % ("0" * 64),
    ):
        bad.write_text(text)
        with pytest.raises(KeysFileError):
            load_keys_file(bad)
    bad.write_text(json.dumps({"keys": [{"name": "x", "sha256": "0" * 64}, {"name": "x", "sha256": "1" * 64}]}))
    with pytest.raises(KeysFileError, match="duplicate"):
        load_keys_file(bad)


def test_identification_and_models(gateway_factory, tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, team={"models": ["anthropic/text", "anthropic/thinking"]}, free={})
    gw = gateway_factory(api_keys=LEGACY, keys_file=str(path))
    ok = gw.stream(turn("anthropic/text"), headers=bearer("sk-team"))
    assert ok.status == 200 and ok.terminal["type"] == "done"
    assert gw.job(ok.headers["x-request-id"]).request.api_key_id == "team"
    legacy = gw.stream(turn("anthropic/slow;n=2"), headers=bearer("sk-legacy-key-0000"))
    assert legacy.status == 200 and gw.job(legacy.headers["x-request-id"]).request.api_key_id == "legacy"
    assert post(gw, "sk-nobody").status_code == 401

    refused = post(gw, "sk-team", "anthropic/slow;n=2")
    assert refused.status_code == 403
    assert refused.json()["error"] == {
        "type": "model_not_allowed",
        "message": "API key team may not use model anthropic/slow;n=2",
        "param": "model",
    }
    fallback = post(gw, "sk-team", fallback=["openai/text"])
    assert fallback.status_code == 403 and fallback.json()["error"]["param"] == "fallback.0"
    pi = gw.http.post(
        "/api/stream",
        json={"model": {"provider": "openai", "id": "x"}, "context": {"messages": [{"role": "user", "content": "hi"}]}},
        headers=bearer("sk-team"),
    )
    assert pi.status_code == 403 and "may not use model openai/x" in pi.json()["error"]
    assert post(gw, "sk-free", "anthropic/slow;n=2").status_code == 200
    assert 'gateway_rejected_requests_total{kind="model_not_allowed"} 3.0' in gw.http.get("/metrics").text


def test_requests_per_minute(gateway_factory, tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, rpm={"requests_per_minute": 3}, other={})
    gw = gateway_factory(keys_file=str(path))
    assert [post(gw, "sk-rpm").status_code for _ in range(3)] == [200, 200, 200]
    refused = post(gw, "sk-rpm")
    assert refused.status_code == 429
    assert refused.json()["error"]["type"] == "rate_limit_rpm" and "limit 3" in refused.json()["error"]["message"]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert post(gw, "sk-other").status_code == 200  # another key has its own window
    # A refused request is not counted: /v1/complete is refused the same way.
    assert gw.http.post("/v1/complete", json=turn("anthropic/text"), headers=bearer("sk-rpm")).status_code == 429
    assert 'gateway_rejected_requests_total{kind="rate_limit_rpm"} 2.0' in gw.http.get("/metrics").text


def test_concurrent_streams(gateway_factory, tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, conc={"concurrent_streams": 2})
    gw = gateway_factory(keys_file=str(path))
    client = httpx.Client(base_url=gw.url, timeout=30)
    opened = []
    try:
        for _ in range(2):
            cm = client.stream(
                "POST", "/v1/stream", json=turn("anthropic/slow;n=2000;delay_ms=20"), headers=bearer("sk-conc")
            )
            response = cm.__enter__()
            assert response.status_code == 200
            lines = response.iter_lines()
            while not next(lines).startswith("data:"):
                pass
            opened.append((cm, response.headers["x-request-id"], lines))
        refused = post(gw, "sk-conc")
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["type"] == "concurrency_limit"
    finally:
        for cm, request_id, _ in opened:
            cm.__exit__(None, None, None)
            gw.job(request_id)
        client.close()
    settle(gw)
    assert post(gw, "sk-conc").status_code == 200  # the leases were released


def test_max_streams_per_key_is_the_default_of_a_keys_concurrent_streams(gateway_factory, tmp_path):
    """GATEWAY_MAX_STREAMS_PER_KEY 1 caps a key without `concurrent_streams` of its own (429 too_many_streams,
    per replica); a key's own value wins, even above the setting (429 concurrency_limit at its 3rd stream)."""
    path = tmp_path / "keys.json"
    write_keys(path, plain={}, own={"concurrent_streams": 2})
    gw = gateway_factory(keys_file=str(path), max_streams_per_key=1, max_streams=10)
    client = httpx.Client(base_url=gw.url, timeout=30)
    opened = []

    def hold(key: str) -> None:
        cm = client.stream("POST", "/v1/stream", json=turn("anthropic/slow;n=2000;delay_ms=20"), headers=bearer(key))
        response = cm.__enter__()
        assert response.status_code == 200
        lines = response.iter_lines()
        while not next(lines).startswith("data:"):
            pass
        opened.append((cm, response.headers["x-request-id"], lines))

    try:
        hold("sk-plain")
        refused = post(gw, "sk-plain")
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        error = refused.json()["error"]
        assert error["type"] == "too_many_streams" and "plain" in error["message"] and "limit 1" in error["message"]
        hold("sk-own")
        hold("sk-own")  # over the setting: the key's own value counts
        refused = post(gw, "sk-own")
        assert refused.status_code == 429 and refused.json()["error"]["type"] == "concurrency_limit"
        assert "limit 2" in refused.json()["error"]["message"]
    finally:
        for cm, request_id, _ in opened:
            cm.__exit__(None, None, None)
            gw.job(request_id)
        client.close()
    metrics = gw.http.get("/metrics").text
    assert 'gateway_rejected_requests_total{kind="max_streams_per_key"} 1.0' in metrics
    assert 'gateway_rejected_requests_total{kind="concurrency_limit"} 1.0' in metrics


def test_tokens_per_minute(gateway_factory, tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, tpm={"tokens_per_minute": 10})
    gw = gateway_factory(keys_file=str(path))
    for _ in range(2):  # tokens count per clock minute: a minute that turns in between starts at zero
        minute = int(time.time() // 60)
        first = post(gw, "sk-tpm")
        assert first.status_code == 200
        gw.job(first.headers["x-request-id"])
        settle(gw)
        refused = post(gw, "sk-tpm")
        if refused.status_code == 200 and int(time.time() // 60) != minute:
            continue
        break
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "rate_limit_tpm"
    assert 1 <= int(refused.headers["retry-after"]) <= 60


def test_budget_and_rebuild_from_ledger(gateway_factory, tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, spender={})
    database = f"sqlite:///{tmp_path}/ledger.db"
    gw = gateway_factory(keys_file=str(path), database_url=database)
    first = gw.stream(turn("anthropic/text"), headers=bearer("sk-spender"))
    cost = first.terminal["usage"]["cost"]["total"]
    assert cost > 0
    gw.job(first.headers["x-request-id"])
    # A budget below one turn's cost: the key has spent it (the spend comes from the ledger, since this key
    # had no budget, hence no counter, when its first turn ran).
    write_keys(path, spender={"budget_usd_per_day": cost / 2})
    assert gw.state.keys.reload()
    refused = post(gw, "sk-spender")
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "budget_exceeded"
    assert int(refused.headers["retry-after"]) >= 1
    assert "until the period resets" in refused.json()["error"]["message"]

    # A second gateway on the same ledger (a restart: empty memory) rebuilds the spend from the records.
    again = gateway_factory(keys_file=str(path), database_url=database)
    assert post(again, "sk-spender").status_code == 429
    # A month budget with room left, no day budget: served.
    write_keys(path, spender={"budget_usd_per_month": cost * 10})
    assert again.state.keys.reload()
    assert post(again, "sk-spender").status_code == 200
    assert 'gateway_key_spend_usd_total{key="spender"}' in gw.http.get("/metrics").text


def test_budget_just_above_one_turn(gateway_factory, tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, probe={})
    gw = gateway_factory(keys_file=str(path))
    probe = gw.stream(turn("anthropic/text", "same prompt"), headers=bearer("sk-probe"))
    cost = probe.terminal["usage"]["cost"]["total"]
    write_keys(path, probe={"budget_usd_per_day": cost * 2.5}, spender={"budget_usd_per_day": cost * 1.05})
    assert gw.state.keys.reload()
    # A budget just above one turn's cost: the first turn is served, the next is stopped (what is left would
    # not cover a turn like the latest one).
    served = gw.stream(turn("anthropic/text", "same prompt"), headers=bearer("sk-spender"))
    assert served.status == 200
    gw.job(served.headers["x-request-id"])
    settle(gw)
    refused = post(gw, "sk-spender")
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "budget_exceeded"
    # Stopped at ~95 % spent: the message says what was spent and what the next turn would cost.
    message = refused.json()["error"]["message"]
    assert f"spent {cost:.4g} of {cost * 1.05:g} USD today (UTC)" in message, message
    assert f"the next turn is estimated at {cost:.4g} USD (the latest turn's cost), more than the" in message
    # Spent 1 turn of 2.5 (from the ledger): a second fits, a third would not.
    served = gw.stream(turn("anthropic/text", "same prompt"), headers=bearer("sk-probe"))
    assert served.status == 200
    gw.job(served.headers["x-request-id"])
    settle(gw)
    assert post(gw, "sk-probe").status_code == 429


def test_reload_on_file_change(gateway_factory, tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, first={})
    gw = gateway_factory(keys_file=str(path), keys_reload_interval=0.05)
    assert post(gw, "sk-first").status_code == 200
    assert post(gw, "sk-second").status_code == 401
    write_keys(path, second={})
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    deadline_reached = _wait(lambda: post(gw, "sk-second").status_code == 200)
    assert deadline_reached, "the keys file change was not picked up"
    assert post(gw, "sk-first").status_code == 401
    # A broken file keeps the previous keys.
    path.write_text("{ not json")
    assert not gw.state.keys.reload()
    assert post(gw, "sk-second").status_code == 200


def _wait(condition, timeout: float = 10.0) -> bool:
    """Poll a condition until it holds or `timeout` passes (the watch polls the file on its own clock)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_spend_rebuilt_from_each_ledger(ledger_gateway, tmp_path):
    """The ledger's spend sum (SQLite json_extract, PostgreSQL jsonb) rebuilds a budget after a restart."""
    path = tmp_path / "keys.json"
    write_keys(path, spender={}, other={})
    gw = ledger_gateway(keys_file=str(path))
    costs = []
    for key in ("sk-spender", "sk-spender", "sk-other"):
        result = gw.stream(turn("anthropic/text"), headers=bearer(key))
        costs.append(result.terminal["usage"]["cost"]["total"])
        gw.job(result.headers["x-request-id"])
    gw.server.call(gw.state.recorder.flush(5))
    since = 0
    spent = gw.server.call(gw.state.ledger.spend("spender", since))
    assert spent == pytest.approx(costs[0] + costs[1], rel=1e-9)
    assert gw.server.call(gw.state.ledger.spend("spender", 2**62)) == 0
    write_keys(path, spender={"budget_usd_per_month": costs[0] * 1.5}, other={"budget_usd_per_month": costs[2] * 2.5})
    restarted = ledger_gateway(keys_file=str(path))
    assert post(restarted, "sk-spender").status_code == 429
    assert post(restarted, "sk-other").status_code == 200


def test_a_broken_keys_file_is_reported_once_per_version(tmp_path, caplog):
    """The watch polls the file; a version that does not load is logged once, not at every poll."""
    path = tmp_path / "keys.json"
    write_keys(path, first={})
    keys = ClientKeys([], str(path))
    path.write_text("{ not json")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with caplog.at_level("ERROR", logger="gateway.keys"):
        for _ in range(3):
            keys.reload_if_changed()
    assert [r.levelname for r in caplog.records if r.name == "gateway.keys"] == ["ERROR"]
    assert keys.identify("Bearer sk-first") == "first"  # the previous keys are kept
    write_keys(path, second={})
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    assert keys.reload_if_changed() and keys.identify("Bearer sk-second") == "second"


@pytest.mark.parametrize("kind", ["rate_limit_rpm", "rate_limit_tpm"])
async def test_a_per_minute_wait_is_at_most_one_minute(tmp_path, kind):
    """Another replica's clock a few ms ahead leaves an entry newer than our `now`: Retry-After stays ≤ 60."""
    from app.contract.limit_kinds import LimitKind
    from app.policy.limits import Limits
    from app.policy.store import Verdict
    from app.contract.refusals import LimitExceeded

    class AheadStore(MemoryLimitStore):
        async def admit(self, *args: Any, **kwargs: Any) -> Verdict:
            return Verdict(LimitKind(kind), 60_004)

    path = tmp_path / "keys.json"
    write_keys(path, limited={"requests_per_minute": 1, "tokens_per_minute": 1})
    limits = Limits(ClientKeys([], str(path)), AheadStore(), lambda key, since: None)
    with pytest.raises(LimitExceeded) as refused:
        await limits.admit("limited", ["anthropic/text"], "req_1")
    assert refused.value.retry_after == 60


def test_a_reload_that_would_merge_two_identities_keeps_the_previous_keys(tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, alice={})
    keys = ClientKeys([ClientKey("legacy", "sk-legacy-key-0000")], str(path))
    path.write_text(json.dumps({"keys": [{"name": "legacy", "sha256": digest("sk-alice")}]}))
    assert not keys.reload()
    assert keys.identify("Bearer sk-alice") == "alice" and keys.identify("Bearer sk-legacy-key-0000") == "legacy"
    path.write_text(json.dumps({"keys": [{"name": "mallory", "sha256": digest("sk-legacy-key-0000")}]}))
    assert not keys.reload()
    assert keys.identify("Bearer sk-legacy-key-0000") == "legacy"


UNPRICED = "anthropic/text-2025-08-07"  # served by the anthropic provider, listed by no catalog


def test_a_key_with_a_budget_is_never_served_a_model_without_a_price(gateway_factory, tmp_path):
    path = tmp_path / "keys.json"
    write_keys(
        path,
        budgeted={"budget_usd_per_day": 5.0},
        monthly={"budget_usd_per_month": 50.0},
        opted_in={"budget_usd_per_day": 5.0, "allow_unpriced_models": True},
        free={},
    )
    gw = gateway_factory(keys_file=str(path))
    for key in ("sk-budgeted", "sk-monthly"):
        m = marker()
        refused = gw.http.post("/v1/stream", json=turn(UNPRICED, m), headers=bearer(key))
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["type"] == "model_not_priced" and error["param"] == "model"
        assert UNPRICED in error["message"] and "no price" in error["message"] and "budget" in error["message"]
        assert f"adds `cost` to the catalog entry of {UNPRICED}" in error["message"]  # the operator's fix
        assert not gw.sim.seen(m)
    # A fallback without a price is refused too, naming it; in the Messages door's own shape as well.
    fallback = gw.http.post(
        "/v1/stream", json=turn("anthropic/text", fallback=[UNPRICED]), headers=bearer("sk-budgeted")
    )
    assert fallback.status_code == 403 and fallback.json()["error"]["param"] == "fallback.0"
    messages = gw.http.post(
        "/v1/messages",
        json={"model": UNPRICED, "max_tokens": 50, "messages": [{"role": "user", "content": marker()}]},
        headers=bearer("sk-budgeted"),
    )
    assert messages.status_code == 403 and messages.json()["type"] == "error"
    assert messages.json()["error"]["type"] == "permission_error" and UNPRICED in messages.json()["error"]["message"]
    # A priced model, a key without a budget, and a key the operator opted in are served.
    assert post(gw, "sk-budgeted").status_code == 200
    assert post(gw, "sk-free", UNPRICED).status_code == 200
    assert post(gw, "sk-opted_in", UNPRICED).status_code == 200
    assert 'gateway_rejected_requests_total{kind="model_not_priced"}' in gw.http.get("/metrics").text


def test_the_operator_may_serve_unpriced_models_to_every_budgeted_key(gateway_factory, tmp_path):
    path = tmp_path / "keys.json"
    write_keys(path, budgeted={"budget_usd_per_day": 5.0})
    gw = gateway_factory(keys_file=str(path), allow_unpriced_models=True)
    assert post(gw, "sk-budgeted", UNPRICED).status_code == 200


def test_a_burst_of_sighups_neither_stalls_streams_nor_loses_the_files_last_state(sim, tmp_path):
    """A real `python -m app` with a 5,000-key file: every event a stream delivers is answered with 10 SIGHUPs.
    The stream keeps flowing to its end, in order, the reloads are coalesced (at most one running and one
    waiting, off the event loop), and the keys end as the file's last state."""
    path = tmp_path / "keys.json"
    many = [{"name": f"k{i}", "sha256": digest(f"sk-k{i}"), "requests_per_minute": 600} for i in range(5000)]

    def write(*names: str) -> None:
        path.write_text(json.dumps({"keys": [*many, *({"name": n, "sha256": digest(f"sk-{n}")} for n in names)]}))

    write("first")
    log_path = tmp_path / "gateway.log"
    with open(log_path, "wb") as log_file:
        proc = GatewayProcess(sim.url, stderr=log_file, GATEWAY_KEYS_FILE=str(path),
                              GATEWAY_KEYS_RELOAD_INTERVAL="3600", GATEWAY_LOG_LEVEL="info")  # fmt: skip
        try:
            proc.wait_ready()
            deltas, terminal, signals = [], None, 0
            deadline = time.monotonic() + 120  # the turn takes ~2 s; with reloads on the loop it took minutes
            body = turn("anthropic/slow;n=40;delay_ms=50", marker())
            with httpx.stream(
                "POST", f"{proc.url}/v1/stream", json=body, headers=bearer("sk-first"), timeout=60
            ) as response:
                assert response.status_code == 200
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    if event["type"] == "text_delta":
                        deltas.append(event["delta"])
                        for _ in range(10):
                            os.kill(proc.proc.pid, signal.SIGHUP)
                            signals += 1
                    elif event["type"] in ("done", "error"):
                        terminal = event
                    assert time.monotonic() < deadline, (
                        f"the stream stalled: {len(deltas)} deltas after {signals} SIGHUPs"
                    )
            assert terminal is not None and terminal["type"] == "done"
            assert len(deltas) == 40 and "".join(deltas) == terminal["message"]["content"][0]["text"]

            # The last state wins: "first" removed, "last" added, one more SIGHUP.
            write("last")
            os.kill(proc.proc.pid, signal.SIGHUP)
            until = time.monotonic() + 60
            while httpx.get(f"{proc.url}/v1/models", headers=bearer("sk-last")).status_code != 200:
                assert time.monotonic() < until, "the file's last state never loaded"
                time.sleep(0.05)  # polling the process for the reload
            assert httpx.get(f"{proc.url}/v1/models", headers=bearer("sk-first")).status_code == 401
            assert httpx.get(f"{proc.url}/v1/models", headers=bearer("sk-k4999")).status_code == 200
        finally:
            proc.proc.terminate()
            proc.proc.wait(30)
    reloads = [line for line in log_path.read_text().splitlines() if "keys file reloaded" in line]
    assert 1 <= len(reloads) <= signals // 4, f"{len(reloads)} reloads for {signals} SIGHUPs: not coalesced"


def test_a_pool_deployment_without_a_price_is_refused_naming_its_fix_and_served_once_it_has_a_cost(
    gateway_factory, tmp_path
):
    keys = tmp_path / "keys.json"
    write_keys(keys, budgeted={"budget_usd_per_day": 5.0})
    deployment = {"provider": "anthropic", "model": "text-team-a"}  # a model id the catalog does not price
    routes = [
        {"name": "unpriced-pool", "pool": {"deployments": [deployment]}},
        {"name": "priced-pool", "pool": {"deployments": [{**deployment, "cost": {"input": 3, "output": 15}}]}},
    ]
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"routes": routes}))
    gw = gateway_factory(keys_file=str(keys), catalog=str(catalog))
    refused = post(gw, "sk-budgeted", "unpriced-pool")
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "model_not_priced"
    message = refused.json()["error"]["message"]
    assert "gives that deployment of route unpriced-pool a `cost`" in message and "docs/pools.md" in message
    assert post(gw, "sk-budgeted", "priced-pool").status_code == 200
