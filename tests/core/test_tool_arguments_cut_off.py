"""A vendor reaching max_tokens inside a tool call's arguments (issue 11, defect 4).

CONTRACT invariant 5: the turn ends with `error` naming the provider, model, tool call id and tool name, and
saying the arguments were cut off by the token limit; no `toolcall_end`, no invented arguments. The simulator's
`tool-max-tokens` scenario ends the message (length) with the call still open, in each vendor's wire format
(Anthropic: no content_block_stop; Responses: no arguments.done / output_item.done before
response.incomplete; Chat Completions: fragments, then finish_reason length).
"""

from __future__ import annotations

import pytest

from tests.conftest import marker, turn


@pytest.mark.parametrize("provider", ["anthropic", "openai", "compat"])
def test_arguments_cut_off_by_the_token_limit_end_the_turn_with_an_error_that_says_so(gateway, provider):
    result = gateway.stream(turn(f"{provider}/tool-max-tokens", marker()))
    assert result.terminal["type"] == "error" and result.terminal["reason"] == "error"
    message = result.terminal["errorMessage"]
    assert message.startswith(f"{provider}/tool-max-tokens tool call "), message
    assert "toolu_sim_weather" in message and "(get_weather)" in message
    assert message.endswith("arguments were cut off by the token limit (stop reason length)"), message
    assert "toolcall_end" not in result.types()
    assert [b["type"] for b in result.message["content"]] == ["text"]  # the text so far is kept, the call is not
    job = gateway.job(result.headers["x-request-id"])
    assert job.attempts[-1].outcome == "error"


def test_google_sends_calls_whole_so_a_cut_call_never_arrives(gateway):
    result = gateway.stream(turn("google/tool-max-tokens", marker()))
    assert result.terminal["type"] == "done" and result.terminal["reason"] == "length"
    assert "toolcall_start" not in result.types()


@pytest.mark.parametrize("provider", ["anthropic", "openai", "compat"])
@pytest.mark.parametrize("fault", ["reset", "error_event"])
def test_an_error_inside_a_calls_arguments_names_the_call(gateway, provider, fault):
    """Not only the token limit: a connection lost or a vendor's in-band error inside a call's arguments ends
    the turn with an error naming that call (id and tool name), so no client runs it."""
    result = gateway.stream(turn(f"{provider}/tools;fault={fault};at=toolargs", marker()))
    assert result.terminal["type"] == "error" and result.terminal["reason"] == "error"
    message = result.terminal["errorMessage"]
    assert message.startswith(f"{provider}/tools;fault={fault};at=toolargs "), message
    call_id = next(e["id"] for e in result.events if e["type"] == "toolcall_start")  # OpenAI's: `<call>|<item>`
    assert message.endswith(f"; tool call {call_id} (get_weather) was cut off inside its arguments"), message
    assert "toolcall_end" not in result.types()
