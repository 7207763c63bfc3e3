"""The Chat Completions decoder on generated input: whatever JSON a client puts in any field, the answer is a
decoded request or a 4xx `BadRequest` naming a parameter — never another exception (which would be a 500)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.doors.errors import BadRequest
from app.doors.openai_chat.request import PARAMETERS, decode
from tests.conftest import examples

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False)

    | st.text(max_size=12) | st.sampled_from(["user", "assistant", "tool", "system", "function", "text", "image_url",
                                             "data:image/png;base64,AAAA", "https://x/y.png", "{}", '{"a": 1}', "call_1"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["role", "content", "type", "text", "image_url", "url", "tool_calls", "tool_call_id", "id",
                         "function", "name", "arguments", "parameters", "include_usage", "refusal"]), children, max_size=5),
    max_leaves=20,
)  # fmt: skip
# Boundary values, tried in every field: limits of the unified request hide there.
BOUNDARY = [None, 0, -1, 1, 2, 17, 10**9, 2**63, 0.5, 2.5, "", "x" * 2000, [], {}, [""], ["x" * 2000], True, False]
VALID: dict[str, Any] = {
    "model": "anthropic/text",
    "messages": [
        {"role": "system", "content": "terse"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                                                                "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "14:05"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}],
    "stream": True,
}  # fmt: skip


def _check(body: dict[str, Any]) -> None:
    try:
        decoded = decode(body, {})
    except BadRequest as error:
        assert 400 <= error.status < 500 and error.message
        return
    assert decoded.unified.context.messages


def test_the_valid_body_decodes():
    decoded = decode(VALID, {})
    assert decoded.stream and [m.role for m in decoded.unified.context.messages] == ["user", "assistant", "toolResult"]


@pytest.mark.parametrize("key", sorted(PARAMETERS))
def test_boundary_values_of_every_parameter(key):
    for value in BOUNDARY:
        _check({**VALID, key: value})


@settings(max_examples=examples(500), deadline=None)
@given(key=st.sampled_from(sorted(PARAMETERS)), value=JSON)
def test_any_value_of_any_parameter(key, value):
    _check({**VALID, key: value})


@settings(max_examples=examples(300), deadline=None)
@given(
    index=st.integers(0, 3),
    field=st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "refusal"]),
    value=st.one_of(st.sampled_from(BOUNDARY), JSON),
)
def test_any_value_inside_a_message(index, field, value):
    messages = [dict(m) for m in VALID["messages"]]
    messages[index][field] = value
    _check({**VALID, "messages": messages})


@settings(max_examples=examples(200), deadline=None)
@given(messages=st.lists(JSON, min_size=1, max_size=4))
def test_any_list_of_messages(messages):
    _check({**VALID, "messages": messages})
