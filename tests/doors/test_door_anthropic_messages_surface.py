"""The Messages door's agent surface (CONTRACT §8a) decoded, and what each adapter's request builder makes of it:
system messages inside `messages`, `cache_control` breakpoints, deferred tools and tool references,
`context_management`'s `clear_thinking`, `clear_at`, and the top-level fields Anthropic gets as they came."""

from __future__ import annotations

from typing import Any

import pytest

from app.doors.errors import BadRequest
from app.contract.catalog_entries import ModelInfo, Pricing
from app.contract.messages import AssistantMessage, Context, SystemMessage, ThinkingContent
from app.contract.request import StreamOptions, StreamRequest
from app.doors.anthropic_messages.request import decode
from app.providers.anthropic.request import build_request as anthropic_request, request_headers
from app.providers.google.request import build_request as google_request
from app.providers.openai_responses.request import build_request as openai_request
from app.providers.openai_completions.compat import Compat
from app.providers.openai_completions.request import build_request as completions_request

CLAUDE = ModelInfo("anthropic", "claude-sonnet-4-5", Pricing(), max_tokens=64000, reasoning=True)
GPT = ModelInfo("openai", "gpt-5-mini", Pricing(), max_tokens=128000, reasoning=True)
GEMINI = ModelInfo("google", "gemini-2.5-flash", Pricing(), max_tokens=65536, reasoning=True)
CHAT = ModelInfo("groq", "openai/gpt-oss-120b", Pricing(), max_tokens=65536, reasoning=True)
EPHEMERAL = {"type": "ephemeral", "ttl": "1h"}
BASH = {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}}
SEARCH = {"name": "ToolSearch", "description": "Load deferred tools", "input_schema": {"type": "object"}}
LATER = {
    "name": "NotebookEdit",
    "description": "Edit a notebook",
    "input_schema": {"type": "object"},
    "defer_loading": True,
}


def body(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": "anthropic/claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    base.update(fields)
    return base


def every_vendor(request: StreamRequest) -> dict[str, dict[str, Any]]:
    context, options = request.context, request.options
    return {
        "anthropic": anthropic_request(CLAUDE, context, options),
        "openai": openai_request(GPT, context, options),
        "google": google_request(GEMINI, context, options)["config"]
        | {"contents": google_request(GEMINI, context, options)["contents"]},
        "chat": completions_request(CHAT, context, options, Compat()),
    }


AGENT_TURN = [
    {"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]},
    {"role": "system", "content": "Environment: linux, cwd /repo.", "output_config": {"effort": "high"}},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py", "cache_control": EPHEMERAL}],
    },
]


def test_a_system_message_mid_conversation_reaches_each_vendor_as_its_own_instruction_at_its_position():
    request = decode(body(messages=AGENT_TURN, system="You are a coding agent.")).unified
    sent = every_vendor(request)
    anthropic_messages = sent["anthropic"]["messages"]
    assert [m["role"] for m in anthropic_messages] == ["user", "system", "assistant", "user"]
    assert anthropic_messages[1] == {
        "role": "system",
        "content": [{"type": "text", "text": "Environment: linux, cwd /repo."}],
        "output_config": {"effort": "high"},
    }
    items = sent["openai"]["input"]
    assert items[1] == {"role": "developer", "content": "Environment: linux, cwd /repo."}
    assert sent["openai"]["instructions"] == "You are a coding agent."
    assert [p["text"] for p in sent["google"]["system_instruction"]["parts"]] == [
        "You are a coding agent.",
        "Environment: linux, cwd /repo.",
    ]
    assert [c["role"] for c in sent["google"]["contents"]] == ["user", "model", "user"]
    chat_roles = [m["role"] for m in sent["chat"]["messages"]]
    instruction = chat_roles[0]
    assert chat_roles == [instruction, "user", instruction, "assistant", "tool"]


def test_the_unified_door_still_refuses_a_system_role_message():
    from app.doors.validation import validate

    with pytest.raises(BadRequest) as caught:
        validate(
            {
                "model": "anthropic/text",
                "context": {"messages": [{"role": "system", "content": [{"type": "text", "text": "x"}]}]},
            },
            StreamRequest,
        )
    assert caught.value.status == 422 and caught.value.param == "context.messages.0"
    assert "context.systemPrompt" in caught.value.message


def test_door_only_fields_sent_to_the_unified_door_are_dropped():
    request = StreamRequest.model_validate(
        {
            "model": "anthropic/text",
            "context": {
                "systemBlocks": [{"type": "text", "text": "x"}],
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cacheControl": EPHEMERAL}]}],
                "tools": [{"name": "t", "deferred": True, "anthropic": {"name": "evil"}}],
            },
            "options": {"passthrough": {"anthropic-messages": {"thinking": {"type": "adaptive"}}}},
        }
    )
    assert request.context.system_blocks is None and request.context.messages[0].content[0].cache_control is None
    assert request.context.tools[0].deferred is None and request.context.tools[0].anthropic is None
    assert request.options.passthrough is None


def test_the_clients_cache_breakpoints_replace_the_adapters_own():
    system = [
        {"type": "text", "text": "billing"},
        {"type": "text", "text": "You are an agent.", "cache_control": EPHEMERAL},
    ]
    sent = anthropic_request(CLAUDE, *_parts(decode(body(messages=AGENT_TURN, system=system)).unified))
    assert sent["system"] == system
    assert sent["messages"][3]["content"][0]["cache_control"] == EPHEMERAL
    assert "cache_control" not in sent["messages"][0]["content"][0]


def test_without_client_breakpoints_the_adapter_places_its_two():
    sent = anthropic_request(CLAUDE, *_parts(decode(body(system="Be brief.")).unified))
    assert sent["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_a_top_level_cache_control_is_the_clients_breakpoint():
    sent = anthropic_request(
        CLAUDE, *_parts(decode(body(system="Be brief.", cache_control={"type": "ephemeral"})).unified)
    )
    assert sent["extra_body"]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in sent["system"][0] and "cache_control" not in sent["messages"][-1]["content"][-1]


def _parts(request: StreamRequest) -> tuple[Context, StreamOptions]:
    return request.context, request.options


def test_anthropic_gets_thinking_output_config_context_management_and_betas_as_sent():
    fields = dict(
        thinking={"type": "adaptive", "display": "omitted"},
        output_config={"effort": "high"},
        context_management={
            "edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000}}]
        },
        service_tier="auto",
    )
    request = decode(body(**fields), {"anthropic-beta": "context-management-2025-06-27, effort-2025-11-24"}).unified
    sent = anthropic_request(CLAUDE, request.context, request.options)
    assert sent["thinking"] == fields["thinking"]
    extra = sent["extra_body"]
    assert (
        extra["output_config"] == fields["output_config"]
        and extra["context_management"] == fields["context_management"]
    )
    assert extra["service_tier"] == "auto"
    assert request_headers(request.options) == {"anthropic-beta": "context-management-2025-06-27,effort-2025-11-24"}
    assert request.options.reasoning == "high"
    assert openai_request(GPT, request.context, request.options)["reasoning"]["effort"] == "high"


def test_a_deferred_tool_reaches_anthropic_and_only_once_loaded_the_others():
    tools = [BASH, SEARCH, LATER]
    before = decode(body(tools=tools)).unified
    sent = every_vendor(before)
    assert sent["anthropic"]["tools"][2] == LATER
    assert [t["name"] for t in sent["openai"]["tools"]] == ["Bash", "ToolSearch"]
    assert [t["function"]["name"] for t in sent["chat"]["tools"]] == ["Bash", "ToolSearch"]
    assert [d["name"] for d in sent["google"]["tools"][0]["function_declarations"]] == ["Bash", "ToolSearch"]
    loaded = [
        {"role": "user", "content": "Edit the notebook."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_s", "name": "ToolSearch", "input": {"query": "notebook"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_s",
                    "content": [{"type": "tool_reference", "tool_name": "NotebookEdit"}],
                }
            ],
        },
    ]
    after = every_vendor(decode(body(tools=tools, messages=loaded)).unified)
    assert after["anthropic"]["messages"][2]["content"][0]["content"] == [
        {"type": "tool_reference", "tool_name": "NotebookEdit"}
    ]
    assert [t["name"] for t in after["openai"]["tools"]] == ["Bash", "ToolSearch", "NotebookEdit"]
    assert after["openai"]["input"][-1]["output"] == "Tool loaded: NotebookEdit"


