"""Cross-provider handoff: a conversation produced on one provider continues on each of the others.

Each source conversation is produced for real (thinking and tool-call turns streamed through the gateway
from the simulator), then replayed to every target. The assertions are on the exact upstream request the
simulator received: thinking kept with its signature only for the same model, plain text otherwise; tool
call ids valid for the target with the results following them; failed turns left out.
"""

from __future__ import annotations

import base64
import json
import re

import pytest

from app.contract.messages import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from app.providers.handoff import NO_RESULT, Target, prepare_history
from tests.conftest import marker, turn

PROVIDERS = ["anthropic", "openai", "google", "compat"]  # compat: api openai-completions (tests/catalog.json)
SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _camel(value):
    """The SDKs mix snake_case and camelCase in request bodies; compare in camelCase."""
    if isinstance(value, dict):
        return {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k): _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


@pytest.fixture(scope="module")
def conversations(gateway):
    """For each provider: [user, thinking turn, user, tool-call turn, results…, aborted turn]."""
    out = {}
    for provider in PROVIDERS:
        thinking = gateway.stream(turn(f"{provider}/thinking", "think first")).message
        tools = gateway.stream(turn(f"{provider}/tools", "now use tools")).message
        assert tools["stopReason"] == "toolUse", tools
        results = [
            {
                "role": "toolResult",
                "toolCallId": b["id"],
                "toolName": b["name"],
                "content": [{"type": "text", "text": f"result of {b['name']}"}],
                "isError": False,
            }
            for b in tools["content"]
            if b["type"] == "toolCall"
        ]
        aborted = {**thinking, "content": [{"type": "text", "text": "ABORTED-TURN-TEXT"}], "stopReason": "aborted"}
        out[provider] = [
            {"role": "user", "content": "think first"},
            thinking,
            {"role": "user", "content": "now use tools"},
            tools,
            *results,
            aborted,
        ]
    return out


def _anthropic_view(body):
    thinking, texts, calls, results = [], [], [], []
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block["type"] == "thinking":
                thinking.append((block["thinking"], block["signature"]))
            elif block["type"] == "text" and message["role"] == "assistant":
                texts.append(block["text"])
            elif block["type"] == "tool_use":
                calls.append(block["id"])
            elif block["type"] == "tool_result":
                results.append(block["tool_use_id"])
    return thinking, texts, calls, results


def _openai_view(body):
    thinking, texts, calls, results = [], [], [], []
    for item in body["input"]:
        kind = item.get("type")
        if kind == "reasoning":
            thinking.append(item)
        elif kind == "function_call":
            calls.append(item["call_id"])
        elif kind == "function_call_output":
            results.append(item["call_id"])
        elif item.get("role") == "assistant":
            content = item["content"]
            texts.append(content if isinstance(content, str) else "".join(p["text"] for p in content))
    return thinking, texts, calls, results


def _google_view(body):
    thinking, texts, calls, results = [], [], [], []
    for content in _camel(body)["contents"]:
        for part in content["parts"]:
            if part.get("thought"):
                thinking.append((part["text"], part.get("thoughtSignature")))
            elif "functionCall" in part:
                calls.append(part["functionCall"]["name"])
            elif "functionResponse" in part:
                results.append(part["functionResponse"]["name"])
            elif "text" in part and content["role"] == "model":
                texts.append(part["text"])
    return thinking, texts, calls, results


def _completions_view(body):
    thinking, texts, calls, results = [], [], [], []
    for message in body["messages"]:
        if message["role"] == "assistant":
            if message.get("reasoning_content"):
                thinking.append(message["reasoning_content"])
            content = message.get("content")
            if content:
                texts.extend([content] if isinstance(content, str) else [p["text"] for p in content])
            calls.extend(c["id"] for c in message.get("tool_calls") or [])
        elif message["role"] == "tool":
            results.append(message["tool_call_id"])
    return thinking, texts, calls, results


VIEWS = {"anthropic": _anthropic_view, "openai": _openai_view, "google": _google_view, "compat": _completions_view}


