"""`POST /v1/messages/count_tokens` with the official `anthropic` SDK (`client.messages.count_tokens`, and the
beta endpoint `?beta=true`) over loopback, against the gateway in front of the simulator's counting endpoints:
the answer is the serving vendor's own count of what a turn would send it, a model whose api cannot count
is a 400 naming the model (never an invented number), vendor failures keep their meaning, and the key's
allowed models apply as for turns."""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import time
from pathlib import Path
from typing import Any, Iterator

import anthropic
import httpx
import pytest

from simulator.scenarios import token_count
from tests.conftest import marker

COUNTING = ["anthropic", "openai", "google"]  # the vendors with a counting endpoint
SYSTEM = "You are a coding agent. " * 40
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def client_for(gateway: Any, **kwargs: Any) -> anthropic.Anthropic:
    kwargs.setdefault("api_key", "unused-when-auth-is-off")
    kwargs.setdefault("max_retries", 0)
    return anthropic.Anthropic(base_url=gateway.url, timeout=30, **kwargs)


@pytest.fixture(scope="module")
def client(gateway: Any) -> anthropic.Anthropic:
    return client_for(gateway)


def counted(gateway: Any, m: str) -> list[dict[str, Any]]:
    """The counting requests the simulator received for this marker."""
    return [seen for seen in gateway.sim.seen(m) if seen["endpoint"] == "count"]


