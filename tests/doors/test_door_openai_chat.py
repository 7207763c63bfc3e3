"""The OpenAI Chat Completions door with the official `openai` SDK, as an application would use it, over
loopback HTTP against the gateway in front of the simulator — each scenario against all three vendors."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import marker

VENDORS = ["anthropic", "openai", "google"]
KEY = "sk-client-chat-0001"
WEATHER = {"city": "Paris", "unit": "celsius"}
TIME = {"timezone": "Europe/Paris"}


@pytest.fixture(scope="module")
def gw(gateway_factory):
    # Coalescing off: every vendor fragment is one chunk, so fragmented tool arguments stay fragmented.
    return gateway_factory(throttle_ms=0, api_keys=f"chat:{KEY}")


@pytest.fixture(scope="module")
def client(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0, timeout=30)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def collect(stream: Any) -> dict[str, Any]:
    """Read a streamed completion as an application does: text, reasoning, tool calls by index, finish, usage."""
    out: dict[str, Any] = {"ids": set(), "models": set(), "chunks": [], "text": "", "reasoning": "", "calls": {},
                           "finish": None, "usage": None, "fragments": 0}  # fmt: skip
    for chunk in stream:
        out["chunks"].append(chunk)
        out["ids"].add(chunk.id)
        out["models"].add(chunk.model)
        if chunk.usage is not None:
            out["usage"] = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            out["text"] += delta.content or ""
            out["reasoning"] += (delta.model_extra or {}).get("reasoning_content") or ""
            for call in delta.tool_calls or []:
                entry = out["calls"].setdefault(call.index, {"id": None, "name": None, "arguments": "", "ids_seen": []})
                if call.id is not None:
                    entry["ids_seen"].append(call.id)
                    entry["id"] = call.id
                if call.function and call.function.name:
                    entry["name"] = call.function.name
                if call.function and call.function.arguments:
                    entry["arguments"] += call.function.arguments
                    out["fragments"] += 1
            if choice.finish_reason is not None:
                out["finish"] = choice.finish_reason
    return out


def request_id_of(completion_id: str) -> str:
    assert completion_id.startswith("chatcmpl-req_")
    return completion_id[len("chatcmpl-") :]


def record(gw: Any, request_id: str) -> dict[str, Any]:
    gw.job(request_id)
    response = gw.http.get(f"/v1/requests/{request_id}", headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 200, response.text
    return response.json()


# ---------------------------------------------------------------------------------------------- text, thinking


@pytest.mark.parametrize("vendor", VENDORS)
def test_streamed_text_with_usage(gw, client, vendor):
    m = marker()
    stream = client.chat.completions.create(
        model=f"{vendor}/text;input=30;cache_read=12",
        messages=user(m),
        stream=True,
        stream_options={"include_usage": True},
    )
    got = collect(stream)
    first = got["chunks"][0]
    assert first.choices[0].delta.role == "assistant"
    assert len(got["ids"]) == 1 and got["models"] == {f"{vendor}/text;input=30;cache_read=12"}
    assert got["text"] == f"Hello from the simulator. You said: {m}"
    assert got["finish"] == "stop"
    last = got["chunks"][-1]
    assert last.choices == [] and last.usage is not None
    rec = record(gw, request_id_of(first.id))
    assert rec["door"] == "openai-chat" and rec["outcome"] == "done"
    usage = rec["usage"]
    assert got["usage"].prompt_tokens == usage["input"] + usage["cacheRead"] + usage["cacheWrite"]
    assert got["usage"].prompt_tokens_details.cached_tokens == usage["cacheRead"] == 12
    assert got["usage"].completion_tokens == usage["output"] > 0
    assert got["usage"].total_tokens == got["usage"].prompt_tokens + got["usage"].completion_tokens


def test_the_stream_ends_with_done_and_sends_usage_only_when_asked(gw):
    body = {"model": "anthropic/text", "messages": user(marker()), "stream": True}
    with httpx.Client(base_url=gw.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http:
        plain = http.post("/v1/chat/completions", json=body)
        with_usage = http.post("/v1/chat/completions", json={**body, "stream_options": {"include_usage": True}})
    for response in (plain, with_usage):
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.text.splitlines() if line.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        assert response.headers["x-request-id"] in lines[0]
    assert '"usage"' not in plain.text
    usage_line = [line for line in with_usage.text.splitlines() if line.startswith("data: ")][-2]
    assert json.loads(usage_line[len("data: ") :])["choices"] == []


@pytest.mark.parametrize("vendor", VENDORS)
def test_not_streamed_text_and_thinking(gw, client, vendor):
    m = marker()
    completion = client.chat.completions.create(model=f"{vendor}/thinking", messages=user(m))
    assert completion.object == "chat.completion"
    assert completion.model == f"{vendor}/thinking"
    choice = completion.choices[0]
    assert choice.message.content == f"Hello from the simulator. You said: {m}"
    assert (choice.message.model_extra or {}).get("reasoning_content") == "The user greets me. I should greet back."
    assert choice.finish_reason == "stop"
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    rec = record(gw, request_id_of(completion.id))
    assert rec["door"] == "openai-chat"
    # Reasoning tokens where the vendor counts them apart (Anthropic does not).
    assert completion.usage.completion_tokens_details.reasoning_tokens == rec["usage"].get("reasoning", 0)
    assert (completion.usage.completion_tokens_details.reasoning_tokens > 0) == (vendor != "anthropic")


@pytest.mark.parametrize("vendor", VENDORS)
def test_streamed_thinking_is_reasoning_content(client, vendor):
    got = collect(client.chat.completions.create(model=f"{vendor}/thinking", messages=user(marker()), stream=True))
    assert got["reasoning"] == "The user greets me. I should greet back."
    assert got["text"].startswith("Hello from the simulator.")


# ---------------------------------------------------------------------------------------------- tools

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
     "timezone": {"type": "string"}}}}},
]  # fmt: skip


@pytest.mark.parametrize("vendor", VENDORS)
def test_parallel_tool_calls_stream_whole_each_in_one_chunk(client, vendor):
    got = collect(
        client.chat.completions.create(model=f"{vendor}/tools", messages=user(marker()), tools=TOOLS, stream=True)
    )
    assert got["finish"] == "tool_calls"
    assert sorted(got["calls"]) == [0, 1]
    first, second = got["calls"][0], got["calls"][1]
    assert (first["name"], json.loads(first["arguments"])) == ("get_weather", WEATHER)
    assert (second["name"], json.loads(second["arguments"])) == ("get_time", TIME)
    for call in (first, second):
        assert call["id"] and call["ids_seen"] == [call["id"]]
    assert first["id"] != second["id"]
    # id, name and the whole arguments in one chunk per call, whatever the vendor's fragments were
    assert got["fragments"] == 2
    call_chunks = [c for c in got["chunks"] if c.choices and c.choices[0].delta.tool_calls]
    assert [[(t.index, t.id, t.function.name) for t in c.choices[0].delta.tool_calls] for c in call_chunks] == [
        [(0, first["id"], "get_weather")],
        [(1, second["id"], "get_time")],
    ]


@pytest.mark.parametrize("vendor", VENDORS)
def test_parallel_fragmented_tool_calls_stream_when_the_client_asks(client, vendor):
    got = collect(client.chat.completions.create(
        model=f"{vendor}/tools", messages=user(marker()), tools=TOOLS, stream=True,
        extra_headers={"X-Gateway-Tool-Arguments": "stream"},
    ))  # fmt: skip
    assert got["finish"] == "tool_calls"
    assert sorted(got["calls"]) == [0, 1]
    first, second = got["calls"][0], got["calls"][1]
    assert (first["name"], json.loads(first["arguments"])) == ("get_weather", WEATHER)
    assert (second["name"], json.loads(second["arguments"])) == ("get_time", TIME)
    for call in (first, second):
        assert call["id"] and call["ids_seen"] == [call["id"]]  # the id once, on the call's first fragment
    assert first["id"] != second["id"]
    if vendor != "google":  # Gemini sends a call's arguments whole
        assert got["fragments"] >= 4  # the vendors' fragments arrive as fragments, not re-assembled


@pytest.mark.parametrize("vendor", VENDORS)
def test_multi_turn_tool_loop(gw, client, vendor):
    m = marker()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}, *user(f"weather? {m}")]
    first = client.chat.completions.create(model=f"{vendor}/tools", messages=messages, tools=TOOLS)
    reply = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls" and len(reply.tool_calls) == 2
    messages.append(reply.model_dump(exclude_none=True))
    results = {"get_weather": f"18C cloudy {m}-w", "get_time": f"14:05 {m}-t"}
    for call in reply.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": results[call.function.name]})
    # The second turn goes to another vendor too: the history carries no provider and replays as foreign content.
    other = VENDORS[(VENDORS.index(vendor) + 1) % 3]
    for target in (vendor, other):
        second = client.chat.completions.create(model=f"{target}/text", messages=messages, tools=TOOLS)
        assert second.choices[0].finish_reason == "stop"
        upstream = gw.sim.seen(f"{m}-w")
        sent = [entry for entry in upstream if entry["vendor"] == target]
        assert sent, f"{target} never received the tool results"
        raw = json.dumps(sent[-1]["body"])
        assert f"{m}-t" in raw and "You are terse." in raw
    assert record(gw, request_id_of(second.id))["door"] == "openai-chat"


def test_tool_choice_and_stop_reach_the_vendor(gw, client):
    m = marker()
    client.chat.completions.create(
        model="anthropic/text", messages=user(m), tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}},
        stop=["END"], max_completion_tokens=77, temperature=0.5,
    )  # fmt: skip
    body = gw.sim.seen(m)[-1]["body"]
    assert body["tool_choice"] == {"type": "tool", "name": "get_time"}
    assert body["stop_sequences"] == ["END"] and body["max_tokens"] == 77 and body["temperature"] == 0.5


@pytest.mark.parametrize("vendor", VENDORS)
def test_malformed_tool_arguments_are_an_error_never_a_call(gw, client, vendor):
    # Gemini sends arguments parsed, so its malformed call is its own stop reason.
    says = "MALFORMED_FUNCTION_CALL" if vendor == "google" else "not valid JSON"
    chunks = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in client.chat.completions.create(
            model=f"{vendor}/tools-malformed", messages=user(marker()), tools=TOOLS, stream=True
        ):
            chunks.append(chunk)
    assert says in str(raised.value)
    assert all(c.choices[0].finish_reason is None for c in chunks if c.choices)
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model=f"{vendor}/tools-malformed", messages=user(marker()), tools=TOOLS)
    assert raised.value.status_code == 502 and says in raised.value.body["message"]
    assert raised.value.body["code"] == "upstream_error"


# A stream cut inside the first call's (get_weather, toolu_sim_weather) arguments: the connection reset, the
# vendor's in-band error, the token limit (no close of the call). Gemini sends calls whole: nothing to cut.
CUT_INSIDE_ARGUMENTS = [
    ("anthropic", "tools;fault=reset;at=toolargs"),
    ("openai", "tools;fault=reset;at=toolargs"),
    ("anthropic", "tools;fault=error_event;at=toolargs"),
    ("openai", "tools;fault=error_event;at=toolargs"),
    ("anthropic", "tool-max-tokens"),
    ("openai", "tool-max-tokens"),
    ("compat", "tool-max-tokens"),
]


def read_until_error(stream: Any) -> tuple[list[Any], openai.APIError]:
    chunks = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in stream:
            chunks.append(chunk)
    return chunks, raised.value


@pytest.mark.parametrize(("vendor", "scenario"), CUT_INSIDE_ARGUMENTS)
def test_a_call_cut_inside_its_arguments_is_never_sent_and_the_error_names_it(client, vendor, scenario):
    chunks, error = read_until_error(client.chat.completions.create(
        model=f"{vendor}/{scenario}", messages=user(marker()), tools=TOOLS, stream=True))  # fmt: skip
    assert [c for c in chunks if c.choices and c.choices[0].delta.tool_calls] == []
    assert all(c.choices[0].finish_reason is None for c in chunks if c.choices)
    assert "toolu_sim_weather" in str(error) and "(get_weather)" in str(error), str(error)


@pytest.mark.parametrize(("vendor", "scenario"), CUT_INSIDE_ARGUMENTS)
def test_a_client_that_asks_for_fragments_gets_them_and_the_error_names_the_call(client, vendor, scenario):
    chunks, error = read_until_error(client.chat.completions.create(
        model=f"{vendor}/{scenario}", messages=user(marker()), tools=TOOLS, stream=True,
        extra_headers={"X-Gateway-Tool-Arguments": "stream"}))  # fmt: skip
    calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    assert calls and calls[0].function.name == "get_weather" and calls[0].function.arguments == ""
    assert "".join(t.function.arguments or "" for t in calls), "no fragment of the arguments"
    assert "toolu_sim_weather" in str(error) and "(get_weather)" in str(error), str(error)


def test_a_complete_call_goes_out_before_the_cut_one_is_named(gw):
    """The token limit inside the second call's arguments: the first call is whole and sent, the second is not."""
    response = httpx.post(f"{gw.url}/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"}, timeout=30, json={
        "model": "anthropic/tool-max-tokens-second", "messages": user(marker()), "tools": TOOLS, "stream": True})  # fmt: skip
    lines = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    calls = [t for line in lines for c in line.get("choices", []) for t in c["delta"].get("tool_calls", [])]
    assert [(t["id"], t["function"]["name"], json.loads(t["function"]["arguments"])) for t in calls] == [
        ("toolu_sim_weather", "get_weather", WEATHER)
    ]
    message = lines[-1]["error"]["message"]
    assert "toolu_sim_time (get_time)" in message and "toolu_sim_weather" not in message, message


