"""Anthropic Messages on Amazon Bedrock, end to end over loopback HTTP: the gateway's SDK client
(`AsyncAnthropicBedrock`, credentials from the standard AWS chain, SigV4, the event-stream framing) against the
simulator's Bedrock wire, which checks each signature the way the service does.

Credentials come from a real chain mechanism: an AWS config file whose profile has a `credential_process`
(a small script printing the credentials in a JSON file, with an `Expiration` a few minutes ahead, so botocore
refreshes them before each signing). Rotating them is writing new ones into that file. The gateway and that chain:
conftest.py; what every cloud does alike (throttling, a client that leaves): test_clouds.py.
"""

from __future__ import annotations

import httpx
import pytest

from simulator.bedrock import TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY, Key
from simulator.scenarios import token_count
from tests.conftest import marker, turn
from tests.providers.clouds.conftest import ONE_HOUR_WRITES, ROTATED_KEY_ID, ROTATED_SECRET, ROTATED_TOKEN, SONNET


def test_a_text_turn_is_signed_framed_and_priced(bedrock, sim):
    prompt = marker()
    result = bedrock.stream(turn(f"bedrock/{SONNET}", prompt))
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
    text = "".join(b["text"] for b in result.message["content"] if b["type"] == "text")
    assert text == f"Hello from the simulator. You said: {prompt}"
    usage = result.message["usage"]
    assert usage["input"] == 25 and usage["output"] > 0
    assert usage["cost"]["input"] == pytest.approx(25 * 3.3 / 1e6) and usage["cost"]["total"] > usage["cost"]["input"]
    seen = sim.seen(prompt)[-1]
    assert seen["vendor"] == "bedrock" and seen["model"] == SONNET and seen["status"] == 200
    assert "model" not in seen["body"] and "stream" not in seen["body"] and seen["body"]["anthropic_version"]
    assert seen["headers"]["aws-access-key-id"] == TEST_ACCESS_KEY_ID
    job = bedrock.job(result.headers["x-request-id"])
    assert [a.outcome for a in job.attempts] == ["done"]


def test_one_hour_cache_writes_on_bedrock_are_priced_at_twice_the_input_price(bedrock):
    """Issue 39 item 7: Bedrock's Claude reports `cache_creation` as Anthropic does; the catalog gives no 1-hour
    price, so those writes cost 2 x input (6.6 per million), the rest the 5-minute 4.125."""
    result = bedrock.stream(turn(f"bedrock/{ONE_HOUR_WRITES}", marker()))
    usage = result.terminal["usage"]
    assert (usage["cacheWrite"], usage["cacheWrite1h"]) == (1000, 600), result.terminal.get("errorMessage")
    assert usage["cost"]["cacheWrite"] == pytest.approx(400 * 4.125 / 1e6 + 600 * 6.6 / 1e6)


def test_thinking_streams_and_its_signature_goes_back_to_the_same_provider(bedrock, sim):
    first = bedrock.stream(turn("bedrock/thinking", marker(), options={"throttleMs": 0, "reasoning": "low"}))
    assert first.terminal["type"] == "done", first.terminal.get("errorMessage")
    thinking = next(b for b in first.message["content"] if b["type"] == "thinking")
    assert (
        thinking["thinking"] == "The user greets me. I should greet back."
        and thinking["thinkingSignature"] == "sig-sim-thinking-42"
    )
    follow_up = marker()
    messages = [{"role": "user", "content": "hi"}, first.message, {"role": "user", "content": follow_up}]
    second = bedrock.stream(
        {
            "model": "bedrock/thinking",
            "context": {"messages": messages},
            "options": {"throttleMs": 0, "reasoning": "low"},
        }
    )
    assert second.terminal["type"] == "done", second.terminal.get("errorMessage")
    sent = sim.seen(follow_up)[-1]["body"]["messages"][1]["content"]
    assert {"type": "thinking", "thinking": thinking["thinking"], "signature": "sig-sim-thinking-42"} in sent


def test_parallel_tool_calls(bedrock):
    result = bedrock.stream(turn("bedrock/tools", marker()))
    assert result.terminal["type"] == "done" and result.terminal["reason"] == "toolUse"
    calls = [b for b in result.message["content"] if b["type"] == "toolCall"]
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_time", {"timezone": "Europe/Paris"}),
    ]


