"""`stop`, `toolChoice` and `topP` on every api: what each adapter's SDK sends to the simulator, and the 400
before any upstream call where the vendor cannot honour the option."""

from __future__ import annotations

import pytest

from tests.conftest import marker, turn

WEATHER = {
    "name": "get_weather",
    "description": "Current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CLOCK = {"name": "get_time", "description": "Current time", "parameters": {"type": "object", "properties": {}}}
NAMED = {"type": "tool", "name": "get_weather"}


def with_options(model: str, m: str, tools: bool = True, **options) -> dict:
    body = turn(model, m, options={"throttleMs": 0, **options})
    if tools:
        body["context"]["tools"] = [WEATHER, CLOCK]
    return body


def sent(gateway, model: str, tools: bool = True, **options) -> dict:
    """The body the simulator received for a turn with these options."""
    m = marker()
    result = gateway.stream(with_options(model, m, tools, **options))
    assert result.status == 200, result.text
    [seen] = gateway.sim.seen(m)
    return seen["body"]


def refused(gateway, model: str, param: str, words: str, tools: bool = True, **options) -> None:
    """400 naming the field, and the simulator saw nothing."""
    m = marker()
    for path in ("/v1/stream", "/v1/complete"):
        response = gateway.http.post(path, json=with_options(model, m, tools, **options))
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"] == param and words in error["message"], error
    assert gateway.sim.seen(m) == []


# --- Anthropic Messages -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice, wire",
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        (NAMED, {"type": "tool", "name": "get_weather"}),
    ],
)
def test_anthropic_tool_choice(gateway, choice, wire):
    assert sent(gateway, "anthropic/text", toolChoice=choice)["tool_choice"] == wire


def test_anthropic_stop_sequences_and_top_p(gateway):
    body = sent(gateway, "anthropic/text", tools=False, stop=["END", "\n\nHuman:"], topP=0.9)
    assert body["stop_sequences"] == ["END", "\n\nHuman:"] and body["top_p"] == 0.9
    assert "tool_choice" not in body


def test_anthropic_without_options_sends_none_of_them(gateway):
    body = sent(gateway, "anthropic/text")
    assert not {"stop_sequences", "tool_choice", "top_p"} & set(body)


def test_anthropic_refuses_a_forced_tool_while_thinking(gateway):
    refused(gateway, "anthropic/text", "options.toolChoice", "thinking", toolChoice="required", reasoning="low")


def test_anthropic_refuses_a_low_top_p_while_thinking(gateway):
    refused(gateway, "anthropic/text", "options.topP", "0.95", topP=0.5, reasoning="low")
    assert sent(gateway, "anthropic/text", topP=0.97, reasoning="low")["top_p"] == 0.97


# --- OpenAI Responses ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice, wire",
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (NAMED, {"type": "function", "name": "get_weather"}),
    ],
)
def test_openai_tool_choice(gateway, choice, wire):
    assert sent(gateway, "openai/text", toolChoice=choice)["tool_choice"] == wire


def test_openai_top_p(gateway):
    assert sent(gateway, "openai/text", topP=0.5)["top_p"] == 0.5


def test_openai_refuses_stop_sequences_before_any_call(gateway):
    refused(gateway, "openai/text", "options.stop", "no stop sequences", stop=["END"])


def test_openai_refuses_top_p_while_reasoning(gateway):
    refused(gateway, "openai/text", "options.topP", "topP", topP=0.5, reasoning="low")
    refused(gateway, "openai/gpt-5-mini", "options.topP", "gpt-5-mini is one", topP=0.5)  # a reasoning model


# --- Google Gemini ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice, wire",
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        (NAMED, {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
    ],
)
def test_google_tool_choice(gateway, choice, wire):
    assert sent(gateway, "google/text", toolChoice=choice)["toolConfig"] == {"functionCallingConfig": wire}


def test_google_stop_sequences_and_top_p(gateway):
    config = sent(gateway, "google/text", tools=False, stop=["END"], topP=0.25)["generationConfig"]
    assert config["stopSequences"] == ["END"] and config["topP"] == 0.25


def test_google_refuses_more_than_five_stop_sequences(gateway):
    refused(gateway, "google/text", "options.stop", "at most 5", stop=[f"s{i}" for i in range(6)])


# --- Chat Completions (openai-completions) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice, wire",
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (NAMED, {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
def test_completions_tool_choice(gateway, choice, wire):
    assert sent(gateway, "compat/text", toolChoice=choice)["tool_choice"] == wire


def test_completions_stop_and_top_p(gateway):
    body = sent(gateway, "compat/text", tools=False, stop=["END"], topP=0.75)
    assert body["stop"] == ["END"] and body["top_p"] == 0.75


# --- every api ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["anthropic/text", "openai/text", "google/text", "compat/text"])
def test_a_forced_tool_needs_tools(gateway, model):
    refused(gateway, model, "options.toolChoice", "needs context.tools", tools=False, toolChoice="required")
    refused(gateway, model, "options.toolChoice", "'nope'", toolChoice={"type": "tool", "name": "nope"})


def test_empty_stop_sequence_is_a_schema_error(gateway):
    response = gateway.http.post("/v1/stream", json=with_options("anthropic/text", marker(), stop=[""]))
    assert response.status_code == 422 and response.json()["error"]["param"] == "options.stop.0"


def test_json_object_is_each_vendors_json_mode_and_anthropic_refuses_it(gateway):
    assert sent(gateway, "openai/text", jsonObject=True)["text"]["format"] == {"type": "json_object"}
    assert sent(gateway, "google/text", jsonObject=True)["generationConfig"]["responseMimeType"] == "application/json"
    assert sent(gateway, "compat/text", jsonObject=True)["response_format"] == {"type": "json_object"}
    assert "text" not in sent(gateway, "openai/text")  # off by default
    refused(gateway, "anthropic/text", "options.jsonObject", "Anthropic has no JSON mode", jsonObject=True)
