"""The published Codex CLI (npm `@openai/codex`, pinned in tests/agents/package-lock.json) runs `codex exec`
against the gateway's Responses door, in front of the simulator speaking each vendor's wire format: a text
answer, a tool call (its `exec_command` shell tool) it runs and answers in the next request with the reasoning
state sent back to the same vendor, a vendor error it reports, the WebSocket upgrade it tries first falling back
to HTTP at once, and remote compaction.

The model ids are the simulator's scenarios (`<provider>/<scenario>`); the CLI does not know them, so it uses
its fallback model metadata and sends its whole current request surface (see tests/agents/codex_capture.py
and tests/codex/ for what it sends).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from simulator.scenarios import AGENT_EXEC_SIGNATURE
from tests.agent_clients import AGENTS, CodexRun, npm_folder, run_codex
from tests.conftest import marker

VENDORS = ["anthropic", "openai", "google"]


@pytest.fixture(scope="module")
def codex_cli() -> Path:
    return npm_folder(AGENTS, "@openai/codex")


def codex(gateway: Any, model: str, prompt: str, cwd: Path, *flags: str, **options: Any) -> CodexRun:
    return run_codex(gateway.url, model, prompt, cwd, *flags, **options)


@pytest.mark.parametrize("vendor", VENDORS)
def test_codex_gets_a_text_answer(vendor: str, gateway: Any, codex_cli: Path, tmp_path: Path) -> None:
    prompt = marker()
    run = codex(gateway, f"{vendor}/text", prompt, tmp_path)
    assert run.returncode == 0 and run.failure is None, run.stderr
    assert run.answer is not None and run.answer.startswith("Hello from the simulator. You said: "), run.lines
    seen = gateway.sim.seen(prompt)
    assert seen and all(s["vendor"] == vendor for s in seen), "the CLI's request never reached the upstream"


@pytest.mark.parametrize("vendor", VENDORS)
def test_codex_runs_its_shell_tool_and_answers_with_the_output(
    vendor: str, gateway: Any, codex_cli: Path, tmp_path: Path
) -> None:
    proof = marker()  # only the CLI running `cat proof.txt` here can bring this back to the model
    (tmp_path / "proof.txt").write_text(proof + "\n")
    run = codex(gateway, f"{vendor}/agent-exec", "Show me the proof file.", tmp_path)
    assert run.returncode == 0 and run.failure is None, (run.lines, run.stderr)
    commands = run.items("command_execution")
    assert [(c["exit_code"], c["aggregated_output"]) for c in commands] == [(0, proof + "\n")]
    assert "cat proof.txt" in commands[0]["command"]
    assert run.answer is not None and run.answer.startswith("The tool said: ") and proof in run.answer
    assert [r["text"] for r in run.items("reasoning")] == ["I will read the proof file."]
    second = gateway.sim.seen(proof)
    assert len(second) == 1 and second[0]["vendor"] == vendor, "the tool output went upstream once, to the vendor"
    # The CLI sent the reasoning item back (store: false, its encrypted_content): the vendor got its own state.
    on_the_wire = {"google": base64.b64encode(AGENT_EXEC_SIGNATURE.encode()).decode()}.get(vendor, AGENT_EXEC_SIGNATURE)
    assert on_the_wire in json.dumps(second[0]["body"])


@pytest.mark.parametrize("vendor", VENDORS)
def test_codex_reports_the_vendors_error(vendor: str, gateway: Any, codex_cli: Path, tmp_path: Path) -> None:
    run = codex(gateway, f"{vendor}/http-400", marker(), tmp_path)
    assert run.returncode == 1, run.lines
    # The vendor's own words reach the CLI's report: its status, its message.
    assert run.failure is not None and "simulated bad request" in run.failure, run.lines
    assert f"{vendor}/http-400 returned HTTP 400" in run.failure


def test_codex_falls_back_to_http_after_one_websocket_attempt(gateway: Any, codex_cli: Path, tmp_path: Path) -> None:
    """A provider that allows WebSockets (as the built-in OpenAI one does) makes the CLI open `GET
    /v1/responses` as a WebSocket first. The gateway's 426 makes it use HTTP at once: one attempt, no notice.
    With its default retries it would try a 403/404/405 seven times, with back-off, then say it fell back."""
    prompt = marker()
    run = codex(gateway, "openai/text", prompt, tmp_path, websockets=True, retries=True)
    assert run.returncode == 0 and run.failure is None, run.stderr
    assert run.answer is not None and run.answer.startswith("Hello from the simulator. You said: ")
    assert run.stderr.count("failed to connect to Responses WebSocket") == 1, run.stderr
    assert not [e for e in run.items("error") if "WebSocket" in e["message"]], run.lines


@pytest.mark.parametrize("vendor", VENDORS)
def test_codex_compacts_the_conversation_with_the_turns_own_model(
    vendor: str, gateway: Any, codex_cli: Path, tmp_path: Path
) -> None:
    """A provider named "OpenAI" (as the built-in one, with `openai_base_url` pointing at the gateway) gets the
    CLI's remote compaction: past its auto-compact limit, the next turn starts with a request whose input ends
    with a `compaction_trigger`. The vendor's model writes the summary; the CLI gets one `compaction` item,
    which it sends back in the turn's request, where the vendor reads the summary."""
    first, second = marker(), marker()
    settings = {"model_auto_compact_token_limit": 1000}  # the simulator reports 5000 input tokens a turn
    model = f"{vendor}/text;input=5000"
    run = codex(gateway, model, first, tmp_path, name="OpenAI", settings=settings)
    assert run.returncode == 0 and run.failure is None, run.stderr
    run = codex(gateway, model, second, tmp_path, "resume", "--last", name="OpenAI", settings=settings)
    assert run.returncode == 0 and run.failure is None, (run.lines, run.stderr)
    assert run.answer == f"Hello from the simulator. You said: {second}"
    upstream = [json.dumps(seen["body"]) for seen in gateway.sim.seen(first)]
    assert all(seen["vendor"] == vendor for seen in gateway.sim.seen(first))
    # The first turn, the summarizing turn (the model asked for the summary), the turn after it.
    assert len(upstream) == 3, upstream
    assert "Context compaction: write a summary" in upstream[1] and second not in upstream[1]
    summary = "The conversation before this point was compacted. Its summary:\\n\\nHello from the simulator."
    assert summary in upstream[2] and second in upstream[2]


