"""The OpenAI Responses door with the official `openai` SDK, as an application would use it, over loopback HTTP
against the gateway in front of the simulator — each scenario against all three vendors."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.conformance import parse_sse
from tests.conftest import marker
from tests.resume_client import resume

VENDORS = ["anthropic", "openai", "google"]
KEY = "sk-client-responses-0001"
WEATHER = {"city": "Paris", "unit": "celsius"}
TIME = {"timezone": "Europe/Paris"}
THINKING = "The user greets me. I should greet back."
SIGNATURE = "sig-sim-thinking-42"  # the simulator's signature of its thinking block, on every vendor
# How each vendor's wire carries it (Gemini's thought signatures are bytes, base64 on the wire).
SIGNATURE_ON_THE_WIRE = {
    "anthropic": SIGNATURE,
    "openai": SIGNATURE,
    "google": base64.b64encode(SIGNATURE.encode()).decode(),
}
TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Current weather",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}},
    {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}},
]  # fmt: skip
STREAM_EVENT = TypeAdapter(ResponseStreamEvent)
ENCRYPTED = ["reasoning.encrypted_content"]


@pytest.fixture(scope="module")
def gw(gateway_factory):
    # Coalescing off: every vendor fragment is one event, so fragmented tool arguments stay fragmented.
    return gateway_factory(throttle_ms=0, api_keys=f"responses:{KEY}")


@pytest.fixture(scope="module")
def client(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0, timeout=30)


def record(gw: Any, request_id: str) -> dict[str, Any]:
    gw.job(request_id)
    response = gw.http.get(f"/v1/requests/{request_id}", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200, response.text
    return response.json()


def request_id_of(response_id: str) -> str:
    assert response_id.startswith("resp_req_")
    return response_id[len("resp_") :]


def events_of(stream: Any) -> list[Any]:
    return list(stream)


def raw_stream(gw: Any, body: dict[str, Any]) -> tuple[httpx.Response, list[tuple[str, dict[str, Any]]]]:
    """POST a streaming body and read the SSE frames as (event name, data)."""
    response = gw.http.post("/v1/responses", json={**body, "stream": True}, headers={"Authorization": f"Bearer {KEY}"})
    frames = []
    for block in response.text.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        frames.append((fields.get("event", ""), json.loads(fields["data"])))
    return response, frames


def types(events: list[Any]) -> list[str]:
    return [e.type for e in events]


# ---------------------------------------------------------------------------------------------- conformance


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("scenario", ["text", "thinking", "tools", "max-tokens", "error-mid-stream", "truncated"])
def test_every_streamed_event_parses_as_the_sdks_stream_event_and_sequence_numbers_count_by_one(gw, vendor, scenario):
    response, frames = raw_stream(
        gw, {"model": f"{vendor}/{scenario}", "input": marker(), "tools": TOOLS, "include": ENCRYPTED}
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert frames
    for position, (name, data) in enumerate(frames):
        assert name == data["type"]  # the `event:` line names the data's type
        STREAM_EVENT.validate_python(data)  # strict: every required field present and typed
        assert data["sequence_number"] == position
    kinds = [data["type"] for _, data in frames]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    terminal = kinds[-1]
    assert terminal in ("response.completed", "response.incomplete", "response.failed")
    assert sum(k in ("response.completed", "response.incomplete", "response.failed") for k in kinds) == 1
    Response.model_validate(frames[-1][1]["response"])
    if scenario in ("error-mid-stream", "truncated"):
        assert terminal == "response.failed"  # a cut or failed stream is never completed
    # Every item added is done before the next one starts, except one cut by a failure.
    added = [d["output_index"] for _, d in frames if d["type"] == "response.output_item.added"]
    done = [d["output_index"] for _, d in frames if d["type"] == "response.output_item.done"]
    assert added == list(range(len(added)))
    assert done == (added if terminal != "response.failed" else added[: len(done)])


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("scenario", ["text", "thinking", "redacted-thinking", "tools", "max-tokens"])
def test_the_non_streamed_answer_validates_strictly_as_the_sdks_response(gw, vendor, scenario):
    body = {"model": f"{vendor}/{scenario}", "input": marker(), "tools": TOOLS, "include": ENCRYPTED}
    response = gw.http.post("/v1/responses", json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200, response.text
    parsed = Response.model_validate(response.json())
    assert parsed.status == ("incomplete" if scenario == "max-tokens" else "completed")
    assert [item.id for item in parsed.output] == [
        f"{prefix}_{parsed.id[len('resp_') :]}_{n}"
        for n, prefix in enumerate(
            {"message": "msg", "reasoning": "rs", "function_call": "fc"}[item.type] for item in parsed.output
        )
    ]


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_sdk_stream_helper_reads_reasoning_and_a_failure(client, vendor):
    with client.responses.stream(model=f"{vendor}/thinking", input=marker(), include=ENCRYPTED) as stream:
        summary = "".join(e.delta for e in stream if e.type == "response.reasoning_summary_text.delta")
        final = stream.get_final_response()
    assert summary == THINKING and final.output[0].type == "reasoning" and final.output_text.startswith("Hello")
    with client.responses.stream(model=f"{vendor}/error-mid-stream", input=marker()) as stream:
        kinds = [e.type for e in stream]
        assert kinds[-1] == "response.failed"
        with pytest.raises(RuntimeError):  # no response.completed: the helper has no final response
            stream.get_final_response()


# ---------------------------------------------------------------------------------------------- text, usage


@pytest.mark.parametrize("vendor", VENDORS)
def test_streamed_text_with_usage_in_openais_sense(gw, client, vendor):
    m = marker()
    model = f"{vendor}/text;input=30;cache_read=12"
    events = events_of(client.responses.create(model=model, input=m, stream=True))
    assert types(events)[:4] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"
    ]  # fmt: skip
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == f"Hello from the simulator. You said: {m}"
    done = [e for e in events if e.type == "response.output_text.done"]
    assert [d.text for d in done] == [text]
    completed = events[-1]
    assert completed.type == "response.completed" and completed.response.status == "completed"
    assert completed.response.model == model and completed.response.output_text == text
    usage = completed.response.usage
    rec = record(gw, request_id_of(completed.response.id))
    assert rec["door"] == "openai-responses" and rec["outcome"] == "done"
    unified = rec["usage"]
    assert usage.input_tokens == unified["input"] + unified["cacheRead"] + unified["cacheWrite"]
    assert usage.input_tokens_details.cached_tokens == unified["cacheRead"] == 12
    assert usage.output_tokens == unified["output"] > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.output_tokens_details.reasoning_tokens == 0


@pytest.mark.parametrize("vendor", VENDORS)
def test_not_streamed_answer_is_the_response_object(gw, client, vendor):
    m = marker()
    response = client.responses.create(model=f"{vendor}/text", input=m, instructions="Be brief.")
    assert response.object == "response" and response.status == "completed"
    assert response.output_text == f"Hello from the simulator. You said: {m}"
    assert response.model == f"{vendor}/text" and response.instructions == "Be brief."
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert record(gw, request_id_of(response.id))["door"] == "openai-responses"
    raw = json.dumps(gw.sim.seen(m)[-1]["body"])
    assert "Be brief." in raw


# ---------------------------------------------------------------------------------------------- reasoning


@pytest.mark.parametrize("vendor", VENDORS)
def test_reasoning_streams_as_a_summary_and_its_state_returns_to_the_same_model_only(gw, client, vendor):
    m = marker()
    events = events_of(client.responses.create(
        model=f"{vendor}/thinking", input=m, stream=True, include=ENCRYPTED, reasoning={"effort": "low", "summary": "auto"}))  # fmt: skip
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    assert summary == THINKING
    assert "response.reasoning_summary_part.added" in types(events) and "response.reasoning_summary_part.done" in types(
        events
    )
    final = events[-1].response
    reasoning = [item for item in final.output if item.type == "reasoning"]
    assert len(reasoning) == 1 and reasoning[0].summary[0].text == THINKING
    assert reasoning[0].encrypted_content and reasoning[0].encrypted_content.startswith("gw1.")
    history = [{"role": "user", "content": m}, *[item.model_dump(exclude_none=True) for item in final.output],
               {"role": "user", "content": f"again {m}-2"}]  # fmt: skip
    # Back to the same model: the vendor's own state arrives with the reasoning.
    again = client.responses.create(model=f"{vendor}/thinking", input=history)
    assert again.status == "completed"
    same = json.dumps(gw.sim.seen(f"{m}-2")[-1]["body"])
    assert SIGNATURE_ON_THE_WIRE[vendor] in same
    assert THINKING in same or vendor == "openai"  # OpenAI gets the reasoning item back whole
    # To another vendor: never the signature, the reasoning as plain text at most.
    other = VENDORS[(VENDORS.index(vendor) + 1) % 3]
    client.responses.create(model=f"{other}/text", input=[*history[:-1], {"role": "user", "content": f"again {m}-3"}])
    foreign = json.dumps(gw.sim.seen(f"{m}-3")[-1]["body"])
    assert all(signature not in foreign for signature in SIGNATURE_ON_THE_WIRE.values()) and "gw1." not in foreign


def test_reasoning_without_include_has_no_encrypted_content(client):
    response = client.responses.create(model="anthropic/thinking", input=marker())
    reasoning = [item for item in response.output if item.type == "reasoning"]
    assert reasoning and reasoning[0].encrypted_content is None and reasoning[0].summary[0].text == THINKING


def test_raw_reasoning_streams_as_reasoning_text(client):
    """A vendor whose thinking is raw reasoning (an openai-completions provider) streams reasoning_text events."""
    events = events_of(client.responses.create(model="compat/thinking", input=marker(), stream=True))
    kinds = types(events)
    if "response.reasoning_text.delta" not in kinds:
        pytest.skip("the compat simulator sends no reasoning for this scenario")
    assert "response.reasoning_summary_text.delta" not in kinds
    text = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    item = [i for i in events[-1].response.output if i.type == "reasoning"][0]
    assert item.content[0].text == text and item.summary == []


def test_redacted_thinking_round_trips_to_anthropic(gw, client):
    m = marker()
    response = client.responses.create(model="anthropic/redacted-thinking", input=m, include=ENCRYPTED)
    reasoning = [item for item in response.output if item.type == "reasoning"][0]
    assert reasoning.summary == [] and reasoning.encrypted_content.startswith("gw1r.")
    history = [{"role": "user", "content": m}, *[i.model_dump(exclude_none=True) for i in response.output],
               {"role": "user", "content": f"{m}-2"}]  # fmt: skip
    client.responses.create(model="anthropic/redacted-thinking", input=history)
    assistant = gw.sim.seen(f"{m}-2")[-1]["body"]["messages"][1]
    assert {"type": "redacted_thinking", "data": "EncryptedBlob=="} in assistant["content"]


# ---------------------------------------------------------------------------------------------- tools


@pytest.mark.parametrize("vendor", VENDORS)
def test_parallel_tool_calls_stream_their_argument_fragments_and_whole_arguments_at_done(client, vendor):
    events = events_of(client.responses.create(model=f"{vendor}/tools", input=marker(), tools=TOOLS, stream=True))
    final = events[-1].response
    assert events[-1].type == "response.completed"
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", WEATHER), ("get_time", TIME)]
    assert calls[0].call_id != calls[1].call_id
    for call in calls:
        item_id = call.id
        fragments = [
            e.delta for e in events if e.type == "response.function_call_arguments.delta" and e.item_id == item_id
        ]
        done = [
            e.arguments for e in events if e.type == "response.function_call_arguments.done" and e.item_id == item_id
        ]
        assert "".join(fragments) == done[0] == call.arguments
        if vendor != "google":  # Gemini sends a call's arguments whole
            assert len(fragments) > 1
        added = [e.item for e in events if e.type == "response.output_item.added" and e.item.id == item_id]
        assert added[0].call_id == call.call_id and added[0].name == call.name  # the id never changes


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_tool_loop_function_call_then_function_call_output(gw, client, vendor):
    m = marker()
    history: list[Any] = [
        {"role": "developer", "content": "You are terse."},
        {"role": "user", "content": f"weather? {m}"},
    ]
    first = client.responses.create(model=f"{vendor}/tools", input=history, tools=TOOLS)
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 2
    history += [item.model_dump(exclude_none=True) for item in first.output]
    results = {"get_weather": f"18C cloudy {m}-w", "get_time": f"14:05 {m}-t"}
    history += [{"type": "function_call_output", "call_id": c.call_id, "output": results[c.name]} for c in calls]
    # The second turn goes to the same vendor and to another one.
    other = VENDORS[(VENDORS.index(vendor) + 1) % 3]
    for target in (vendor, other):
        second = client.responses.create(model=f"{target}/text", input=history, tools=TOOLS)
        assert second.status == "completed"
        sent = [entry for entry in gw.sim.seen(f"{m}-w") if entry["vendor"] == target]
        assert sent, f"{target} never received the tool results"
        raw = json.dumps(sent[-1]["body"])
        assert f"{m}-t" in raw and "You are terse." in raw
    assert record(gw, request_id_of(second.id))["door"] == "openai-responses"


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_sdk_stream_helper_assembles_the_final_response(client, vendor):
    with client.responses.stream(model=f"{vendor}/tools", input=marker(), tools=TOOLS) as stream:
        kinds = {event.type for event in stream}
        final = stream.get_final_response()
    assert {"response.output_text.delta", "response.function_call_arguments.delta", "response.completed"} <= kinds
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", WEATHER), ("get_time", TIME)]
    assert final.output_text == "Let me check."


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_request_shaped_like_codex_clis_is_served(gw, vendor):
    """What Codex CLI sends to a `wire_api = "responses"` provider: instructions, typed message items, function
    tools next to hosted and custom ones, parallel_tool_calls false, store false, reasoning with a summary, the
    encrypted reasoning include, a prompt cache key, text verbosity and client metadata."""
    m = marker()
    body = {
        "model": f"{vendor}/tools", "instructions": "You are Codex.", "stream": True, "store": False,
        "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandbox: read-only"}]},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": m}]}],
        "tools": [{"type": "function", "name": "shell", "description": "Run a command", "strict": False,
                   "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}}},
                  {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}, {"type": "web_search"}],
        "tool_choice": "auto", "parallel_tool_calls": False, "reasoning": {"effort": "medium", "summary": "auto"},
        "include": ENCRYPTED, "prompt_cache_key": "thread-1", "text": {"verbosity": "medium"},
        "client_metadata": {"x-codex-installation-id": "abc"},
    }  # fmt: skip
    response, frames = raw_stream(gw, body)
    assert response.status_code == 200, response.text
    assert response.headers["x-gateway-dropped-tools"] == "custom, web_search"
    assert frames[-1][1]["type"] == "response.completed"
    sent = json.dumps(gw.sim.seen(m)[-1]["body"])
    assert "You are Codex." in sent and "Sandbox: read-only" in sent and '"shell"' in sent and "apply_patch" not in sent


def test_hosted_tools_are_dropped_and_named_in_a_header_never_refused(gw, client):
    m = marker()
    raw = client.responses.with_raw_response.create(
        model="anthropic/text", input=m, tools=[{"type": "web_search"}, *TOOLS, {"type": "file_search", "vector_store_ids": ["vs_1"]}])  # fmt: skip
    assert raw.http_response.status_code == 200
    assert raw.headers["x-gateway-dropped-tools"] == "file_search, web_search"  # the door's own, then the turn's
    assert raw.parse().status == "completed"
    sent = gw.sim.seen(m)[-1]["body"]
    assert [t["name"] for t in sent["tools"]] == ["get_weather", "get_time"]
    assert (
        "x-gateway-dropped-tools"
        not in client.responses.with_raw_response.create(model="anthropic/text", input=marker()).headers
    )


def test_tool_choice_max_output_tokens_temperature_and_cache_key_reach_the_vendor(gw, client):
    m = marker()
    client.responses.create(
        model="anthropic/text", input=m, tools=TOOLS, tool_choice={"type": "function", "name": "get_time"},
        max_output_tokens=77, temperature=0.5, metadata={"team": "a"}, store=False, parallel_tool_calls=True,
    )  # fmt: skip
    body = gw.sim.seen(m)[-1]["body"]
    assert body["tool_choice"] == {"type": "tool", "name": "get_time"}
    assert body["max_tokens"] == 77 and body["temperature"] == 0.5
    m = marker()
    client.responses.create(model="openai/text", input=m, prompt_cache_key="conv-1", reasoning={"effort": "low"},
                            instructions="Be brief.", max_output_tokens=64)  # fmt: skip
    body = gw.sim.seen(m)[-1]["body"]
    assert body["instructions"] == "Be brief." and body["prompt_cache_key"] == "conv-1"
    assert body["max_output_tokens"] == 64 and body["reasoning"]["effort"] == "low"


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def test_a_json_schema_text_format_reaches_each_vendor_as_its_structured_output(gw, client):
    text = {"format": {"type": "json_schema", "name": "answer", "schema": SCHEMA, "strict": True}}
    m = marker()
    client.responses.create(model="openai/text", input=m, text=text)
    assert gw.sim.seen(m)[-1]["body"]["text"]["format"]["schema"] == SCHEMA
    m = marker()
    client.responses.create(model="google/text", input=m, text=text)
    assert gw.sim.seen(m)[-1]["body"]["generationConfig"]["responseJsonSchema"] == SCHEMA
    m = marker()
    client.responses.create(model="anthropic/text", input=m, text=text)
    assert gw.sim.seen(m)[-1]["body"]["output_config"]["format"] == {"type": "json_schema", "schema": SCHEMA}


def test_json_mode_reaches_openai_and_gemini_and_anthropic_refuses_it(gw, client):
    text = {"format": {"type": "json_object"}}
    m = marker()
    client.responses.create(model="openai/text", input=m, text=text)
    assert gw.sim.seen(m)[-1]["body"]["text"]["format"] == {"type": "json_object"}
    m = marker()
    client.responses.create(model="google/text", input=m, text=text)
    assert gw.sim.seen(m)[-1]["body"]["generationConfig"]["responseMimeType"] == "application/json"
    m = marker()
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model="anthropic/text", input=m, text=text)
    assert raised.value.body["param"] == "options.jsonObject"
    assert gw.sim.seen(m) == []


def test_images_and_system_messages_reach_the_vendor(gw, client):
    m = marker()
    client.responses.create(model="anthropic/text", input=[
        {"role": "system", "content": "Rule one."},
        {"role": "user", "content": [{"type": "input_text", "text": m}, {"type": "input_image", "image_url": IMAGE}]},
    ])  # fmt: skip
    body = gw.sim.seen(m)[-1]["body"]
    assert "Rule one." in json.dumps(body["system"])
    sources = [c.get("source") for c in body["messages"][0]["content"]]
    assert {"type": "base64", "media_type": "image/png", "data": IMAGE.split(",", 1)[1]} in sources


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_developer_message_inside_the_conversation_reaches_every_vendor(gw, client, vendor):
    """At its place for Anthropic and OpenAI; Gemini's adapter adds it to the system instruction."""
    m = marker()
    response = client.responses.create(model=f"{vendor}/text", input=[
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
        {"role": "developer", "content": f"Now answer in French {m}-dev"}, {"role": "user", "content": m},
    ])  # fmt: skip
    assert response.status == "completed"
    sent = json.dumps(gw.sim.seen(m)[-1]["body"])
    assert f"Now answer in French {m}-dev" in sent
    if vendor != "google":
        assert sent.index("-dev") < sent.rindex(f'"{m}"')


