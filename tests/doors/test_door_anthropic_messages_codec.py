"""The Anthropic Messages door's pure halves: request decoding, signature wrapping, event encoding."""

from __future__ import annotations

import json

import pytest

from app.contract.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.contract.request import ToolChoiceTool
from app.doors.errors import BadRequest
from app.contract.failures import ErrorKind
from app.doors.anthropic_messages.errors import refusal_body
from app.doors.anthropic_messages.events import PING, MessagesEncoder, message_object
from app.doors.anthropic_messages.request import decode
from app.contract.failures import Failure
from app.core.settled import SettledTurn
from app.doors.signatures import Origin, unwrap, wrap
from tests.conformance import parse_sse

ANTHROPIC = Origin("anthropic", "anthropic-messages", "claude-sonnet-4-5")
OPENAI = Origin("openai", "openai-responses", "gpt-5-mini")


def body(**fields):
    base = {"model": "anthropic/claude-sonnet-4-5", "max_tokens": 256, "messages": [{"role": "user", "content": "Hi"}]}
    base.update(fields)
    return base


# ----------------------------------------------------------------------------- signatures


def test_signature_round_trip_keeps_the_vendor_signature_verbatim():
    for vendor in ["EqQBCkYIBxgCKkA+/=", "", '{"type":"reasoning","id":"rs_1","encrypted_content":"x.y"}']:
        wrapped = wrap(OPENAI, vendor)
        assert wrapped.startswith("gw1.")
        unwrapped = unwrap(wrapped)
        assert unwrapped is not None and unwrapped.origin == OPENAI and unwrapped.signature == vendor


@pytest.mark.parametrize(
    "value", ["", "EqQBCkYIBxgCKkA", "gw1.", "gw1.nodot", "gw1.!!!.x", "gw1.e30.sig", "gw1.WyJhIl0.sig"]
)
def test_signatures_the_door_did_not_wrap_have_no_origin(value):
    assert unwrap(value) is None


# ----------------------------------------------------------------------------- request


def test_full_request_maps_every_field():
    request = decode(
        body(
            system=[
                {"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Use tools."},
            ],
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Weather?"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Let me look.", "signature": wrap(ANTHROPIC, "sig-1")},
                        {"type": "redacted_thinking", "data": wrap(ANTHROPIC, "blob")},
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                        {"type": "text", "text": "And tomorrow?"},
                    ],
                },
            ],
            tools=[
                {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {}}}
            ],
            tool_choice={"type": "tool", "name": "get_weather"},
            thinking={"type": "enabled", "budget_tokens": 10000},
            temperature=0.5,
            top_p=0.9,
            stop_sequences=["END"],
            metadata={"user_id": "u1"},
            stream=True,
        )
    )
    assert request.stream is True
    unified = request.unified
    assert unified.model == "anthropic/claude-sonnet-4-5"
    context = unified.context
    assert context.system_prompt == "Be terse.\n\nUse tools."
    user, assistant, result, follow_up = context.messages
    assert isinstance(user, UserMessage) and isinstance(user.content[1], ImageContent)
    assert isinstance(assistant, AssistantMessage)
    assert (assistant.provider, assistant.api, assistant.model) == (
        "anthropic",
        "anthropic-messages",
        "claude-sonnet-4-5",
    )
    assert assistant.content == [
        ThinkingContent(thinking="Let me look.", thinking_signature="sig-1"),
        ThinkingContent(thinking="", thinking_signature="blob", redacted=True),
        TextContent(text="Checking."),
        ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
    ]
    assert assistant.stop_reason == "toolUse"
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_call_id, result.tool_name, result.content) == (
        "toolu_1",
        "get_weather",
        [TextContent(text="18C")],
    )
    assert isinstance(follow_up, UserMessage) and follow_up.content == [TextContent(text="And tomorrow?")]
    options = unified.options
    assert options.max_tokens == 256 and options.temperature == 0.5 and options.top_p == 0.9 and options.stop == ["END"]
    assert options.reasoning == "medium"
    assert options.tool_choice == ToolChoiceTool(type="tool", name="get_weather")
    assert options.metadata == {"userId": "u1"}
    assert context.tools[0].parameters == {"type": "object", "properties": {}}


