"""The load generator's client: raw asyncio streams, HTTP/1.1, chunked bodies, SSE frames.

It is deliberately small (no httpx per stream) so that one bench process can hold thousands of streams
without becoming the bottleneck; `bench` reports its own CPU share next to every figure to show it.

Both paths are read by the same code: `Path.DIRECT` POSTs the Anthropic wire request to the simulator and
counts `content_block_delta` frames; `Path.GATEWAY` POSTs `/v1/stream` and counts `text_delta` frames, or
with `door="openai-chat"` POSTs `/v1/chat/completions` and counts `chat.completion.chunk` lines with content,
with `door="anthropic-messages"` POSTs `/v1/messages` and counts `content_block_delta` frames as direct does,
with `door="openai-responses"` POSTs `/v1/responses` (`store: false`, as Codex CLI sends it) and counts
`response.output_text.delta` frames. `door="portkey-chat"` is a peer gateway's Chat Completions endpoint
(bench/peer_bench.py): `/v1/chat/completions` with the bare scenario as the model and the routing headers in
`headers`, its chunks read as the Chat Completions door's.
With `agent=True` the gateway paths send a coding agent's (Claude Code's) request size: a 50 KB system prompt
and 20 tools (`AGENT_SYSTEM`, `AGENT_TOOLS`), in each door's own shape.
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson


AGENT_SYSTEM_BYTES, AGENT_TOOL_COUNT = 50_000, 20


def _agent_system() -> str:
    """About 50 KB of instructions, as a coding agent's system prompt (numbered rules, no two alike)."""
    lines, size, i = [], 0, 0
    while size < AGENT_SYSTEM_BYTES:
        line = (
            f"Rule {i}: when a task touches file number {i}, read it first, keep its style, run its tests, "
            f"and report what changed in one short paragraph; never invent paths (ref {i * 7919 % 10007})."
        )
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines)


def _agent_tool(i: int) -> dict[str, Any]:
    """One tool in the unified shape (`parameters`): a name, a paragraph of description, a few arguments."""
    return {
        "name": f"tool_{i:02d}",
        "description": f"Tool {i}: " + "Runs one operation of the agent on the workspace and returns its output. " * 6,
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "a path inside the workspace"},
                "content": {"type": "string", "description": "text to write or search for"},
                "limit": {"type": "integer", "minimum": 1, "description": "at most this many results"},
                "recursive": {"type": "boolean"},
            },
            "required": ["path"],
        },
    }


AGENT_SYSTEM = _agent_system()
AGENT_TOOLS = [_agent_tool(i) for i in range(AGENT_TOOL_COUNT)]


class Path(str, Enum):
    DIRECT = "direct"
    GATEWAY = "gateway"