def test_an_unknown_tool_arguments_mode_is_a_400_naming_the_header(gw):
    response = httpx.post(f"{gw.url}/v1/chat/completions", timeout=30,
                          headers={"authorization": f"Bearer {KEY}", "X-Gateway-Tool-Arguments": "fragments"},
                          json={"model": "anthropic/text", "messages": user(marker()), "stream": True})  # fmt: skip
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "X-Gateway-Tool-Arguments"


# ---------------------------------------------------------------------------------------------- failures


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    ("scenario", "error_type", "status"),
    [("http-429", openai.RateLimitError, 429), ("http-500", openai.InternalServerError, 502),
     ("error-before-content", openai.InternalServerError, 502)],
)  # fmt: skip
def test_vendor_error_before_the_start_is_an_http_error(gw, client, vendor, scenario, error_type, status):
    for stream in (True, False):
        with pytest.raises(error_type) as raised:
            result = client.chat.completions.create(
                model=f"{vendor}/{scenario}", messages=user(marker()), stream=stream
            )
            if stream:
                collect(result)
        assert raised.value.status_code == status
        assert raised.value.body["message"].startswith(f"{vendor}/{scenario}")
        rec = record(gw, raised.value.response.headers["x-request-id"])
        assert rec["outcome"] == "error" and rec["door"] == "openai-chat"


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(("scenario", "says"), [("error-mid-stream", "error"), ("truncated", "truncated")])
def test_failure_after_the_start_raises_mid_stream(gw, client, vendor, scenario, says):
    chunks = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in client.chat.completions.create(model=f"{vendor}/{scenario}", messages=user(marker()), stream=True):
            chunks.append(chunk)
    assert not isinstance(raised.value, openai.APIStatusError)  # the stream had started: 200, then the error
    assert chunks and chunks[0].choices[0].delta.role == "assistant"
    assert any(word in str(raised.value).lower() for word in says.split("|"))
    assert all(c.choices[0].finish_reason is None for c in chunks if c.choices)  # never a successful end
    rec = record(gw, request_id_of(chunks[0].id))
    assert rec["outcome"] == "error" and rec["door"] == "openai-chat"
    assert raised.value.body["type"] == "server_error" and raised.value.body["code"] == "upstream_error"
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model=f"{vendor}/{scenario}", messages=user(marker()))
    assert raised.value.status_code == 502
    assert any(word in raised.value.body["message"].lower() for word in says.split("|"))


