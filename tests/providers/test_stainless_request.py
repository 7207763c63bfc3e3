"""The request a Stainless provider sends (`app/providers/stainless.py`): built from one options template per
provider for speed, it must be the request the SDK's own `client.post()` sends — the same method, URL, headers
(auth, version, the SDK's `x-stainless-*`) and body — with an idempotency key of its own per call."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from aiohttp import web

from app.contract.catalog_entries import ModelInfo, Pricing
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.anthropic import AnthropicProvider
from app.providers.base import ProviderError
from app.providers.config import ProviderConfig
from app.providers.openai_responses import OpenAIResponsesProvider
from app.providers.openai_completions import OpenAICompletionsProvider

# A minimal SSE body each SDK reads to its end without complaint (the providers read raw events).
SSE = b'event: message_stop\ndata: {"type": "message_stop"}\n\n'


async def _server(seen: list[dict[str, Any]], sse: bytes = SSE) -> tuple[web.AppRunner, int]:
    async def record(request: web.Request) -> web.StreamResponse:
        seen.append(
            {
                "method": request.method,
                "url": str(request.rel_url),
                "headers": dict(request.headers),
                "body": await request.read(),
            }
        )
        return web.Response(body=sse, content_type="text/event-stream", headers={"request-id": "req_42"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


@pytest.mark.parametrize(
    ("provider_class", "base_path", "endpoint"),
    [
        (AnthropicProvider, "/anthropic", "/anthropic/v1/messages"),
        (AnthropicProvider, "", "/v1/messages"),
        (OpenAIResponsesProvider, "/openai/v1", "/openai/v1/responses"),
        (OpenAICompletionsProvider, "/compat/v1/", "/compat/v1/chat/completions"),
    ],
)
async def test_the_request_is_the_one_client_post_sends(provider_class, base_path, endpoint):
    seen: list[dict[str, Any]] = []
    runner, port = await _server(seen)
    provider = provider_class(
        ProviderConfig(name="p", api_key="secret-key", base_url=f"http://127.0.0.1:{port}{base_path}")
    )
    try:
        model = ModelInfo(provider="p", id="m", pricing=Pricing())
        context = Context.model_validate({"messages": [{"role": "user", "content": "hi"}]})
        for _ in range(2):
            upstream = await provider.open(model, context, StreamOptions())
            [event async for event in upstream]
            await upstream.aclose()
        body = provider.encoded_body(model, context, StreamOptions())
        stream = await provider.client.post(
            provider.path, content=body, cast_to=object, stream=True, stream_cls=provider.sdk.AsyncStream[object]
        )
        await stream.close()
    finally:
        await provider.aclose()
        await runner.cleanup()

    first, second, reference = seen
    assert first["method"] == reference["method"] == "POST"
    assert first["url"] == reference["url"] == endpoint
    assert first["body"] == reference["body"] == body
    assert first["headers"] == reference["headers"] == second["headers"]
    headers = {k.lower(): v for k, v in first["headers"].items()}
    assert "secret-key" in (headers.get("x-api-key", "") + headers.get("authorization", ""))
    assert headers["x-stainless-lang"] == "python" and headers["content-type"] == "application/json"


def test_each_call_has_its_own_idempotency_key():
    provider = AnthropicProvider(ProviderConfig(name="p", api_key="k", base_url="http://127.0.0.1:9/anthropic"))
    first, second = provider.request_options(b"{}"), provider.request_options(b"{}")
    assert first.idempotency_key != second.idempotency_key
    assert first.idempotency_key.startswith("stainless-python-retry-")
    # Only a counter changes between calls: no `os.urandom` per call (it releases the GIL).
    assert first.idempotency_key.rsplit("-", 1)[0] == second.idempotency_key.rsplit("-", 1)[0]
    assert (first.content, first.method, first.url) == (b"{}", "post", "http://127.0.0.1:9/anthropic/v1/messages")
    # The template itself is never changed by a call.
    assert provider._options.content is None and provider._options.idempotency_key is None


async def test_an_in_band_error_still_reads_after_the_request_headers_are_dropped():
    """`open()` drops the request's headers once the response has come; the SDK's error for an in-band error
    event still has its request and the response's headers, and maps to a ProviderError."""
    error = b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}\n\n'
    runner, port = await _server([], error)
    provider = AnthropicProvider(ProviderConfig(name="p", api_key="k", base_url=f"http://127.0.0.1:{port}"))
    try:
        model = ModelInfo(provider="p", id="m", pricing=Pricing())
        context = Context.model_validate({"messages": [{"role": "user", "content": "hi"}]})
        upstream = await provider.open(model, context, StreamOptions())
        with pytest.raises(Exception) as raised:
            [event async for event in upstream]
        await upstream.aclose()
    finally:
        await provider.aclose()
        await runner.cleanup()
    assert raised.value.request.url.path == "/v1/messages" and raised.value.response.headers["request-id"] == "req_42"
    mapped = provider.error(raised.value)
    assert isinstance(mapped, ProviderError) and mapped.message == "sent an error event: overloaded_error: busy"