@pytest.mark.parametrize("target", PROVIDERS)
@pytest.mark.parametrize("source", PROVIDERS)
def test_conversation_moves_between_providers(gateway, conversations, source, target):
    history = conversations[source]
    source_thinking = history[1]["content"][0]
    assert source_thinking["type"] == "thinking" and source_thinking["thinkingSignature"]
    m = marker()
    body = {"model": f"{target}/thinking", "context": {"messages": [*history, {"role": "user", "content": m}]}}
    result = gateway.stream(body)
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")  # the follow-up streams normally

    sent = gateway.sim.seen(m)[0]["body"]
    assert "ABORTED-TURN-TEXT" not in json.dumps(sent)  # aborted turns are not replayed
    thinking, texts, calls, results = VIEWS[target](sent)
    if source == target:
        # Same provider, api and model: thinking goes back as thinking with its signature.
        assert len(thinking) == 1
        if target == "openai":
            assert thinking[0] == json.loads(source_thinking["thinkingSignature"])
        elif target == "compat":
            # Back in the field it came in (the signature names it).
            assert source_thinking["thinkingSignature"] == "reasoning_content"
            assert thinking == [source_thinking["thinking"]]
        elif target == "google":
            assert thinking[0][0] == source_thinking["thinking"]
            assert (
                base64.b64decode(thinking[0][1].replace("-", "+").replace("_", "/") + "==")
                == base64.b64decode(source_thinking["thinkingSignature"] + "==")
                or thinking[0][1] == source_thinking["thinkingSignature"]
            )
        else:
            assert thinking[0] == (source_thinking["thinking"], source_thinking["thinkingSignature"])
    else:
        # Another provider's thinking is plain text; its signature is never sent.
        assert thinking == []
        assert source_thinking["thinking"] in texts
        assert source_thinking["thinkingSignature"] not in json.dumps(sent)
    # Tool calls and their results, with ids the target accepts (Gemini matches by name).
    assert len(calls) == 2 and sorted(results) == sorted(calls)
    if target in ("anthropic", "openai", "compat"):
        assert all(SAFE_ID.match(c) for c in calls)


def test_prepare_history_rules():
    target = Target("anthropic", "anthropic-messages", "m1")
    other = dict(provider="openai", api="openai-responses", model="gpt-x")
    messages = [
        UserMessage(content="hi \ud800 there"),
        AssistantMessage(
            **other,
            stop_reason="toolUse",
            content=[
                ThinkingContent(thinking="", thinking_signature="{}"),
                ThinkingContent(thinking="secret", thinking_signature="x", redacted=True),
                ThinkingContent(thinking="plan", thinking_signature='{"type":"reasoning"}'),
                TextContent(text="ok", text_signature='{"v":1,"id":"msg_1"}'),
                ToolCall(id="call_1|fc_1", name="a", arguments={}),
                ToolCall(id="call_2|fc_2", name="b", arguments={}),
            ],
        ),
        ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="a", content=[TextContent(text="r1")]),
        AssistantMessage(**other, stop_reason="error", content=[ToolCall(id="call_9|fc_9", name="z", arguments={})]),
        ToolResultMessage(tool_call_id="call_9|fc_9", tool_name="z", content=[TextContent(text="orphaned")]),
        UserMessage(content="next"),
    ]
    out = prepare_history(messages, target, lambda i: i.replace("|", "_"))
    assert out[0].content == "hi  there"  # lone surrogate removed
    assistant = out[1]
    assert [type(b).__name__ for b in assistant.content] == ["TextContent", "TextContent", "ToolCall", "ToolCall"]
    assert assistant.content[0].text == "plan" and assistant.content[1].text_signature is None
    assert [b.id for b in assistant.content[2:]] == ["call_1_fc_1", "call_2_fc_2"]
    assert out[2].tool_call_id == "call_1_fc_1"
    # The unanswered call gets a synthetic error result before the conversation moves on.
    assert out[3].tool_call_id == "call_2_fc_2" and out[3].is_error and out[3].content[0].text == NO_RESULT
    # The errored turn and the result of its call are gone.
    assert out[4] == UserMessage(content="next") and len(out) == 5


def test_signed_content_is_not_touched_by_surrogate_cleaning():
    target = Target("anthropic", "anthropic-messages", "m1")
    signed = ThinkingContent(thinking="keep \udc00 as signed", thinking_signature="sig")
    message = AssistantMessage(
        provider="anthropic", api="anthropic-messages", model="m1", stop_reason="stop", content=[signed]
    )
    out = prepare_history([UserMessage(content="q"), message], target)
    assert out[1].content[0].thinking == "keep \udc00 as signed"