def test_a_throttling_exception_inside_the_stream_is_a_rate_limit_with_the_clouds_reason(bedrock):
    result = bedrock.stream(turn("bedrock/error-before-content;exception=throttlingException", marker()))
    assert result.terminal["type"] == "error"
    job = bedrock.job(result.headers["x-request-id"])
    assert len(job.attempts) == 3 and all(a.http_status == 429 for a in job.attempts)  # retried, as a 429 is
    assert "sent throttlingException: Overloaded (request id " in result.terminal["errorMessage"]
    response = bedrock.http.post(
        "/v1/chat/completions",
        json={
            "model": "bedrock/error-before-content;exception=throttlingException",
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    assert response.status_code == 429  # the rate-limit failure, as the doors answer it


def test_a_bad_signature_is_refused_by_the_cloud_and_reported_clearly(bedrock, chain, wire):
    chain.use(TEST_ACCESS_KEY_ID, "a-wrong-secret-for-this-key-id")
    try:
        result = bedrock.stream(turn(f"bedrock/{SONNET}", marker()))
    finally:
        chain.use(TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY)
    message = result.terminal["errorMessage"]
    assert result.terminal["type"] == "error"
    assert message.startswith(
        f"bedrock/{SONNET} returned HTTP 403 InvalidSignatureException: The request signature we calculated"
    )
    assert "(request id " in message and "a-wrong-secret" not in message and TEST_ACCESS_KEY_ID not in message
    job = bedrock.job(result.headers["x-request-id"])
    assert len(job.attempts) == 1 and job.attempts[0].http_status == 403  # not retried: it would fail the same


def test_rotated_credentials_are_picked_up_without_failing_a_running_stream(bedrock, sim, chain, wire):
    before, after = marker(), marker()
    with httpx.Client(base_url=bedrock.url, timeout=30) as client:
        with client.stream("POST", "/v1/stream", json=turn("bedrock/slow;n=40;delay_ms=25", before)) as running:
            lines = running.iter_lines()
            assert any(line.startswith("data:") and "text_delta" in line for line in lines)  # content is flowing
            # The old credentials are revoked and the chain now yields new ones (with a session token).
            chain.use(ROTATED_KEY_ID, ROTATED_SECRET, ROTATED_TOKEN)
            wire.keys = {ROTATED_KEY_ID: Key(ROTATED_SECRET, ROTATED_TOKEN)}
            wire.expired = {TEST_ACCESS_KEY_ID}
            rest = "\n".join(lines)
        try:
            result = bedrock.stream(turn(f"bedrock/{SONNET}", after))
        finally:
            chain.use(TEST_ACCESS_KEY_ID, TEST_SECRET_ACCESS_KEY)
    assert '"type":"done"' in rest.replace(" ", "")  # the stream signed with the old credentials ended well
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
    assert sim.seen(before)[-1]["headers"]["aws-access-key-id"] == TEST_ACCESS_KEY_ID
    assert [e["headers"]["aws-access-key-id"] for e in sim.seen(after)] == [ROTATED_KEY_ID]


def test_expired_credentials_are_reported_with_the_clouds_reason(bedrock, wire):
    wire.expired = {TEST_ACCESS_KEY_ID}
    result = bedrock.stream(turn(f"bedrock/{SONNET}", marker()))
    assert result.terminal["type"] == "error"
    assert (
        "returned HTTP 403 ExpiredTokenException: The security token included in the request is expired"
        in result.terminal["errorMessage"]
    )


def test_a_non_streaming_turn_is_served(bedrock):
    response = bedrock.http.post("/v1/complete", json=turn(f"bedrock/{SONNET}", "hi"))
    assert response.status_code == 200, response.text
    assert response.json()["stopReason"] == "stop"


def _another_gateway(gateway_factory, bedrock, sim):
    """A gateway like `bedrock` whose provider reads the AWS chain afresh (a provider resolves it once)."""
    return gateway_factory(
        catalog=bedrock.state.settings.catalog, base_urls={"bedrock": f"{sim.url}/bedrock"}, retries=0
    )


def test_no_credentials_in_the_chain_fail_the_turn_clearly(gateway_factory, bedrock, sim, chain, monkeypatch):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(chain.current.parent / "missing-config"))
    try:
        result = _another_gateway(gateway_factory, bedrock, sim).stream(turn(f"bedrock/{SONNET}", marker()))
    finally:
        monkeypatch.undo()
    assert result.terminal["type"] == "error"
    assert "could not sign the request for Bedrock: Unable to locate credentials" in result.terminal["errorMessage"]
    assert "internal error" not in result.terminal["errorMessage"]


FOUNDATION = "anthropic.claude-sonnet-4-5-20250929-v1:0"  # what SONNET's inference profile serves


def counted(sim, m: str) -> list[dict]:
    return [seen for seen in sim.seen(m) if seen["endpoint"] == "count"]


def test_a_token_count_is_bedrocks_count_tokens_of_the_turns_invoke_body_signed_as_a_turn(bedrock, sim):
    """The Messages door's count on an inference profile: `CountTokens` on its foundation model (the simulator
    refuses a profile id there, as the service does) of the very InvokeModel body a turn sends."""
    m = marker()
    response = bedrock.http.post(
        "/v1/messages/count_tokens",
        json={
            "model": f"bedrock/{SONNET}",
            "system": "You are terse.",
            "messages": [{"role": "user", "content": f"hi {m}"}],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}],
        },
    )
    assert response.status_code == 200, response.text
    [seen] = counted(sim, m)
    assert (seen["vendor"], seen["model"], seen["status"]) == ("bedrock", FOUNDATION, 200)
    assert response.json() == {"input_tokens": token_count(seen["body"])}  # Bedrock's number, unchanged
    body = seen["body"]
    assert body["anthropic_version"] and "model" not in body and "stream" not in body  # the InvokeModel body
    assert body["system"] and body["tools"][0]["name"] == "get_weather" and body["max_tokens"]
    assert seen["headers"]["aws-access-key-id"] == TEST_ACCESS_KEY_ID  # signed with the chain's credentials
    assert not [s for s in sim.seen(m) if s["endpoint"] == "stream"], "a count is not a turn"


