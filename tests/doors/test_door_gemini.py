"""The Gemini door with the official `google-genai` SDK, as an application would use it, over loopback HTTP
against the gateway in front of the simulator — each scenario against all three vendors."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from simulator.scenarios import token_count
from tests.conftest import marker

VENDORS = ["anthropic", "openai", "google"]
KEY = "sk-client-gemini-0001"
WEATHER = {"city": "Paris", "unit": "celsius"}
TIME = {"timezone": "Europe/Paris"}
THINKING = "The user greets me. I should greet back."
SIGNATURE = "sig-sim-thinking-42"
SIGNATURE_ON_THE_WIRE = {
    "anthropic": SIGNATURE,
    "openai": SIGNATURE,
    "google": base64.b64encode(SIGNATURE.encode()).decode(),
}
TOOLS = [types.Tool(function_declarations=[
    types.FunctionDeclaration(name="get_weather", description="Current weather", parameters_json_schema={
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}),
    types.FunctionDeclaration(name="get_time", parameters=types.Schema(
        type=types.Type.OBJECT, properties={"timezone": types.Schema(type=types.Type.STRING)})),
])]  # fmt: skip
AUTH = {"x-goog-api-key": KEY}


@pytest.fixture(scope="module")
def gw(gateway_factory):
    return gateway_factory(throttle_ms=0, api_keys=f"gemini:{KEY}")


@pytest.fixture(scope="module")
def client(gw) -> genai.Client:
    return genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=gw.url, timeout=30_000))


def record(gw: Any, request_id: str) -> dict[str, Any]:
    gw.job(request_id)
    response = gw.http.get(f"/v1/requests/{request_id}", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200, response.text
    return response.json()


def text_of(chunks: list[types.GenerateContentResponse]) -> str:
    return "".join(c.text or "" for c in chunks)


def raw_chunks(gw: Any, model: str, body: dict[str, Any]) -> tuple[httpx.Response, list[dict[str, Any]]]:
    response = gw.http.post(f"/v1beta/models/{model}:streamGenerateContent?alt=sse", json=body, headers=AUTH)
    chunks = [
        json.loads(block[len("data: ") :]) for block in response.text.split("\r\n\r\n") if block.startswith("data: ")
    ]
    return response, chunks


@pytest.mark.parametrize("vendor", VENDORS)
def test_streamed_text_with_usage_in_geminis_sense(gw, client, vendor):
    m = marker()
    chunks = list(client.models.generate_content_stream(model=f"{vendor}/text;input=30;cache_read=12", contents=m))
    assert text_of(chunks) == f"Hello from the simulator. You said: {m}"
    last = chunks[-1]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    assert all(c.candidates[0].finish_reason is None for c in chunks[:-1])
    assert last.model_version == f"{vendor}/text;input=30;cache_read=12"
    usage = last.usage_metadata
    rec = record(gw, last.response_id)
    assert rec["door"] == "gemini" and rec["outcome"] == "done"
    unified = rec["usage"]
    assert usage.prompt_token_count == unified["input"] + unified["cacheRead"] + unified["cacheWrite"]
    assert usage.cached_content_token_count == unified["cacheRead"] == 12
    assert usage.candidates_token_count == unified["output"] > 0
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count


@pytest.mark.parametrize("vendor", ["openai", "google"])
def test_thinking_a_vendor_counts_apart_is_thoughts_token_count(gw, client, vendor):
    m = marker()
    config = types.GenerateContentConfig(
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=1024)
    )
    chunks = list(client.models.generate_content_stream(model=f"{vendor}/thinking", contents=m, config=config))
    usage = chunks[-1].usage_metadata
    unified = record(gw, chunks[-1].response_id)["usage"]
    assert usage.thoughts_token_count == unified["reasoning"] > 0
    assert usage.candidates_token_count == unified["output"] - unified["reasoning"]
    assert (
        usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count + usage.thoughts_token_count
    )


@pytest.mark.parametrize("vendor", VENDORS)
def test_not_streamed_answer_is_one_generate_content_response(gw, client, vendor):
    m = marker()
    response = client.models.generate_content(
        model=f"{vendor}/text", contents=m, config=types.GenerateContentConfig(system_instruction="Be brief.")
    )
    assert response.text == f"Hello from the simulator. You said: {m}"
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert response.model_version == f"{vendor}/text" and response.usage_metadata.prompt_token_count > 0
    assert record(gw, response.response_id)["door"] == "gemini"
    assert "Be brief." in json.dumps(gw.sim.seen(m)[-1]["body"])


@pytest.mark.parametrize("vendor", VENDORS)
def test_thoughts_stream_only_when_asked_and_their_signature_returns_to_the_same_model_only(gw, client, vendor):
    m = marker()
    shown = types.GenerateContentConfig(
        thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=2048)
    )
    chunks = list(client.models.generate_content_stream(model=f"{vendor}/thinking", contents=m, config=shown))
    parts = [p for c in chunks for p in c.candidates[0].content.parts]
    assert "".join(p.text for p in parts if p.thought and p.text) == THINKING
    assert text_of(chunks).startswith("Hello")  # `.text` leaves thoughts out
    signed = [p for p in parts if p.thought and p.thought_signature]
    assert len(signed) == 1 and signed[0].thought_signature.startswith(b"gw1.")
    hidden = list(client.models.generate_content_stream(model=f"{vendor}/thinking", contents=marker()))
    assert not any(p.thought for c in hidden for p in c.candidates[0].content.parts or [])
    # The conversation as the SDK holds it: the streamed parts of the model turn, then a new user turn.
    history = [types.Content(role="user", parts=[types.Part(text=m)]), types.Content(role="model", parts=parts),
               types.Content(role="user", parts=[types.Part(text=f"again {m}-2")])]  # fmt: skip
    client.models.generate_content(model=f"{vendor}/thinking", contents=history, config=shown)
    same = json.dumps(gw.sim.seen(f"{m}-2")[-1]["body"])
    assert SIGNATURE_ON_THE_WIRE[vendor] in same and (THINKING in same or vendor == "openai")
    other = VENDORS[(VENDORS.index(vendor) + 1) % 3]
    history[-1] = types.Content(role="user", parts=[types.Part(text=f"again {m}-3")])
    client.models.generate_content(model=f"{other}/text", contents=history)
    foreign = json.dumps(gw.sim.seen(f"{m}-3")[-1]["body"])
    assert all(s not in foreign for s in SIGNATURE_ON_THE_WIRE.values()) and "gw1." not in foreign


@pytest.mark.parametrize("vendor", VENDORS)
def test_parallel_function_calls_arrive_whole_with_ids(client, vendor):
    chunks = list(client.models.generate_content_stream(
        model=f"{vendor}/tools", contents=marker(), config=types.GenerateContentConfig(tools=TOOLS)))  # fmt: skip
    calls = [p.function_call for c in chunks for p in c.candidates[0].content.parts or [] if p.function_call]
    assert [(c.name, c.args) for c in calls] == [("get_weather", WEATHER), ("get_time", TIME)]
    assert calls[0].id and calls[1].id and calls[0].id != calls[1].id
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert text_of(chunks) == "Let me check."


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("with_ids", [True, False])
def test_a_function_call_loop_reaches_the_same_and_another_vendor(gw, client, vendor, with_ids):
    """The second turn returns each call's result with its id, or by name only (older clients): both pair."""
    m = marker()
    config = types.GenerateContentConfig(tools=TOOLS, system_instruction="You are terse.")
    first = client.models.generate_content(model=f"{vendor}/tools", contents=f"weather? {m}", config=config)
    model_turn = first.candidates[0].content
    calls = [p.function_call for p in model_turn.parts if p.function_call]
    assert len(calls) == 2
    if not with_ids:
        for call in calls:
            call.id = None
    results = {"get_weather": f"18C cloudy {m}-w", "get_time": f"14:05 {m}-t"}
    answers = types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        id=c.id, name=c.name, response={"output": results[c.name]})) for c in reversed(calls)])  # fmt: skip
    history = [types.Content(role="user", parts=[types.Part(text=f"weather? {m}")]), model_turn, answers]
    other = VENDORS[(VENDORS.index(vendor) + 1) % 3]
    for target in (vendor, other):
        second = client.models.generate_content(model=f"{target}/text", contents=history, config=config)
        assert second.candidates[0].finish_reason == types.FinishReason.STOP
        sent = [entry for entry in gw.sim.seen(f"{m}-w") if entry["vendor"] == target]
        raw = json.dumps(sent[-1]["body"])
        assert f"{m}-t" in raw and "You are terse." in raw
        if target == "anthropic":  # each result answers its own call
            results_sent = {b["tool_use_id"]: b["content"] for msg in sent[-1]["body"]["messages"]
                            for b in (msg["content"] if isinstance(msg["content"], list) else []) if b.get("type") == "tool_result"}  # fmt: skip
            uses = {b["name"]: b["id"] for msg in sent[-1]["body"]["messages"]
                    for b in (msg["content"] if isinstance(msg["content"], list) else []) if b.get("type") == "tool_use"}  # fmt: skip
            assert f"{m}-w" in json.dumps(results_sent[uses["get_weather"]]) and f"{m}-t" in json.dumps(
                results_sent[uses["get_time"]]
            )