# ---------------------------------------------------------------------------------------------- failures


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    ("scenario", "error_type", "status"),
    [("http-429", openai.RateLimitError, 429), ("http-500", openai.InternalServerError, 502),
     ("error-before-content", openai.InternalServerError, 502), ("blocked", openai.BadRequestError, 400)],
)  # fmt: skip
def test_a_vendor_error_before_the_start_is_an_http_error_in_openai_shape(
    gw, client, vendor, scenario, error_type, status
):
    for stream in (True, False):
        with pytest.raises(error_type) as raised:
            result = client.responses.create(model=f"{vendor}/{scenario}", input=marker(), stream=stream)
            if stream:
                events_of(result)
        assert raised.value.status_code == status
        assert raised.value.body["message"].startswith(f"{vendor}/{scenario}")
        rec = record(gw, raised.value.response.headers["x-request-id"])
        assert rec["outcome"] == "error" and rec["door"] == "openai-responses"


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(("scenario", "says"), [("error-mid-stream", "error"), ("truncated", "truncated")])
def test_a_failure_after_the_start_is_response_failed_with_the_vendors_reason_never_completed(
    gw, client, vendor, scenario, says
):
    events = events_of(client.responses.create(model=f"{vendor}/{scenario}", input=marker(), stream=True))
    kinds = types(events)
    assert kinds[-1] == "response.failed" and "response.completed" not in kinds
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.code == "server_error"
    assert failed.error.message.startswith(f"{vendor}/{scenario}") and says in failed.error.message.lower()
    assert failed.output and failed.output[0].status == "incomplete"  # the text cut short
    rec = record(gw, request_id_of(failed.id))
    assert rec["outcome"] == "error" and rec["door"] == "openai-responses"
    with pytest.raises(openai.APIStatusError) as raised:
        client.responses.create(model=f"{vendor}/{scenario}", input=marker())
    assert raised.value.status_code == 502 and says in raised.value.body["message"].lower()