# The vendor's reason, as each adapter names it (Gemini's refusal is a safety stop).
REFUSED = {"anthropic": "stop_reason=refusal", "openai": "refused", "google": "finishReason=SAFETY"}
BLOCKED = {"anthropic": "stop_reason=refusal", "openai": "content_filter", "google": "blockReason=SAFETY"}


@pytest.mark.parametrize("vendor", VENDORS)
def test_refusal_mid_answer_is_an_error_line_naming_the_vendors_reason(gw, client, vendor):
    """A refusal after the answer started: the stream's error line (typed as a refusal, not a server error, so
    no SDK asks again) with the vendor's reason; not streaming, a 400."""
    chunks = []
    with pytest.raises(openai.APIError) as raised:
        for chunk in client.chat.completions.create(model=f"{vendor}/refusal", messages=user(marker()), stream=True):
            chunks.append(chunk)
    assert not isinstance(raised.value, openai.APIStatusError)  # the stream had started: 200, then the error
    assert chunks and all(c.choices[0].finish_reason is None for c in chunks if c.choices)
    assert raised.value.body["type"] == "invalid_request_error" and raised.value.body["code"] == "refusal"
    assert REFUSED[vendor] in raised.value.body["message"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=f"{vendor}/refusal", messages=user(marker()))
    assert refused.value.status_code == 400 and REFUSED[vendor] in refused.value.body["message"]