def test_foreign_or_unwrapped_signatures_are_not_replayed_as_signatures():
    request = decode(
        body(
            messages=[
                {"role": "user", "content": "Hi"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "mine", "signature": wrap(OPENAI, "enc")},
                        {"type": "thinking", "thinking": "theirs", "signature": wrap(ANTHROPIC, "sig")},
                        {"type": "thinking", "thinking": "direct", "signature": "EqQBCkYIBxgC"},
                        {"type": "redacted_thinking", "data": "not-wrapped"},
                        {"type": "text", "text": "Hello"},
                    ],
                },
                {"role": "user", "content": "Again"},
            ]
        )
    )
    assistant = request.unified.context.messages[1]
    assert (assistant.provider, assistant.model) == ("openai", "gpt-5-mini")
    assert assistant.content == [
        ThinkingContent(thinking="mine", thinking_signature="enc"),
        ThinkingContent(thinking="theirs"),
        ThinkingContent(thinking="direct"),
        TextContent(text="Hello"),
    ]


def test_an_unsigned_conversation_has_no_origin():
    request = decode(
        body(
            messages=[
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Bye"},
            ]
        )
    )
    assistant = request.unified.context.messages[1]
    assert assistant.provider is None and assistant.content == [TextContent(text="Hello")]


@pytest.mark.parametrize(
    "thinking, effort, level",
    [
        ({"type": "enabled", "budget_tokens": 1024}, None, "minimal"),
        ({"type": "enabled", "budget_tokens": 2048}, None, "low"),
        ({"type": "enabled", "budget_tokens": 8191}, None, "low"),
        ({"type": "enabled", "budget_tokens": 8192}, None, "medium"),
        ({"type": "enabled", "budget_tokens": 16384}, None, "high"),
        ({"type": "enabled", "budget_tokens": 64000}, None, "xhigh"),
        ({"type": "disabled"}, None, None),
        ({"type": "disabled"}, "high", None),
        ({"type": "adaptive"}, None, "medium"),
        ({"type": "adaptive"}, "max", "xhigh"),
        (None, "low", "low"),
        (None, None, None),
    ],
)
def test_thinking_maps_to_a_reasoning_level(thinking, effort, level):
    fields = {}
    if thinking is not None:
        fields["thinking"] = thinking
    if effort is not None:
        fields["output_config"] = {"effort": effort}
    assert decode(body(**fields)).unified.options.reasoning == level


@pytest.mark.parametrize(
    "choice, expected", [({"type": "auto"}, "auto"), ({"type": "any"}, "required"), ({"type": "none"}, "none")]
)
def test_tool_choice(choice, expected):
    tools = [{"name": "t", "input_schema": {"type": "object"}}]
    assert decode(body(tools=tools, tool_choice=choice)).unified.options.tool_choice == expected


def test_leading_system_messages_join_the_system_prompt_and_unknown_fields_are_ignored():
    request = decode(
        body(
            system="One.",
            messages=[{"role": "system", "content": "Two."}, {"role": "user", "content": "Hi"}],
            service_tier="auto",
            context_management={"edits": [{"type": "clear_tool_uses_20250919"}]},
            cache_control={"type": "ephemeral"},
            something_new={"x": 1},
        )
    )
    assert request.unified.context.system_prompt == "One.\n\nTwo."
    assert request.stream is False


