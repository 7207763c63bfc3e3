"""The Anthropic Messages translator on its own, fed with wire events as dicts (and as SDK objects)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anthropic._models import construct_type
from anthropic.types import RawMessageStreamEvent

from app.contract.failures import ErrorKind
from app.providers.anthropic.events import AnthropicTranslator
from app.providers.base import ProviderError

SAMPLES = Path(__file__).parents[1] / "wire_samples"


def run(events: list[Any], translator: AnthropicTranslator | None = None) -> list[dict[str, Any]]:
    translator = translator or AnthropicTranslator()
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(translator.feed(event))
    out.extend(translator.end())
    return out


def message_start(**usage: int) -> dict[str, Any]:
    tokens = {"input_tokens": 10, "output_tokens": 1, **usage}
    return {
        "type": "message_start",
        "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": tokens},
    }


def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **fields: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": fields}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def finish(reason: str | None = "end_turn", **usage: Any) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": usage or {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_text_lifecycle_and_usage_where_non_null_fields_overwrite():
    events = run(
        [
            message_start(cache_read_input_tokens=3, cache_creation_input_tokens=2),
            start(0, {"type": "text", "text": ""}),
            {"type": "ping"},
            delta(0, type="text_delta", text="Ol"),
            delta(0, type="text_delta", text="á!"),
            stop(0),
            *finish("end_turn", output_tokens=7, input_tokens=None),
        ]
    )
    assert kinds(events) == ["usage", "text_start", "text_delta", "text_delta", "text_end", "usage", "finish"]
    assert events[0] == {"type": "usage", "input": 10, "output": 1, "cacheRead": 3, "cacheWrite": 2}
    assert events[-2] == {"type": "usage", "input": 10, "output": 7, "cacheRead": 3, "cacheWrite": 2}
    assert events[-1] == {"type": "finish", "reason": "stop"}


def test_text_carried_by_the_block_start_is_a_delta():
    events = run([message_start(), start(0, {"type": "text", "text": "Hi"}), stop(0), *finish()])
    assert events[1:4] == [{"type": "text_start"}, {"type": "text_delta", "delta": "Hi"}, {"type": "text_end"}]


def test_thinking_signature_deltas_are_joined_onto_the_end():
    events = run(
        [
            message_start(),
            start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            delta(0, type="thinking_delta", thinking="Let me think."),
            delta(0, type="signature_delta", signature="sig-"),
            delta(0, type="signature_delta", signature="part2"),
            stop(0),
            *finish(),
        ]
    )
    assert events[1:4] == [
        {"type": "thinking_start"},
        {"type": "thinking_delta", "delta": "Let me think."},
        {"type": "thinking_end", "signature": "sig-part2"},
    ]


def test_redacted_thinking_keeps_its_data_as_the_signature():
    events = run(
        [message_start(), start(0, {"type": "redacted_thinking", "data": "EncryptedBlob=="}), stop(0), *finish()]
    )
    assert events[1:3] == [
        {"type": "thinking_start"},
        {"type": "thinking_end", "signature": "EncryptedBlob==", "redacted": True},
    ]


def test_tool_use_streams_its_json_fragments():
    events = run(
        [
            message_start(),
            start(0, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}),
            delta(0, type="input_json_delta", partial_json=""),
            delta(0, type="input_json_delta", partial_json='{"city": "Pa'),
            delta(0, type="input_json_delta", partial_json='ris"}'),
            stop(0),
            *finish("tool_use"),
        ]
    )
    assert events[1] == {"type": "toolcall_start", "id": "toolu_1", "toolName": "get_weather"}
    assert "".join(e["delta"] for e in events if e["type"] == "toolcall_delta") == '{"city": "Paris"}'
    assert kinds(events)[-3:] == ["toolcall_end", "usage", "finish"] and events[-1]["reason"] == "toolUse"


def test_the_web_search_server_tool_is_a_search_and_citations_are_ignored():
    """The search's blocks become one search (its query from the streamed input, its results' urls); the event
    stream passes it on only to a request that asked for hosted tools. Other server tools are skipped."""
    events = run(
        [
            message_start(),
            start(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
            delta(0, type="input_json_delta", partial_json='{"query": "x"}'),
            stop(0),
            start(
                1,
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_1",
                    "content": [
                        {
                            "type": "web_search_result",
                            "url": "https://example.com",
                            "title": "Example",
                            "encrypted_content": "E",
                        }
                    ],
                },
            ),
            stop(1),
            start(2, {"type": "text", "text": ""}),
            delta(
                2, type="citations_delta", citation={"type": "web_search_result_location", "url": "https://example.com"}
            ),
            delta(2, type="text_delta", text="Found it."),
            stop(2),
            start(3, {"type": "server_tool_use", "id": "srvtoolu_2", "name": "code_execution", "input": {}}),
            delta(3, type="input_json_delta", partial_json='{"code": "1"}'),
            stop(3),
            *finish(),
        ]
    )
    assert kinds(events) == [
        "usage",
        "websearch_start",
        "websearch_end",
        "text_start",
        "text_delta",
        "text_end",
        "usage",
        "finish",
    ]
    assert events[1] == {"type": "websearch_start", "id": "srvtoolu_1"}
    assert events[2] == {"type": "websearch_end", "id": "srvtoolu_1", "query": "x", "status": "completed",
                         "sources": [{"url": "https://example.com", "title": "Example"}]}  # fmt: skip


def test_a_web_search_error_result_is_a_failed_search():
    events = run([
        message_start(),
        start(0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
        stop(0),
        start(1, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                  "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}}),
        stop(1),
        *finish(),
    ])  # fmt: skip
    assert events[2] == {"type": "websearch_end", "id": "srvtoolu_1", "query": "", "status": "failed", "sources": []}


@pytest.mark.parametrize(
    ("reason", "mapped"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "length"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "toolUse"),
        (None, "stop"),
    ],
)
def test_stop_reasons(reason, mapped):
    assert run([message_start(), *finish(reason)])[-1] == {"type": "finish", "reason": mapped}


@pytest.mark.parametrize("reason", ["refusal", "sensitive"])
def test_refusals_raise_with_their_kind(reason):
    with pytest.raises(ProviderError) as raised:
        run([message_start(), *finish(reason)])
    assert raised.value.kind == ErrorKind.REFUSAL and f"stop_reason={reason}" in raised.value.message


def test_an_unknown_stop_reason_is_an_error():
    with pytest.raises(ProviderError) as raised:
        run([message_start(), *finish("something_new")])
    assert raised.value.kind == ErrorKind.STOP_REASON


def test_an_error_event_is_a_retryable_upstream_error():
    with pytest.raises(ProviderError) as raised:
        run([message_start(), {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}])
    assert raised.value.retryable and raised.value.message == "sent an error event: overloaded_error: Overloaded"


def test_a_body_without_message_stop_is_truncated():
    with pytest.raises(ProviderError) as raised:
        run([message_start(), start(0, {"type": "text", "text": ""}), delta(0, type="text_delta", text="cut")])
    assert raised.value.kind == ErrorKind.TRUNCATED and "message_stop" in raised.value.message


def test_a_delta_for_a_block_that_never_started_is_an_error():
    with pytest.raises(ProviderError, match="unknown content block 3"):
        run([message_start(), delta(3, type="text_delta", text="?")])


def test_unknown_event_types_are_skipped():
    assert kinds(run([message_start(), {"type": "future_event", "detail": {}}, *finish()])) == [
        "usage",
        "usage",
        "finish",
    ]


def test_compaction_iterations_are_summed():
    usage = {
        "input_tokens": 181,
        "output_tokens": 8,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "iterations": [
            {
                "input_tokens": 100,
                "output_tokens": 83,
                "cache_read_input_tokens": 55096,
                "cache_creation_input_tokens": 0,
            },
            {"input_tokens": 81, "output_tokens": 8, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
        ],
    }
    events = run([message_start(), *finish("end_turn", **usage)])
    assert events[-2] == {"type": "usage", "input": 181, "output": 91, "cacheRead": 55096, "cacheWrite": 0}


def _sample(name: str) -> list[dict[str, Any]]:
    raw = (SAMPLES / f"anthropic-{name}.sse").read_text()
    return [json.loads(line[len("data: ") :]) for line in raw.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("name", ["thinking-tool-empty-args", "web-search-citations", "cache-read-compaction"])
def test_sdk_event_objects_and_wire_dicts_translate_alike(name):
    """The adapter reads raw dicts from the SDK's SSE stream, but the SDK's typed events must read the same."""
    wire = _sample(name)
    objects = [construct_type(type_=RawMessageStreamEvent, value=event) for event in wire]
    assert run(objects) == run(wire)


@pytest.mark.parametrize("field", ["id", "name"])
@pytest.mark.parametrize("value", ["", None])
def test_a_tool_use_block_without_an_id_or_name_is_malformed(field, value):
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    block[field] = value
    with pytest.raises(ProviderError) as caught:
        run([message_start(), start(0, block)])
    assert caught.value.kind is ErrorKind.MALFORMED
    assert f"tool_use block's {field}" in str(caught.value)
