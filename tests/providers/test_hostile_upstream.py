"""Hostile upstream values (issue 24, items 10, 12 and 13), end to end over loopback HTTP.

A small raw server stands in for a vendor (or a proxy in front of one) and answers what a well-behaved vendor
never would: an error that echoes the key it was sent, values of the wrong type, a line without end. The
gateway must keep every key out of what it emits or stores, treat a malformed upstream as an upstream error
(its kind and message say what came, fallback applies) and bound what it buffers of one SSE event.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import tracemalloc
import zlib
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.telemetry.logs import JsonFormatter
from tests.conftest import HERE, PROVIDER_KEYS, marker, turn
from tests.servers import ServerThread


def _sse(*events: dict[str, Any], named: bool = False) -> bytes:
    """SSE frames of `events` (with `event:` lines naming each one's `type` when `named`, as Anthropic does)."""
    out = b""
    for event in events:
        if named:
            out += f"event: {event['type']}\n".encode()
        out += b"data: " + json.dumps(event).encode() + b"\n\n"
    return out


def _chunk(delta: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


_MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "m",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
}
_CREATED = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}

# What each malformed case streams, and what the error must say it sent.
MALFORMED = {
    "tool-index-list": (
        _sse(
            _chunk({"role": "assistant"}),
            _chunk({"tool_calls": [{"index": [0], "id": "c1", "function": {"name": "f", "arguments": "{}"}}]}),
        ),
        "sent a tool call index that is not an integer: [0]",
    ),
    "tool-index-dict": (
        _sse(
            _chunk({"role": "assistant"}),
            _chunk({"tool_calls": [{"index": {"i": 0}, "id": "c1", "function": {"name": "f"}}]}),
        ),
        "sent a tool call index that is not an integer: {'i': 0}",
    ),
    "thinking-int": (
        _sse(
            _MESSAGE_START,
            {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": 5}},
            named=True,
        ),
        "sent a thinking block's thinking that is not a string: 5",
    ),
    "call-name-list": (
        _sse(
            _CREATED,
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "id": "fc_1",
                    "type": "function_call",
                    "status": "in_progress",
                    "call_id": "c1",
                    "name": ["f"],
                    "arguments": "",
                },
            },
        ),
        "sent a function_call's name that is not a string: ['f']",
    ),
    "digits-5000": (  # valid JSON that Python's json module will not read (a 5,000-digit integer)
        b'data: {"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": '
        + b"9" * 5000
        + b"}}\n\n",
        "sent JSON the gateway could not read: Exceeds the limit (4300 digits) for integer string conversion",
    ),
    "stop-reason-list": (  # a value no check names: still an upstream error saying what failed, never internal
        _sse(
            _MESSAGE_START,
            {"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}, "usage": {"output_tokens": 1}},
            {"type": "message_stop"},
            named=True,
        ),
        "sent a message_stop event the gateway could not read (TypeError",
    ),
}


class RawVendor:
    """The raw server's state: what each echo request carried, and the bytes each huge-line stream sent."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}
        self.finished = threading.Event()


def _raw_app(state: RawVendor) -> Starlette:
    async def malformed(request: Request) -> Response:
        body, _ = MALFORMED[request.path_params["case"]]
        return Response(body, media_type="text/event-stream")

    async def echo(request: Request) -> Response:
        # A proxy that echoes the credentials it was sent in its error message.
        seen = {k: v for k, v in request.headers.items() if k in ("authorization", "x-api-key", "x-goog-api-key")}
        seen["key"] = request.query_params.get("key", "")
        text = f"invalid credentials: {json.dumps(seen)}"
        return JSONResponse(
            {"error": {"type": "authentication_error", "code": 401, "status": "UNAUTHENTICATED", "message": text}},
            status_code=401,
        )

    return Starlette(
        routes=[
            Route("/malformed/{case}/{path:path}", malformed, methods=["POST"]),
            Route("/echo/{path:path}", echo, methods=["POST"]),
        ]
    )


@pytest.fixture(scope="module")
def raw():
    state = RawVendor()
    server = ServerThread(_raw_app(state), "raw-vendor").start()
    server.state = state
    yield server
    server.stop()


# ------------------------------------------------------------------------------------------------ item 12

CASE_PROVIDER = {
    "tool-index-list": "compat",
    "tool-index-dict": "compat",
    "digits-5000": "compat",
    "thinking-int": "anthropic",
    "call-name-list": "openai",
    "stop-reason-list": "anthropic",
}


def _pointed_at(provider: str, base: str) -> dict[str, Any]:
    """Settings that send `provider`'s requests to `base` (the raw server)."""
    if provider == "compat":
        return {"base_urls": {"compat": f"{base}/v1"}}
    return {f"{provider}_base_url": base + ("/v1" if provider == "openai" else "")}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_value_of_the_wrong_type_is_a_malformed_upstream_and_the_turn_falls_back(gateway_factory, raw, case):
    provider = CASE_PROVIDER[case]
    gw = gateway_factory(retries=0, **_pointed_at(provider, f"{raw.url}/malformed/{case}"))
    fallback = "google/text"  # the simulator, reached as usual
    result = gw.stream(turn(f"{provider}/some-model", marker(), fallback=[fallback]))
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
    assert result.message["provider"] == "google"
    job = gw.job(result.headers["x-request-id"])
    first = job.attempts[0]
    assert first.kind == "malformed" and first.outcome == "error"
    assert MALFORMED[case][1] in first.error_message, first.error_message
    assert first.error_message.startswith(f"{provider}/some-model sent ")
    assert "internal error" not in first.error_message


