"""`POST /v1/messages` with the official `anthropic` SDK, as an application would use it, over loopback against
the gateway in front of the simulator, with each upstream vendor behind it (and `compat`, a Chat Completions server).

Covers the conformance scenarios through this door (text, thinking, parallel fragmented tool calls, malformed
tool JSON, vendor errors before and after the start, refusal, truncation, usage, cancellation), the signed
thinking round trip (kept on the same model, never sent to another vendor), and bad input (4xx in
Anthropic's error shape, the SDK's own error types, no upstream call).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from app.doors.signatures import unwrap, unwrap_call
from simulator.app import VENDORS
from tests.conformance import parse_sse
from tests.conftest import marker

PROVIDERS = [
    "anthropic",
    "openai",
    "google",
    "compat",
]  # compat: a keyless openai-completions provider (tests/catalog.json)
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}},
}
TIME = {
    "name": "get_time",
    "description": "Current time",
    "input_schema": {"type": "object", "properties": {"timezone": {"type": "string"}}},
}


def client_for(gateway: Any, **kwargs: Any) -> anthropic.Anthropic:
    kwargs.setdefault("api_key", "unused-when-auth-is-off")
    kwargs.setdefault("max_retries", 0)
    return anthropic.Anthropic(base_url=gateway.url, timeout=30, **kwargs)


@pytest.fixture(scope="module")
def gateway(gateway_factory: Any) -> Any:
    """Coalescing off (an Anthropic client has no per-request `throttleMs`): every vendor fragment is one delta."""
    return gateway_factory(throttle_ms=0)


@pytest.fixture(scope="module")
def client(gateway: Any) -> anthropic.Anthropic:
    return client_for(gateway)


def request_id(message_id: str) -> str:
    assert message_id.startswith("msg_")
    return message_id[len("msg_") :]


def record(gateway: Any, rid: str) -> dict[str, Any]:
    gateway.job(rid)  # settled
    for _ in range(100):  # the ledger writes in the background
        response = gateway.http.get(f"/v1/requests/{rid}")
        if response.status_code == 200 and response.json().get("outcome"):
            return response.json()
        time.sleep(0.05)
    raise AssertionError(f"no settled record for {rid}")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# ----------------------------------------------------------------------------- text and usage


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stream_text(client, gateway, provider):
    m = marker()
    with client.messages.stream(model=f"{provider}/text", max_tokens=200, messages=[user(m)]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == f"Hello from the simulator. You said: {m}"
    assert final.model == f"{provider}/text" and final.stop_reason == "end_turn" and final.role == "assistant"
    assert [b.type for b in final.content] == ["text"] and final.content[0].text == text
    rid = request_id(final.id)
    job = gateway.job(rid)
    usage = job.turn.message["usage"]
    assert final.usage.input_tokens == usage["input"] > 0 and final.usage.output_tokens == usage["output"] > 0
    assert record(gateway, rid)["door"] == "anthropic-messages"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_create_text(client, gateway, provider):
    m = marker()
    message = client.messages.create(model=f"{provider}/text", max_tokens=200, messages=[user(m)], system="Be brief.")
    assert message.content[0].text == f"Hello from the simulator. You said: {m}"
    assert message.stop_reason == "end_turn" and message.model == f"{provider}/text"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert len(gateway.sim.seen(m)) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_usage_in_anthropic_sense(client, gateway, provider):
    """`input_tokens` without cache reads and writes, which have fields of their own."""
    model = f"{provider}/text;input=40;cache_read=300;cache_write=20"
    with client.messages.stream(model=model, max_tokens=100, messages=[user(marker())]) as stream:
        final = stream.get_final_message()
    usage = gateway.job(request_id(final.id)).turn.message["usage"]
    assert final.usage.input_tokens == usage["input"]
    assert final.usage.cache_read_input_tokens == usage["cacheRead"]
    assert (final.usage.cache_creation_input_tokens or 0) == usage["cacheWrite"]
    assert final.usage.output_tokens == usage["output"]
    assert usage["cacheRead"] > 0
    created = client.messages.create(model=model, max_tokens=100, messages=[user(marker())])
    assert created.usage.cache_read_input_tokens == final.usage.cache_read_input_tokens


def test_max_tokens_stop_reason(client):
    message = client.messages.create(model="anthropic/max-tokens", max_tokens=5, messages=[user(marker())])
    assert message.stop_reason == "max_tokens"


# ----------------------------------------------------------------------------- thinking and signatures


def thinking_request(model: str, prompt: str) -> dict[str, Any]:
    return dict(
        model=model, max_tokens=4000, thinking={"type": "enabled", "budget_tokens": 2048}, messages=[user(prompt)]
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_signed_thinking_round_trips_on_the_same_model(client, gateway, provider):
    first_prompt, second_prompt = marker(), marker()
    with client.messages.stream(**thinking_request(f"{provider}/thinking", first_prompt)) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert any(e.type == "thinking" for e in events) and any(e.type == "signature" for e in events)
    thinking = final.content[0]
    assert thinking.type == "thinking" and thinking.thinking.startswith("The user greets me.")
    signed = unwrap(thinking.signature)
    assert signed is not None and signed.origin.provider == provider and signed.signature
    # Second turn: the client sends the assistant content back exactly as it got it.
    second = client.messages.create(
        model=f"{provider}/thinking",
        max_tokens=4000,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[user(first_prompt), {"role": "assistant", "content": final.content}, user(second_prompt)],
    )
    assert second.content[0].type == "thinking"
    upstream = json.dumps(gateway.sim.seen(second_prompt)[0]["body"])
    # OpenAI's signature is the whole reasoning item (JSON); what the vendor checks is its encrypted content.
    own = json.loads(signed.signature)["encrypted_content"] if provider == "openai" else signed.signature
    assert own in upstream, "the vendor's own signature went back to the vendor"
    assert "gw1." not in upstream, "the door's wrapper never reaches a vendor"


@pytest.mark.parametrize("provider", ["openai", "google", "compat"])
def test_thinking_is_never_sent_to_another_vendor_as_a_signature(client, gateway, provider):
    first_prompt, second_prompt = marker(), marker()
    first = client.messages.create(**thinking_request("anthropic/thinking", first_prompt))
    vendor_signature = unwrap(first.content[0].signature).signature
    client.messages.create(
        model=f"{provider}/text",
        max_tokens=500,
        messages=[user(first_prompt), {"role": "assistant", "content": first.content}, user(second_prompt)],
    )
    upstream = json.dumps(gateway.sim.seen(second_prompt)[0]["body"])
    assert vendor_signature not in upstream and "gw1." not in upstream
    assert "The user greets me." in upstream  # the reasoning survives as plain text


def test_redacted_thinking_round_trips(client, gateway):
    first_prompt, second_prompt = marker(), marker()
    first = client.messages.create(**thinking_request("anthropic/redacted-thinking", first_prompt))
    redacted = first.content[0]
    assert redacted.type == "redacted_thinking" and unwrap(redacted.data).signature == "EncryptedBlob=="
    client.messages.create(
        **{
            **thinking_request("anthropic/redacted-thinking", second_prompt),
            "messages": [user(first_prompt), {"role": "assistant", "content": first.content}, user(second_prompt)],
        }
    )
    body = gateway.sim.seen(second_prompt)[0]["body"]
    assert {"type": "redacted_thinking", "data": "EncryptedBlob=="} in body["messages"][1]["content"]


# ----------------------------------------------------------------------------- tools


@pytest.mark.parametrize("provider", PROVIDERS)
def test_parallel_fragmented_tool_calls_and_a_second_turn(client, gateway, provider):
    m = marker()
    with client.messages.stream(
        model=f"{provider}/tools", max_tokens=500, tools=[WEATHER, TIME], messages=[user(m)]
    ) as stream:
        deltas = [
            e.delta.partial_json
            for e in stream
            if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
        ]
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    calls = [b for b in final.content if b.type == "tool_use"]
    assert [(c.name, c.input) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_time", {"timezone": "Europe/Paris"}),
    ]
    # Fragments as the vendor streamed them (Gemini sends each call's arguments whole).
    assert len(deltas) >= (2 if provider == "google" else 5)
    follow_up = marker()
    results = [{"type": "tool_result", "tool_use_id": c.id, "content": f"result {c.name}"} for c in calls]
    second = client.messages.create(
        model=f"{provider}/text",
        max_tokens=500,
        tools=[WEATHER, TIME],
        messages=[
            user(m),
            {"role": "assistant", "content": final.content},
            {"role": "user", "content": [*results, {"type": "text", "text": follow_up}]},
        ],
    )
    assert second.stop_reason == "end_turn"
    upstream = json.dumps(gateway.sim.seen(follow_up)[0]["body"])
    assert "result get_weather" in upstream and "result get_time" in upstream


@pytest.mark.parametrize("provider", PROVIDERS)
def test_create_with_tools_and_tool_choice(client, gateway, provider):
    m = marker()
    message = client.messages.create(
        model=f"{provider}/tools",
        max_tokens=500,
        tools=[WEATHER, TIME],
        tool_choice={"type": "any"},
        messages=[user(m)],
    )
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
    assert message.content[1].input == {"city": "Paris", "unit": "celsius"}


# `disable_parallel_tool_use: true` as each vendor takes it (Gemini has no such switch: nothing is sent).
SERIAL = {
    "anthropic": lambda body: body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True},
    "openai": lambda body: body["parallel_tool_calls"] is False,
    "google": lambda body: "parallel" not in json.dumps(body).lower(),
    "compat": lambda body: body["parallel_tool_calls"] is False,
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_disable_parallel_tool_use_reaches_each_vendor_as_its_own_switch(client, gateway, provider):
    m = marker()
    client.messages.create(model=f"{provider}/tools", max_tokens=500, tools=[WEATHER, TIME], messages=[user(m)],
                           tool_choice={"type": "any", "disable_parallel_tool_use": True})  # fmt: skip
    assert SERIAL[provider](gateway.sim.seen(m)[-1]["body"])


# Gemini reports a call it could not form itself, as finishReason MALFORMED_FUNCTION_CALL.
MALFORMED = {
    "anthropic": "arguments are not valid JSON",
    "openai": "arguments are not valid JSON",
    "google": "MALFORMED_FUNCTION_CALL",
    "compat": "arguments are not valid JSON",
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_tool_json_is_an_error_never_a_call(client, gateway, provider):
    seen: list[Any] = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(
            model=f"{provider}/tools-malformed", max_tokens=500, tools=[WEATHER], messages=[user(marker())]
        ) as stream:
            for event in stream:
                seen.append(event)
    assert MALFORMED[provider] in str(caught.value)
    assert not any(
        e.type == "content_block_stop" and getattr(e, "content_block", None) and e.content_block.type == "tool_use"
        for e in seen
    )
    with pytest.raises(anthropic.APIStatusError) as created:
        client.messages.create(
            model=f"{provider}/tools-malformed", max_tokens=500, tools=[WEATHER], messages=[user(marker())]
        )
    assert MALFORMED[provider] in created.value.message
    assert created.value.body["type"] == "error" and created.value.body["error"]["type"] == "api_error"


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("provider", PROVIDERS)
def test_vendor_error_before_the_start_is_an_http_error(client, gateway, provider):
    m = marker()
    with pytest.raises(anthropic.RateLimitError) as caught:
        with client.messages.stream(
            model=f"{provider}/http-429;retry_after=0", max_tokens=100, messages=[user(m)]
        ) as stream:
            list(stream)
    assert caught.value.body["error"]["type"] == "rate_limit_error"
    assert f"{provider}/http-429" in caught.value.body["error"]["message"]
    with pytest.raises(anthropic.InternalServerError) as server:
        client.messages.create(model=f"{provider}/http-500", max_tokens=100, messages=[user(marker())])
    assert server.value.body["error"]["type"] == "api_error"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_vendor_error_after_the_start_is_an_error_event(client, gateway, provider):
    text = []
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(
            model=f"{provider}/error-mid-stream", max_tokens=100, messages=[user(marker())]
        ) as stream:
            for chunk in stream.text_stream:
                text.append(chunk)
    assert "".join(text).startswith("Hello from")
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["message"].startswith(
        f"{provider}/error-mid-stream "
    )
    assert caught.value.body["error"]["type"] in ("api_error", "overloaded_error")


# What each vendor's refusal says (Gemini's is a safety stop).
REFUSED = {"anthropic": "refused", "openai": "refused", "google": "finishReason=SAFETY", "compat": "refus"}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("scenario", ["refusal", "truncated"])
def test_refusal_and_truncation_are_errors(client, gateway, provider, scenario):
    says = REFUSED[provider] if scenario == "refusal" else "truncated"
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(
            model=f"{provider}/{scenario}", max_tokens=100, messages=[user(marker())]
        ) as stream:
            list(stream)
    assert says in caught.value.body["error"]["message"]
    m = marker()
    # With the SDK's default retries: a refusal (400) is not sent again; a truncated stream (502) would be.
    retrying = client_for(gateway, max_retries=2) if scenario == "refusal" else client
    with pytest.raises(anthropic.APIStatusError) as created:
        retrying.messages.create(model=f"{provider}/{scenario}", max_tokens=100, messages=[user(m)])
    assert says in created.value.body["error"]["message"]
    if scenario == "refusal":
        assert created.value.status_code == 400 and created.value.body["error"]["type"] == "invalid_request_error"
        assert len(gateway.sim.seen(m)) == 1, "a refusal is asked once"
    else:
        assert created.value.status_code == 502 and created.value.body["error"]["type"] == "api_error"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_client_cancelling_mid_stream_closes_the_upstream(gateway, provider):
    m = marker()
    client = client_for(gateway)
    with client.messages.stream(
        model=f"{provider}/slow;n=400;delay_ms=20", max_tokens=1000, messages=[user(m)]
    ) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                rid = request_id(stream.current_message_snapshot.id)
                left_at = time.time()
                break  # leaving the `with` closes the response
    closed = gateway.sim.wait(m, until="closed")
    assert closed["clientClosed"] is True and closed["completed"] is False
    assert closed["closedAt"] - left_at < 1.0  # a few ms when measured; generous for a loaded machine
    rec = record(gateway, rid)
    assert rec["outcome"] == "aborted" and rec["door"] == "anthropic-messages"


def test_ping_frames_while_idle(gateway_factory):
    gateway = gateway_factory(keepalive_interval=0.05)
    body = {"model": "anthropic/slow;n=3;delay_ms=400", "max_tokens": 100, "stream": True, "messages": [user(marker())]}
    response = gateway.http.post("/v1/messages", json=body)
    frames = parse_sse(response.text)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    names = [f.event for f in frames]
    assert "ping" in names and names[0] == "message_start" and names[-1] == "message_stop"
    assert all(json.loads(f.data)["type"] == f.event for f in frames)


# ----------------------------------------------------------------------------- auth and bad input


def test_x_api_key_and_bearer_auth(gateway_factory):
    gateway = gateway_factory(api_keys="team:sk-door-test-1")
    good = client_for(gateway, api_key="sk-door-test-1")
    assert (
        good.messages.create(model="anthropic/text", max_tokens=50, messages=[user(marker())]).stop_reason == "end_turn"
    )
    bearer = client_for(gateway, auth_token="sk-door-test-1", api_key=None)
    assert (
        bearer.messages.create(model="anthropic/text", max_tokens=50, messages=[user(marker())]).stop_reason
        == "end_turn"
    )
    m = marker()
    with pytest.raises(anthropic.AuthenticationError) as caught:
        client_for(gateway, api_key="wrong").messages.create(model="anthropic/text", max_tokens=50, messages=[user(m)])
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "authentication_error"
    assert not gateway.sim.seen(m)


def test_version_and_beta_headers_are_accepted(gateway):
    client = client_for(gateway, default_headers={"anthropic-beta": "interleaved-thinking-2025-05-14,some-future-beta"})
    assert (
        client.messages.create(model="anthropic/text", max_tokens=50, messages=[user(marker())]).stop_reason
        == "end_turn"
    )


CALL = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "get_weather", "input": {}}]}
BAD_INPUT = [
    ("wrong type", dict(max_tokens="lots"), anthropic.BadRequestError, "max_tokens"),
    (
        "unknown role",
        dict(messages=[{"role": "robot", "content": "{m}"}]),
        anthropic.BadRequestError,
        "messages.0.role",
    ),
    (
        "orphan tool_result",
        dict(
            messages=[
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nope", "content": "{m}"}]}
            ]
        ),
        anthropic.BadRequestError,
        "messages.0.content.0.tool_use_id",
    ),
    (
        "unknown tool_use_id",
        dict(
            messages=[
                user("{m}"),
                CALL,
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_y", "content": "x"}]},
            ]
        ),
        anthropic.BadRequestError,
        "messages.2.content.0.tool_use_id",
    ),
    (
        "url image",
        dict(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "{m}"},
                        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                    ],
                }
            ]
        ),
        anthropic.BadRequestError,
        "messages.0.content.1.source",
    ),
    (
        "prefill",
        dict(messages=[user("{m}"), {"role": "assistant", "content": "The answer is ("}]),
        anthropic.BadRequestError,
        "messages.1.role",
    ),
    ("top_k", dict(extra_body={"top_k": 5}), anthropic.BadRequestError, "top_k"),
    (
        "tool_use input not an object",
        dict(
            messages=[
                user("{m}"),
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_z", "name": "get_weather", "input": '{"city": "Paris"'}
                    ],
                },
                user("next"),
            ]
        ),
        anthropic.BadRequestError,
        "messages.1.content.0.input",
    ),
    (
        "stop sequences on a vendor without them",
        dict(model="openai/text", stop_sequences=["END"]),
        anthropic.BadRequestError,
        "stop_sequences: ",
    ),
    (
        "forced tool while thinking",
        dict(
            tools=[WEATHER],
            tool_choice={"type": "tool", "name": "get_weather"},
            thinking={"type": "enabled", "budget_tokens": 1024},
            max_tokens=2000,
        ),
        anthropic.BadRequestError,
        "tool_choice: ",
    ),
    (
        "max_tokens over the unified limit",
        dict(max_tokens=1_000_001),
        anthropic.BadRequestError,
        "max_tokens: must be at most",
    ),
    (
        "stop sequence over 1000 characters",
        dict(stop_sequences=["x" * 1001]),
        anthropic.BadRequestError,
        "stop_sequences.0: ",
    ),
    ("unknown model", dict(model="nosuchprovider/x"), anthropic.NotFoundError, "nosuchprovider"),
    ("bare unknown model", dict(model="no-such-model"), anthropic.NotFoundError, "model"),
]


@pytest.mark.parametrize("fields, error, names", [case[1:] for case in BAD_INPUT], ids=[case[0] for case in BAD_INPUT])
def test_bad_input_is_a_4xx_in_anthropic_shape(client, gateway, fields, error, names):
    m = marker()
    params: dict[str, Any] = {"model": "anthropic/text", "max_tokens": 100, "messages": [user(m)]}
    params.update(json.loads(json.dumps(fields).replace("{m}", m)))
    with pytest.raises(error) as caught:
        client.messages.create(**params)
    assert 400 <= caught.value.status_code < 500
    assert caught.value.body["type"] == "error" and names in caught.value.body["error"]["message"]
    assert caught.value.body["error"]["type"] in ("invalid_request_error", "not_found_error")
    assert not gateway.sim.seen(m), "no upstream call for a bad request"


def test_a_missing_max_tokens_is_a_400_naming_it_as_anthropic_answers(gateway):
    m = marker()
    response = gateway.http.post("/v1/messages", json={"model": "anthropic/text", "messages": [user(m)]})
    assert response.status_code == 400
    assert response.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
        "request_id": response.headers["x-request-id"],
    }
    assert not gateway.sim.seen(m)


def test_huge_body_is_413(client, gateway):
    m = marker()
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(model="anthropic/text", max_tokens=100, messages=[user(m + "x" * (50 * 1024 * 1024))])
    assert caught.value.status_code == 413 and caught.value.body["error"]["type"] == "request_too_large"
    assert not gateway.sim.seen(m)


def test_not_json_is_a_400_in_anthropic_shape(gateway):
    response = gateway.http.post("/v1/messages", content=b"{nope", headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["type"] == "error" and response.json()["error"]["type"] == "invalid_request_error"


def finished_job_with(gateway: Any, m: str) -> Any:
    """The settled turn whose conversation holds the marker `m` (for clients that never learnt its id)."""
    deadline = time.monotonic() + 10
    while not (jobs := [j for j in list(gateway.finished._done.values()) if m in j.request.context.model_dump_json()]):
        assert time.monotonic() < deadline, "the turn never settled"
        time.sleep(0.05)
    return jobs[0]


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_leaves_before_the_start_cancels_the_turn(gateway, stream):
    """Headers wait for the turn's first event (streaming) or its end (not); a client gone meanwhile cancels it."""
    m = marker()
    body = {"model": "anthropic/hang", "max_tokens": 100, "stream": stream, "messages": [user(m)]}
    with httpx.Client(base_url=gateway.url) as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post("/v1/messages", json=body, timeout=httpx.Timeout(10, read=0.5))
    assert gateway.sim.wait(m, until="closed")["clientClosed"] is True
    job = finished_job_with(gateway, m)
    assert job.turn.outcome == "aborted" and job.client_disconnected and job.request.door == "anthropic-messages"


