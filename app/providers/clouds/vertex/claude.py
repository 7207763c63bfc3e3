"""Claude on Google Vertex AI: the `anthropic-messages` adapter through the `anthropic` SDK's
`AsyncAnthropicVertex` (the `vertex` extra), catalog `cloud: {kind: "vertex", project, region}`
(docs/clouds/vertex.md). The SDK sends each turn to
`<base>/v1/projects/<project>/locations/<region>/publishers/anthropic/models/<model>:streamRawPredict` with
the SDK's `anthropic_version` in the body and a bearer token from Application Default Credentials
(`auth.py`); the events are Anthropic's own, signed thinking included."""

from __future__ import annotations

from typing import Any

import anthropic

from app.contract.catalog_entries import ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.anthropic import AnthropicProvider
from app.providers.base import ProviderError, Upstream, build_off_loop
from app.providers.calls import UPSTREAM_HEADERS
from app.providers.clouds.vertex.auth import credentials_error

DEFAULT_REGION = "global"


class VertexAnthropicProvider(AnthropicProvider):
    def new_client(self, **options: Any) -> Any:
        cloud = self.config.cloud
        assert cloud is not None
        options.pop("api_key")
        base = options.pop("base_url")  # a configured base URL is the service root; the SDK's ends in /v1
        return anthropic.AsyncAnthropicVertex(
            region=cloud.region or DEFAULT_REGION,
            project_id=cloud.project,  # type: ignore[arg-type]  # None: the credentials' project, not the SDK's env default
            base_url=f"{base.rstrip('/')}/v1" if base else None,
            **options,
        )

    async def open(self, model: ModelInfo, context: Context, options: StreamOptions) -> Upstream:
        """Through the SDK's `post` of `/v1/messages`, which the Vertex client turns into the model's
        `streamRawPredict` path (the model leaves the body, `anthropic_version` joins it)."""
        params = await build_off_loop(self.build_request, model, context, options)
        headers = {**(self.request_headers(options) or {}), **(UPSTREAM_HEADERS.get() or {})}
        stream = await self.client.post(
            "/v1/messages",
            body=params,
            cast_to=object,
            stream=True,
            stream_cls=self._stream_cls,
            options={"headers": headers} if headers else {},
        )
        return Upstream(stream, stream.close)

    def error(self, exc: BaseException) -> ProviderError | None:
        return credentials_error(exc) or super().error(exc)
