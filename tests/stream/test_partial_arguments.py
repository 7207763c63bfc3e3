"""`partialArguments` (app/stream/partial_arguments.py): the incremental parser against partial-json-parser.

Unit cases pin fragmented, escaped and unicode arguments (fragment boundaries inside `\\uXXXX` escapes and
between the halves of a surrogate pair); a property test checks, for generated arguments serialized in
several styles and cut at generated points, that every prefix parses to what partial-json-parser gives.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import partial_json_parser
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.stream.partial_arguments import PartialArguments, PartialJson
from tests.conftest import examples


def values_per_fragment(fragments: list[str]) -> list[Any]:
    parser = PartialJson()
    seen = []
    for fragment in fragments:
        parser.feed(fragment)
        seen.append(parser.value())
    return seen


def one_shot(text: str) -> Any:
    return values_per_fragment([text])[0]


@pytest.mark.parametrize(
    ("fragments", "expected"),
    [
        (
            ['{"city": "Par', 'is", "days": 3', "}"],
            [{"city": "Par"}, {"city": "Paris", "days": 3}, {"city": "Paris", "days": 3}],
        ),
        (['{"ci', 'ty"', ": ", '"x"'], [{}, {}, {}, {"city": "x"}]),
        (
            ['{"a": [1, 2', ', {"b": tr', "ue}]}"],
            [{"a": [1, 2]}, {"a": [1, 2, {"b": True}]}, {"a": [1, 2, {"b": True}]}],
        ),
        (['{"n": -', "1.", "5e", "+3}"], [{}, {"n": -1}, {"n": -1.5}, {"n": -1500.0}]),
        (['{"n": nu', "ll, ", '"f": f'], [{"n": None}, {"n": None}, {"n": None, "f": False}]),
        # escapes: a fragment ends after the backslash, inside \uXXXX, after a quote escape
        (
            ['{"q": "say \\', '"hi\\', '" \\u00', "e9\\u20", 'ac"}'],
            [{"q": "say "}, {"q": 'say "hi'}, {"q": 'say "hi" '}, {"q": 'say "hi" é'}, {"q": 'say "hi" é€'}],
        ),
        # a surrogate pair split between the halves, and inside the low half
        (['{"e": "\\ud83d', "\\ude", '00!"}'], [{"e": ""}, {"e": ""}, {"e": "😀!"}]),
        (['{"e": "a\\ud8', "3d\\", 'ude00"}'], [{"e": "a"}, {"e": "a"}, {"e": "a😀"}]),
        # raw (unescaped) unicode passes through, astral characters included
        (['{"t": "日本', '語 🎉"}'], [{"t": "日本"}, {"t": "日本語 🎉"}]),
        (["{}"], [{}]),
        (["", "  ", "{"], [{}, {}, {}]),
    ],
)
def test_fragmented_arguments(fragments, expected):
    assert values_per_fragment(fragments) == expected


def test_text_that_is_not_json_keeps_the_last_value():
    assert values_per_fragment(['{"a": 1, ', "oops", '"b": 2}']) == [{"a": 1}, {"a": 1}, {"a": 1}]
    assert values_per_fragment(['{"a": "\\x41"}']) == [{}]
    assert values_per_fragment(['{"a": "\\ud83d\\u0041"}']) == [{}]  # a high surrogate without its low half


def test_a_partial_string_keeps_its_trailing_spaces():
    assert values_per_fragment(['{"a": "x ', " y"]) == [{"a": "x "}, {"a": "x  y"}]


def test_unchanged_text_returns_the_same_object():
    parser = PartialJson()
    parser.feed('{"a": [1')
    first = parser.value()
    parser.feed("  ")
    assert parser.value() is first


def test_partial_arguments_adds_the_field_to_toolcall_deltas_only():
    add = PartialArguments()
    start = {"type": "toolcall_start", "contentIndex": 1, "id": "t1", "toolName": "f"}
    assert add(start) is start
    assert add({"type": "toolcall_delta", "contentIndex": 1, "delta": '{"x": "a'})["partialArguments"] == {"x": "a"}
    # another call's fragments are parsed apart
    add({"type": "toolcall_start", "contentIndex": 2, "id": "t2", "toolName": "g"})
    assert add({"type": "toolcall_delta", "contentIndex": 2, "delta": "[1"})["partialArguments"] == [1]
    delta = {"type": "toolcall_delta", "contentIndex": 1, "delta": 'b"}'}
    out = add(delta)
    assert out["partialArguments"] == {"x": "ab"} and "partialArguments" not in delta  # the event is not mutated
    text = {"type": "text_delta", "contentIndex": 0, "delta": "{"}
    assert add(text) is text


# ------------------------------------------------------------------------- equivalence (generated)


def assert_matches(prefix: str, incremental: Any) -> None:
    """Fed in fragments or at once, the parser agrees; and it agrees with partial-json-parser wherever that
    has a value, up to the two differences: a trailing lone high surrogate (which cannot be sent as UTF-8)
    is cut, escape by escape; and the comparison is on the prefix without trailing whitespace, because
    partial-json-parser strips the text before completing a string, losing the spaces a partial string
    ends with (ours keeps them)."""
    assert incremental == one_shot(prefix), prefix
    while True:
        prefix = prefix.rstrip()
        try:
            expected = partial_json_parser.loads(prefix)
        except Exception:  # partial-json-parser has no value for this prefix
            return
        try:
            orjson.dumps(expected)
            break
        except orjson.JSONEncodeError:
            prefix = prefix[: prefix.rindex("\\u")]
    assert one_shot(prefix) == expected, prefix


scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.text(alphabet=st.sampled_from('"\\/\b\f\n\r\té€😀𝄞\x00\x1f '), max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
argument_objects = st.dictionaries(st.text(max_size=8), values, max_size=5)
styles = st.sampled_from(
    [
        {"ensure_ascii": True},
        {"ensure_ascii": False},
        {"ensure_ascii": True, "separators": (",", ":")},
        {"ensure_ascii": False, "indent": 2},
    ]
)


@settings(max_examples=examples(300), deadline=None)
@given(argument_objects, styles, st.data())
def test_every_prefix_matches_partial_json_parser(arguments, style, data):
    text = json.dumps(arguments, **style)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(text)), max_size=12))))
    fragments = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)]) if b > a]
    seen = values_per_fragment(fragments)
    end = 0
    for fragment, value in zip(fragments, seen):
        end += len(fragment)
        assert_matches(text[:end], value)
    assert seen[-1] == arguments


@settings(max_examples=examples(100), deadline=None)
@given(argument_objects, styles)
def test_character_by_character_matches(arguments, style):
    text = json.dumps(arguments, **style)
    seen = values_per_fragment(list(text))
    for end, value in enumerate(seen, start=1):
        assert_matches(text[:end], value)
    assert seen[-1] == arguments


# ------------------------------------------------------------------------- over HTTP


@pytest.mark.parametrize("model", ["anthropic/tools", "openai/tools", "google/tools"])
def test_stream_carries_partial_arguments_when_asked(gateway, model):
    from tests.conftest import turn

    result = gateway.stream(turn(model, options={"throttleMs": 0, "partialArguments": True}))
    assert result.status == 200
    deltas = [e for e in result.events if e["type"] == "toolcall_delta"]
    ends = [e for e in result.events if e["type"] == "toolcall_end"]
    assert deltas and ends
    for end in ends:
        mine = [e for e in deltas if e["contentIndex"] == end["contentIndex"]]
        text = "".join(e["delta"] for e in mine)
        for count, event in enumerate(mine, start=1):
            assert event["partialArguments"] == one_shot("".join(e["delta"] for e in mine[:count]))
        assert mine[-1]["partialArguments"] == end["toolCall"]["arguments"] == json.loads(text)


def test_stream_has_no_partial_arguments_by_default(gateway):
    from tests.conftest import turn

    result = gateway.stream(turn("anthropic/tools"))
    deltas = [e for e in result.events if e["type"] == "toolcall_delta"]
    assert deltas and all("partialArguments" not in e for e in deltas)