def test_a_timeout_before_the_start_is_504_timeout_error(gateway_factory):
    impatient = gateway_factory(first_event_timeout=0.5, idle_timeout=0.5, retries=0)
    client = client_for(impatient)
    for stream in (True, False):
        with pytest.raises(anthropic.APIStatusError) as raised:
            if stream:
                with client.messages.stream(model="anthropic/hang", max_tokens=100, messages=[user(marker())]) as s:
                    list(s)
            else:
                client.messages.create(model="anthropic/hang", max_tokens=100, messages=[user(marker())])
        assert raised.value.status_code == 504
        assert raised.value.body["error"]["type"] == "timeout_error"
        assert "timeout fired after 0.5s" in raised.value.body["error"]["message"]


def test_a_vendor_rate_limit_keeps_its_retry_after(client):
    with pytest.raises(anthropic.RateLimitError) as raised:
        client.messages.create(model="openai/http-429;retry_after=1", max_tokens=100, messages=[user(marker())])
    assert raised.value.response.headers["retry-after"] == "1"


def test_lone_surrogates_leave_message_text_and_are_refused_elsewhere(gateway):
    """A JavaScript client that cut a string inside an emoji: the half goes from the text; in a tool's
    arguments it is refused, naming the field."""
    m = marker()
    text = '{"model": "anthropic/text", "max_tokens": 50, "messages": [{"role": "user", "content": "%s \\ud83d"}]}' % m
    response = gateway.http.post("/v1/messages", content=text.encode(), headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.json()["content"][0]["text"].startswith("Hello from the simulator.")
    bad = (
        '{"model": "anthropic/text", "max_tokens": 50, "messages": [{"role": "user", "content": "%s"}, '
        '{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"q": "\\ud83d"}}]}, '
        '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}' % marker()
    )
    refused = gateway.http.post("/v1/messages", content=bad.encode(), headers={"content-type": "application/json"})
    assert refused.status_code == 422 and refused.json()["type"] == "error"
    assert refused.json()["error"]["type"] == "invalid_request_error"
    assert refused.json()["error"]["message"].startswith("messages.1.content.0.input.q")


def test_message_start_reports_the_input_anthropic_gave_at_its_start(client):
    model = "anthropic/text;input=40;cache_read=300"
    with client.messages.stream(model=model, max_tokens=100, messages=[user(marker())]) as stream:
        start = next(e for e in stream if e.type == "message_start")
        final = stream.get_final_message()
    assert start.message.usage.input_tokens == 40 and start.message.usage.cache_read_input_tokens == 300
    assert final.usage.input_tokens == 40 and final.usage.output_tokens > 0


def test_an_idle_timeout_after_the_start_is_a_timeout_error_event(gateway_factory):
    impatient = gateway_factory(idle_timeout=0.5, retries=0, throttle_ms=0)
    with pytest.raises(anthropic.APIStatusError) as raised:
        with client_for(impatient).messages.stream(
            model="google/hang-mid-stream", max_tokens=100, messages=[user(marker())]
        ) as stream:
            list(stream)
    assert raised.value.body["error"]["type"] == "timeout_error"
    assert "idle timeout fired after 0.5s" in raised.value.body["error"]["message"]


def check_anthropic_stream(text: str) -> list[dict[str, Any]]:
    """Anthropic's stream grammar: message_start first; per block start, deltas of its kind, stop, indexes
    0, 1, 2 … never interleaved; then message_delta and message_stop last — or one error frame last."""
    frames = parse_sse(text)
    events = [json.loads(f.data) for f in frames if f.event != "ping"]
    for f in frames:
        assert json.loads(f.data)["type"] == f.event
    assert events[0]["type"] == "message_start"
    deltas = {
        "text": {"text_delta"},
        "thinking": {"thinking_delta", "signature_delta"},
        "tool_use": {"input_json_delta"},
    }
    open_block, next_index = None, 0
    for event in events[1:-1]:
        kind = event["type"]
        if kind == "content_block_start":
            assert open_block is None and event["index"] == next_index
            open_block = event["content_block"]["type"]
        elif kind == "content_block_delta":
            assert open_block is not None and event["index"] == next_index
            assert event["delta"]["type"] in deltas[open_block], (open_block, event)
        elif kind == "content_block_stop":
            assert open_block is not None and event["index"] == next_index
            open_block, next_index = None, next_index + 1
        else:
            assert kind == "message_delta" and open_block is None and event is events[-2], event
    assert events[-1]["type"] in ("message_stop", "error")
    if events[-1]["type"] == "message_stop":
        assert events[-2]["type"] == "message_delta" and open_block is None
    return events


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "scenario", ["text", "thinking", "redacted-thinking", "tools", "tool-empty-args", "error-mid-stream", "truncated"]
)
def test_every_stream_follows_anthropics_grammar(gateway, provider, scenario):
    body = {"model": f"{provider}/{scenario}", "max_tokens": 1000, "stream": True, "messages": [user(marker())]}
    response = gateway.http.post("/v1/messages", json=body)
    assert response.status_code == 200
    events = check_anthropic_stream(response.text)
    if events[-1]["type"] == "message_stop":
        # The concatenated deltas are the blocks of the same turn answered whole (the simulator is deterministic).
        streamed: list[str] = []
        for event in events:
            if event["type"] == "content_block_start":
                block = event["content_block"]
                streamed.append(block.get("text") or block.get("thinking") or block.get("data") or "")
            elif event["type"] == "content_block_delta":
                delta = event["delta"]
                streamed[-1] += delta.get("text") or delta.get("thinking") or delta.get("partial_json") or ""
        whole = gateway.http.post(
            "/v1/messages", json={**body, "stream": False, "messages": [user(body["messages"][0]["content"])]}
        ).json()
        assert len(streamed) == len(whole["content"])
        for text, block in zip(streamed, whole["content"]):
            if block["type"] == "tool_use":
                assert json.loads(text or "{}") == block["input"]
            elif block["type"] == "text":
                assert text == block["text"]
            elif block["type"] == "thinking":
                assert text == block["thinking"]