@pytest.mark.parametrize("door", ["responses", "gemini"])
def test_every_doors_count_route_reaches_bedrocks_count(bedrock, sim, door):
    m = marker()
    if door == "responses":
        response = bedrock.http.post(
            "/v1/responses/input_tokens", json={"model": f"bedrock/{SONNET}", "input": f"hi {m}"}
        )
        field = "input_tokens"
    else:
        response = bedrock.http.post(
            f"/v1beta/models/bedrock/{SONNET}:countTokens",
            json={"contents": [{"role": "user", "parts": [{"text": f"hi {m}"}]}]},
        )
        field = "totalTokens"
    assert response.status_code == 200, response.text
    [seen] = counted(sim, m)
    assert response.json()[field] == token_count(seen["body"]) and seen["model"] == FOUNDATION


@pytest.mark.parametrize(
    "model, status, reason",
    [
        ("http-400", 400, "ValidationException"),
        ("text;throttle=1", 429, "ThrottlingException"),
        ("text;deny=1", 502, "AccessDeniedException"),
        ("http-500", 502, "InternalServerException"),
    ],
)
def test_a_failed_count_is_typed_with_bedrocks_reason_and_no_arn(bedrock, sim, model, status, reason):
    m = marker()
    response = bedrock.http.post(
        "/v1/messages/count_tokens", json={"model": f"bedrock/{model}", "messages": [{"role": "user", "content": m}]}
    )
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert message.startswith(f"bedrock/{model} returned HTTP ") and reason in message and "(request id " in message, (
        message
    )
    assert "123456789012" not in response.text and "arn:aws" not in response.text
    assert len(counted(sim, m)) == 1, "asked once: a count is not retried"


def test_the_foundation_model_of_a_bedrock_model_id():
    from app.providers.clouds.bedrock.claude import foundation_model

    assert foundation_model(SONNET) == FOUNDATION
    assert foundation_model("eu.anthropic.claude-haiku-4-5-20251001-v1:0") == "anthropic.claude-haiku-4-5-20251001-v1:0"
    assert foundation_model(f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{SONNET}") == FOUNDATION
    assert foundation_model(FOUNDATION) == FOUNDATION
    app_profile = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
    assert foundation_model(app_profile) == app_profile


@pytest.mark.parametrize("scenario, timeout", [("hang-before-headers", "first_event"), ("hang-mid-stream", "idle")])
def test_a_bedrock_stream_that_stops_sending_times_out_and_is_closed(
    gateway_factory, sim, chain, bedrock, scenario, timeout
):
    quick = gateway_factory(
        catalog=bedrock.state.settings.catalog,
        base_urls={"bedrock": f"{sim.url}/bedrock"},
        first_event_timeout=0.5,
        idle_timeout=0.5,
        retries=0,
    )
    prompt = marker()
    result = quick.stream(turn(f"bedrock/{scenario}", prompt))
    assert result.terminal["type"] == "error"
    assert quick.job(result.headers["x-request-id"]).attempts[-1].timeout == timeout
    assert sim.wait(prompt, until="closed")["clientClosed"]  # the cloud stream was closed


def test_web_identity_credentials_irsa_are_refreshed_from_sts_as_the_token_rotates(
    gateway_factory, bedrock, sim, chain, wire, tmp_path, monkeypatch
):
    """IRSA's chain: `AWS_ROLE_ARN` and a projected service account token file; botocore calls STS
    `AssumeRoleWithWebIdentity` (the simulator's, `AWS_ENDPOINT_URL_STS`) for credentials that last 5 minutes, so
    it refreshes them before signing; the kubelet rotates the token file, and STS takes only the new token."""
    token_file = tmp_path / "token"
    token_file.write_text("service-account-token-1")
    wire.web_identity_tokens = {"service-account-token-1"}
    issued_before = len(wire.issued)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/llm-gateway-bedrock")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", f"{sim.url}/sts")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    try:
        irsa = _another_gateway(gateway_factory, bedrock, sim)
        first = irsa.stream(turn(f"bedrock/{SONNET}", before := marker()))
        token_file.write_text("service-account-token-2")  # the kubelet rotates the projected token
        wire.web_identity_tokens = {"service-account-token-2"}
        wire.expired = set(wire.issued)  # and the credentials issued so far expire
        second = irsa.stream(turn(f"bedrock/{SONNET}", after := marker()))
    finally:
        monkeypatch.undo()
    assert first.terminal["type"] == "done", first.terminal.get("errorMessage")
    assert second.terminal["type"] == "done", second.terminal.get("errorMessage")
    first_key, second_key = (sim.seen(m)[-1]["headers"]["aws-access-key-id"] for m in (before, after))
    assert (
        first_key in wire.issued[issued_before:]
        and second_key in wire.issued[issued_before:]
        and first_key != second_key
    )


