"""Anthropic Messages adapter (api `anthropic-messages`) on the official `anthropic` SDK's raw event stream."""

from __future__ import annotations


import anthropic
from anthropic import AsyncStream

from app.catalog import ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.anthropic.events import AnthropicTranslator
from app.providers.anthropic.request import API, build_params
from app.providers.base import ProviderError, Upstream
from app.providers.transport import TransportSettings, client_options, stainless_error


class AnthropicProvider:
    api = API

    def __init__(self, name: str, api_key: str, base_url: str | None, transport: TransportSettings) -> None:
        self.name = name
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            http_client=anthropic.DefaultAioHttpClient(**client_options(transport)),
        )

    async def open(self, model: ModelInfo, context: Context, options: StreamOptions) -> Upstream:
        """POST /v1/messages with `stream: true` through the SDK (auth, headers, SSE decoding, in-band error
        events, status errors) but with untyped events: building the SDK's pydantic event objects was 28% of
        the gateway's CPU per streamed event, and the translator reads plain dicts."""
        params = build_params(model, context, options)
        params.update(params.pop("extra_body", None) or {})
        stream = await self.client.post(
            "/v1/messages", body=params, cast_to=object, stream=True, stream_cls=AsyncStream[object]
        )
        return Upstream(stream.__aiter__(), stream.close)

    def translator(self, model: ModelInfo) -> AnthropicTranslator:
        return AnthropicTranslator()

    def error(self, exc: BaseException) -> ProviderError | None:
        return stainless_error(exc, anthropic)

    async def aclose(self) -> None:
        await self.client.close()