REFUSED = {"anthropic": "stop_reason=refusal", "openai": "refused", "google": "finishReason=SAFETY"}


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_refusal_mid_answer_is_response_failed_naming_the_vendors_reason(client, vendor):
    events = events_of(client.responses.create(model=f"{vendor}/refusal", input=marker(), stream=True))
    failed = events[-1]
    assert failed.type == "response.failed" and failed.response.error.code == "invalid_prompt"
    assert REFUSED[vendor] in failed.response.error.message
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=f"{vendor}/refusal", input=marker())
    assert REFUSED[vendor] in raised.value.body["message"]


@pytest.mark.parametrize("vendor", VENDORS)
def test_truncation_by_max_output_tokens_is_response_incomplete(client, vendor):
    events = events_of(client.responses.create(model=f"{vendor}/max-tokens", input=marker(), stream=True))
    assert events[-1].type == "response.incomplete" and "response.completed" not in types(events)
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    response = client.responses.create(model=f"{vendor}/max-tokens", input=marker())
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text.startswith("Hello from the simulator.")


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_client_that_cancels_closes_the_upstream_and_the_record_says_aborted(gw, client, vendor):
    m = marker()
    stream = client.responses.create(model=f"{vendor}/slow;n=400;delay_ms=10", input=m, stream=True)
    seen = 0
    for event in stream:
        seen += 1
        if event.type == "response.created":
            response_id = event.response.id
        if seen == 5:
            break
    cancelled_at = time.time()
    stream.close()
    entry = gw.sim.wait(m, until="closed")
    assert entry["clientClosed"] is True and not entry["completed"]
    assert entry["closedAt"] - cancelled_at < 1.0
    rec = record(gw, request_id_of(response_id))
    assert rec["outcome"] == "aborted" and rec["door"] == "openai-responses" and rec["clientDisconnected"] is True