USER = {"role": "user", "content": "Hi"}
CALL = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]}
BAD = [
    ({"model": 5}, "model"),
    ({"model": "has a space"}, "model"),
    ({"max_tokens": "many"}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"messages": "Hi"}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "robot", "content": "Hi"}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
    ({"messages": [{"role": "user", "content": ""}]}, "messages.0.content"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]}, "messages.0.content.0.text"),
    ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, "messages.0.content.0.type"),
    (
        {
            "messages": [
                {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}
            ]
        },
        "messages.0.content.0.source",
    ),
    (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "base64", "media_type": "image/tiff", "data": "x"}}
                    ],
                }
            ]
        },
        "messages.0.content.0.source.media_type",
    ),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}, "messages.0.content.0.type"),
    (
        {
            "messages": [
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}
            ]
        },
        "messages.0.content.0.tool_use_id",
    ),
    (
        {"messages": [USER, CALL, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2"}]}]},
        "messages.2.content.0.tool_use_id",
    ),
    (
        {
            "messages": [
                USER,
                CALL,
                USER,
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
            ]
        },
        "messages.3.content.0.tool_use_id",
    ),
    (
        {
            "messages": [
                USER,
                CALL,
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "document"}]}],
                },
            ]
        },
        "messages.2.content.0.content.0.type",
    ),
    (
        {
            "messages": [
                USER,
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": "x"}]},
                USER,
            ]
        },
        "messages.1.content.0.input",
    ),
    (
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}],
                },
                USER,
            ]
        },
        "messages.1.content.0.type",
    ),
    ({"messages": [USER, CALL, USER, CALL, USER]}, "messages.3.content.0.id"),
    ({"messages": [USER, {"role": "assistant", "content": "The answer is ("}]}, "messages.1.role"),
    ({"system": 5}, "system"),
    ({"system": [{"type": "image"}]}, "system.0.type"),
    ({"tools": {"name": "t"}}, "tools"),
    ({"tools": [{"name": "t"}]}, "tools.0.input_schema"),
    ({"tools": [{"name": "t", "input_schema": {}}, {"name": "t", "input_schema": {}}]}, "tools.1.name"),
    ({"tool_choice": {"type": "any"}}, "tool_choice"),
    ({"tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
    ({"tools": [{"name": "t", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "u"}}, "tool_choice.name"),
    (
        {
            "tools": [{"name": "t", "input_schema": {}}],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": "yes"},
        },
        "tool_choice.disable_parallel_tool_use",
    ),
    ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens"),
    ({"thinking": {"type": "enabled", "budget_tokens": 100}}, "thinking.budget_tokens"),
    ({"thinking": {"type": "sometimes"}}, "thinking.type"),
    ({"output_config": {"effort": "extreme"}}, "output_config.effort"),
    ({"output_config": {"format": {"type": "xml", "schema": {}}}}, "output_config.format.type"),
    ({"temperature": 3}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_k": 5}, "top_k"),
    ({"top_p": 1.5}, "top_p"),
    ({"stop_sequences": "END"}, "stop_sequences"),
    ({"stop_sequences": [""]}, "stop_sequences.0"),
    ({"stop_sequences": [str(i) for i in range(17)]}, "stop_sequences"),
    ({"metadata": {"user_id": 5}}, "metadata.user_id"),
    ({"stream": "yes"}, "stream"),
    ({"mcp_servers": [{"url": "https://x"}]}, "mcp_servers"),
]


@pytest.mark.parametrize("fields, param", BAD, ids=[p for _, p in BAD])
def test_bad_requests_name_the_field(fields, param):
    with pytest.raises(BadRequest) as caught:
        decode(body(**fields))
    assert caught.value.param == param
    assert caught.value.message.startswith(param)
    assert caught.value.status == (404 if fields.get("model") == "has a space" else 400)
    assert refusal_body(caught.value)["error"]["type"] == (
        "not_found_error" if caught.value.status == 404 else "invalid_request_error"
    )


# ----------------------------------------------------------------------------- events


def encode_all(events):
    encoder = MessagesEncoder("req_1")
    frames = parse_sse(b"".join(encoder.encode(e) for e in events).decode())
    for f in frames:
        assert json.loads(f.data)["type"] == f.event
    return [json.loads(f.data) for f in frames]


USAGE = {"input": 10, "output": 7, "cacheRead": 100, "cacheWrite": 5, "totalTokens": 122, "cost": {}}
START = {
    "type": "start",
    "requestId": "req_1",
    "provider": "anthropic",
    "api": "anthropic-messages",
    "model": "claude-sonnet-4-5",
}


def test_events_encode_as_anthropic_stream():
    events = [
        START,
        {"type": "thinking_start", "contentIndex": 0},
        {"type": "thinking_delta", "contentIndex": 0, "delta": "Hmm"},
        {"type": "thinking_end", "contentIndex": 0, "content": "Hmm", "contentSignature": "sig-1"},
        {"type": "thinking_start", "contentIndex": 1},
        {"type": "thinking_end", "contentIndex": 1, "content": "", "contentSignature": "blob", "redacted": True},
        {"type": "text_start", "contentIndex": 2},
        {"type": "text_delta", "contentIndex": 2, "delta": "Hi"},
        {"type": "text_end", "contentIndex": 2, "content": "Hi"},
        {"type": "toolcall_start", "contentIndex": 3, "id": "toolu_1", "toolName": "t"},
        {"type": "toolcall_delta", "contentIndex": 3, "delta": '{"a":'},
        {"type": "toolcall_delta", "contentIndex": 3, "delta": "1}"},
        {"type": "toolcall_end", "contentIndex": 3, "toolCall": {"id": "toolu_1", "name": "t", "arguments": {"a": 1}}},
        {"type": "done", "reason": "toolUse", "usage": USAGE, "message": {}},
    ]
    out = encode_all(events)
    assert [o["type"] for o in out] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    message = out[0]["message"]
    assert message["id"] == "msg_req_1" and message["model"] == "anthropic/claude-sonnet-4-5"
    assert message["usage"] == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    assert out[1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    signature = out[3]["delta"]["signature"]
    assert out[3]["delta"]["type"] == "signature_delta" and unwrap(signature).signature == "sig-1"
    assert unwrap(signature).origin == ANTHROPIC
    assert (
        out[5]["content_block"]["type"] == "redacted_thinking"
        and unwrap(out[5]["content_block"]["data"]).signature == "blob"
    )
    assert out[11]["delta"] == {"type": "input_json_delta", "partial_json": '{"a":'}
    assert [o["index"] for o in out[1:14]] == [0, 0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert out[14]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert out[14]["usage"] == {
        "input_tokens": 10,
        "output_tokens": 7,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
    }


@pytest.mark.parametrize("reason, stop", [("stop", "end_turn"), ("length", "max_tokens"), ("toolUse", "tool_use")])
def test_stop_reasons(reason, stop):
    out = encode_all([START, {"type": "done", "reason": reason, "usage": USAGE, "message": {}}])
    assert out[1]["delta"]["stop_reason"] == stop


def test_error_after_start_is_an_error_event():
    events = [
        START,
        {"type": "text_start", "contentIndex": 0},
        {"type": "error", "reason": "error", "errorMessage": "anthropic/x overloaded", "usage": USAGE, "message": {}},
    ]
    out = encode_all(events)
    assert out[-1] == {
        "type": "error",
        "error": {"type": "api_error", "message": "anthropic/x overloaded"},
        "request_id": "req_1",
    }


class View:
    """A TurnView stand-in: the usage so far, and the settled result."""

    def __init__(self, usage, result=None):
        self._usage, self._result = usage, result

    def usage(self):
        return self._usage

    def result(self):
        return self._result


def test_message_start_carries_the_usage_so_far_and_errors_are_typed_by_the_failure():
    failed = SettledTurn(
        "req_3", "error", {"errorMessage": "anthropic/x idle timeout fired after 60s"}, 504, Failure.TIMEOUT
    )
    encoder = MessagesEncoder("req_3", None, View({"input": 12, "cacheRead": 300, "cacheWrite": 4}, failed))
    events = [
        START,
        {
            "type": "error",
            "reason": "error",
            "errorMessage": "anthropic/x idle timeout fired after 60s",
            "usage": USAGE,
            "message": {},
        },
    ]
    out = [json.loads(f.data) for f in parse_sse(b"".join(encoder.encode(e) for e in events).decode())]
    assert out[0]["message"]["usage"] == {
        "input_tokens": 12,
        "output_tokens": 0,
        "cache_read_input_tokens": 300,
        "cache_creation_input_tokens": 4,
    }
    assert out[1] == {
        "type": "error",
        "error": {"type": "timeout_error", "message": "anthropic/x idle timeout fired after 60s"},
        "request_id": "req_3",
    }


def test_ping_frame():
    frame = parse_sse(PING.decode())[0]
    assert frame.event == "ping" and json.loads(frame.data) == {"type": "ping"}


def test_message_object():
    message = {
        "role": "assistant",
        "provider": "openai",
        "api": "openai-responses",
        "model": "gpt-5-mini",
        "content": [
            {"type": "thinking", "thinking": "Hmm", "thinkingSignature": "enc"},
            {"type": "thinking", "thinking": "Plain"},
            {"type": "text", "text": "Hi", "textSignature": "x"},
            {"type": "toolCall", "id": "call_1", "name": "t", "arguments": {"a": 1}},
        ],
        "stopReason": "toolUse",
        "usage": USAGE,
    }
    out = message_object(message, "req_9")
    assert out["id"] == "msg_req_9" and out["model"] == "openai/gpt-5-mini" and out["stop_reason"] == "tool_use"
    assert [b["type"] for b in out["content"]] == ["thinking", "thinking", "text", "tool_use"]
    assert unwrap(out["content"][0]["signature"]).signature == "enc"
    assert unwrap(out["content"][1]["signature"]).signature == ""  # the origin travels even without a vendor signature
    assert out["content"][3] == {"type": "tool_use", "id": "call_1", "name": "t", "input": {"a": 1}}
    assert out["usage"]["cache_read_input_tokens"] == 100


@pytest.mark.parametrize(
    "failure, status, expected",
    [
        (Failure.RATE_LIMITED, 429, (429, "rate_limit_error")),
        (Failure.OVERLOADED, 503, (529, "overloaded_error")),
        (Failure.INVALID_REQUEST, 400, (400, "invalid_request_error")),
        (Failure.INVALID_REQUEST, 404, (404, "not_found_error")),
        (Failure.TIMEOUT, 504, (504, "timeout_error")),
        (Failure.SHUTTING_DOWN, 503, (503, "overloaded_error")),
        (Failure.UPSTREAM, 502, (502, "api_error")),
    ],
)
def test_failed_turns_answer_with_a_status_and_type(failure, status, expected, kind=None):
    result = SettledTurn("req_2", "error", {"errorMessage": "openai/x went wrong"}, status, failure, kind=kind)
    code, error = MessagesEncoder("req_2").complete(result)
    assert (code, error["error"]["type"]) == expected
    assert error == {
        "type": "error",
        "error": {"type": expected[1], "message": "openai/x went wrong"},
        "request_id": "req_2",
    }
    assert MessagesEncoder("req_2").refuse(result) == (code, error)


def test_a_refusal_is_a_400_that_no_sdk_retries():
    test_failed_turns_answer_with_a_status_and_type(
        Failure.REFUSED, 400, (400, "invalid_request_error"), ErrorKind.REFUSAL
    )
    test_failed_turns_answer_with_a_status_and_type(Failure.UPSTREAM, 502, (502, "api_error"), ErrorKind.TRUNCATED)


def test_refusals_name_the_field_as_this_wire_does():
    error = BadRequest(400, "invalid_request", "OpenAI's Responses API has no stop sequences", param="options.stop")
    assert refusal_body(error) == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "stop_sequences: OpenAI's Responses API has no stop sequences",
        },
    }
    assert (
        refusal_body(BadRequest(413, "payload_too_large", "request body exceeds 10 bytes"))["error"]["type"]
        == "request_too_large"
    )
    assert (
        refusal_body(BadRequest(401, "authentication_error", "invalid API key"))["error"]["type"]
        == "authentication_error"
    )
