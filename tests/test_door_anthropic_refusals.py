"""Refusals through `POST /v1/messages` as the vendor would answer them, with the official `anthropic` SDK over
loopback against the simulator: a prompt the vendor's safety filter blocked (nothing answered) is a 400
`invalid_request_error` naming the vendor's reason, streaming or not, and is never sent again; a refusal
mid-answer is `event: error` with that type and reason after the text already streamed."""

from __future__ import annotations

from typing import Any

import anthropic
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
    return anthropic.Anthropic(base_url=gateway.url, api_key="unused-when-auth-is-off", max_retries=max_retries, timeout=30)


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
        with client_for(gateway).messages.stream(model=f"{provider}/refusal", max_tokens=100, messages=user(marker())) as events:
            for chunk in events.text_stream:
                text.append(chunk)
    assert "".join(text)  # the answer had started: the error came as an event, not as the HTTP status
    assert raised.value.response.status_code == 200
    error = raised.value.body["error"]
    assert error["type"] == "invalid_request_error" and REFUSED[provider] in error["message"]