def test_tool_config_and_generation_config_reach_the_vendor(gw, client):
    m = marker()
    config = types.GenerateContentConfig(
        tools=TOOLS, max_output_tokens=77, temperature=0.5, top_p=0.9, stop_sequences=["END"],
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
            mode=types.FunctionCallingConfigMode.ANY, allowed_function_names=["get_time"])),
    )  # fmt: skip
    client.models.generate_content(model="anthropic/text", contents=m, config=config)
    body = gw.sim.seen(m)[-1]["body"]
    assert body["tool_choice"] == {"type": "tool", "name": "get_time"}
    assert body["max_tokens"] == 77 and body["temperature"] == 0.5 and body["stop_sequences"] == ["END"]
    m = marker()
    safety = [
        types.SafetySetting(
            category=types.HarmCategory.HARM_CATEGORY_HARASSMENT, threshold=types.HarmBlockThreshold.BLOCK_NONE
        )
    ]
    client.models.generate_content(model="google/text", contents=m, config=types.GenerateContentConfig(
        safety_settings=safety, thinking_config=types.ThinkingConfig(thinking_budget=1234),
        response_mime_type="application/json", response_schema={"type": "OBJECT", "properties": {"a": {"type": "STRING"}}}))  # fmt: skip
    body = gw.sim.seen(m)[-1]["body"]
    assert body["safetySettings"] == [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    thinking = body["generationConfig"]["thinkingConfig"]
    assert thinking.get("thinkingBudget", thinking.get("thinking_budget")) == 1234  # (Google's parser reads either)
    assert body["generationConfig"]["responseJsonSchema"] == {"type": "object", "properties": {"a": {"type": "string"}}}
    m = marker()  # elsewhere safety settings change nothing and are not sent
    client.models.generate_content(
        model="openai/text", contents=m, config=types.GenerateContentConfig(safety_settings=safety)
    )
    assert "HARASSMENT" not in json.dumps(gw.sim.seen(m)[-1]["body"])


IMAGE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def test_an_inline_image_reaches_the_vendor(gw, client):
    m = marker()
    client.models.generate_content(
        model="anthropic/text", contents=[m, types.Part.from_bytes(data=IMAGE, mime_type="image/png")]
    )
    sources = [c.get("source") for c in gw.sim.seen(m)[-1]["body"]["messages"][0]["content"]]
    assert {"type": "base64", "media_type": "image/png", "data": base64.b64encode(IMAGE).decode()} in sources


# ---------------------------------------------------------------------------------------------- failures


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(("scenario", "status", "name"), [
    ("http-429", 429, "RESOURCE_EXHAUSTED"), ("http-500", 502, "UNAVAILABLE"), ("blocked", 400, "INVALID_ARGUMENT")])  # fmt: skip
def test_a_vendor_error_before_the_start_is_an_http_error_in_googles_shape(gw, client, vendor, scenario, status, name):
    for stream in (True, False):
        with pytest.raises(genai_errors.APIError) as raised:
            if stream:
                list(client.models.generate_content_stream(model=f"{vendor}/{scenario}", contents=marker()))
            else:
                client.models.generate_content(model=f"{vendor}/{scenario}", contents=marker())
        assert raised.value.code == status and raised.value.status == name
        assert raised.value.message.startswith(f"{vendor}/{scenario}")
        rec = record(gw, raised.value.response.headers["x-request-id"])
        assert rec["outcome"] == "error" and rec["door"] == "gemini"


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(("scenario", "says", "code"), [
    ("error-mid-stream", "error", 502), ("truncated", "truncated", 502), ("refusal", "", 400)])  # fmt: skip
def test_a_failure_after_the_start_is_an_error_the_sdk_raises_never_a_clean_finish(
    client, vendor, scenario, says, code
):
    seen: list[types.GenerateContentResponse] = []
    with pytest.raises(genai_errors.APIError) as raised:
        for chunk in client.models.generate_content_stream(model=f"{vendor}/{scenario}", contents=marker()):
            seen.append(chunk)
    assert seen and all(c.candidates[0].finish_reason is None for c in seen)  # text came, then the error
    assert raised.value.code == code and says in raised.value.message.lower()
    with pytest.raises(genai_errors.APIError) as raised:
        client.models.generate_content(model=f"{vendor}/{scenario}", contents=marker())
    assert raised.value.code == code


@pytest.mark.parametrize("vendor", VENDORS)
def test_truncation_by_max_output_tokens_is_finish_reason_max_tokens(client, vendor):
    chunks = list(client.models.generate_content_stream(model=f"{vendor}/max-tokens", contents=marker()))
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    response = client.models.generate_content(model=f"{vendor}/max-tokens", contents=marker())
    assert response.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert response.text.startswith("Hello from the simulator.")


@pytest.mark.parametrize("vendor", VENDORS)
def test_a_client_that_stops_reading_closes_the_upstream_and_the_record_says_aborted(gw, vendor):
    m = marker()
    url = f"{gw.url}/v1beta/models/{vendor}/slow;n=400;delay_ms=10:streamGenerateContent?alt=sse"
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", url, json={"contents": [{"parts": [{"text": m}]}]}, headers=AUTH) as response:
            request_id = response.headers["x-request-id"]
            received = b""
            for piece in response.iter_bytes():
                received += piece
                if received.count(b"\r\n\r\n") >= 5:
                    break
            cancelled_at = time.time()
    entry = gw.sim.wait(m, until="closed")
    assert entry["clientClosed"] is True and not entry["completed"]
    assert entry["closedAt"] - cancelled_at < 1.0
    rec = record(gw, request_id)
    assert rec["outcome"] == "aborted" and rec["door"] == "gemini" and rec["clientDisconnected"] is True


def test_keys_come_as_x_goog_api_key_the_key_query_parameter_or_a_bearer_token(gw):
    body = {"contents": [{"parts": [{"text": "hi"}]}]}
    path = "/v1beta/models/anthropic/text:generateContent"
    assert gw.http.post(path, json=body, headers=AUTH).status_code == 200
    assert gw.http.post(path, json=body, params={"key": KEY}).status_code == 200
    assert gw.http.post(path, json=body, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    for headers, params in (({}, {}), ({"x-goog-api-key": "wrong"}, {}), ({}, {"key": "wrong"})):
        refused = gw.http.post(path, json=body, headers=headers, params=params)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == 401 and refused.json()["error"]["status"] == "UNAUTHENTICATED"
    # The `key` query parameter is the Gemini door's alone.
    assert gw.http.post("/v1/stream", params={"key": KEY}, json={}).status_code == 401
    bad = genai.Client(api_key="wrong", http_options=types.HttpOptions(base_url=gw.url))
    with pytest.raises(genai_errors.ClientError) as raised:
        bad.models.generate_content(model="anthropic/text", contents="hi")
    assert raised.value.code == 401


def test_model_names_come_with_their_slash_as_is_or_encoded_and_a_route_or_bare_id(gw, client):
    body = {"contents": [{"parts": [{"text": "hi"}]}]}
    for model in ("models/anthropic/text", "anthropic%2Ftext", "models/anthropic%2Ftext", "anthropic/text"):
        response = gw.http.post(f"/v1beta/models/{model}:generateContent", json=body, headers=AUTH)
        assert response.status_code == 200, (model, response.text)
        assert response.json()["modelVersion"] == "anthropic/text"
    assert gw.http.post("/v1/models/anthropic/text:generateContent", json=body, headers=AUTH).status_code == 200
    missing = gw.http.post("/v1beta/models/nope/text:generateContent", json=body, headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"


# ---------------------------------------------------------------------------------------------- bad input


def _body(m: str, **extra: Any) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": m}]}], **extra}


def _call(name: str = "get_time", **extra: Any) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": {}, **extra}}


BAD_INPUT = [
    ("contents missing", lambda m: {"generationConfig": {"temperature": 0.1}}, "contents"),
    ("contents empty", lambda m: {"contents": []}, "contents"),
    ("unknown role", lambda m: {"contents": [{"role": "wizard", "parts": [{"text": m}]}]}, "contents.0.role"),
    ("parts not a list", lambda m: {"contents": [{"role": "user", "parts": m}]}, "contents.0.parts"),
    (
        "file uri",
        lambda m: _body(m, contents=[{"role": "user", "parts": [{"text": m}, {"fileData": {"fileUri": "gs://x"}}]}]),
        "contents.0.parts.1.fileData",
    ),
    (
        "not an image",
        lambda m: _body(
            m,
            contents=[
                {
                    "role": "user",
                    "parts": [{"text": m}, {"inlineData": {"mimeType": "application/pdf", "data": "AAAA"}}],
                }
            ],
        ),
        "contents.0.parts.1.inlineData.mimeType",
    ),
    (
        "image not base64",
        lambda m: _body(
            m,
            contents=[
                {"role": "user", "parts": [{"text": m}, {"inlineData": {"mimeType": "image/png", "data": "***"}}]}
            ],
        ),
        "contents.0.parts.1.inlineData.data",
    ),
    (
        "response answers no call",
        lambda m: _body(
            m,
            contents=[
                {"role": "user", "parts": [{"text": m}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "get_time", "response": {}}}]},
            ],
        ),
        "contents.1.parts.0.functionResponse.name",
    ),
    (
        "response answers another id",
        lambda m: _body(
            m,
            contents=[
                {"role": "user", "parts": [{"text": m}]},
                {"role": "model", "parts": [_call(id="c1")]},
                {"role": "user", "parts": [{"functionResponse": {"id": "c2", "name": "get_time", "response": {}}}]},
            ],
        ),
        "contents.2.parts.0.functionResponse.id",
    ),
    (
        "call args not an object",
        lambda m: _body(
            m,
            contents=[
                {"role": "user", "parts": [{"text": m}]},
                {"role": "model", "parts": [_call(args=[1])]},
                {"role": "user", "parts": [{"text": m}]},
            ],
        ),
        "contents.1.parts.0.functionCall.args",
    ),
    (
        "prefill",
        lambda m: _body(
            m, contents=[{"role": "user", "parts": [{"text": m}]}, {"role": "model", "parts": [{"text": "x"}]}]
        ),
        "contents.1.role",
    ),
    ("unknown field", lambda m: _body(m, bestOf=3), "bestOf"),
    ("unknown generation field", lambda m: _body(m, generationConfig={"creativity": 3}), "generationConfig.creativity"),
    ("temperature type", lambda m: _body(m, generationConfig={"temperature": "hot"}), "generationConfig.temperature"),
    ("temperature range", lambda m: _body(m, generationConfig={"temperature": 3}), "generationConfig.temperature"),
    (
        "max tokens type",
        lambda m: _body(m, generationConfig={"maxOutputTokens": "many"}),
        "generationConfig.maxOutputTokens",
    ),
    ("top k", lambda m: _body(m, generationConfig={"topK": 0}), "generationConfig.topK"),
    ("two candidates", lambda m: _body(m, generationConfig={"candidateCount": 2}), "generationConfig.candidateCount"),
    (
        "json mode on anthropic",
        lambda m: _body(m, generationConfig={"responseMimeType": "application/json"}),
        "options.jsonObject",
    ),
    (
        "enum mime type",
        lambda m: _body(m, generationConfig={"responseMimeType": "text/x.enum"}),
        "generationConfig.responseMimeType",
    ),
    (
        "thinking level",
        lambda m: _body(m, generationConfig={"thinkingConfig": {"thinkingLevel": "EXTREME"}}),
        "generationConfig.thinkingConfig.thinkingLevel",
    ),
    (
        "thinking budget",
        lambda m: _body(m, generationConfig={"thinkingConfig": {"thinkingBudget": -5}}),
        "generationConfig.thinkingConfig.thinkingBudget",
    ),
    (
        "function without a name",
        lambda m: _body(m, tools=[{"functionDeclarations": [{"description": "x"}]}]),
        "tools.0.functionDeclarations.0.name",
    ),
    (
        "calling mode",
        lambda m: _body(m, toolConfig={"functionCallingConfig": {"mode": "SOMETIMES"}}),
        "toolConfig.functionCallingConfig.mode",
    ),
    (
        "allowed name unknown",
        lambda m: _body(
            m,
            tools=[{"functionDeclarations": [{"name": "a"}]}],
            toolConfig={"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["b"]}},
        ),
        "toolConfig.functionCallingConfig.allowedFunctionNames.0",
    ),
    ("cached content on another vendor", lambda m: _body(m, cachedContent="cachedContents/abc"), "cachedContent"),
    ("cached content type", lambda m: _body(m, cachedContent=7), "cachedContent"),
    ("safety settings", lambda m: _body(m, safetySettings=[{"category": 3}]), "safetySettings.0.category"),
    (
        "system instruction",
        lambda m: _body(m, systemInstruction={"parts": [{"inlineData": {}}]}),
        "systemInstruction.parts.0",
    ),
]


@pytest.mark.parametrize(("name", "build", "field"), BAD_INPUT, ids=[row[0] for row in BAD_INPUT])
def test_bad_input_is_a_400_in_googles_shape_naming_the_field_and_no_upstream_call(gw, name, build, field):
    m = marker()
    response = gw.http.post("/v1beta/models/anthropic/text:generateContent", json=build(m), headers=AUTH)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT" and error["message"].startswith(f"{field}:")
    assert error["details"][0]["fieldViolations"][0]["field"] == field
    assert gw.sim.seen(m) == []


def test_cached_content_reaches_a_gemini_upstream_and_is_refused_by_the_others(gw):
    m = marker()
    response = gw.http.post(
        "/v1beta/models/google/text:generateContent", json=_body(m, cachedContent="cachedContents/abc"), headers=AUTH
    )
    assert response.status_code == 200, response.text
    assert gw.sim.seen(m)[-1]["body"]["cachedContent"] == "cachedContents/abc"
    for vendor in ("openai", "anthropic"):
        m = marker()
        response = gw.http.post(
            f"/v1beta/models/{vendor}/text:generateContent",
            json=_body(m, cachedContent="cachedContents/abc"),
            headers=AUTH,
        )
        assert response.status_code == 400 and "Gemini cache" in response.json()["error"]["message"], response.text
        assert gw.sim.seen(m) == []


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def test_a_response_schema_reaches_each_vendor_as_its_structured_output(gw, client):
    config = types.GenerateContentConfig(response_mime_type="application/json", response_json_schema=SCHEMA)
    m = marker()
    client.models.generate_content(model="google/text", contents=m, config=config)
    generation = gw.sim.seen(m)[-1]["body"]["generationConfig"]
    assert generation["responseMimeType"] == "application/json" and generation["responseJsonSchema"] == SCHEMA
    m = marker()
    client.models.generate_content(model="openai/text", contents=m, config=config)
    assert gw.sim.seen(m)[-1]["body"]["text"]["format"]["schema"] == SCHEMA
    m = marker()
    list(client.models.generate_content_stream(model="anthropic/text", contents=m, config=config))
    assert gw.sim.seen(m)[-1]["body"]["output_config"]["format"] == {"type": "json_schema", "schema": SCHEMA}


def test_json_mode_without_a_schema_reaches_gemini_and_openai_and_anthropic_refuses_it(gw, client):
    config = types.GenerateContentConfig(response_mime_type="application/json")
    m = marker()
    client.models.generate_content(model="google/text", contents=m, config=config)
    generation = gw.sim.seen(m)[-1]["body"]["generationConfig"]
    assert generation["responseMimeType"] == "application/json" and "responseJsonSchema" not in generation
    m = marker()
    list(client.models.generate_content_stream(model="openai/text", contents=m, config=config))
    assert gw.sim.seen(m)[-1]["body"]["text"]["format"] == {"type": "json_object"}
    m = marker()
    with pytest.raises(genai_errors.ClientError) as raised:
        client.models.generate_content(model="anthropic/text", contents=m, config=config)
    assert raised.value.code == 400 and raised.value.message.startswith("options.jsonObject:")
    assert "Anthropic has no JSON mode" in raised.value.message
    assert gw.sim.seen(m) == []


def test_a_stream_with_an_unknown_alt_and_a_body_that_is_not_json_are_400(gw):
    response = gw.http.post(
        "/v1beta/models/anthropic/text:streamGenerateContent?alt=media", json=_body("hi"), headers=AUTH
    )
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("alt:")
    response = gw.http.post("/v1beta/models/anthropic/text:generateContent", content=b"{nope",
                            headers={**AUTH, "content-type": "application/json"})  # fmt: skip
    assert response.status_code == 400 and response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_records_and_metrics_name_the_door(gw, client):
    response = client.models.generate_content(model="anthropic/text", contents=marker())
    assert record(gw, response.response_id)["door"] == "gemini"
    assert 'door="gemini"' in gw.http.get("/metrics").text
    by_door = gw.http.get("/v1/requests", params={"door": "gemini", "limit": 200},
                          headers={"Authorization": f"Bearer {KEY}"}).json()["records"]  # fmt: skip
    assert response.response_id in [r["requestId"] for r in by_door]


# ---------------------------------------------------------------------------------------------- counting, models


@pytest.mark.parametrize("vendor", VENDORS)
def test_count_tokens_is_the_serving_vendors_own_count(gw, client, vendor):
    m = marker()
    counted = client.models.count_tokens(model=f"{vendor}/text", contents=f"count {m}")
    [entry] = gw.sim.seen(m)
    assert entry["vendor"] == vendor and entry["endpoint"] == "count"  # the vendor counted, no turn ran
    assert counted.total_tokens == token_count(entry["body"])  # the vendor's number, unchanged
    # The whole request (system instruction, tools) as the SDKs send it to count a generateContent request.
    body = {"generateContentRequest": {"contents": [{"role": "user", "parts": [{"text": m}]}],
                                       "systemInstruction": {"parts": [{"text": "Be brief."}]}}}  # fmt: skip
    response = gw.http.post(f"/v1beta/models/{vendor}/text:countTokens", json=body, headers=AUTH)
    [entry] = [e for e in gw.sim.seen(m) if e["endpoint"] == "count" and "Be brief." in json.dumps(e["body"])]
    assert response.status_code == 200 and response.json() == {"totalTokens": token_count(entry["body"])}


def test_count_tokens_errors_are_in_googles_shape(gw):
    response = gw.http.post("/v1beta/models/anthropic/text:countTokens", json={"contents": []}, headers=AUTH)
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("contents:")
    response = gw.http.post(
        "/v1beta/models/anthropic/text:countTokens", json={"contents": [{"parts": [{"text": "x"}]}]}
    )
    assert response.status_code == 401 and response.json()["error"]["status"] == "UNAUTHENTICATED"
    m = marker()  # an api without a counting endpoint: a clear 400, never an estimate
    response = gw.http.post("/v1/models/compat/meta-llama/Llama-3.3-70B-Instruct:countTokens",
                            json={"contents": [{"parts": [{"text": m}]}]}, headers=AUTH)  # fmt: skip
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("model:")
    assert gw.sim.seen(m) == []
    # A malformed `generateContentRequest` wrapper: a 400 naming the field at fault.
    for body, field in (({"generateContentRequest": "x"}, "generateContentRequest"),
                        ({"generateContentRequest": {"contents": []}, "contents": []}, "contents")):  # fmt: skip
        response = gw.http.post("/v1beta/models/anthropic/text:countTokens", json=body, headers=AUTH)
        assert response.status_code == 400 and response.json()["error"]["message"].startswith(f"{field}:")


@pytest.mark.parametrize(
    "model_in_path, refused",
    [
        ("google/gemini-x:countTokens%23", "'#'"),  # the fragment would cut the vendor's URL at `countTokens`
        ("google/gemini-x:countTokens", "':'"),  # Gemini's method follows the one `:` of the segment
        ("google/gemini-x%3FcountTokens", "'?'"),
        ("google/%2e%2e/%2e%2e/gemini-x", "'.' or '..' segment"),
        ("google/gemini-x%00", "'\\x00'"),
        ("google/tunedModels/x", "'/'"),
        ("anthropic/text%23x", "'#'"),  # an id in the body holds none of these either
    ],
)
@pytest.mark.parametrize("method", ["generateContent", "streamGenerateContent", "countTokens"])
def test_a_model_id_that_is_not_one_path_segment_is_a_400_naming_it_and_never_reaches_the_vendor(
    gw, model_in_path, refused, method
):
    m = marker()
    body = {"contents": [{"parts": [{"text": m}]}]}
    response = gw.http.post(f"/v1beta/models/{model_in_path}:{method}", json=body, headers=AUTH)
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("model: model '") and refused in message, message
    assert gw.sim.seen(m) == []


def test_models_list_and_get_in_geminis_shape(gw, client):
    models = list(client.models.list())
    names = [model.name for model in models]
    assert "models/anthropic/text" in names
    thinking = next(model for model in models if model.name == "models/anthropic/thinking")
    assert thinking.input_token_limit == 200000 and thinking.output_token_limit == 8192
    assert "generateContent" in thinking.supported_actions
    got = client.models.get(model="anthropic/text")
    assert got.name == "models/anthropic/text"
    # What the list names can be sent back as the model of a turn.
    response = client.models.generate_content(model=got.name, contents=marker())
    assert response.model_version == "anthropic/text"
    missing = gw.http.get("/v1beta/models/nope/nothing", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"
    assert gw.http.get("/v1beta/models", params={"key": KEY}).status_code == 200
    refused = gw.http.get("/v1beta/models")
    assert refused.status_code == 401 and refused.json()["error"]["status"] == "UNAUTHENTICATED"


def test_gemini_clis_sampling_defaults_with_thinking_reach_gemini_only(gw, client):
    """Gemini CLI always restates Gemini's own sampling (temperature 1, topP 0.95, topK 64) with thoughts on:
    with thinking, topP and topK go to Gemini alone (OpenAI reasoning models refuse topP)."""
    config = types.GenerateContentConfig(temperature=1, top_p=0.95, top_k=64,
                                         thinking_config=types.ThinkingConfig(include_thoughts=True))  # fmt: skip
    for vendor in ("openai", "anthropic"):
        m = marker()
        response = client.models.generate_content(model=f"{vendor}/thinking", contents=m, config=config)
        assert response.candidates[0].finish_reason == types.FinishReason.STOP
        sent = gw.sim.seen(m)[-1]["body"]
        assert "top_p" not in sent and "top_k" not in sent
    m = marker()
    client.models.generate_content(model="google/thinking", contents=m, config=config)
    generation = gw.sim.seen(m)[-1]["body"]["generationConfig"]
    assert generation["topP"] == 0.95 and generation["topK"] == 64


def test_a_resumable_stream_continues_after_last_event_id_with_no_gap(gw):
    """`X-Gateway-Resumable: true` (a client that resumes, not the Google SDKs, whose readers take no `id:`
    line): the chunks get `id:` lines, and a client that reconnects with Last-Event-ID gets the rest."""
    from tests.conformance import parse_sse
    from tests.resume_client import resume

    m = marker()
    headers = {**AUTH, "X-Gateway-Resumable": "true"}
    url = f"{gw.url}/v1beta/models/anthropic/slow;n=60;delay_ms=5:streamGenerateContent?alt=sse"
    with httpx.Client(timeout=60) as http:
        with http.stream("POST", url, json={"contents": [{"parts": [{"text": m}]}]}, headers=headers) as response:
            assert response.status_code == 200
            request_id = response.headers["x-request-id"]
            text = ""
            for chunk in response.iter_text():
                text += chunk.replace("\r\n", "\n")
                if text.count("\n\n") >= 20:
                    break
    head = [f for f in parse_sse(text[: text.rfind("\n\n") + 2]) if f.data]
    last_id = [f.id for f in head if f.id is not None][-1]
    rest = resume(gw.url, request_id, {"Authorization": f"Bearer {KEY}"}, last_id)
    assert rest.status_code == 200
    chunks = [json.loads(f.data) for f in head + [f for f in parse_sse(rest.text) if f.data]]
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert "".join(p["text"] for p in parts) == "".join(f"{i:07d} " for i in range(60))
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert len(gw.sim.seen(m)) == 1


def test_a_timeout_before_the_start_is_504_and_after_it_an_error_chunk(gateway_factory):
    impatient = gateway_factory(first_event_timeout=0.5, idle_timeout=0.5, retries=0)
    client = genai.Client(api_key="none", http_options=types.HttpOptions(base_url=impatient.url))
    for stream in (True, False):
        with pytest.raises(genai_errors.ServerError) as raised:
            if stream:
                list(client.models.generate_content_stream(model="anthropic/hang", contents=marker()))
            else:
                client.models.generate_content(model="anthropic/hang", contents=marker())
        assert raised.value.code == 504 and raised.value.status == "DEADLINE_EXCEEDED"
        assert "timeout fired after 0.5s" in raised.value.message
    seen = []
    with pytest.raises(genai_errors.ServerError) as raised:
        for chunk in client.models.generate_content_stream(model="anthropic/hang-mid-stream", contents=marker()):
            seen.append(chunk)
    assert seen and raised.value.code == 504 and "timeout fired after 0.5s" in raised.value.message