def test_auth_errors_in_openai_shape(gw):
    bad = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as raised:
        bad.responses.create(model="anthropic/text", input="hi")
    assert raised.value.status_code == 401 and raised.value.body["type"] == "authentication_error"
    with pytest.raises(openai.NotFoundError) as raised:
        openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0).responses.create(
            model="nope/text", input="hi"
        )
    assert raised.value.body["param"] == "model"


# ---------------------------------------------------------------------------------------------- bad input

IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def _body(m: str, **extra: Any) -> dict[str, Any]:
    return {"model": "anthropic/text", "input": m, **extra}


def _call(call_id: str = "call_1", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "get_time", "arguments": arguments}


BAD_INPUT = [
    # (name, body builder, param)
    ("previous_response_id type", lambda m: _body(m, previous_response_id=123), "previous_response_id"),
    (
        "unknown item type",
        lambda m: _body(m, input=[{"type": "computer_call_output", "call_id": "c"}, {"role": "user", "content": m}]),
        "input.0.type",
    ),
    (
        "unknown item_reference",
        lambda m: _body(m, input=[{"type": "item_reference", "id": "msg_1"}, {"role": "user", "content": m}]),
        "input.0.id",
    ),
    ("unknown role", lambda m: _body(m, input=[{"role": "wizard", "content": m}]), "input.0.role"),
    ("input missing", lambda m: {"model": "anthropic/text"}, "input"),
    ("input wrong type", lambda m: _body(m, input=42), "input"),
    ("content wrong type", lambda m: _body(m, input=[{"role": "user", "content": 42}]), "input.0.content"),
    (
        "unknown content part",
        lambda m: _body(m, input=[{"role": "user", "content": [{"type": "input_video", "url": m}]}]),
        "input.0.content.0.type",
    ),
    (
        "http image",
        lambda m: _body(
            m,
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": m},
                        {"type": "input_image", "image_url": "https://example.com/cat.png"},
                    ],
                }
            ],
        ),
        "input.0.content.1.image_url",
    ),
    (
        "bad data url",
        lambda m: _body(
            m,
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": m},
                        {"type": "input_image", "image_url": "data:image/png;base64,***"},
                    ],
                }
            ],
        ),
        "input.0.content.1.image_url",
    ),
    (
        "output answers no call",
        lambda m: _body(
            m,
            input=[
                {"role": "user", "content": m},
                {"type": "function_call_output", "call_id": "call_x", "output": "r"},
            ],
        ),
        "input.1.call_id",
    ),
    (
        "output answers another call",
        lambda m: _body(
            m,
            input=[
                {"role": "user", "content": m},
                _call("call_1"),
                {"type": "function_call_output", "call_id": "call_2", "output": "r"},
            ],
        ),
        "input.2.call_id",
    ),
    (
        "invalid call arguments",
        lambda m: _body(m, input=[{"role": "user", "content": m}, _call(arguments='{"a": ')]),
        "input.1.arguments",
    ),
    (
        "call arguments not an object",
        lambda m: _body(m, input=[{"role": "user", "content": m}, _call(arguments="[1]")]),
        "input.1.arguments",
    ),
    (
        "reasoning summary wrong type",
        lambda m: _body(m, input=[{"role": "user", "content": m}, {"type": "reasoning", "summary": "x"}]),
        "input.1.summary",
    ),
    ("unknown field", lambda m: _body(m, best_of=3), "best_of"),
    ("temperature type", lambda m: _body(m, temperature="hot"), "temperature"),
    ("temperature range", lambda m: _body(m, temperature=3), "temperature"),
    ("max_output_tokens type", lambda m: _body(m, max_output_tokens="many"), "max_output_tokens"),
    ("stream type", lambda m: _body(m, stream="yes"), "stream"),
    ("store type", lambda m: _body(m, store="yes"), "store"),
    ("instructions type", lambda m: _body(m, instructions=["a"]), "instructions"),
    ("reasoning effort", lambda m: _body(m, reasoning={"effort": "extreme"}), "reasoning.effort"),
    ("reasoning effort type", lambda m: _body(m, reasoning={"effort": {}}), "reasoning.effort"),
    (
        "json schema without schema",
        lambda m: _body(m, text={"format": {"type": "json_schema", "name": "x"}}),
        "text.format.schema",
    ),
    (
        "tool choice names no tool",
        lambda m: _body(m, tools=TOOLS, tool_choice={"type": "function", "name": "nope"}),
        "tool_choice.name",
    ),
    ("tool choice required without tools", lambda m: _body(m, tool_choice="required"), "tool_choice"),
    (
        "function tool without a name",
        lambda m: _body(m, tools=[{"type": "function", "parameters": {}}]),
        "tools.0.name",
    ),
    ("tools not a list", lambda m: _body(m, tools={"type": "function"}), "tools"),
    ("metadata values", lambda m: _body(m, metadata={"a": 1}), "metadata"),
    ("include type", lambda m: _body(m, include="reasoning.encrypted_content"), "include"),
    ("logprobs", lambda m: _body(m, include=["message.output_text.logprobs"]), "include.0"),
    ("background", lambda m: _body(m, background=True), "background"),
    ("conversation", lambda m: _body(m, conversation="conv_1"), "conversation"),
    ("model missing", lambda m: {"input": m}, "model"),
]


