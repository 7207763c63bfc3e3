"""Defect 13: requests Gemini (or its SDK) cannot take are refused before any upstream call with a 400 naming
the problem, instead of ending as "gateway internal error: ValueError"."""

from __future__ import annotations

import pytest

from tests.conftest import marker, turn

TOOL_RESULT = {
    "role": "toolResult",
    "toolCallId": "call_1",
    "toolName": "get_weather",
    "content": [{"type": "text", "text": "21C"}],
    "isError": False,
}


def _body(model: str, messages: list[dict]) -> dict:
    body = turn(model)
    body["context"]["messages"] = messages
    return body


CASES = {
    "only-tool-results": ("google/gemini-2.5-flash", [TOOL_RESULT], "context.messages"),
    "empty-content-list": ("google/gemini-2.5-flash", [{"role": "user", "content": []}], "context.messages"),
    "only-empty-texts": (
        "google/gemini-2.5-flash",
        [{"role": "user", "content": [{"type": "text", "text": ""}]}],
        "context.messages",
    ),
    "model-dotdot": ("google/gemini..flash", None, "model"),
    "model-query": ("google/gemini-2.5-flash?alt=json", None, "model"),
    "model-amp": ("google/gemini&x", None, "model"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("path", ["/v1/stream", "/v1/complete"])
def test_refused_with_400_before_any_upstream_call(gateway, case, path):
    model, messages, param = CASES[case]
    m = marker()
    body = _body(model, messages) if messages is not None else turn(model, m)
    response = gateway.http.post(path, json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request" and error["param"] == param
    assert "ValueError" not in error["message"] and "internal" not in error["message"]
    assert gateway.sim.seen(m) == []


def test_a_history_that_starts_with_tool_results_still_works_when_it_has_something_to_say(gateway):
    """Not over-refusing: tool results after their call, or next to a user message, are a normal turn."""
    m = marker()
    call = {"role": "assistant", "content": [{"type": "toolCall", "id": "call_1", "name": "get_weather", "arguments": {}}],
            "api": "google-generative-ai", "provider": "google", "model": "gemini-2.5-flash", "stopReason": "toolUse",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}, "timestamp": 1}  # fmt: skip
    body = _body("google/text", [{"role": "user", "content": f"weather? {m}"}, call, TOOL_RESULT])
    result = gateway.stream(body)
    assert result.status == 200 and result.terminal["type"] == "done", result.text


def test_the_request_builder_refuses_an_empty_conversation_as_a_request_error():
    """The builder's exact rule, behind `check_request`'s cheap one: a typed request error, not a ValueError."""
    from app.contract.catalog_entries import ModelInfo, Pricing
    from app.contract.failures import ErrorKind
    from app.contract.messages import Context
    from app.contract.request import StreamOptions
    from app.providers.base import ProviderError
    from app.providers.google.request import build_request

    context = Context.model_validate({"messages": [TOOL_RESULT]})
    with pytest.raises(ProviderError) as info:
        build_request(ModelInfo("google", "gemini-2.5-flash", Pricing()), context, StreamOptions())
    assert info.value.kind == ErrorKind.REQUEST and "nothing Gemini can read" in info.value.message