@pytest.fixture(scope="module")
def searching_gateway(gateway_factory: Any, tmp_path_factory: Any) -> Any:
    """A gateway whose catalog lets the vendor's own web search serve `<vendor>/web-search` on every vendor."""
    catalog = json.loads((Path(__file__).parents[1] / "catalog.json").read_text())
    catalog["models"] += [
        {"provider": vendor, "id": "web-search", "hostedTools": {"webSearch": True}} for vendor in VENDORS
    ]
    path = tmp_path_factory.mktemp("codex-search") / "catalog.json"
    path.write_text(json.dumps(catalog))
    return gateway_factory(catalog=str(path))


def _vendor_search(seen: dict[str, Any]) -> list[Any]:
    body = seen["body"]
    return [
        t
        for t in body.get("tools", [])
        if t.get("type") in ("web_search", "web_search_20250305") or "googleSearch" in t
    ]


def test_codex_web_search_runs_at_openai_cached_only(searching_gateway: Any, codex_cli: Path, tmp_path: Path) -> None:
    """Codex's default search (`external_web_access: false`, cached results only) is OpenAI's alone: OpenAI runs it."""
    prompt = marker()
    run = codex(searching_gateway, "openai/web-search", prompt, tmp_path)
    assert run.returncode == 0 and run.failure is None, (run.lines, run.stderr)
    assert run.answer is not None and run.answer.endswith("It is sunny today."), run.lines
    (seen,) = searching_gateway.sim.seen(prompt)
    assert _vendor_search(seen) == [{"type": "web_search", "external_web_access": False}]


@pytest.mark.parametrize("vendor", ["anthropic", "google"])
def test_codex_cached_search_is_dropped_elsewhere_and_a_live_one_runs(
    vendor: str, searching_gateway: Any, codex_cli: Path, tmp_path: Path
) -> None:
    prompt = marker()
    run = codex(searching_gateway, f"{vendor}/web-search", prompt, tmp_path)
    assert run.returncode == 0 and run.failure is None, (run.lines, run.stderr)
    (seen,) = searching_gateway.sim.seen(prompt)
    assert _vendor_search(seen) == []  # cached-only cannot be honoured there: sent without it, never refused
    live = marker()
    run = codex(searching_gateway, f"{vendor}/web-search", live, tmp_path, settings={"web_search": "live"})
    assert run.returncode == 0 and run.failure is None, (run.lines, run.stderr)
    (seen,) = searching_gateway.sim.seen(live)
    expected = {"anthropic": [{"type": "web_search_20250305", "name": "web_search"}], "google": [{"googleSearch": {}}]}
    assert _vendor_search(seen) == expected[vendor]
