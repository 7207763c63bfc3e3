"""Record what the Claude Code CLI sends to the Messages API: a small stand-in for Anthropic's API on loopback.

Run: `python tests/agents/capture.py OUT_DIR [--with-thinking] [CLI ARGS…]` (e.g. `--model claude-haiku-4-5`;
`--with-thinking`: the stand-in's tool turn starts with a signed thinking block, which the second turn sends back) — it starts a server on 127.0.0.1, runs the pinned CLI
(tests/agents/node_modules) in print mode against it with a temporary HOME, and writes each request it received
as `OUT_DIR/claude-code-<n>.json` (method, path with query, headers with the API key redacted, JSON body).

The stand-in answers the first streamed turn with a `Bash` tool call (`echo captured`), so the CLI runs the tool
and sends a second turn carrying its result; every later turn, and every request that does not stream, gets a
short text answer. The files are what another engineer reads to build the Messages door's request surface;
re-run this after a version bump of the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLAUDE = HERE / "node_modules" / ".bin" / "claude"
API_KEY = "sk-ant-capture-0000"
REDACTED = "<redacted api key>"


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def text_turn(model: str, text: str) -> list[bytes]:
    return [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_capture_text",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        ),
        sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        ),
        sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        sse("message_stop", {"type": "message_stop"}),
    ]


def thinking_block(index: int) -> list[bytes]:
    return [
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "thinking_delta", "thinking": "I should run the command."},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": "sig-capture-0001"},
            },
        ),
        sse("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def tool_turn(model: str, thinking: bool) -> list[bytes]:
    arguments = json.dumps({"command": "echo captured", "description": "Print a word"})
    index = 1 if thinking else 0
    return [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_capture_tool",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        ),
        *(thinking_block(0) if thinking else []),
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": "toolu_capture_01", "name": "Bash", "input": {}},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": arguments},
            },
        ),
        sse("content_block_stop", {"type": "content_block_stop", "index": index}),
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 12},
            },
        ),
        sse("message_stop", {"type": "message_stop"}),
    ]


class Recorder:
    def __init__(self, out: Path, thinking: bool = False) -> None:
        self.out = out
        self.thinking = thinking  # the tool turn starts with a signed thinking block
        self.lock = threading.Lock()
        self.count = 0
        self.streamed_turns = 0

    def record(self, entry: dict) -> int:
        with self.lock:
            self.count += 1
            n = self.count
        (self.out / f"claude-code-{n}.json").write_text(json.dumps(entry, indent=2, ensure_ascii=False) + "\n")
        return n


def handler_for(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _capture(self) -> dict | None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {
                k: (REDACTED if k.lower() in ("x-api-key", "authorization") else v) for k, v in self.headers.items()
            }
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            entry = {"method": self.command, "path": self.path, "headers": headers, "body": body}
            recorder.record(entry)
            return body if isinstance(body, dict) else None

        def do_GET(self) -> None:
            self._capture()
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}})

        def do_HEAD(self) -> None:
            self._capture()
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            body = self._capture() or {}
            model = body.get("model", "claude-capture")
            if not self.path.startswith("/v1/messages") or self.path.startswith("/v1/messages/count_tokens"):
                if self.path.startswith("/v1/messages/count_tokens"):
                    self._json(200, {"input_tokens": 1234})
                else:
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}})
                return
            if not body.get("stream"):
                self._json(
                    200,
                    {
                        "id": "msg_capture_plain",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [{"type": "text", "text": "ok"}],
                        "stop_reason": "end_turn",
                        "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 1},
                    },
                )
                return
            with recorder.lock:
                recorder.streamed_turns += 1
                turn = recorder.streamed_turns
            has_bash = any(t.get("name") == "Bash" for t in body.get("tools") or [])
            frames = (
                tool_turn(model, recorder.thinking)
                if turn == 1 and has_bash
                else text_turn(model, "The command printed captured.")
            )
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("request-id", f"req_capture_{turn}")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for frame in frames:
                self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")

        def _json(self, status: int, data: dict) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def main(
    out: Path, extra: list[str], prompt: str = "Run `echo captured` with the Bash tool and tell me what it printed."
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    thinking = "--with-thinking" in extra
    extra = [arg for arg in extra if arg != "--with-thinking"]
    recorder = Recorder(out, thinking)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(recorder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}",
            "ANTHROPIC_API_KEY": API_KEY,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        result = subprocess.run(
            [
                str(CLAUDE),
                "-p",
                prompt,
                "--output-format",
                "stream-json",
                "--verbose",
                "--allowedTools",
                "Bash",
                *extra,
            ],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    server.shutdown()
    (out / "claude-code-stdout.jsonl").write_text(result.stdout)
    sys.stderr.write(result.stderr)
    print(f"exit {result.returncode}, {recorder.count} requests recorded in {out}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
