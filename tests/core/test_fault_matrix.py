"""Every upstream fault we can produce, at every point it applies, for every provider (CONTRACT §3 invariants).

The simulator breaks a `tools` scenario (text, two tool calls) with the fault named in the model id
(`simulator/faults.py`: `tools;fault=<fault>;at=<point>`). Each case goes over real loopback HTTP through
the gateway and asserts:

- the stream passes the conformance checker (one terminal event, last; ordered blocks; deltas = text/args);
- the right ending: `done` exactly where the fault cannot break the turn (an unknown event, frames after
  the terminal one, a slow drip, a huge delta, any fault after the terminal frame), and then the content
  equals the fault-free turn's (nothing lost or invented); `error` everywhere else, with an `errorMessage`
  that names the provider and model and says what happened;
- the job is complete: settled once, every attempt ended with an outcome, the last one the turn's, one
  attempt once content was sent; the record (`GET /v1/requests/{id}`) agrees;
- nothing is left behind: the gateway loop's task count returns to its baseline, the turn left the
  in-flight set, and the simulator saw every upstream request of the case finish.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from app.providers.anthropic.events import AnthropicTranslator
from simulator.faults import APPLICABLE, POINTS, applicable
from tests.conftest import marker, turn
from tests.harness import ScriptedProvider, run_script

PROVIDERS = ("anthropic", "openai", "google", "compat")  # compat: api openai-completions
SCENARIO = "tools"
FILLER_MB = 1
# Faults that cannot break a turn wherever they land; any fault after the terminal frame cannot either.
HARMLESS = {"unknown_event", "dup_terminal", "after_terminal", "drip", "huge_delta"}
HTTP_VARIANTS = ("status=503", "status=429;retry_after=1", "status=400")
DRIP = "chunk=16;interval_ms=2"  # each frame arrives well inside the idle timeout, a few bytes at a time
# The google-genai SDK decodes SSE lines as the SSE standard says (invalid UTF-8 → U+FFFD); the anthropic and
# openai SDKs decode strictly and raise. Both are accepted; with U+FFFD nothing may be lost besides the bad bytes.
REPLACES_INVALID_UTF8 = {"google"}


def _cases() -> list[tuple[str, str, str, str]]:
    cases = []
    for provider in PROVIDERS:
        for fault, points in APPLICABLE.items():
            for point in POINTS:
                if point not in points or not applicable(provider, fault, point):
                    continue
                extras = {"http": HTTP_VARIANTS, "huge_delta": (f"mb={FILLER_MB}",), "drip": (DRIP,)}.get(fault, ("",))
                for extra in extras:
                    cases.append((provider, fault, point, extra))
    return cases


CASES = _cases()


def _model(fault: str, point: str, extra: str) -> str:
    return f"{SCENARIO};fault={fault};at={point}" + (f";{extra}" if extra else "")


async def _count_tasks() -> int:
    return len([t for t in asyncio.all_tasks() if not t.done()])


@pytest.fixture(scope="module")
def rig(gateway_factory):
    gw = gateway_factory(
        first_event_timeout=0.3,
        idle_timeout=0.3,
        keepalive_interval=0.1,
        late_frame_grace=0.3,
        retries=1,
        retry_backoff_ms=5,
        retry_after_cap_ms=20,
    )
    baselines = {}
    for provider in PROVIDERS:
        result = gw.stream(turn(f"{provider}/{SCENARIO}", marker()))
        assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
        baselines[provider] = result.message["content"]
    gw.tasks_baseline = gw.server.call(_count_tasks())
    gw.baselines = baselines
    return gw


def _comparable(content: list[dict[str, Any]]) -> list[Any]:
    """Content without the ids the gateway or vendor makes up per request."""
    return [(b["type"], b.get("text"), b.get("thinking"), b.get("name"), b.get("arguments")) for b in content]


def _expected_outcome(provider: str, fault: str, point: str) -> str:
    if point == "after_terminal" or fault in HARMLESS:
        return "done"
    if fault == "non_utf8" and provider in REPLACES_INVALID_UTF8:
        return "done"
    return "error"


def _message_mentions(fault: str, point: str, extra: str) -> tuple[str, ...]:
    """What the errorMessage must say besides the provider and model (any one of them)."""
    if fault == "hang":
        return ("first-event timeout",) if point == "before_headers" else ("idle timeout", "first-event timeout")
    if fault == "http":
        return (f"HTTP {extra.split(';')[0].split('=')[1]}",)
    if fault == "error_event":
        return ("simulated in-band error",)
    if fault == "close" or (fault == "reset" and point == "before_headers"):
        return ("truncated", "connection lost", "without a finishReason", "without a finish_reason")
    if fault == "reset":
        return ("connection lost", "truncated", "malformed")
    if fault in ("bad_json", "bad_framing", "non_utf8"):
        return ("malformed", "could not read", "truncated")
    return ()


@pytest.mark.parametrize("provider,fault,point,extra", CASES, ids=["-".join(filter(None, c)) for c in CASES])
def test_fault(rig, provider, fault, point, extra):
    m = marker()
    model_id = _model(fault, point, extra)
    result = rig.stream(turn(f"{provider}/{model_id}", m))  # the conformance checker runs inside
    assert result.status == 200, result.text
    terminal = result.terminal
    request_id = result.headers["x-request-id"]
    expected = _expected_outcome(provider, fault, point)

    if expected == "done":
        assert terminal["type"] == "done", terminal.get("errorMessage")
        content = result.message["content"]
        baseline = rig.baselines[provider]
        if fault == "huge_delta":
            grown = sum(len(str(b.get("text") or b.get("arguments"))) for b in content)
            before = sum(len(str(b.get("text") or b.get("arguments"))) for b in baseline)
            assert grown == before + FILLER_MB * 1024 * 1024
        elif fault == "non_utf8":
            texts = "".join(b.get("text") or "" for b in content)
            assert texts == "".join(b.get("text") or "" for b in baseline).replace("check.", "c\ufffd\ufffdheck.")
        else:
            assert _comparable(content) == _comparable(baseline)
    else:
        assert terminal["type"] == "error" and terminal["reason"] == "error"
        message = terminal["errorMessage"]
        assert message.startswith(f"{provider}/{model_id} "), message
        assert "internal error" not in message
        wanted = _message_mentions(fault, point, extra)
        assert not wanted or any(w in message for w in wanted), message
        if "retry_after=1" in extra:
            assert message.endswith(" retry-after-ms=1000"), message

    job = rig.job(request_id)
    turn_ = job.turn
    assert turn_.settled and turn_.terminal is terminal or turn_.terminal["type"] == terminal["type"]
    assert turn_.outcome == expected
    assert job.attempts, "no attempt recorded"
    for attempt in job.attempts:
        assert attempt.ended_at is not None and attempt.outcome in ("done", "error"), attempt
        assert attempt.provider == provider and attempt.model == model_id
    assert job.attempts[-1].outcome == expected, job.attempts
    assert all(a.outcome == "error" for a in job.attempts[:-1])
    if turn_.started:
        assert len(job.attempts) == 1, "content was sent, yet the turn was attempted again"

    record = rig.http.get(f"/v1/requests/{request_id}")
    if record.status_code != 404:  # the ledger is wired
        assert record.status_code == 200, record.text
        record = record.json()
        assert record["outcome"] == expected and record["settledAt"] is not None
        assert len(record["attempts"]) == len(job.attempts)
        assert record.get("errorMessage") == terminal.get("errorMessage")

    seen = rig.sim.http.get("/_sim/wait", params={"contains": m, "until": "finished", "all": "1", "timeout": 10})
    assert seen.status_code == 200, f"an upstream request never finished: {seen.text[:500]}"
    assert len(seen.json()) == len(job.attempts)

    deadline = time.monotonic() + 10
    while (
        job in rig.state.jobs or rig.server.call(_count_tasks()) > rig.tasks_baseline
    ) and time.monotonic() < deadline:
        time.sleep(0.02)  # bounded wait for the turn's task and uvicorn's connection task to wind down
    assert job not in rig.state.jobs
    assert rig.server.call(_count_tasks()) <= rig.tasks_baseline


def test_matrix_size():
    """The number of cases exercised (reported): faults × points × providers plus HTTP variants."""
    combos = {(f, p) for _, f, p, _ in CASES}
    print(
        f"\nfault matrix: {len(CASES)} cases = {len(combos)} fault×point combinations over {len(PROVIDERS)} providers"
    )
    assert {c[0] for c in CASES} == set(PROVIDERS)  # every api is in the matrix
    assert len(CASES) >= 100


def test_a_transport_failure_after_the_terminal_event_leaves_the_attempt_done():
    """Regression (fault matrix `reset`/`bad_json`/`error_event` at `after_terminal`): the turn settled `done`,
    then the upstream failed while the gateway counted late frames; the attempt was recorded as `error`."""
    wire = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    provider = ScriptedProvider("anthropic", "anthropic-messages", AnthropicTranslator, wire, ConnectionError("reset"))
    events, job = run_script(provider)
    assert events[-1]["type"] == "done"
    assert [a.outcome for a in job.attempts] == ["done"]
    assert job.attempts[0].error_message is None
