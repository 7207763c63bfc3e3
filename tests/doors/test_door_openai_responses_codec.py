"""The Responses door's decoder and encoder without a server: input items to unified messages (assistant items
grouped, reasoning state kept only with its origin), and normalized events to Responses events."""

from __future__ import annotations

import json

import pytest

from app.contract.messages import (
    AssistantMessage,
    SystemMessage,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.doors.signatures import Origin
from app.doors.openai_responses.events import ResponsesEncoder
from app.doors.openai_responses.signatures import unwrap_reasoning, wrap_reasoning
from app.doors.openai_responses.request import decode

ANTHROPIC = Origin("anthropic", "anthropic-messages", "claude-sonnet-4-5")


def messages(*items):
    return decode({"model": "anthropic/x", "input": list(items)}).unified.context.messages


def test_assistant_side_items_form_one_assistant_message_with_the_reasoning_origin():
    state = wrap_reasoning(ANTHROPIC, "sig-1")
    decoded = messages(
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thought"}], "encrypted_content": state},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "42"},
    )
    assert [type(m) for m in decoded] == [UserMessage, AssistantMessage, ToolResultMessage]
    assistant = decoded[1]
    assert (assistant.provider, assistant.api, assistant.model) == (
        "anthropic",
        "anthropic-messages",
        "claude-sonnet-4-5",
    )
    assert assistant.content[0] == ThinkingContent(thinking="thought", thinking_signature="sig-1")
    assert assistant.content[2] == ToolCall(id="call_1", name="f", arguments={"a": 1})
    assert assistant.stop_reason == "toolUse" and decoded[2].tool_name == "f"


def test_an_encrypted_content_the_gateway_did_not_wrap_is_foreign_and_loses_its_state():
    decoded = messages(
        {"role": "user", "content": "hi"},
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "thought"}],
            "encrypted_content": "gAAAA-openai",
        },
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "more"},
    )
    assistant = decoded[1]
    assert assistant.provider is None and assistant.content[0] == ThinkingContent(thinking="thought")


def test_redacted_reasoning_round_trips_as_redacted_thinking_and_is_dropped_without_its_origin():
    redacted = wrap_reasoning(ANTHROPIC, "blob", redacted=True)
    assert redacted.startswith("gw1r.") and unwrap_reasoning(redacted).redacted
    kept = messages({"role": "user", "content": "hi"}, {"type": "reasoning", "summary": [], "encrypted_content": redacted},
                    {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"})  # fmt: skip
    assert kept[1].content[0] == ThinkingContent(thinking="", thinking_signature="blob", redacted=True)
    other = wrap_reasoning(Origin("openai", "openai-responses", "gpt-5"), "{}")
    mixed = messages({"role": "user", "content": "hi"}, {"type": "reasoning", "summary": [], "encrypted_content": other},
                     {"type": "reasoning", "summary": [], "encrypted_content": redacted},
                     {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"})  # fmt: skip
    assert [b.type for b in mixed[1].content] == ["thinking", "text"]  # the redacted one came from another origin


def test_system_messages_before_the_conversation_join_instructions_and_later_ones_stay_in_place():
    request = decode({"model": "anthropic/x", "instructions": "Be brief.", "input": [
        {"role": "system", "content": "Rule one."}, {"role": "user", "content": "hi"},
        {"role": "developer", "content": [{"type": "input_text", "text": "Rule two."}]}, {"role": "user", "content": "more"},
    ]})  # fmt: skip
    context = request.unified.context
    assert context.system_prompt == "Be brief.\n\nRule one."
    assert isinstance(context.messages[1], SystemMessage) and context.messages[1].text == "Rule two."


@pytest.mark.parametrize(
    ("effort", "level"), [("none", None), ("minimal", "minimal"), ("high", "high"), ("xhigh", "xhigh")]
)
def test_reasoning_effort_maps_to_the_unified_level(effort, level):
    assert decode({"model": "m", "input": "hi", "reasoning": {"effort": effort}}).unified.options.reasoning == level


class _Turn:
    def usage(self):
        return {}

    def result(self):
        raise AssertionError("not needed")


def frames(data: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")]


def test_the_encoder_numbers_every_event_and_closes_each_item_before_the_next():
    request = decode({"model": "anthropic/x", "input": "hi", "include": ["reasoning.encrypted_content"]})
    encoder = ResponsesEncoder("req_1", request, _Turn())
    events = [
        {"type": "start", "provider": "anthropic", "api": "anthropic-messages", "model": "claude"},
        {"type": "thinking_start", "contentIndex": 0},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "hm"},
        {"type": "thinking_end", "contentIndex": 0, "content": "hm", "contentSignature": "sig"},
        {"type": "toolcall_start", "contentIndex": 1, "id": "toolu_1", "toolName": "f"},
        {"type": "toolcall_delta", "contentIndex": 1, "delta": '{"a":'},
        {"type": "toolcall_delta", "contentIndex": 1, "delta": " 1}"},
        {"type": "toolcall_end", "contentIndex": 1, "toolCall": {"id": "toolu_1", "name": "f", "arguments": {"a": 1}}},
    ]
    out = [f for event in events for f in frames(encoder.encode(event))]
    message = {"role": "assistant", "provider": "anthropic", "api": "anthropic-messages", "model": "claude", "stopReason": "toolUse",
               "content": [{"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"},
                           {"type": "toolCall", "id": "toolu_1", "name": "f", "arguments": {"a": 1}}]}  # fmt: skip
    out += frames(
        encoder.encode({"type": "done", "reason": "toolUse", "usage": {"input": 3, "output": 4}, "message": message})
    )
    assert [f["sequence_number"] for f in out] == list(range(len(out)))
    assert [f["type"] for f in out] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed",
    ]  # fmt: skip
    final = out[-1]["response"]
    assert unwrap_reasoning(final["output"][0]["encrypted_content"]).signature == "sig"
    assert final["output"][1]["arguments"] == '{"a": 1}' and final["output"][1]["call_id"] == "toolu_1"
    assert (
        final["usage"]["input_tokens"] == 3
        and final["usage"]["output_tokens"] == 4
        and final["model"] == "anthropic/claude"
    )
