"""The OpenAI Responses translator fed with wire events as dicts (and as SDK objects), plus request helpers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai._models import construct_type
from openai.types.responses import ResponseStreamEvent

from app.contract.catalog_entries import ModelInfo, Pricing
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.base import ProviderError
from app.providers.openai_responses.events import OpenAIResponsesTranslator
from app.providers.openai_responses.request import (
    build_request,
    normalize_tool_call_id,
    reasoning_effort,
    split_tool_call_id,
)

SAMPLES = Path(__file__).parents[1] / "wire_samples"


def run(events: list[dict[str, Any]], translator: OpenAIResponsesTranslator | None = None) -> list[dict[str, Any]]:
    translator = translator or OpenAIResponsesTranslator()
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(translator.feed(event))
    out.extend(translator.end())
    return out


def completed(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    usage = usage or {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5}
    return {"type": "response.completed", "response": {"status": "completed", "usage": usage}}


def message(item_id: str, *parts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "assistant", "content": list(parts), **extra}


def added(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "item": item}


def done(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.done", "item": item}


def call(
    item_id: str = "fc_1", call_id: str = "call_1", name: str = "get_weather", arguments: str = ""
) -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def test_text_lifecycle_with_signature_and_usage():
    events = run(
        [
            {"type": "response.created", "response": {"status": "in_progress"}},
            added(message("msg_1", status="in_progress")),
            {"type": "response.content_part.added", "item_id": "msg_1", "part": {"type": "output_text", "text": ""}},
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Ol"},
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "á!"},
            {"type": "response.output_text.done", "item_id": "msg_1", "text": "Olá!"},
            done(message("msg_1", {"type": "output_text", "text": "Olá!"}, phase="final_answer")),
            completed({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 30}, "output_tokens": 7}),
        ]
    )
    assert events == [
        {"type": "text_start"},
        {"type": "text_delta", "delta": "Ol"},
        {"type": "text_delta", "delta": "á!"},
        {"type": "text_end", "signature": '{"v":1,"id":"msg_1","phase":"final_answer"}'},
        {"type": "usage", "input": 70, "output": 7, "cacheRead": 30, "cacheWrite": 0},
        {"type": "finish", "reason": "stop"},
    ]


def test_summary_parts_are_joined_by_a_blank_line_and_the_item_is_the_signature():
    item = {
        "id": "rs_1",
        "type": "reasoning",
        "encrypted_content": "ENC",
        "summary": [{"type": "summary_text", "text": "First."}, {"type": "summary_text", "text": "Second."}],
    }
    ids = {"item_id": "rs_1"}
    events = run(
        [
            added({"id": "rs_1", "type": "reasoning", "summary": []}),
            {"type": "response.reasoning_summary_part.added", "summary_index": 0, **ids},
            {"type": "response.reasoning_summary_text.delta", "delta": "First.", "summary_index": 0, **ids},
            {"type": "response.reasoning_summary_part.done", "summary_index": 0, **ids},
            {"type": "response.reasoning_summary_part.added", "summary_index": 1, **ids},
            {"type": "response.reasoning_summary_text.delta", "delta": "Sec", "summary_index": 1, **ids},
            {"type": "response.reasoning_summary_text.delta", "delta": "ond.", "summary_index": 1, **ids},
            {"type": "response.reasoning_summary_part.done", "summary_index": 1, **ids},
            done(item),
            completed(),
        ]
    )
    deltas = [e["delta"] for e in events if e["type"] == "thinking_delta"]
    assert deltas == ["First.", "\n\n", "Sec", "ond."]  # between parts only, never trailing
    end = next(e for e in events if e["type"] == "thinking_end")
    assert json.loads(end["signature"]) == item


def test_text_missing_from_the_deltas_is_sent_from_the_finished_item():
    events = run(
        [
            added({"id": "rs_1", "type": "reasoning", "summary": []}),
            done({"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Only here."}]}),
            added(message("msg_1")),
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hel"},
            done(message("msg_1", {"type": "output_text", "text": "Hello"})),
            completed(),
        ]
    )
    assert [e for e in events if e["type"].endswith("_delta")] == [
        {"type": "thinking_delta", "delta": "Only here."},
        {"type": "text_delta", "delta": "Hel"},
        {"type": "text_delta", "delta": "lo"},
    ]


def test_fragmented_arguments_are_not_resent_at_done():
    events = run(
        [
            added(call()),
            {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"city":'},
            {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '"Paris"}'},
            {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": '{"city":"Paris"}'},
            done(call(arguments='{"city":"Paris"}')),
            completed(),
        ]
    )
    assert events[:4] == [
        {"type": "toolcall_start", "id": "call_1|fc_1", "toolName": "get_weather"},
        {"type": "toolcall_delta", "delta": '{"city":'},
        {"type": "toolcall_delta", "delta": '"Paris"}'},
        {"type": "toolcall_end"},
    ]
    assert events[-1] == {"type": "finish", "reason": "stop"}  # the event stream turns it into toolUse


@pytest.mark.parametrize("where", ["arguments.done", "item.done", "done-only"])
def test_arguments_sent_whole_become_exactly_one_delta(where):
    wire: list[dict[str, Any]] = [] if where == "done-only" else [added(call())]
    if where == "arguments.done":
        wire.append(
            {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": '{"city":"Paris"}'}
        )
    wire += [done(call(arguments='{"city":"Paris"}')), completed()]
    events = run(wire)
    assert [e for e in events if e["type"].startswith("toolcall")] == [
        {"type": "toolcall_start", "id": "call_1|fc_1", "toolName": "get_weather"},
        {"type": "toolcall_delta", "delta": '{"city":"Paris"}'},
        {"type": "toolcall_end"},
    ]


def test_refusal_streams_as_text_then_fails_with_usage_kept():
    translator = OpenAIResponsesTranslator()
    events = []
    for event in [
        added(message("msg_1")),
        {"type": "response.content_part.added", "item_id": "msg_1", "part": {"type": "refusal", "refusal": ""}},
        {"type": "response.refusal.delta", "item_id": "msg_1", "delta": "I can't help."},
        {"type": "response.refusal.done", "item_id": "msg_1", "refusal": "I can't help."},
        done(message("msg_1", {"type": "refusal", "refusal": "I can't help."})),
        completed(),
    ]:
        events.extend(translator.feed(event))
    assert [e["type"] for e in events] == ["text_start", "text_delta", "text_end", "usage"]
    with pytest.raises(ProviderError) as info:
        translator.end()
    assert "refus" in info.value.message and info.value.kind == "refusal" and not info.value.retryable


def test_a_frame_after_a_refusal_raises_at_once():
    translator = OpenAIResponsesTranslator()
    for event in [
        added(message("msg_1")),
        {"type": "response.refusal.delta", "item_id": "msg_1", "delta": "No."},
        done(message("msg_1", {"type": "refusal", "refusal": "No."})),
        completed(),
    ]:
        translator.feed(event)
    with pytest.raises(ProviderError, match="refus"):
        translator.feed({"type": "response.output_text.delta", "delta": "late"})


def test_incomplete_for_max_output_tokens_is_length():
    events = run(
        [
            added(message("msg_1")),
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Cut"},
            {
                "type": "response.incomplete",
                "response": {
                    "status": "incomplete",
                    "incomplete_details": {"reason": "max_output_tokens"},
                    "usage": {"input_tokens": 9, "output_tokens": 4},
                },
            },
        ]
    )
    # The unfinished message is closed (no signature: the vendor never finished the item).
    assert events == [
        {"type": "text_start"},
        {"type": "text_delta", "delta": "Cut"},
        {"type": "text_end"},
        {"type": "usage", "input": 9, "output": 4, "cacheRead": 0, "cacheWrite": 0},
        {"type": "finish", "reason": "length"},
    ]


def test_incomplete_for_the_content_filter_is_an_error():
    translator = OpenAIResponsesTranslator()
    events = translator.feed(
        {
            "type": "response.incomplete",
            "response": {
                "incomplete_details": {"reason": "content_filter"},
                "usage": {"input_tokens": 9, "output_tokens": 1},
            },
        }
    )
    assert events[-1]["type"] == "usage"
    with pytest.raises(ProviderError, match="content filter"):
        translator.end()


def test_response_failed_and_error_events_carry_code_and_message():
    with pytest.raises(ProviderError) as failed:
        run(
            [
                {
                    "type": "response.failed",
                    "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
                }
            ]
        )
    assert failed.value.message == "response failed: server_error: boom" and failed.value.retryable
    with pytest.raises(ProviderError) as error:
        run([{"type": "error", "code": "invalid_prompt", "message": "bad prompt", "param": None}])
    assert error.value.message == "sent an error event: invalid_prompt: bad prompt" and not error.value.retryable
    with pytest.raises(ProviderError, match="rate_limit_exceeded: slow down"):
        run([{"type": "error", "error": {"type": "rate_limit_exceeded", "message": "slow down"}}])


def test_a_stream_without_a_terminal_event_is_truncated():
    with pytest.raises(ProviderError) as info:
        run([added(message("msg_1")), {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "Hi"}])
    assert info.value.kind == "truncated" and "truncated" in info.value.message


def test_a_web_search_call_is_a_search_other_built_in_items_and_unknown_events_are_skipped():
    action = {"type": "search", "query": "weather", "sources": [{"type": "url", "url": "https://example.com"}]}
    events = run(
        [
            {"type": "response.future_event", "detail": {}},
            added({"id": "ws_1", "type": "web_search_call", "status": "in_progress"}),
            {"type": "response.web_search_call.searching", "item_id": "ws_1"},
            done({"id": "ws_1", "type": "web_search_call", "status": "completed", "action": action}),
            added({"id": "fs_1", "type": "file_search_call", "status": "in_progress"}),
            done({"id": "fs_1", "type": "file_search_call", "status": "completed"}),
            completed(),
        ]
    )
    assert events == [{"type": "websearch_start", "id": "ws_1"},
                      {"type": "websearch_end", "id": "ws_1", "query": "weather", "status": "completed",
                       "sources": [{"url": "https://example.com"}]},
                      {"type": "usage", "input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0},
                      {"type": "finish", "reason": "stop"}]  # fmt: skip


def test_a_delta_for_an_item_that_is_not_open_is_an_error():
    with pytest.raises(ProviderError, match="not open"):
        run(
            [
                added(message("msg_1")),
                {"type": "response.function_call_arguments.delta", "item_id": "fc_9", "delta": "{"},
            ]
        )


def test_sdk_event_objects_from_a_recorded_sample():
    """The adapter is fed SDK models, not dicts: run a recorded stream through the SDK's own event types."""
    raw = (SAMPLES / "openai-responses-reasoning-tool.sse").read_text()
    lines = [line[len("data: ") :] for line in raw.splitlines() if line.startswith("data: ")]
    wire = [construct_type(type_=ResponseStreamEvent, value=json.loads(line)) for line in lines]
    events = run(wire)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["thinking_start", "thinking_end"] and kinds[-2:] == ["usage", "finish"]
    item = json.loads(events[1]["signature"])
    assert item["type"] == "reasoning" and item["id"].startswith("rs_0c6e") and len(item["encrypted_content"]) == 2212
    start = next(e for e in events if e["type"] == "toolcall_start")
    assert start == {
        "type": "toolcall_start",
        "toolName": "weather",
        "id": "call_EDay3PkaZNpmYHDVyeY69wF9|fc_0c6e197b73d08e53016a3c1266504c8191975a5dba87645ec1",
    }
    args = "".join(e["delta"] for e in events if e["type"] == "toolcall_delta")
    assert json.loads(args) == {"location": "Florence, Italy"}
    assert events[-2] == {
        "type": "usage",
        "input": 60,
        "output": 225,
        "cacheRead": 0,
        "cacheWrite": 0,
        "reasoning": 192,
    }