@dataclass(frozen=True)
class Target:
    """Where a path's requests go and how its frames read."""

    path: Path
    port: int
    host: str = "127.0.0.1"
    provider: str = "anthropic"  # gateway path: the provider the model ref names (direct is Anthropic's wire)
    door: str = "unified"  # gateway path: `unified` (/v1/stream), `openai-chat`, `anthropic-messages`, `openai-responses`, `gemini`
    agent: bool = False  # gateway path: a coding agent's request size (`AGENT_SYSTEM`, `AGENT_TOOLS`)
    headers: tuple[tuple[str, str], ...] = ()  # extra request headers (a peer gateway's routing headers)

    @property
    def chat(self) -> bool:
        """A Chat Completions stream: this gateway's door or a peer gateway's (`portkey-chat`)."""
        return self.path is Path.GATEWAY and self.door in ("openai-chat", "portkey-chat")

    @property
    def peer(self) -> bool:
        return self.path is Path.GATEWAY and self.door == "portkey-chat"

    @property
    def gemini(self) -> bool:
        return self.path is Path.GATEWAY and self.door == "gemini"

    @property
    def anthropic_wire(self) -> bool:
        """Anthropic's Messages wire: the simulator's own endpoint, or the gateway's `/v1/messages` door."""
        return self.path is Path.DIRECT or self.door == "anthropic-messages"

    @property
    def responses(self) -> bool:
        return self.path is Path.GATEWAY and self.door == "openai-responses"

    @property
    def url_path(self) -> str:
        if self.gemini:
            return f"/v1beta/models/{self.provider}/{{scenario}}:streamGenerateContent?alt=sse"
        if self.chat:
            return "/v1/chat/completions"
        if self.responses:
            return "/v1/responses"
        if self.anthropic_wire:
            return "/anthropic/v1/messages" if self.path is Path.DIRECT else "/v1/messages"
        return "/v1/stream"

    @property
    def delta_prefix(self) -> bytes:
        if self.gemini:
            return b'data: {"candidates":[{"content":{"parts":[{"text":'
        if self.peer:  # Portkey's chunk ids are `<provider>-<ms>`
            return b'data: {"id":"'
        if self.chat:
            return b'data: {"id":"chatcmpl-'
        if self.responses:
            return b"event: response.output_text.delta"
        return b"event: content_block_delta" if self.anthropic_wire else b"event: text_delta"

    @property
    def end_event(self) -> bytes:
        if self.gemini:
            return b'"finishReason":'
        if self.chat:
            return b"data: [DONE]"
        if self.responses:
            return b"event: response.completed"
        return b"event: message_stop" if self.anthropic_wire else b"event: done"

    def delta_text(self, frame: bytes) -> str | None:
        """The text of a delta frame (None when the frame carries no text)."""
        payload = orjson.loads(frame[frame.index(b"data: ") + 6 :])
        if self.gemini:
            return payload["candidates"][0]["content"]["parts"][0].get("text") or None
        if self.chat:
            choices = payload["choices"]
            return choices[0]["delta"].get("content") or None if choices else None
        if self.responses:
            return payload["delta"]
        return payload["delta"].get("text") if self.anthropic_wire else payload["delta"]

    def body(self, scenario: str, prompt: str, throttle_ms: int | None) -> bytes:
        if self.chat:  # the Chat Completions door has no per-request coalescing window: the server default
            return orjson.dumps(
                {
                    "model": scenario if self.peer else f"{self.provider}/{scenario}",
                    "max_tokens" if self.peer else "max_completion_tokens": 4096,
                    "stream": True,
                    "messages": [{"role": "user", "content": prompt}],
                }
            )
        if self.responses:  # nor has the Responses door
            return orjson.dumps(
                {
                    "model": f"{self.provider}/{scenario}",
                    "max_output_tokens": 4096,
                    "stream": True,
                    "store": False,
                    "input": prompt,
                }
            )
        agent = self.agent and self.path is Path.GATEWAY
        if self.gemini:  # the model is in the path (`url_path`)
            body: dict[str, Any] = {
                "contents": [{"role": "user", "parts": [{"text": prompt}]}],
                "generationConfig": {"maxOutputTokens": 4096},
            }
            if agent:
                body["systemInstruction"] = {"parts": [{"text": AGENT_SYSTEM}]}
                body["tools"] = [{"functionDeclarations": [{"name": t["name"], "description": t["description"],
                                                            "parametersJsonSchema": t["parameters"]} for t in AGENT_TOOLS]}]  # fmt: skip
            return orjson.dumps(body)
        if self.anthropic_wire:  # the Anthropic door, like the Chat Completions one, coalesces at the server default
            body = {
                "model": scenario if self.path is Path.DIRECT else f"{self.provider}/{scenario}",
                "max_tokens": 4096,
                "stream": True,
                "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
            }
            if agent:
                body["system"] = AGENT_SYSTEM
                body["tools"] = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
                                 for t in AGENT_TOOLS]  # fmt: skip
            return orjson.dumps(body)
        options: dict[str, Any] = {"maxTokens": 4096}
        if throttle_ms is not None:
            options["throttleMs"] = throttle_ms
        context: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}]}
        if agent:
            context["systemPrompt"] = AGENT_SYSTEM
            context["tools"] = AGENT_TOOLS
        return orjson.dumps({"model": f"{self.provider}/{scenario}", "context": context, "options": options})

    def request(self, scenario: str, prompt: str, throttle_ms: int | None) -> bytes:
        body = self.body(scenario, prompt, throttle_ms)
        extra = "".join(f"{name}: {value}\r\n" for name, value in self.headers)
        head = (
            f"POST {self.url_path.format(scenario=scenario)} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\nx-api-key: bench-key\r\n"
            f"anthropic-version: 2023-06-01\r\n{extra}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        return head.encode() + body


@dataclass
class StreamResult:
    status: int = 0
    started: float = 0.0  # perf_counter just before connecting
    first_delta: float | None = None  # perf_counter at the first text delta
    delta_times: list[float] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    completed: bool = False  # the terminal event (message_stop / done) arrived
    request_id: str | None = None
    error: str | None = None
    closed_wall: float | None = None  # time.time() when the client closed early (cancellation)

    @property
    def ttft(self) -> float | None:
        return None if self.first_delta is None else self.first_delta - self.started

    @property
    def gaps(self) -> list[float]:
        t = self.delta_times
        return [b - a for a, b in zip(t, t[1:])]

    @property
    def joined(self) -> str:
        return "".join(self.text)


class _Chunked:
    """Incremental decoder of an HTTP/1.1 chunked body."""

    __slots__ = ("buf", "need", "done")

    def __init__(self) -> None:
        self.buf = b""
        self.need: int | None = None
        self.done = False

    def feed(self, data: bytes) -> bytes:
        self.buf += data
        out = []
        while not self.done:
            if self.need is None:
                end = self.buf.find(b"\r\n")
                if end < 0:
                    break
                size = int(self.buf[:end].split(b";", 1)[0], 16)
                self.buf = self.buf[end + 2 :]
                if size == 0:
                    self.done = True
                    break
                self.need = size
            elif len(self.buf) >= self.need + 2:
                out.append(self.buf[: self.need])
                self.buf = self.buf[self.need + 2 :]
                self.need = None
            else:
                break
        return b"".join(out)


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def stream(
    target: Target,
    scenario: str,
    prompt: str,
    *,
    throttle_ms: int | None = 0,
    cancel_after: int | None = None,
) -> StreamResult:
    """One streamed turn. With `cancel_after=k` the client closes the connection after k text deltas."""
    result = StreamResult(started=time.perf_counter())
    writer = None
    try:
        reader, writer = await asyncio.open_connection(target.host, target.port, limit=1 << 20)
        writer.write(target.request(scenario, prompt, throttle_ms))
        result.status, headers = await _read_head(reader)
        result.request_id = headers.get("x-request-id")
        chunked = _Chunked() if headers.get("transfer-encoding", "").lower() == "chunked" else None
        prefix, end_event = target.delta_prefix, target.end_event
        pending = b""
        sep = b""  # the frame separator, learnt from the first frame: LF LF or CRLF CRLF
        while True:
            data = await reader.read(1 << 16)
            now = time.perf_counter()
            if not data:
                break
            if chunked is not None:
                data = chunked.feed(data)
            pending += data
            if not sep:
                sep = b"\r\n\r\n" if b"\r\n\r\n" in pending else b"\n\n" if b"\n\n" in pending else b""
                if not sep:
                    continue
            if sep not in pending:
                continue
            *frames, pending = pending.split(sep)
            for frame in frames:
                if end_event in frame:  # (before the deltas: Gemini's finishing chunk starts as a delta does)
                    result.completed = True
                elif frame.startswith(prefix, max(frame.find(b"event: "), 0)):
                    text = target.delta_text(frame)
                    if isinstance(text, str):
                        if result.first_delta is None:
                            result.first_delta = now
                        result.delta_times.append(now)
                        result.text.append(text)
            if cancel_after is not None and len(result.delta_times) >= cancel_after:
                result.closed_wall = time.time()
                writer.close()
                writer = None
                return result
            if chunked is not None and chunked.done:
                break
    except Exception as exc:  # a failed stream is a figure (lost frames), not a crash of the bench
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if writer is not None:
            writer.close()
    return result


async def slow_read(target: Target, scenario: str, prompt: str, *, rate: int, seconds: float) -> dict[str, Any]:
    """Read a stream at `rate` bytes per second for `seconds`, with a small receive buffer, then hang up."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    sock.setblocking(False)
    received = 0
    try:
        await loop.sock_connect(sock, (target.host, target.port))
        await loop.sock_sendall(sock, target.request(scenario, prompt, None))
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            tick = time.monotonic()
            data = await asyncio.wait_for(loop.sock_recv(sock, rate), timeout=max(deadline - tick, 0.01))
            if not data:
                break
            received += len(data)
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    except TimeoutError:
        pass
    finally:
        sock.close()
    return {"bytesRead": received, "seconds": seconds}