def _replays() -> list[str]:
    """Every recorded sample as its scenario, `<provider>/replay-<file name without its vendor prefix>`."""
    samples = Path(__file__).parents[1] / "wire_samples"
    refs = []
    for path in sorted(samples.rglob("*.sse")):
        stem = path.relative_to(samples).with_suffix("").as_posix()
        named = [f"{vendor}/replay-{stem.removeprefix(v.sample_prefix)}" for vendor, v in VENDORS.items()
                 if stem.startswith(v.sample_prefix)]  # fmt: skip
        assert len(named) == 1, f"{path} is named by no vendor's sample prefix (or by several)"
        refs += named
    return refs


@pytest.mark.parametrize("model", _replays())
def test_recorded_vendor_streams_through_the_door_match_the_unified_stream(gateway, model):
    """Each real recorded vendor stream (tests/wire_samples), replayed by the simulator: the door's stream
    keeps Anthropic's grammar and carries the same blocks and outcome as `/v1/stream` does."""
    unified = gateway.stream({"model": model, "context": {"messages": [{"role": "user", "content": marker()}]}})
    response = gateway.http.post(
        "/v1/messages", json={"model": model, "max_tokens": 4096, "stream": True, "messages": [user(marker())]}
    )
    if unified.events[0]["type"] != "start":  # failed before the start: an HTTP error here
        assert response.status_code >= 400 and response.json()["type"] == "error"
        return
    events = check_anthropic_stream(response.text)
    if unified.terminal["type"] == "error":
        assert events[-1]["type"] == "error"
        return
    blocks: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "content_block_start":
            blocks.append({**event["content_block"], "json": ""})
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[-1]
            for field, into in (
                ("text", "text"),
                ("thinking", "thinking"),
                ("partial_json", "json"),
                ("signature", "signature"),
            ):
                if field in delta:
                    block[into] = block.get(into, "") + delta[field]
    expected = []
    for block in unified.message["content"]:  # a call signed on its own (Gemini 3) is followed by its signature's block
        expected += (
            [block, {"type": "callSignature", "signature": block["thoughtSignature"]}]
            if block.get("thoughtSignature")
            else [block]
        )
    assert len(blocks) == len(expected)
    for got, want in zip(blocks, expected):
        if want["type"] == "callSignature":
            assert (
                got["type"] == "thinking"
                and got["thinking"] == ""
                and unwrap_call(got["signature"]).signature == want["signature"]
            )
        elif want["type"] == "toolCall":
            # (Gemini sends calls without ids: the adapter makes one per request, so ids differ between the two.)
            assert (got["type"], got["name"], json.loads(got["json"])) == ("tool_use", want["name"], want["arguments"])
            assert got["id"] == want["id"] or not model.startswith(("anthropic/", "openai/"))
        elif want["type"] == "text":
            assert got == {"type": "text", "text": want["text"], "json": ""}
        elif want.get("redacted"):
            assert got["type"] == "redacted_thinking" and unwrap(got["data"]).signature == want["thinkingSignature"]
        else:
            assert got["type"] == "thinking" and got["thinking"] == want["thinking"]
            assert unwrap(got["signature"]).signature == want.get("thinkingSignature", "")
    stop = next(e for e in events if e["type"] == "message_delta")
    assert (
        stop["delta"]["stop_reason"]
        == {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}[unified.terminal["reason"]]
    )
    usage = unified.terminal["usage"]
    assert stop["usage"] == {"input_tokens": usage["input"], "output_tokens": usage["output"],
                             "cache_read_input_tokens": usage["cacheRead"], "cache_creation_input_tokens": usage["cacheWrite"]}  # fmt: skip