# ---------------------------------------------------------------------------------------------- request helpers


def test_tool_call_ids_from_other_models_are_normalised():
    assert normalize_tool_call_id("toolu_01ABC") == "call_toolu_01ABC|fc_toolu_01ABC"
    assert normalize_tool_call_id("call_abc|fc_def") == "call_abc|fc_def"
    long = normalize_tool_call_id("call_" + "x" * 100 + "|item+/=" + "y" * 100)
    call, item = long.split("|")
    assert len(call) <= 64 and len(item) <= 64 and item.startswith("fc_item")
    assert all(c.isalnum() or c in "_-" for c in call + item)
    assert split_tool_call_id("call_1|fc_1") == ("call_1", "fc_1") and split_tool_call_id("toolu_1") == (
        "toolu_1",
        None,
    )


def test_reasoning_effort_levels():
    assert reasoning_effort("o4-mini", "xhigh") == "high"
    assert reasoning_effort("gpt-5.2", "xhigh") == "xhigh"
    assert reasoning_effort("gpt-5-mini", "minimal") == "minimal"


def test_temperature_is_sent_only_without_reasoning():
    model = ModelInfo("openai", "gpt-4o", Pricing())
    context = Context.model_validate({"messages": [{"role": "user", "content": "hi"}]})
    plain = build_request(model, context, StreamOptions(temperature=0.4))
    assert plain["temperature"] == 0.4 and "reasoning" not in plain and "include" not in plain
    assert plain["store"] is False and plain["stream"] is True and "prompt_cache_key" not in plain
    reasoning = build_request(model, context, StreamOptions(temperature=0.4, reasoning="low"))
    assert "temperature" not in reasoning and reasoning["reasoning"] == {"effort": "low", "summary": "auto"}
    assert reasoning["include"] == ["reasoning.encrypted_content"]


def test_a_built_in_item_finishing_inside_a_message_leaves_the_message_open():
    events = run(
        [
            added(message("msg_1")),
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "A"},
            done({"id": "ws_1", "type": "web_search_call", "status": "completed"}),
            {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "B"},
            done(message("msg_1", {"type": "output_text", "text": "AB"})),
            completed(),
        ]
    )
    assert [e["type"] for e in events] == ["text_start", "text_delta", "text_delta", "text_end", "usage", "finish"]


def test_max_output_tokens_is_clamped_to_the_catalog_limit():
    context = Context.model_validate({"messages": [{"role": "user", "content": "hi"}]})
    limited = ModelInfo("openai", "gpt-4o", Pricing(), max_tokens=16384)
    assert build_request(limited, context, StreamOptions(max_tokens=999_999))["max_output_tokens"] == 16384
    unknown = ModelInfo("openai", "new-model", Pricing())
    assert build_request(unknown, context, StreamOptions(max_tokens=999_999))["max_output_tokens"] == 999_999
    assert "max_output_tokens" not in build_request(unknown, context, StreamOptions())