@pytest.mark.parametrize("vendor", [*VENDORS, "compat"])
def test_a_prompt_the_vendors_filter_blocked_is_a_400_naming_the_reason(gw, vendor):
    """Blocked before any content (Gemini promptFeedback.blockReason, an Anthropic refusal or an OpenAI content
    filter with nothing answered): 400 `invalid_request_error`, streaming or not, asked once even by a client
    that retries (a 5xx would have the SDK send the same prompt again)."""
    says = BLOCKED.get(vendor, "content_filter")
    retrying = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=2, timeout=30)
    for stream in (True, False):
        m = marker()
        with pytest.raises(openai.BadRequestError) as raised:
            result = retrying.chat.completions.create(model=f"{vendor}/blocked", messages=user(m), stream=stream)
            if stream:
                collect(result)
        assert raised.value.status_code == 400
        assert raised.value.body["type"] == "invalid_request_error" and raised.value.body["code"] == "refusal"
        assert raised.value.body["message"].startswith(f"{vendor}/blocked ") and says in raised.value.body["message"]
        assert len(gw.sim.seen(m)) == 1, "a blocked prompt is sent once"
        rec = record(gw, raised.value.response.headers["x-request-id"])
        assert rec["outcome"] == "error" and rec["door"] == "openai-chat"