@pytest.mark.parametrize("header", ["retry_after=inf", "retry_after_ms=1e400", "retry_after=1e400", "retry_after=nan"])
@pytest.mark.parametrize("provider", ["anthropic", "openai", "google", "compat"])
def test_a_retry_after_of_infinity_is_capped_and_retry_and_fallback_still_apply(gateway_factory, provider, header):
    gw = gateway_factory(retries=1, retry_after_cap_ms=20)
    result = gw.stream(turn(f"{provider}/http-429;{header}", marker(), fallback=["anthropic/text"]))
    assert result.terminal["type"] == "done", result.terminal.get("errorMessage")
    job = gw.job(result.headers["x-request-id"])
    assert [a.kind for a in job.attempts[:2]] == ["http", "http"]  # retried, then fell back
    assert job.attempts[-1].outcome == "done" and job.attempts[-1].provider == "anthropic"
    assert all(a.retry_after_ms is None or a.retry_after_ms <= 86_400_000 for a in job.attempts)


# ------------------------------------------------------------------------------------------------ item 10

GROQ_KEY = "gsk-hostile-test-GROQKEY-0123456789"


class _Lines(logging.Handler):
    """Every log line as the gateway's JSON formatter writes it."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def log_lines():
    handler = _Lines()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield handler.lines
    root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="module")
def echo_gateway(gateway_factory, raw, tmp_path_factory):
    """Every provider, a catalog one with a `keyEnv` key included, behind a proxy that echoes credentials."""
    catalog = json.loads((HERE / "catalog.json").read_text())
    catalog["providers"].append({"name": "groq", "api": "openai-completions", "keyEnv": "HOSTILE_TEST_GROQ_API_KEY"})
    catalog["models"].append(
        {
            "provider": "groq",
            "id": "llama",
            "contextWindow": 8192,
            "maxTokens": 1024,
            "cost": {"input": 0.1, "output": 0.1},
        }
    )
    path = tmp_path_factory.mktemp("catalog") / "catalog.json"
    path.write_text(json.dumps(catalog))
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("HOSTILE_TEST_GROQ_API_KEY", GROQ_KEY)
    echo = f"{raw.url}/echo"
    gw = gateway_factory(
        retries=0,
        catalog=str(path),
        api_keys="tenant:tenant-key-SECRET",
        anthropic_base_url=echo,
        openai_base_url=f"{echo}/v1",
        google_base_url=echo,
        base_urls={"compat": f"{echo}/v1", "groq": f"{echo}/v1"},
    )
    yield gw
    monkeypatch.undo()


ALL_KEYS = (*PROVIDER_KEYS.values(), GROQ_KEY)
TENANT = {"Authorization": "Bearer tenant-key-SECRET"}


@pytest.mark.parametrize("model", ["anthropic/some-model", "openai/some-model", "google/some-model", "groq/llama"])
def test_a_provider_key_echoed_in_an_error_is_redacted_everywhere(echo_gateway, log_lines, model):
    gw = echo_gateway
    result = gw.stream(turn(model, marker()), headers=TENANT)
    message = result.terminal["errorMessage"]
    assert result.terminal["type"] == "error" and "HTTP 401" in message and "[redacted]" in message, message
    request_id = result.headers["x-request-id"]
    gw.job(request_id)
    complete = gw.http.post("/v1/complete", json=turn(model, marker()), headers=TENANT)
    chat = gw.http.post(
        "/v1/chat/completions", headers=TENANT, json={"model": model, "messages": [{"role": "user", "content": "hi"}]}
    )
    messages = gw.http.post(
        "/v1/messages",
        headers=TENANT,
        json={"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]},
    )
    record = gw.http.get(f"/v1/requests/{request_id}", headers=TENANT)
    assert record.status_code == 200 and "[redacted]" in record.text
    emitted = {
        "error event": result.text,
        "/v1/complete": complete.text,
        "chat completions door": chat.text,
        "messages door": messages.text,
        "record": record.text,
        "metrics": gw.http.get("/metrics").text,
        "logs": "\n".join(log_lines),
    }
    assert "[redacted]" in emitted["logs"]
    for where, text in emitted.items():
        for key in ALL_KEYS:
            assert key not in text, f"{key} in the {where}"


# ------------------------------------------------------------------------------------------------ item 13


class HugeLineVendor:
    """A raw HTTP/1.1 server on loopback (its own thread and loop) answering every POST with a 200 event stream
    whose first line never ends: `data: {"pad": "aaaa…` for `line_bytes`, in 64 KiB writes, each awaited
    (`drain`), so `sent` counts what the client's socket took before it hung up. `gzip` compresses the body."""

    CHUNK = 64 * 1024

    def __init__(self, line_bytes: int, gzip: bool = False, content_type: bytes = b"text/event-stream") -> None:
        self.line_bytes = line_bytes
        self.gzip = gzip
        self.content_type = content_type
        self.sent: list[int] = []  # per request: body bytes written (decoded, before compression)
        self.finished = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        self.thread = threading.Thread(target=self.loop.run_forever, name="huge-line-vendor", daemon=True)
        self.thread.start()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sent = 0
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            encoding = b"content-encoding: gzip\r\n" if self.gzip else b""
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: "
                + self.content_type
                + b"\r\n"
                + encoding
                + b"connection: close\r\n\r\n"
            )
            compress = zlib.compressobj(wbits=31) if self.gzip else None
            piece = b'data: {"pad": "' + b"a" * (self.CHUNK - 15)
            while sent < self.line_bytes:
                writer.write(compress.compress(piece) + compress.flush(zlib.Z_SYNC_FLUSH) if compress else piece)
                await writer.drain()
                sent += len(piece)
                piece = b"a" * self.CHUNK
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass  # the client hung up: what it took is counted
        finally:
            self.sent.append(sent)
            self.finished.set()
            writer.close()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


