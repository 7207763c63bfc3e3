"""A Gemini function call's own thought signature through the Responses and Messages doors, with the official
`openai` and `anthropic` SDKs over loopback against the gateway in front of the simulator. The simulator's
`signed-tools` model signs its call and, on Gemini, refuses (400) a next turn that replays the call without
that signature, as Gemini 3 does: so the round trip works only if the door carried it."""

from __future__ import annotations

import base64
import json
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from simulator.scenarios import SIGNED_CALL_SIGNATURE
from tests.conftest import marker

KEY = "sk-client-signed-calls-0001"
ON_THE_WIRE = base64.b64encode(SIGNED_CALL_SIGNATURE.encode()).decode()  # as Gemini sends it
RESULT = "18 degrees and sunny"
FUNCTION = {"type": "function", "name": "get_weather", "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}  # fmt: skip
TOOL = {"name": "get_weather", "description": "Current weather", "input_schema": FUNCTION["parameters"]}
INCLUDE = ["reasoning.encrypted_content"]


@pytest.fixture(scope="module")
def gw(gateway_factory):
    return gateway_factory(throttle_ms=0, api_keys=f"signed:{KEY}")


@pytest.fixture(scope="module")
def responses(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0, timeout=30)


@pytest.fixture(scope="module")
def messages(gw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key=KEY, max_retries=0, timeout=30)


def replayed_call(gw: Any, m: str) -> dict[str, Any]:
    """The functionCall part of the model turn the Gemini upstream got back on the second turn."""
    body = gw.sim.seen(m)[-1]["body"]
    [part] = [p for c in body["contents"] if c.get("role") == "model" for p in c["parts"] if "functionCall" in p]
    return part


# ---------------------------------------------------------------------------------------------- Responses door


def _first_turn_streamed(client: openai.OpenAI, m: str) -> tuple[list[Any], list[tuple[int, Any]]]:
    done: list[tuple[int, Any]] = []
    with client.responses.stream(model="google/signed-tools", input=m, tools=[FUNCTION], include=INCLUDE) as stream:
        for event in stream:
            if event.type == "response.output_item.done":
                done.append((event.output_index, event.item))
        final = stream.get_final_response()
    return final.output, done


def test_responses_a_signed_call_is_followed_by_a_reasoning_item_that_brings_its_signature_back(gw, responses):
    m = marker()
    output, done = _first_turn_streamed(responses, m)
    assert [item.type for item in output] == ["function_call", "reasoning"]
    call, signed = output
    assert signed.encrypted_content.startswith("gw1c.") and not signed.summary
    # The streamed items are the final output's, at the same positions.
    assert [(index, item.id) for index, item in done] == [(0, call.id), (1, signed.id)]
    follow_up = [{"role": "user", "content": m}, *[i.model_dump(exclude_none=True) for i in output],
                 {"type": "function_call_output", "call_id": call.call_id, "output": RESULT}]  # fmt: skip
    answer = responses.responses.create(model="google/signed-tools", input=follow_up, tools=[FUNCTION], include=INCLUDE)
    assert answer.output_text == f"The tool said: {RESULT}"
    assert replayed_call(gw, m)["thoughtSignature"] == ON_THE_WIRE


def test_responses_not_streamed_and_stored_the_signature_returns_too(gw, responses):
    m = marker()
    first = responses.responses.create(
        model="google/signed-tools", input=m, tools=[FUNCTION], include=INCLUDE, store=True
    )
    assert [item.type for item in first.output] == ["function_call", "reasoning"]
    # previous_response_id: the stored output carries the signature whether or not the client asked to see it.
    answer = responses.responses.create(
        model="google/signed-tools", previous_response_id=first.id, tools=[FUNCTION],
        input=[{"type": "function_call_output", "call_id": first.output[0].call_id, "output": RESULT}],
    )  # fmt: skip
    assert answer.output_text == f"The tool said: {RESULT}"
    assert [item.type for item in answer.output] == ["message"]
    assert replayed_call(gw, m)["thoughtSignature"] == ON_THE_WIRE


def test_responses_without_include_no_signature_is_shown_and_gemini_refuses_the_replayed_call(gw, responses):
    m = marker()
    first = responses.responses.create(model="google/signed-tools", input=m, tools=[FUNCTION])
    assert [item.type for item in first.output] == ["function_call"]
    follow_up = [{"role": "user", "content": m}, first.output[0].model_dump(exclude_none=True),
                 {"type": "function_call_output", "call_id": first.output[0].call_id, "output": RESULT}]  # fmt: skip
    with pytest.raises(openai.BadRequestError) as raised:
        responses.responses.create(model="google/signed-tools", input=follow_up, tools=[FUNCTION])
    assert "thought_signature" in raised.value.message


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_responses_the_signature_never_reaches_another_vendor(gw, responses, vendor):
    m = marker()
    first = responses.responses.create(model="google/signed-tools", input=m, tools=[FUNCTION], include=INCLUDE)
    follow_up = [{"role": "user", "content": m}, *[i.model_dump(exclude_none=True) for i in first.output],
                 {"type": "function_call_output", "call_id": first.output[0].call_id, "output": RESULT}]  # fmt: skip
    answer = responses.responses.create(
        model=f"{vendor}/signed-tools", input=follow_up, tools=[FUNCTION], include=INCLUDE
    )
    assert answer.output_text == f"The tool said: {RESULT}"
    sent = json.dumps(gw.sim.seen(m)[-1]["body"])
    assert SIGNATURE_TRACES.isdisjoint(sent.split('"'))
    assert "get_weather" in sent


SIGNATURE_TRACES = {SIGNED_CALL_SIGNATURE, ON_THE_WIRE}


# ---------------------------------------------------------------------------------------------- Messages door


def test_messages_a_signed_call_is_followed_by_a_thinking_block_that_brings_its_signature_back(gw, messages):
    m = marker()
    with messages.messages.stream(model="google/signed-tools", max_tokens=1024, tools=[TOOL],
                                  messages=[{"role": "user", "content": m}]) as stream:  # fmt: skip
        starts = [(e.index, e.content_block.type) for e in stream if e.type == "content_block_start"]
        final = stream.get_final_message()
    assert starts == [(0, "tool_use"), (1, "thinking")]
    call, signed = final.content
    assert call.type == "tool_use" and call.input == {"city": "Paris", "unit": "celsius"}
    assert signed.type == "thinking" and signed.thinking == "" and signed.signature.startswith("gw1c.")
    assert final.stop_reason == "tool_use"
    follow_up = [
        {"role": "user", "content": m},
        {"role": "assistant", "content": [b.model_dump() for b in final.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": RESULT}]},
    ]
    answer = messages.messages.create(model="google/signed-tools", max_tokens=1024, tools=[TOOL], messages=follow_up)
    assert answer.content[0].text == f"The tool said: {RESULT}"
    assert replayed_call(gw, m)["thoughtSignature"] == ON_THE_WIRE


def test_messages_not_streamed_and_on_another_vendor(gw, messages):
    m = marker()
    first = messages.messages.create(model="google/signed-tools", max_tokens=1024, tools=[TOOL],
                                     messages=[{"role": "user", "content": m}])  # fmt: skip
    assert [b.type for b in first.content] == ["tool_use", "thinking"]
    follow_up = [
        {"role": "user", "content": m},
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[0].id, "content": RESULT}]},
    ]
    answer = messages.messages.create(model="google/signed-tools", max_tokens=1024, tools=[TOOL], messages=follow_up)
    assert answer.content[0].text == f"The tool said: {RESULT}"
    assert replayed_call(gw, m)["thoughtSignature"] == ON_THE_WIRE
    m2 = marker()
    follow_up[0] = {"role": "user", "content": m2}
    answer = messages.messages.create(model="anthropic/signed-tools", max_tokens=1024, tools=[TOOL], messages=follow_up)
    assert answer.content[0].text == f"The tool said: {RESULT}"
    sent = gw.sim.seen(m2)[-1]["body"]
    assert SIGNATURE_TRACES.isdisjoint(json.dumps(sent).split('"'))
    assert [b["type"] for b in sent["messages"][1]["content"]] == ["tool_use"]  # no empty thinking block


# ---------------------------------------------------------------------------------------------- Gemini door


def test_gemini_door_the_call_keeps_its_signature_on_its_own_part(gw):
    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=gw.url, timeout=30_000))
    m = marker()
    tools = [types.Tool(function_declarations=[types.FunctionDeclaration(
        name="get_weather", parameters_json_schema=FUNCTION["parameters"])])]  # fmt: skip
    config = types.GenerateContentConfig(tools=tools)
    first = client.models.generate_content(model="google/signed-tools", contents=m, config=config)
    parts = first.candidates[0].content.parts
    assert parts[0].function_call.name == "get_weather" and parts[0].thought_signature.startswith(b"gw1.")
    history = [types.Content(role="user", parts=[types.Part(text=m)]), first.candidates[0].content,
               types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
                   id=parts[0].function_call.id, name="get_weather", response={"output": RESULT}))])]  # fmt: skip
    answer = client.models.generate_content(model="google/signed-tools", contents=history, config=config)
    assert answer.text == f"The tool said: {RESULT}"
    assert replayed_call(gw, m)["thoughtSignature"] == ON_THE_WIRE