@pytest.mark.parametrize("vendor", VENDORS)
def test_truncation_by_max_tokens_is_finish_reason_length(client, vendor):
    got = collect(client.chat.completions.create(model=f"{vendor}/max-tokens", messages=user(marker()), stream=True))
    assert got["finish"] == "length"
    completion = client.chat.completions.create(model=f"{vendor}/max-tokens", messages=user(marker()))
    assert completion.choices[0].finish_reason == "length"


@pytest.mark.parametrize("vendor", VENDORS)
def test_client_cancel_closes_the_upstream(gw, client, vendor):
    m = marker()
    stream = client.chat.completions.create(model=f"{vendor}/slow;n=400;delay_ms=10", messages=user(m), stream=True)
    chunks = iter(stream)
    for _ in range(3):  # three chunks, then the client cancels
        chunk = next(chunks)
    cancelled_at = time.time()
    stream.close()
    entry = gw.sim.wait(m, until="closed")
    assert entry["clientClosed"] is True and not entry["completed"]
    print(f"{vendor}: upstream closed {1000 * (entry['closedAt'] - cancelled_at):.1f} ms after the client cancelled")
    rec = record(gw, request_id_of(chunk.id))
    assert rec["outcome"] == "aborted" and rec["door"] == "openai-chat" and rec["clientDisconnected"] is True


def test_auth_errors_in_openai_shape(gw):
    bad = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as raised:
        bad.chat.completions.create(model="anthropic/text", messages=user("hi"))
    assert raised.value.body["type"] == "authentication_error"
    with pytest.raises(openai.NotFoundError) as raised:
        openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0).chat.completions.create(
            model="nope/text", messages=user("hi")
        )
    assert raised.value.body["param"] == "model"