@pytest.mark.parametrize(("name", "build", "param"), BAD_INPUT, ids=[row[0] for row in BAD_INPUT])
def test_bad_input_is_a_400_in_openai_shape_naming_the_field_and_no_upstream_call(gw, name, build, param):
    m = marker()
    response = gw.http.post("/v1/responses", json=build(m), headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and error["message"] and error["type"] == "invalid_request_error"
    assert gw.sim.seen(m) == []


def test_an_unknown_previous_response_id_is_a_404_in_openai_shape(gw, client):
    m = marker()
    with pytest.raises(openai.NotFoundError) as raised:
        client.responses.create(model="anthropic/text", input=m, previous_response_id="resp_abc")
    assert raised.value.body == {"message": "Previous response with id 'resp_abc' not found.", "type": "invalid_request_error",
                                 "param": "previous_response_id", "code": "previous_response_not_found"}  # fmt: skip
    assert gw.sim.seen(m) == []


def test_not_json_is_400_in_openai_shape(gw):
    response = gw.http.post(
        "/v1/responses",
        content=b"{nope",
        headers={"Authorization": f"Bearer {KEY}", "content-type": "application/json"},
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


def test_records_metrics_and_the_records_filter_name_the_door(gw, client):
    response = client.responses.create(model="anthropic/text", input=marker())
    request_id = request_id_of(response.id)
    assert record(gw, request_id)["door"] == "openai-responses"
    assert 'door="openai-responses"' in gw.http.get("/metrics").text
    auth = {"Authorization": f"Bearer {KEY}"}
    by_door = gw.http.get("/v1/requests", params={"door": "openai-responses", "limit": 200}, headers=auth).json()[
        "records"
    ]
    assert request_id in [r["requestId"] for r in by_door] and {r["door"] for r in by_door} == {"openai-responses"}


def test_a_lone_surrogate_in_input_text_is_removed_and_a_50_mb_body_is_413(gw):
    m = marker()
    body = (
        b'{"model": "anthropic/text", "input": [{"role": "user", "content": [{"type": "input_text", "text": "%s \\ud83d"}]}]}'
        % m.encode()
    )
    headers = {"Authorization": f"Bearer {KEY}", "content-type": "application/json"}
    response = gw.http.post("/v1/responses", content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert "\\ud83d" not in json.dumps(gw.sim.seen(m)[-1]["body"])
    big = json.dumps(_body(m, input="x" * 50_000_000)).encode()
    too_big = gw.http.post("/v1/responses", content=big, headers=headers)
    assert too_big.status_code == 413 and too_big.json()["error"]["message"].startswith("request body exceeds")


def test_a_resumable_stream_continues_after_last_event_id_with_no_gap_and_sequence_numbers_intact(gw, client):
    """`X-Gateway-Resumable: true`: the door's frames get `id:` lines; a client that reconnects with
    Last-Event-ID gets the rest, and the sequence numbers still count by one across the cut."""
    m = marker()
    headers = {"Authorization": f"Bearer {KEY}", "X-Gateway-Resumable": "true"}
    body = {"model": "anthropic/slow;n=60;delay_ms=5", "input": m, "stream": True}
    with httpx.Client(timeout=60) as http:
        with http.stream("POST", f"{gw.url}/v1/responses", json=body, headers=headers) as response:
            assert response.status_code == 200
            request_id = response.headers["x-request-id"]
            text = ""
            for chunk in response.iter_text():
                text += chunk
                if text.count("\n\n") >= 20:
                    break
    head = [f for f in parse_sse(text[: text.rfind("\n\n") + 2]) if f.data]
    last_id = [f.id for f in head if f.id is not None][-1]
    rest = resume(gw.url, request_id, {"Authorization": f"Bearer {KEY}"}, last_id)
    assert rest.status_code == 200
    events = [json.loads(f.data) for f in head + [f for f in parse_sse(rest.text) if f.data]]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "".join(
        f"{i:07d} " for i in range(60)
    )
    assert len(gw.sim.seen(m)) == 1
    # The SDK reads a resumable stream (frames with `id:` lines) like any other.
    events = list(client.responses.create(model="anthropic/slow;n=5;delay_ms=1", input=marker(), stream=True,
                                          extra_headers={"X-Gateway-Resumable": "true"}))  # fmt: skip
    assert events[-1].type == "response.completed" and events[-1].response.output_text == "".join(
        f"{i:07d} " for i in range(5)
    )


def test_a_timeout_before_the_start_is_504_and_after_it_a_failed_response_typed_as_a_timeout(gateway_factory):
    impatient = gateway_factory(first_event_timeout=0.5, idle_timeout=0.5, retries=0)
    client = openai.OpenAI(base_url=f"{impatient.url}/v1", api_key="none", max_retries=0)
    for stream in (True, False):
        with pytest.raises(openai.APIStatusError) as raised:
            result = client.responses.create(model="anthropic/hang", input=marker(), stream=stream)
            if stream:
                events_of(result)
        assert raised.value.status_code == 504
        assert (
            raised.value.body["type"] == "timeout_error" and "timeout fired after 0.5s" in raised.value.body["message"]
        )
    events = events_of(client.responses.create(model="anthropic/hang-mid-stream", input=marker(), stream=True))
    failed = events[-1].response
    assert events[-1].type == "response.failed" and failed.error.type == "timeout_error"
    assert "timeout fired after 0.5s" in failed.error.message