LINE = 256 * 1024 * 1024  # the hostile line: 256 MiB without a newline
BOUND = 1024 * 1024  # the gateway's GATEWAY_MAX_UPSTREAM_EVENT_BYTES in these tests


@pytest.mark.parametrize("body", ["plain", "gzip", "unlabelled"])  # unlabelled: served as application/json
@pytest.mark.parametrize("provider", ["anthropic", "openai", "google", "compat"])
def test_an_sse_line_that_never_ends_fails_the_turn_at_the_bound_and_memory_does_not_follow_it(
    gateway_factory, provider, body
):
    vendor = HugeLineVendor(
        LINE, gzip=body == "gzip", content_type=b"application/json" if body == "unlabelled" else b"text/event-stream"
    )
    try:
        gw = gateway_factory(retries=0, max_upstream_event_bytes=BOUND, **_pointed_at(provider, vendor.url))
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            result = gw.stream(turn(f"{provider}/some-model", marker()))
            assert vendor.finished.wait(30), "the vendor never saw the gateway hang up"
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        terminal = result.terminal
        assert terminal["type"] == "error"
        assert f"{provider}/some-model sent an SSE event longer than {BOUND} bytes" in terminal["errorMessage"], (
            terminal["errorMessage"]
        )
        job = gw.job(result.headers["x-request-id"])
        assert job.attempts[-1].kind == "event_too_large"
        # What the gateway took of the line before it hung up, and the most Python memory it held meanwhile:
        # the bound plus socket buffers, nothing like the line. Compressed, a 64 KiB piece of the line is a few
        # hundred bytes on the wire, so the socket buffers hold many MiB of it and how much the vendor wrote
        # before the hang-up reached it depends on the machine's load (35 MiB seen under load): there, the
        # line not sent whole is what holds whatever the timing.
        assert vendor.sent[0] < (LINE if body == "gzip" else 32 * 1024 * 1024), vendor.sent
        assert peak < 16 * 1024 * 1024, peak
    finally:
        vendor.stop()


def test_event_bound_counts_from_the_last_blank_line_across_chunks():
    from app.providers.transport import EventTooLarge, _EventBound

    bound = _EventBound(12)
    for chunk in (b"data: 1\n\n", b"data: 12", b"34\n", b"\n", b"data: 123\r\n", b"\r\ndata: 1234\r", b"\rx"):
        bound.feed(chunk)  # events end at \n\n (also split across chunks), \r\n\r\n, \r\r
    assert bound.pending == 1
    bound.feed(b"data: 12345")  # 12 bytes since the last blank line: at the bound
    with pytest.raises(EventTooLarge):
        bound.feed(b"6")
