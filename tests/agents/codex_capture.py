"""Record what the Codex CLI sends to a custom Responses provider: a small stand-in for OpenAI's Responses API on
loopback.

Run: `python tests/agents/codex_capture.py OUT_DIR [--websocket] [--compact] [CODEX EXEC ARGS…]` — it starts a
server on 127.0.0.1, runs the pinned CLI (tests/agents/node_modules, `codex exec --json`) against it with a
temporary CODEX_HOME whose config.toml names the server as a `model_providers` entry (`wire_api = "responses"`,
an env key, nothing that phones home: see `tests.agent_clients.codex_config`), and writes each request it received
as `OUT_DIR/codex-<n>.json` (method, path, headers with the key redacted, JSON body) and the CLI's JSON lines as
`OUT_DIR/codex-stdout.jsonl`.

The stand-in answers the first streamed turn with an `exec_command` call (`echo captured`), so the CLI runs it
and sends a second turn carrying its output; every later turn gets a short text answer.
`--websocket`: the provider allows WebSockets; the stand-in refuses the upgrade on `GET /v1/responses` with 426.
`--compact`: every turn reports a large usage, so the CLI compacts the conversation before it continues
(auto-compact limit 1000 tokens): with a provider of its own name that is a summarizing turn of the model's
(a request like any other), with `--named-openai` (the provider named "OpenAI", as the built-in one is) it is
remote compaction v2: a request whose `input` ends with a `compaction_trigger` item, which the stand-in answers
with one `compaction` item that the CLI sends back in the next request's `input`.
Every outbound connection the CLI tries elsewhere goes through this server as its HTTP(S) proxy and is
recorded too (a `CONNECT host:443`), so a capture shows whether anything phones home.
Re-run this after a version bump of the CLI; tests/codex/README.md says what the last run found.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.agent_clients import CODEX, codex_environment

API_KEY = "sk-codex-capture-0000"
REDACTED = "<redacted api key>"
SMALL_USAGE = {
    "input_tokens": 10,
    "output_tokens": 2,
    "total_tokens": 12,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens_details": {"reasoning_tokens": 0},
}
LARGE_USAGE = {**SMALL_USAGE, "input_tokens": 200_000, "total_tokens": 200_002}


def sse(data: dict) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def turn(response_id: str, item: dict, usage: dict) -> list[bytes]:
    """A whole streamed response with one output item."""
    base = {"id": response_id, "object": "response", "model": "capture", "output": []}
    return [
        sse(e)
        for e in (
            {"type": "response.created", "response": {**base, "status": "in_progress"}},
            {"type": "response.output_item.added", "output_index": 0, "item": {**item, "status": "in_progress"}},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {
                "type": "response.completed",
                "response": {**base, "status": "completed", "output": [item], "usage": usage},
            },
        )
    ]


def text_item(text: str) -> dict:
    return {
        "type": "message",
        "id": "msg_capture",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def compaction_item() -> dict:
    return {"type": "compaction", "id": "cmp_capture", "encrypted_content": "capture-compaction-summary"}


def call_item() -> dict:
    return {
        "type": "function_call",
        "id": "fc_capture",
        "call_id": "call_capture_01",
        "name": "exec_command",
        "arguments": json.dumps({"cmd": "echo captured"}),
        "status": "completed",
    }


class Recorder:
    def __init__(self, out: Path, compact: bool) -> None:
        self.out = out
        self.compact = compact
        self.lock = threading.Lock()
        self.count = 0
        self.streamed_turns = 0

    def record(self, entry: dict) -> None:
        with self.lock:
            self.count += 1
            n = self.count
        (self.out / f"codex-{n}.json").write_text(json.dumps(entry, indent=2, ensure_ascii=False) + "\n")


def handler_for(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _capture(self) -> dict | None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.headers.get("content-encoding") == "gzip":
                raw = gzip.decompress(raw)
            headers = {k: (REDACTED if k.lower() == "authorization" else v) for k, v in self.headers.items()}
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = f"<{len(raw)} bytes, {self.headers.get('content-encoding') or 'not JSON'}>"
            recorder.record({"method": self.command, "path": self.path, "headers": headers, "body": body})
            return body if isinstance(body, dict) else None

        def do_CONNECT(self) -> None:  # the CLI reaching for another host through its proxy
            self._capture()
            self._empty(403)

        def do_GET(self) -> None:
            self._capture()
            if self.headers.get("upgrade", "").lower() == "websocket":
                self._empty(426)  # what makes the CLI fall back to HTTP at once
            else:
                self._empty(404)

        def do_POST(self) -> None:
            body = self._capture() or {}
            if self.path.endswith("/responses/compact"):  # remote compaction v1 (the CLI now sends v2, below)
                return self._json(
                    200,
                    {
                        "id": "resp_compact",
                        "object": "response.compaction",
                        "output": [compaction_item()],
                        "usage": SMALL_USAGE,
                    },
                )
            if not self.path.endswith("/responses"):
                return self._empty(404)
            with recorder.lock:
                recorder.streamed_turns += 1
                n = recorder.streamed_turns
            has_exec = any(t.get("name") == "exec_command" for t in body.get("tools") or [])
            last = (body.get("input") or [{}])[-1]
            if isinstance(last, dict) and last.get("type") == "compaction_trigger":  # remote compaction v2
                item, usage = compaction_item(), SMALL_USAGE
            else:
                item = call_item() if n == 1 and has_exec else text_item("The command printed captured.")
                usage = LARGE_USAGE if recorder.compact else SMALL_USAGE
            frames = turn(f"resp_capture_{n}", item, usage)
            payload = b"".join(frames)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _empty(self, status: int) -> None:
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def _json(self, status: int, data: dict) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def main(out: Path, extra: list[str], prompt: str = "Run `echo captured` and tell me what it printed.") -> int:
    out.mkdir(parents=True, exist_ok=True)
    websocket = "--websocket" in extra
    compact = "--compact" in extra
    name = "OpenAI" if "--named-openai" in extra else "Gateway"
    extra = [arg for arg in extra if arg not in ("--websocket", "--compact", "--named-openai")]
    recorder = Recorder(out, compact)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(recorder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    settings = {"model_auto_compact_token_limit": 1000} if compact else {}
    with tempfile.TemporaryDirectory() as work:
        env = codex_environment(Path(work), url, API_KEY, websockets=websocket, settings=settings, name=name)
        env |= {"HTTPS_PROXY": url, "HTTP_PROXY": url, "NO_PROXY": "127.0.0.1"}
        result = subprocess.run(
            [str(CODEX), "exec", "--json", "--skip-git-repo-check", "--model", "capture-model", *extra, prompt],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    server.shutdown()
    (out / "codex-stdout.jsonl").write_text(result.stdout)
    sys.stderr.write(result.stderr)
    print(f"exit {result.returncode}, {recorder.count} requests recorded in {out}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
