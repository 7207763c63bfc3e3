"""The published Gemini CLI (npm `@google/gemini-cli`, pinned in tests/agents), the `@google/genai` JavaScript
SDK and the AI SDK's `@ai-sdk/google` provider against the gateway's Gemini door, in front of the simulator, on every vendor: the CLI runs offline with
docs/agents/gemini-cli.md's settings and environment (`GOOGLE_GEMINI_BASE_URL`, `GEMINI_API_KEY`), a home of its
own, telemetry and updates off."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agent_clients import AGENTS, NODE, npm_folder
from tests.conftest import marker
from tests.agents.recipes import recipe, recipe_environment
from tests.agents.test_agent_ai_sdk import ai_sdk_turn

VENDORS = ["anthropic", "openai", "google"]
KEY = "sk-client-gemini-cli-0001"


@pytest.fixture(scope="module")
def agents() -> Path:
    return npm_folder(AGENTS, "@google/gemini-cli")


@pytest.fixture(scope="module")
def gw(gateway_factory):
    return gateway_factory(api_keys=f"gemini-cli:{KEY}")


def run_gemini(gateway_url: str, model: str, prompt: str, cwd: Path, *flags: str) -> tuple[int, dict[str, Any], str]:
    """`gemini -p <prompt> --output-format json` against the gateway, configured by docs/agents/gemini-cli.md:
    (exit status, its JSON answer, stderr)."""
    home = cwd / ".home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(recipe("gemini-cli.md", "settings.json"))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        **recipe_environment("gemini-cli.md", "environment", gateway_url),
        "GEMINI_API_KEY": KEY,  # this gateway's key
    }
    command = [
        str(AGENTS / "node_modules" / ".bin" / "gemini"),
        "-p",
        prompt,
        "-m",
        model,
        "--output-format",
        "json",
        *flags,
    ]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    out = "\n" + done.stdout + "\n" + done.stderr  # the JSON answer: stdout, or stderr after an error's report
    start = out.find("\n{\n")
    answer = json.loads(out[start : out.find("\n}\n", start) + 3]) if start >= 0 else {}
    return done.returncode, answer, done.stderr


@pytest.mark.parametrize("vendor", VENDORS)
def test_gemini_cli_answers_a_prompt(gw, agents, tmp_path, vendor):
    m = marker()
    status, answer, stderr = run_gemini(gw.url, f"{vendor}/text", f"say hi {m}", tmp_path)
    assert status == 0, stderr
    assert answer["response"].startswith("Hello from the simulator.")
    [entry] = [e for e in gw.sim.seen(m) if e["endpoint"] == "stream"]
    assert entry["vendor"] == vendor
    tokens = answer["stats"]["models"][f"{vendor}/text"]["tokens"]
    assert tokens["prompt"] > 0 and tokens["candidates"] > 0  # usageMetadata read as Gemini's


@pytest.mark.parametrize("vendor", VENDORS)
def test_gemini_cli_runs_one_tool_call_and_answers_with_its_result(gw, agents, tmp_path, vendor):
    m = marker()
    (tmp_path / "proof.txt").write_text(f"proof {m}-file\n")
    status, answer, stderr = run_gemini(
        gw.url, f"{vendor}/agent-shell", f"show proof {m}", tmp_path, "--approval-mode", "yolo"
    )
    assert status == 0, stderr
    assert f"{m}-file" in answer["response"]  # the shell ran `cat proof.txt`; the model got its output back
    assert answer["stats"]["tools"]["totalCalls"] == 1 and answer["stats"]["tools"]["totalSuccess"] == 1
    second = [e for e in gw.sim.seen(f"{m}-file") if e["vendor"] == vendor]
    assert second, "the tool's result never reached the vendor"


def test_gemini_cli_reports_a_vendor_error(gw, agents, tmp_path):
    status, answer, _ = run_gemini(gw.url, "anthropic/http-400", f"fail {marker()}", tmp_path)
    assert status != 0 and answer["error"]["code"] == 400


def _errors_by_type(answer: dict[str, Any], model: str) -> dict[str, int]:
    errors: dict[str, int] = answer["stats"]["models"][model]["api"]["errorsByType"]
    return errors


@pytest.mark.parametrize("vendor", ["google", "anthropic"])
def test_gemini_cli_reads_why_a_safety_stop_ended_the_stream(gw, agents, tmp_path, vendor):
    """A safety stop after some text: the error end carries `finishReason: SAFETY`, so the CLI ends the turn with
    the reason (and does not resend the same prompt as a stream that ended without a finish reason)."""
    model = f"{vendor}/safety"
    status, answer, stderr = run_gemini(gw.url, model, f"unsafe {marker()}", tmp_path)
    assert status == 0, stderr
    assert _errors_by_type(answer, model) == {}  # before: {"NO_FINISH_REASON": 1} and the prompt sent 4 times
    assert answer["stats"]["models"][model]["api"]["totalRequests"] == 1
    assert answer["response"] == "Partial "


def test_gemini_cli_reads_that_a_tool_call_was_cut(gw, agents, tmp_path):
    """An Anthropic upstream cut inside a tool call's arguments: the CLI reads `MALFORMED_FUNCTION_CALL`."""
    model = "anthropic/tool-max-tokens"
    status, answer, stderr = run_gemini(gw.url, model, f"cut {marker()}", tmp_path)
    assert _errors_by_type(answer, model) == {"MALFORMED_FUNCTION_CALL": 1}, stderr  # before: NO_FINISH_REASON


