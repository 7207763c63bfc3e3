"""Refusals through `POST /v1/messages` as the vendor would answer them, with the official `anthropic` SDK over
loopback against the simulator: a prompt the vendor's safety filter blocked (nothing answered) is a 400
`invalid_request_error` naming the vendor's reason, streaming or not, and is never sent again; a refusal
mid-answer is `event: error` with that type and reason after the text already streamed."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest

from tests.conftest import marker

PROVIDERS = ["anthropic", "openai", "google", "compat"]
# The vendor's reason, as each adapter names it.
BLOCKED = {"anthropic": "stop_reason=refusal", "openai": "content_filter", "google": "blockReason=SAFETY",
           "compat": "content_filter"}  # fmt: skip
REFUSED = {"anthropic": "stop_reason=refusal", "openai": "refused", "google": "finishReason=SAFETY", "compat": "refus"}


@pytest.fixture(scope="module")
def gateway(gateway_factory: Any) -> Any:
    return gateway_factory(throttle_ms=0)


def client_for(gateway: Any, max_retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=gateway.url, api_key="unused-when-auth-is-off", max_retries=max_retries, timeout=30
    )


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_prompt_the_vendors_filter_blocked_is_a_400_naming_the_reason(gateway, provider):
    retrying = client_for(gateway, max_retries=2)  # the SDK's default: a 5xx would be sent twice more
    for stream in (True, False):
        m = marker()
        with pytest.raises(anthropic.BadRequestError) as raised:
            if stream:
                with retrying.messages.stream(model=f"{provider}/blocked", max_tokens=100, messages=user(m)) as events:
                    list(events)
            else:
                retrying.messages.create(model=f"{provider}/blocked", max_tokens=100, messages=user(m))
        assert raised.value.status_code == 400
        error = raised.value.body["error"]
        assert error["type"] == "invalid_request_error"
        assert error["message"].startswith(f"{provider}/blocked ") and BLOCKED[provider] in error["message"]
        assert len(gateway.sim.seen(m)) == 1, "a blocked prompt is sent once"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refusal_mid_answer_is_an_error_event_naming_the_reason(gateway, provider):
    text = []
    with pytest.raises(anthropic.APIStatusError) as raised:
        with client_for(gateway).messages.stream(
            model=f"{provider}/refusal", max_tokens=100, messages=user(marker())
        ) as events:
            for chunk in events.text_stream:
                text.append(chunk)
    assert "".join(text)  # the answer had started: the error came as an event, not as the HTTP status
    assert raised.value.response.status_code == 200
    error = raised.value.body["error"]
    assert error["type"] == "invalid_request_error" and REFUSED[provider] in error["message"]


@pytest.mark.parametrize(
    "path, body, headers, status",
    [
        pytest.param("/v1/messages", {"model": "anthropic/x", "messages": user("hi")}, {}, 400, id="no-max-tokens"),
        pytest.param(
            "/v1/messages", {"model": "nope/none", "max_tokens": 5, "messages": user("hi")}, {}, 404, id="unknown-model"
        ),
        pytest.param("/v1/messages", None, {}, 400, id="not-json"),
        pytest.param(
            "/v1/messages",
            {"model": "anthropic/x", "messages": user("hi")},
            {"host": "evil.example"},
            400,
            id="host-refused",
        ),
        pytest.param(
            "/v1/messages/count_tokens",
            {"model": "nope/none", "messages": user("hi")},
            {},
            404,
            id="count-unknown-model",
        ),
    ],
)
def test_a_request_refused_before_its_turn_starts_carries_its_request_id_in_the_body(
    gateway, path, body, headers, status
):
    """docs/doors/anthropic-messages.md, Errors: always `{"type": "error", "error": {…}, "request_id"}`."""
    content = b"{not json" if body is None else json.dumps(body).encode()
    response = httpx.post(
        gateway.url + path, content=content, headers={"content-type": "application/json", **headers}, timeout=30
    )
    assert response.status_code == status, response.text
    answer = response.json()
    assert answer["type"] == "error" and answer["error"]["type"]
    assert answer["request_id"] == response.headers["x-request-id"]