def test_an_access_denied_keeps_the_clouds_reason_and_request_id_but_no_arn(bedrock):
    result = bedrock.stream(turn(f"bedrock/{SONNET};deny=1", marker()))
    message = result.terminal["errorMessage"]
    assert message.startswith(
        f"bedrock/{SONNET};deny=1 returned HTTP 403 AccessDeniedException: User: [arn] is not authorized "
        "to perform: bedrock:InvokeModelWithResponseStream on resource: [arn] because"
    ), message
    assert "(request id " in message
    request_id = result.headers["x-request-id"]
    bedrock.job(request_id)
    emitted = {
        "error event": result.text,
        "record": bedrock.http.get(f"/v1/requests/{request_id}").text,
        "metrics": bedrock.http.get("/metrics").text,
    }
    for where, text in emitted.items():
        assert "123456789012" not in text and "llm-gateway-bedrock" not in text, where


def test_an_error_body_past_the_upstream_bound_ends_the_turn_with_one_clean_error_and_a_record(
    gateway_factory, bedrock, sim
):
    """Bedrock's error bodies are read whole by the SDK: an 8 MiB one stops at GATEWAY_MAX_UPSTREAM_EVENT_BYTES."""
    bounded = gateway_factory(
        catalog=bedrock.state.settings.catalog,
        base_urls={"bedrock": f"{sim.url}/bedrock"},
        retries=0,
        max_upstream_event_bytes=1024 * 1024,
    )
    model = f"bedrock/text;error_bytes={8 * 1024 * 1024}"
    prompt = marker()
    result = bounded.stream(turn(model, prompt))
    assert [e["type"] for e in result.events if e["type"] in ("done", "error")] == ["error"]
    message = result.terminal["errorMessage"]
    assert (
        message == f"{model} answered HTTP 500 with a body longer than 1048576 bytes (GATEWAY_MAX_UPSTREAM_EVENT_BYTES)"
    )
    request_id = result.headers["x-request-id"]
    [attempt] = bounded.job(request_id).attempts
    assert (attempt.kind, attempt.http_status) == ("event_too_large", 500)
    record = bounded.http.get(f"/v1/requests/{request_id}")
    assert record.status_code == 200 and record.json()["outcome"] == "error", record.text
    assert len(record.text) < 64 * 1024  # none of the body was kept
    assert [e["status"] for e in sim.seen(prompt)] == [500]


def test_a_count_whose_error_body_passes_the_bound_is_a_clean_502(gateway_factory, bedrock, sim):
    bounded = gateway_factory(
        catalog=bedrock.state.settings.catalog,
        base_urls={"bedrock": f"{sim.url}/bedrock"},
        max_upstream_event_bytes=1024 * 1024,
    )
    response = bounded.http.post(
        "/v1/messages/count_tokens",
        json={
            "model": f"bedrock/text;error_bytes={8 * 1024 * 1024}",
            "messages": [{"role": "user", "content": marker()}],
        },
    )
    assert response.status_code == 502 and len(response.content) < 4096, response.text[:300]
    assert "with a body longer than 1048576 bytes" in response.json()["error"]["message"]