# ---------------------------------------------------------------------------------------------- bad input

IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def _body(m: str, **extra: Any) -> dict[str, Any]:
    return {"model": "anthropic/text", "messages": user(m), **extra}


def _call(call_id: str = "call_1", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "get_time", "arguments": arguments}}


BAD_INPUT = [
    # (name, body builder, status, param)
    ("n=2", lambda m: _body(m, n=2), 400, "n"),
    ("n=true", lambda m: _body(m, n=True), 400, "n"),
    ("logprobs=0", lambda m: _body(m, logprobs=0), 400, "logprobs"),
    ("logprobs", lambda m: _body(m, logprobs=True), 400, "logprobs"),
    ("seed", lambda m: _body(m, seed=7), 400, "seed"),
    (
        "json schema without schema",
        lambda m: _body(m, response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
        400,
        "response_format.json_schema.schema",
    ),
    (
        "json schema without name",
        lambda m: _body(m, response_format={"type": "json_schema", "json_schema": {"schema": {}}}),
        400,
        "response_format.json_schema.name",
    ),
    ("response format type", lambda m: _body(m, response_format={"type": "xml"}), 400, "response_format.type"),
    ("penalty", lambda m: _body(m, presence_penalty=0.5), 400, "presence_penalty"),
    ("unknown parameter", lambda m: _body(m, best_of=3), 400, "best_of"),
    (
        "http image",
        lambda m: _body(
            m,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": m},
                        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                    ],
                }
            ],
        ),
        400,
        "messages.0.content.1.image_url.url",
    ),
    (
        "bad data url",
        lambda m: _body(
            m,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": m},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,***"}},
                    ],
                }
            ],
        ),
        400,
        "messages.0.content.1.image_url.url",
    ),
    ("unknown role", lambda m: _body(m, messages=[{"role": "wizard", "content": m}]), 400, "messages.0.role"),
    ("messages not a list", lambda m: _body(m, messages={"role": "user", "content": m}), 400, "messages"),
    (
        "content wrong type",
        lambda m: _body(m, messages=[{"role": "user", "content": 42}, *user(m)]),
        400,
        "messages.0.content",
    ),
    ("temperature type", lambda m: _body(m, temperature="hot"), 400, "temperature"),
    ("temperature range", lambda m: _body(m, temperature=3), 400, "temperature"),
    ("stream type", lambda m: _body(m, stream="yes"), 400, "stream"),
    (
        "orphan tool result",
        lambda m: _body(m, messages=[*user(m), {"role": "tool", "tool_call_id": "call_x", "content": "r"}]),
        400,
        "messages.1.tool_call_id",
    ),
    (
        "tool result answers no earlier call",
        lambda m: _body(
            m,
            messages=[
                *user(m),
                {"role": "assistant", "tool_calls": [_call("call_1")]},
                {"role": "tool", "tool_call_id": "call_2", "content": "r"},
            ],
        ),
        400,
        "messages.2.tool_call_id",
    ),
    (
        "invalid tool arguments JSON",
        lambda m: _body(
            m,
            messages=[
                *user(m),
                {"role": "assistant", "tool_calls": [_call(arguments='{"a": ')]},
                {"role": "tool", "tool_call_id": "call_1", "content": "r"},
            ],
        ),
        400,
        "messages.1.tool_calls.0.function.arguments",
    ),
    (
        "tool arguments not an object",
        lambda m: _body(m, messages=[*user(m), {"role": "assistant", "tool_calls": [_call(arguments="[1]")]}]),
        400,
        "messages.1.tool_calls.0.function.arguments",
    ),
    (
        "tool choice names no tool",
        lambda m: _body(m, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}),
        400,
        "tool_choice.function.name",
    ),
    ("custom tool", lambda m: _body(m, tools=[{"type": "custom", "custom": {"name": "x"}}]), 400, "tools.0.type"),
    ("parallel tool calls off", lambda m: _body(m, tools=TOOLS, parallel_tool_calls=False), 400, "parallel_tool_calls"),
    ("reasoning effort", lambda m: _body(m, reasoning_effort="extreme"), 400, "reasoning_effort"),
    (
        "stream options without stream",
        lambda m: _body(m, stream_options={"include_usage": True}),
        400,
        "stream_options",
    ),
    ("model missing", lambda m: {"messages": user(m)}, 400, "model"),
    ("only a system message", lambda m: _body(m, messages=[{"role": "system", "content": m}]), 400, "messages"),
    (
        "audio part",
        lambda m: _body(
            m,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                        {"type": "text", "text": m},
                    ],
                }
            ],
        ),
        400,
        "messages.0.content.0.type",
    ),
]


