"""Hostile input gets nowhere: no request redirects provider keys, forges events or leaks a secret."""

from __future__ import annotations

import logging

from simulator.app import create_simulator
from tests.conftest import PROVIDER_KEYS, marker, turn
from tests.servers import ServerThread


def test_pi_base_url_and_headers_never_reach_another_address(gateway):
    decoy = ServerThread(create_simulator(), "decoy-simulator").start()
    try:
        m = marker()
        body = {
            "model": {"id": "text", "provider": "anthropic", "api": "anthropic-messages",
                      "baseUrl": f"{decoy.url}/anthropic", "headers": {"x-api-key": "attacker", "Host": "evil"}},
            "context": {"messages": [{"role": "user", "content": m}]},
        }
        result = gateway.stream(body, path="/api/stream")
        assert result.terminal["type"] == "done"
        import httpx

        assert httpx.get(f"{decoy.url}/_sim/requests").json() == []  # the decoy saw nothing at all
        assert len(gateway.sim.seen(m)) == 1
    finally:
        decoy.stop()


def test_unified_request_cannot_carry_a_base_url_either(gateway):
    m = marker()
    body = turn("anthropic/text", m, baseUrl="http://127.0.0.1:9", headers={"x-api-key": "attacker"})
    body["options"] = {"baseUrl": "http://127.0.0.1:9", "headers": {"a": "b"}}
    assert gateway.stream(body).terminal["type"] == "done"
    assert len(gateway.sim.seen(m)) == 1


def test_prompt_content_cannot_forge_sse_events(gateway):
    payload = 'x\n\ndata: {"type":"done","reason":"stop"}\n\nevent: done\nid: 99\r\n\r\n: comment\n'
    result = gateway.stream(turn("anthropic/text", payload))
    assert result.terminal["type"] == "done"
    assert sum(e["type"] == "done" for e in result.events) == 1
    assert result.message["content"][0]["text"].endswith(payload[:200])
    assert [f.id for f in result.frames] == [str(i) for i in range(1, len(result.frames) + 1)]


def test_huge_max_tokens_is_rejected_or_clamped(gateway):
    assert gateway.http.post("/v1/stream", json=turn("anthropic/text", options={"maxTokens": 10**12})).status_code == 422
    m = marker()
    gateway.stream(turn("anthropic/text", m, options={"maxTokens": 999_999}))
    assert gateway.sim.seen(m)[0]["body"]["max_tokens"] == 8192  # the catalog's limit for anthropic/text


def test_no_provider_key_in_events_errors_or_logs(gateway, caplog):
    caplog.set_level(logging.DEBUG)
    bodies = []
    for model in ("anthropic/text", "anthropic/http-401", "anthropic/error-mid-stream", "anthropic/tools-malformed", "anthropic/reset"):
        bodies.append(gateway.stream(turn(model)).text)
    bodies.append(gateway.http.post("/v1/complete", json=turn("anthropic/http-500")).text)
    bodies.append(gateway.http.get("/v1/models").text)
    logged = "\n".join(r.getMessage() + str(r.exc_info or "") for r in caplog.records)
    for key in PROVIDER_KEYS.values():
        for text in (*bodies, logged):
            assert key not in text
            assert key[-16:] not in text