def _thinking_turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"q{n}"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"thought {n}", "signature": ""},
                {"type": "text", "text": f"a{n}"},
            ],
        },
    ]


@pytest.mark.parametrize(
    "keep, kept",
    [
        (None, ["thought 2"]),
        ({"type": "thinking_turns", "value": 2}, ["thought 1", "thought 2"]),
        ("all", ["thought 0", "thought 1", "thought 2"]),
        ({"type": "thinking_turns", "value": 0}, []),
    ],
)
def test_clear_thinking_leaves_out_the_thinking_the_client_asked_to_clear(keep, kept):
    messages = _thinking_turn(0) + _thinking_turn(1) + _thinking_turn(2) + [{"role": "user", "content": "next"}]
    edit: dict[str, Any] = {"type": "clear_thinking_20251015"}
    if keep is not None:
        edit["keep"] = keep
    request = decode(body(messages=messages, context_management={"edits": [edit]})).unified
    thoughts = [
        b.thinking
        for m in request.context.messages
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, ThinkingContent)
    ]
    assert thoughts == kept


def test_a_system_message_cleared_at_the_next_user_message_is_not_sent_to_other_vendors_once_one_follows():
    messages = [
        {"role": "user", "content": "one"},
        {"role": "system", "content": "Only for this turn.", "clear_at": "next_user_message"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "two"},
    ]
    request = decode(body(messages=messages)).unified
    (system,) = [m for m in request.context.messages if isinstance(m, SystemMessage)]
    assert system.expired
    sent = every_vendor(request)
    assert sent["anthropic"]["messages"][1] == {
        "role": "system",
        "content": [{"type": "text", "text": "Only for this turn."}],
        "clear_at": "next_user_message",
    }
    assert "Only for this turn." not in str(sent["openai"]) + str(sent["google"]) + str(sent["chat"])


@pytest.mark.parametrize(
    "fields, param",
    [
        ({"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": []}]}, "messages.1.content"),
        (
            {"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "s", "clear_at": "later"}]},
            "messages.1.clear_at",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "s", "output_config": 3}]},
            "messages.1.output_config",
        ),
        ({"thinking": {"type": "adaptive", "display": "loud"}}, "thinking.display"),
        ({"tools": [{**BASH, "defer_loading": "yes"}]}, "tools.0.defer_loading"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": "ephemeral"}]}]},
            "messages.0.content.0.cache_control",
        ),
        (
            {
                "context_management": {
                    "edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": -1}}]
                }
            },
            "context_management.edits.0.keep.value",
        ),
        ({"compaction": {"type": "x"}}, "compaction"),
    ],
)
def test_bad_agent_fields_are_a_400_naming_the_field(fields, param):
    with pytest.raises(BadRequest) as caught:
        decode(body(**fields))
    assert caught.value.status == 400 and caught.value.param == param