@pytest.mark.parametrize(("name", "build", "status", "param"), BAD_INPUT, ids=[row[0] for row in BAD_INPUT])
def test_bad_input_is_a_4xx_in_openai_shape_and_no_upstream_call(gw, name, build, status, param):
    m = marker()
    response = gw.http.post("/v1/chat/completions", json=build(m), headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["message"] and error["type"] and "code" in error
    assert gw.sim.seen(m) == []


def test_the_sdk_raises_bad_request_with_the_message(gw, client):
    m = marker()
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="anthropic/text", messages=user(m), n=2)
    assert "n is not honoured" in raised.value.message and raised.value.body["param"] == "n"
    assert gw.sim.seen(m) == []


def test_a_50_mb_body_is_413_in_openai_shape(gw):
    m = marker()
    body = json.dumps(_body(m, messages=user(m + "x" * 50_000_000))).encode()
    response = gw.http.post(
        "/v1/chat/completions",
        content=body,
        headers={"Authorization": f"Bearer {KEY}", "content-type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["error"]["message"].startswith("request body exceeds")
    assert gw.sim.seen(m) == []


def test_not_json_is_400_in_openai_shape(gw):
    response = gw.http.post(
        "/v1/chat/completions",
        content=b"{nope",
        headers={"Authorization": f"Bearer {KEY}", "content-type": "application/json"},
    )
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


def test_an_inline_image_reaches_the_vendor(gw, client):
    m = marker()
    client.chat.completions.create(
        model="anthropic/text", messages=[{"role": "user", "content": [{"type": "text", "text": m}, {"type": "image_url", "image_url": {"url": IMAGE}}]}]
    )  # fmt: skip
    content = gw.sim.seen(m)[-1]["body"]["messages"][0]["content"]
    assert {"type": "base64", "media_type": "image/png", "data": IMAGE.split(",", 1)[1]} in [
        c.get("source") for c in content
    ]


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def test_a_json_schema_response_format_reaches_each_vendor_as_its_structured_output(gw, client):
    response_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}
    m = marker()
    client.chat.completions.create(model="openai/text", messages=user(m), response_format=response_format)
    assert gw.sim.seen(m)[-1]["body"]["text"]["format"]["schema"] == SCHEMA
    m = marker()
    client.chat.completions.create(model="google/text", messages=user(m), response_format=response_format)
    assert gw.sim.seen(m)[-1]["body"]["generationConfig"]["responseJsonSchema"] == SCHEMA
    m = marker()
    client.chat.completions.create(model="anthropic/text", messages=user(m), response_format=response_format)
    assert gw.sim.seen(m)[-1]["body"]["output_config"]["format"] == {"type": "json_schema", "schema": SCHEMA}


def test_json_mode_reaches_openai_gemini_and_compat_vendors_and_anthropic_refuses_it(gw, client):
    json_mode = {"type": "json_object"}
    m = marker()
    client.chat.completions.create(model="openai/text", messages=user(m), response_format=json_mode)
    assert gw.sim.seen(m)[-1]["body"]["text"]["format"] == {"type": "json_object"}
    m = marker()
    client.chat.completions.create(model="google/text", messages=user(m), response_format=json_mode)
    generation = gw.sim.seen(m)[-1]["body"]["generationConfig"]
    assert generation["responseMimeType"] == "application/json" and "responseJsonSchema" not in generation
    m = marker()
    client.chat.completions.create(model="compat/text", messages=user(m), response_format=json_mode)
    assert gw.sim.seen(m)[-1]["body"]["response_format"] == {"type": "json_object"}
    m = marker()
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="anthropic/text", messages=user(m), response_format=json_mode)
    assert raised.value.body["param"] == "options.jsonObject" and "Anthropic has no JSON mode" in raised.value.message
    assert gw.sim.seen(m) == []