def request(m: str) -> dict[str, Any]:
    return {
        "system": SYSTEM,
        "tools": [WEATHER],
        "messages": [
            {"role": "user", "content": f"What is the weather in Paris? {m}"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
        ],
    }


@pytest.mark.parametrize("provider", COUNTING)
def test_count_is_the_serving_vendors_own_count_of_the_whole_request(client, gateway, provider):
    m = marker()
    result = client.messages.count_tokens(model=f"{provider}/text", **request(m))
    [seen] = counted(gateway, m)
    assert seen["vendor"] == provider
    assert result.input_tokens == token_count(seen["body"])  # the vendor's number, unchanged
    sent = json.dumps(seen["body"])
    assert "You are a coding agent." in sent and "get_weather" in sent and "sunny" in sent  # all of it is counted
    assert not [s for s in gateway.sim.seen(m) if s["endpoint"] == "stream"], "a count is not a turn"


@pytest.mark.parametrize("provider", COUNTING)
def test_beta_count_endpoint_is_answered_the_same(client, gateway, provider):
    m = marker()
    result = client.beta.messages.count_tokens(model=f"{provider}/text", **request(m))
    [seen] = counted(gateway, m)
    assert result.input_tokens == token_count(seen["body"])


def test_a_model_whose_api_has_no_counting_endpoint_is_a_400_naming_the_model(client, gateway):
    m = marker()
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.count_tokens(model="compat/meta-llama/Llama-3.3-70B-Instruct", **request(m))
    assert raised.value.status_code == 400 and raised.value.body["type"] == "error"
    error = raised.value.body["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("model: compat/meta-llama/Llama-3.3-70B-Instruct")
    assert "no token counting endpoint" in error["message"]
    assert gateway.sim.seen(m) == [], "no vendor was asked"


@pytest.mark.parametrize(
    ("provider", "scenario", "error_type", "status"),
    [
        ("anthropic", "http-429", anthropic.RateLimitError, 429),
        ("openai", "http-400", anthropic.BadRequestError, 400),
        ("google", "http-500", anthropic.InternalServerError, 502),
        ("anthropic", "http-529", anthropic.InternalServerError, 529),
    ],
)
def test_a_vendor_failing_to_count_is_an_error_with_its_meaning(
    client, gateway, provider, scenario, error_type, status
):
    m = marker()
    with pytest.raises(error_type) as raised:
        client.messages.count_tokens(model=f"{provider}/{scenario}", **request(m))
    assert raised.value.status_code == status
    assert raised.value.body["error"]["message"].startswith(f"{provider}/{scenario} returned HTTP")
    assert len(counted(gateway, m)) == 1, "asked once: no retries, no fallback to another vendor's count"


def test_unknown_model_is_404(client):
    with pytest.raises(anthropic.NotFoundError) as raised:
        client.messages.count_tokens(model="nobody/nothing", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.body["error"]["type"] == "not_found_error"


def test_bad_input_is_a_400_naming_the_field(client, gateway):
    m = marker()
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.count_tokens(model="anthropic/text", messages=[{"role": "robot", "content": m}])  # type: ignore[typeddict-item]
    assert raised.value.body["error"]["message"].startswith("messages.0.role")
    assert gateway.sim.seen(m) == []


def test_count_needs_a_key_and_honours_its_allowed_models(gateway_factory, tmp_path: Path):
    path = tmp_path / "keys.json"
    digest = hashlib.sha256(b"sk-team").hexdigest()
    path.write_text(json.dumps({"keys": [{"name": "team", "sha256": digest, "models": ["anthropic/*"]}]}))
    gw = gateway_factory(keys_file=str(path))
    team = client_for(gw, api_key="sk-team")
    assert team.messages.count_tokens(model="anthropic/text", **request(marker())).input_tokens > 0
    m = marker()
    with pytest.raises(anthropic.PermissionDeniedError) as raised:
        team.messages.count_tokens(model="openai/text", **request(m))
    assert raised.value.body["error"]["message"] == "model: API key team may not use model openai/text"
    with pytest.raises(anthropic.AuthenticationError):
        client_for(gw, api_key="sk-nobody").messages.count_tokens(model="anthropic/text", **request(m))
    assert gw.sim.seen(m) == []


def test_a_vendor_that_does_not_answer_the_count_in_time_is_a_504(gateway_factory):
    gw = gateway_factory(first_event_timeout=0.5)
    m = marker()
    with pytest.raises(anthropic.APIStatusError) as raised:
        client_for(gw).messages.count_tokens(model="openai/hang-before-headers", **request(m))
    assert raised.value.status_code == 504 and raised.value.body["error"]["type"] == "timeout_error"
    assert raised.value.body["error"]["message"] == "openai/hang-before-headers token count timed out after 0.5s"
    gw.sim.wait(m, until="closed")  # the vendor's connection is closed, not left hanging


def _keys_file(tmp_path: Path, **policy: Any) -> str:
    path = tmp_path / "keys.json"
    digest = hashlib.sha256(b"sk-team").hexdigest()
    path.write_text(json.dumps({"keys": [{"name": "team", "sha256": digest, **policy}]}))
    return str(path)


TEAM = {"x-api-key": "sk-team"}


def _count_on_each_door(gw: Any, m: str) -> list[httpx.Response]:
    """One count through each door's counting route (Messages, Responses, Gemini), as the key `team`."""
    messages = [{"role": "user", "content": m}]
    return [
        gw.http.post("/v1/messages/count_tokens", json={"model": "anthropic/text", "messages": messages}, headers=TEAM),
        gw.http.post("/v1/responses/input_tokens", json={"model": "openai/text", "input": m}, headers=TEAM),
        gw.http.post(
            "/v1beta/models/google/text:countTokens", json={"contents": [{"parts": [{"text": m}]}]}, headers=TEAM
        ),
    ]


def test_counts_count_against_the_keys_requests_per_minute_on_every_door(gateway_factory, tmp_path: Path):
    gw = gateway_factory(keys_file=_keys_file(tmp_path, requests_per_minute=2))
    team = client_for(gw, api_key="sk-team")
    for _ in range(2):
        assert team.messages.count_tokens(model="anthropic/text", **request(marker())).input_tokens > 0
    m = marker()
    refused = _count_on_each_door(gw, m)
    assert [r.status_code for r in refused] == [429, 429, 429]
    for response in refused:
        assert int(response.headers["retry-after"]) >= 1
        assert "requests per minute limit reached (limit 2)" in json.dumps(response.json())
    assert refused[0].json()["type"] == "error" and refused[0].json()["error"]["type"] == "rate_limit_error"
    turn_refused = gw.http.post(
        "/v1/messages",
        json={"model": "anthropic/text", "max_tokens": 8, "messages": [{"role": "user", "content": m}]},
        headers=TEAM,
    )
    assert turn_refused.status_code == 429, "counts and turns share the key's window"
    assert gw.sim.seen(m) == [], "no vendor was asked"


def test_a_key_at_its_concurrency_is_refused_a_count_while_a_count_hangs(gateway_factory, tmp_path: Path):
    gw = gateway_factory(keys_file=_keys_file(tmp_path, concurrent_streams=1), first_event_timeout=5)
    with _a_count_hanging(gw) as held:
        m = marker()
        refused = _count_on_each_door(gw, m)
        assert [r.status_code for r in refused] == [429, 429, 429]
        assert "concurrent streams limit reached (limit 1)" in refused[0].json()["error"]["message"]
        assert refused[0].headers["retry-after"] == "1"
        assert gw.sim.seen(m) == []
        assert held.result().status_code == 504
    gw.server.call(gw.state.limits.idle())
    assert [r.status_code for r in _count_on_each_door(gw, marker())][:1] == [200], "the hold was released"


def test_counts_without_a_concurrency_of_the_keys_own_are_capped_per_key_by_the_replica(gateway_factory):
    gw = gateway_factory(api_keys="team:sk-team", max_streams_per_key=1, first_event_timeout=5)
    with _a_count_hanging(gw) as held:
        refused = _count_on_each_door(gw, marker())
        assert [r.status_code for r in refused] == [429, 429, 429]
        assert refused[0].json()["error"]["type"] == "rate_limit_error"
        assert "too many concurrent streams for API key team (limit 1)" in refused[0].json()["error"]["message"]
        assert held.result().status_code == 504
    assert gw.state.pending == 0 and not gw.state.streams_per_key


def test_a_count_body_past_the_body_bound_is_refused_like_a_turns(gateway_factory):
    gw = gateway_factory(max_body_bytes=2000)
    m = marker()
    big = {"model": "anthropic/text", "messages": [{"role": "user", "content": m + "x" * 5000}]}
    response = gw.http.post("/v1/messages/count_tokens", json=big)
    assert response.status_code == 413 and "2000 bytes" in json.dumps(response.json())
    assert gw.sim.seen(m) == []


@contextlib.contextmanager
def _a_count_hanging(gw: Any) -> Iterator[concurrent.futures.Future[httpx.Response]]:
    """A count whose vendor hangs before its headers (its key's slot held), sent from a thread; the vendor has
    seen it when the block starts; yields the count's future (a 504 once `first_event_timeout` runs out)."""
    hanging = marker()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        held = pool.submit(
            gw.http.post,
            "/v1/messages/count_tokens",
            json={"model": "openai/hang-before-headers", "messages": [{"role": "user", "content": hanging}]},
            headers=TEAM,
        )
        _until_the_vendor_sees(gw, hanging)
        yield held


def _until_the_vendor_sees(gw: Any, m: str) -> None:
    """Wait until the simulator has received the count carrying `m` (its request is then in flight)."""
    deadline = time.monotonic() + 10
    while not counted(gw, m):
        assert time.monotonic() < deadline, f"the vendor never received {m}"
        time.sleep(0.01)
