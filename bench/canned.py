"""`python -m bench.canned PORT` — a canned Anthropic upstream for the `workers` scenario: a raw asyncio
server (uvloop) that answers every request with the same Messages API event stream (five text deltas, usage),
bytes built once. Costs a few tens of microseconds per turn, far less than the simulator's Starlette app, so
that the CPU the scenario measures is the gateway's rather than its upstream's."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import uvloop

DELTAS = 5
_HEAD_END = b"\r\n\r\n"


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def messages_stream(deltas: int = DELTAS) -> bytes:
    """The whole HTTP response: status, headers and a Messages stream with `deltas` text deltas."""
    message: dict[str, Any] = {
        "id": "msg_canned",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    body = _event("message_start", {"type": "message_start", "message": message})
    body += _event(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    for n in range(deltas):
        body += _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"word{n} "}},
        )
    body += _event("content_block_stop", {"type": "content_block_stop", "index": 0})
    body += _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": deltas},
        },
    )
    body += _event("message_stop", {"type": "message_stop"})
    head = (
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nrequest-id: req_canned\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


class CannedUpstream(asyncio.Protocol):
    """One client connection: each complete request (headers, then `content-length` bytes) gets the canned reply."""

    reply = messages_stream()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(_HEAD_END)
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = 0
            at = head.find(b"content-length:")
            if at >= 0:
                length = int(head[at + 15 :].split(b"\r\n", 1)[0])
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            self.buffer = self.buffer[total:]
            self.transport.write(self.reply)


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(CannedUpstream, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1])))