def test_the_error_end_names_the_cut_call_in_its_finish_message(gw):
    body = {"contents": [{"role": "user", "parts": [{"text": marker()}]}]}
    response = gw.http.post("/v1beta/models/anthropic/tool-max-tokens:streamGenerateContent?alt=sse", json=body,
                            headers={"x-goog-api-key": KEY})  # fmt: skip
    last = json.loads(response.text.strip().split("\r\n\r\n")[-1].removeprefix("data: "))
    (candidate,) = last["candidates"]
    assert candidate["finishReason"] == "MALFORMED_FUNCTION_CALL" and last["error"]["code"] == 502
    assert "(get_weather)" in candidate["finishMessage"] and "cut off" in candidate["finishMessage"]


JS_SDK = """
import { GoogleGenAI } from "@google/genai";
const [baseUrl, key, model, prompt] = process.argv.slice(2);
const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl } });
const tools = [{ functionDeclarations: [{ name: "get_time", parametersJsonSchema: { type: "object", properties: { timezone: { type: "string" } } } }] }];
const out = { text: "", calls: [], finish: null, usage: null };
for await (const chunk of await ai.models.generateContentStream({ model, contents: prompt, config: { tools } })) {
  out.text += chunk.text ?? "";
  out.calls.push(...(chunk.functionCalls ?? []));
  out.finish = chunk.candidates?.[0]?.finishReason ?? out.finish;
  out.usage = chunk.usageMetadata ?? out.usage;
}
try {
  await ai.models.generateContent({ model: model.replace(/[^/]*$/, "error-mid-stream"), contents: prompt });
} catch (error) { out.error = error.status ?? String(error); }
console.log(JSON.stringify(out));
"""


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_google_genai_javascript_sdk_streams_text_and_calls(gw, agents, vendor):
    script = AGENTS / "genai_turn.mjs"
    script.write_text(JS_SDK)
    try:
        done = subprocess.run([NODE, str(script), gw.url, KEY, f"{vendor}/tools", marker()], capture_output=True,
                              text=True, timeout=60, cwd=AGENTS)  # fmt: skip
    finally:
        script.unlink()
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["text"] == "Let me check." and out["finish"] == "STOP" and out["usage"]["totalTokenCount"] > 0
    assert [(c["name"], c["args"]) for c in out["calls"]] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_time", {"timezone": "Europe/Paris"}),
    ]
    assert out["error"] == 502


@pytest.mark.parametrize("vendor", VENDORS)
def test_the_ai_sdks_google_provider_runs_complete_tool_calls(gateway, agents, vendor):
    """`@ai-sdk/google` (`streamText` with two tools, tests/agents/ai_sdk_turn.mjs) against the Gemini door: the
    SDK runs both calls once complete, and a cut stream is an error it reports, never a finished turn."""
    # The provider puts `models/` before a model id only when it holds no `/`: a gateway name needs it written.
    got = ai_sdk_turn(gateway, "gemini", f"models/{vendor}/tools")
    assert got["errors"] == [] and got["finish"] == ["tool-calls"]
    assert [(c["name"], c["input"]) for c in got["executed"]] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_time", {"timezone": "Europe/Paris"}),
    ]
    cut = ai_sdk_turn(gateway, "gemini", f"models/{vendor}/truncated")
    assert cut["errors"] and "truncated" in cut["errors"][0].lower() and cut["finish"] != ["stop"]


def test_gemini_cli_keeps_anthropics_signed_thinking_in_a_tool_loop(gw, agents, tmp_path):
    """Anthropic thinks (signed) before its call; the CLI keeps the functionCall part and drops thought parts, so
    the thinking rides on the call's `thoughtSignature` and reaches Anthropic again as the signed block it wants
    before the call (the simulator refuses the second request without it, as Anthropic does)."""
    m = marker()
    (tmp_path / "proof.txt").write_text(f"proof {m}-file\n")
    model = "anthropic/agent-shell-thinking"
    status, answer, stderr = run_gemini(gw.url, model, f"show proof {m}", tmp_path, "--approval-mode", "yolo")
    assert status == 0, stderr
    assert f"{m}-file" in answer["response"]
    [second] = [e for e in gw.sim.seen(f"{m}-file") if e["vendor"] == "anthropic"]
    replayed = [msg for msg in second["body"]["messages"] if msg["role"] == "assistant"][-1]["content"]
    assert [b["type"] for b in replayed][:2] == ["thinking", "tool_use"]
    assert replayed[0]["thinking"] == "I will read the proof file."
