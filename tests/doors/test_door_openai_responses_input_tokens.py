"""`POST /v1/responses/input_tokens` with the official `openai` SDK (`client.responses.input_tokens.count`) over
loopback, against the gateway in front of the simulator's counting endpoints: the serving vendor's own count
of what a turn would send it (never an estimate), errors in OpenAI's shape naming the field or the model."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from simulator.scenarios import token_count
from tests.conftest import marker

COUNTING = ["anthropic", "openai", "google"]  # the vendors with a counting endpoint
TOOL = {"type": "function", "name": "get_weather", "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}  # fmt: skip


@pytest.fixture(scope="module")
def client(gateway: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused-when-auth-is-off", max_retries=0, timeout=30)


def counted(gateway: Any, m: str) -> list[dict[str, Any]]:
    return [seen for seen in gateway.sim.seen(m) if seen["endpoint"] == "count"]


def conversation(m: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"What is the weather in Paris? {m}"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]


@pytest.mark.parametrize("provider", COUNTING)
def test_input_tokens_are_the_serving_vendors_own_count_of_the_whole_request(client, gateway, provider):
    m = marker()
    result = client.responses.input_tokens.count(
        model=f"{provider}/text", instructions="You are a coding agent.", tools=[TOOL], input=conversation(m)
    )
    [seen] = counted(gateway, m)
    assert seen["vendor"] == provider
    assert result.object == "response.input_tokens"
    assert result.input_tokens == token_count(seen["body"])  # the vendor's number, unchanged
    sent = json.dumps(seen["body"])
    assert "You are a coding agent." in sent and "get_weather" in sent and "sunny" in sent
    assert not [s for s in gateway.sim.seen(m) if s["endpoint"] == "stream"], "a count is not a turn"


def test_a_model_whose_api_has_no_counting_endpoint_is_a_400_in_openais_shape(client, gateway):
    m = marker()
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.input_tokens.count(model="compat/meta-llama/Llama-3.3-70B-Instruct", input=m)
    assert raised.value.body["type"] == "invalid_request_error"
    assert "compat/meta-llama/Llama-3.3-70B-Instruct" in raised.value.body["message"]
    assert not counted(gateway, m)


def test_previous_response_id_is_a_400_naming_it(client, gateway):
    m = marker()
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.input_tokens.count(model="anthropic/text", input=m, previous_response_id="resp_x")
    assert raised.value.body["param"] == "previous_response_id"
    assert not counted(gateway, m)


def test_bad_input_is_a_400_naming_the_field(client, gateway):
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.input_tokens.count(model="anthropic/text", input=[{"type": "nonsense"}])
    assert raised.value.body["param"].startswith("input")


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError):
        client.responses.input_tokens.count(model="nope/none", input="hi")


@pytest.mark.parametrize(
    ("provider", "scenario", "error_type", "status"),
    [
        ("anthropic", "http-429", openai.RateLimitError, 429),
        ("openai", "http-400", openai.BadRequestError, 400),
        ("google", "http-500", openai.InternalServerError, 502),
    ],
)
def test_a_vendor_failing_to_count_is_an_error_with_its_meaning(
    client, gateway, provider, scenario, error_type, status
):
    m = marker()
    with pytest.raises(error_type) as raised:
        client.responses.input_tokens.count(model=f"{provider}/{scenario}", input=m)
    assert raised.value.status_code == status
    assert raised.value.body["message"].startswith(f"{provider}/{scenario} returned HTTP")
    assert len(counted(gateway, m)) == 1, "asked once: no retries, no fallback to another vendor's count"