def test_a_vendor_429_keeps_its_retry_after(gw, client):
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="anthropic/http-429;retry_after=1", messages=user(marker()), stream=True)
    assert raised.value.response.headers["retry-after"] == "1"
    assert raised.value.body["code"] == "rate_limit_exceeded"


def test_a_client_that_leaves_before_the_start_cancels_the_turn(gw):
    """The door holds its headers until the turn's first event; a client gone meanwhile still cancels it."""
    m = marker()
    body = {"model": "anthropic/hang", "messages": user(m), "stream": True}
    with httpx.Client(base_url=gw.url, headers={"Authorization": f"Bearer {KEY}"}) as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post("/v1/chat/completions", json=body, timeout=httpx.Timeout(10, read=0.5))
    assert gw.sim.wait(m, until="closed")["clientClosed"] is True
    deadline = time.monotonic() + 10
    while not (jobs := [j for j in list(gw.finished._done.values()) if m in j.request.context.model_dump_json()]):
        assert time.monotonic() < deadline, "the turn never settled"
        time.sleep(0.05)
    job = jobs[0]
    assert job.turn.outcome == "aborted" and job.client_disconnected and job.request.door == "openai-chat"


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_sdk_stream_helper_assembles_the_completion(client, vendor):
    """`chat.completions.stream()` checks every chunk and accumulates the final completion itself."""
    with client.chat.completions.stream(model=f"{vendor}/tools", messages=user(marker()), tools=TOOLS) as stream:
        kinds = {event.type for event in stream}
        final = stream.get_final_completion()
    assert {"content.delta", "tool_calls.function.arguments.delta", "tool_calls.function.arguments.done"} <= kinds
    calls = final.choices[0].message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", WEATHER),
        ("get_time", TIME),
    ]
    assert final.choices[0].finish_reason == "tool_calls" and final.model == f"{vendor}/tools"


def test_a_timeout_before_the_start_is_504(gateway_factory):
    impatient = gateway_factory(first_event_timeout=0.5, idle_timeout=0.5, retries=0)
    client = openai.OpenAI(base_url=f"{impatient.url}/v1", api_key="none", max_retries=0)
    for stream in (True, False):
        with pytest.raises(openai.APIStatusError) as raised:
            client.chat.completions.create(model="anthropic/hang", messages=user(marker()), stream=stream)
        assert raised.value.status_code == 504
        assert (
            raised.value.body["type"] == "timeout_error" and "timeout fired after 0.5s" in raised.value.body["message"]
        )
    # After the start, the error line is typed the same way.
    with pytest.raises(openai.APIError) as raised:
        for _ in client.chat.completions.create(
            model="anthropic/hang-mid-stream", messages=user(marker()), stream=True
        ):
            pass
    assert not isinstance(raised.value, openai.APIStatusError)
    assert raised.value.body["type"] == "timeout_error" and raised.value.body["code"] == "timeout"


def test_parameters_at_their_defaults_are_accepted(gw, client):
    """What SDKs and frameworks send by default never trips the refusals."""
    m = marker()
    completion = client.chat.completions.create(
        model="openai/text", messages=[{"role": "developer", "content": "Be brief."}, *user(m)], tools=TOOLS,
        n=1, logprobs=False, frequency_penalty=0, presence_penalty=0.0, logit_bias={}, parallel_tool_calls=True,
        response_format={"type": "text"}, modalities=["text"], service_tier="auto", store=True, user="u-42",
        metadata={"team": "a"}, prompt_cache_key="conv-1", max_tokens=64, reasoning_effort="low",
    )  # fmt: skip
    assert completion.choices[0].finish_reason == "stop"
    body = gw.sim.seen(m)[-1]["body"]
    assert body["instructions"] == "Be brief." and body["prompt_cache_key"] == "conv-1"
    assert body["max_output_tokens"] == 64 and body["reasoning"]["effort"] == "low"
