"""Emoji cut between vendor events inside their UTF-16 surrogate pair (issue 11, defect 1).

The simulator's `split-surrogates` scenario sends, in each vendor's wire format, a thinking block, a text
block and a tool call whose deltas end with a high surrogate escape (`\\ud83d`) and continue with the low one
(`\\ude00`) in the next event, plus halves that never pair. Through the real SDKs and adapters the gateway
must send only valid text, join the cut pairs, drop the lone halves, and settle `done`.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import marker, turn
from tests.providers.test_conformance_suite import PROVIDERS

THINKING = "Hmm \U0001f914 let me see"
TEXT = "Smile \U0001f600 lone  and low end "
ARGUMENTS = {"face": "\U0001f600"}


def _contents(message: dict) -> dict:
    out = {}
    for block in message["content"]:
        out[block["type"]] = block["arguments"] if block["type"] == "toolCall" else block[block["type"]]
    return out


@pytest.mark.parametrize("throttle_ms", [0, 50])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_split_surrogate_pairs_stream_as_valid_text(gateway, provider, throttle_ms):
    result = gateway.stream(turn(f"{provider}/split-surrogates", marker(), options={"throttleMs": throttle_ms}))
    assert result.status == 200
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
    assert result.terminal["reason"] == "toolUse"
    # Every frame is valid UTF-8 JSON without surrogate escapes (the client's parser would choke on them).
    assert "\\ud8" not in result.text and "\\ude" not in result.text
    contents = _contents(result.message)
    if provider != "compat":  # chat completions carry no thinking
        assert contents.get("thinking") == THINKING
    assert contents["text"] == TEXT
    assert contents["toolCall"] == ARGUMENTS
    deltas = "".join(e["delta"] for e in result.events if e["type"] == "text_delta")
    assert deltas == TEXT
    job = gateway.job(result.headers["x-request-id"])
    assert job.turn.outcome == "done" and not job.client_disconnected


@pytest.mark.parametrize("provider", PROVIDERS)
def test_split_surrogate_pairs_complete_as_one_message(gateway, provider):
    response = gateway.http.post("/v1/complete", json=turn(f"{provider}/split-surrogates", marker()))
    assert response.status_code == 200, response.text
    message = json.loads(response.content)
    assert message["stopReason"] == "toolUse"
    assert _contents(message)["text"] == TEXT


def test_split_surrogate_turn_is_recorded_done(ledger_gateway):
    gw = ledger_gateway()
    result = gw.stream(turn("anthropic/split-surrogates", marker()))
    request_id = result.headers["x-request-id"]
    gw.job(request_id)
    record = gw.http.get(f"/v1/requests/{request_id}").json()
    assert record["outcome"] == "done" and record["clientDisconnected"] is False
    assert _contents(record["message"])["text"] == TEXT
