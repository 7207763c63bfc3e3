"""Azure OpenAI: the `openai-responses` and `openai-completions` adapters on an Azure OpenAI resource
(catalog `cloud: {kind: "azure", …}`, docs/clouds/azure.md), through the official `openai` SDK.

- The catalog entry's `baseUrl` is the resource endpoint (`https://<resource>.openai.azure.com`).
- Without `cloud.apiVersion` the v1 API (`<endpoint>/openai/v1/`) with the SDK's plain client, as Microsoft
  documents it: the same paths as OpenAI's, the key as a bearer token, the deployment name as `model`.
- With `cloud.apiVersion` the dated path with the SDK's `AsyncAzureOpenAI`: `?api-version=<it>` on every
  call, the key in an `api-key` header, Chat Completions under `/openai/deployments/<deployment>/…` (the SDK
  puts the deployment in the path), Responses at `/openai/responses`.
- `cloud.deployments` maps catalog model ids to deployment names (`Cloud.upstream_model`).
- `cloud.auth: "entra"`: Microsoft Entra ID tokens from `azure-identity`'s `DefaultAzureCredential` (the
  optional extra `azure`), fetched and refreshed by it before they expire (a token within five minutes of its
  end is renewed on the next request), never logged.

Azure OpenAI has no input token counting endpoint: a count for an Azure model is refused (`TokensNotCounted`,
400 `tokens_not_counted` on every door's count route), never estimated.

Throttling answers 429 with `retry-after-ms`; the dispatcher waits that long (capped) and retries. An error
keeps Azure's request id (`apim-request-id`, `x-request-id`) so an operator can quote it to Azure support.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import httpx2
import openai

from app.contract.catalog_entries import Cloud, ModelInfo
from app.contract.messages import Context
from app.contract.request import StreamOptions
from app.providers.base import ProviderError, Upstream, build_off_loop
from app.providers.config import ProviderConfig
from app.providers.openai_completions import OpenAICompletionsProvider
from app.providers.openai_responses import OpenAIResponsesProvider
from app.providers.calls import UPSTREAM_HEADERS
from app.contract.refusals import TokensNotCounted

ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
REQUEST_ID_HEADERS = ("apim-request-id", "x-request-id", "x-ms-request-id")


class AzureConfigError(ValueError):
    """An Azure provider's catalog entry cannot be served (says which field to fix)."""


def entra_token_provider() -> Callable[[], Any]:
    """An async callable returning a Microsoft Entra ID access token for Azure OpenAI, from
    `DefaultAzureCredential` (environment, workload identity, managed identity, developer logins)."""
    try:
        from azure.identity.aio import DefaultAzureCredential, get_bearer_token_provider
    except ImportError:
        raise AzureConfigError(
            'cloud.auth "entra" needs the azure-identity package (install the gateway with its `azure` extra)'
        ) from None
    return get_bearer_token_provider(DefaultAzureCredential(), ENTRA_SCOPE)


class AzureOpenAI:
    """The Azure part of an OpenAI adapter; listed first in the bases of the classes below."""

    name: str
    path: str
    client: Any
    _stream_cls: Any

    def __init__(self, config: ProviderConfig) -> None:
        cloud = config.cloud
        assert cloud is not None
        endpoint = (config.base_url or "").rstrip("/")
        if not endpoint.startswith(("https://", "http://")):
            raise AzureConfigError(
                f"provider {config.name}: an Azure OpenAI provider needs its resource endpoint as baseUrl "
                "(https://<resource>.openai.azure.com)"
            )
        for suffix in ("/openai/v1", "/openai"):  # the endpoint, also when given with the API's path
            endpoint = endpoint.removesuffix(suffix)
        self.cloud: Cloud = cloud
        self._token_provider = entra_token_provider() if cloud.auth == "entra" else None
        base_url = f"{endpoint}/openai" if cloud.api_version else f"{endpoint}/openai/v1"
        super().__init__(replace(config, base_url=base_url))  # type: ignore[call-arg]

    def new_client(self, **options: Any) -> Any:
        if self.cloud.api_version:
            auth: dict[str, Any] = (
                {"azure_ad_token_provider": self._token_provider}
                if self._token_provider
                else {"api_key": options["api_key"]}
            )
            options.pop("api_key")
            return openai.AsyncAzureOpenAI(api_version=self.cloud.api_version, **auth, **options)
        if self._token_provider is not None:
            options["api_key"] = self._token_provider  # the v1 API takes the Entra token as the bearer token
        return openai.AsyncOpenAI(**options)

    def build_request(self, model: ModelInfo, context: Context, options: StreamOptions) -> dict[str, Any]:
        params = super().build_request(model, context, options)  # type: ignore[misc]
        params["model"] = self.cloud.upstream_model(model.id)
        return params

    async def open(self, model: ModelInfo, context: Context, options: StreamOptions) -> Upstream:
        if not self.cloud.api_version:
            return await super().open(model, context, options)  # type: ignore[misc]
        # The dated path: the SDK's own `post`, whose Azure client puts the deployment into a Chat
        # Completions path and the api-version on the query.
        params = await build_off_loop(self.build_request, model, context, options)
        headers = {**(self.request_headers(options) or {}), **(UPSTREAM_HEADERS.get() or {})}  # type: ignore[attr-defined]
        stream = await self.client.post(
            self.path,
            body=params,
            cast_to=object,
            stream=True,
            stream_cls=self._stream_cls,
            options={"headers": headers} if headers else {},
        )
        stream.response.request.headers = httpx2.Headers()
        return Upstream(stream, stream.close)

    async def count_tokens(self, model: ModelInfo, context: Context, options: StreamOptions) -> int:
        """Azure OpenAI has no input token counting endpoint (neither path serves `responses/input_tokens`), and
        the gateway does not estimate counts."""
        raise TokensNotCounted(
            f"{self.name}/{model.id}: Azure OpenAI has no input token counting endpoint, and the gateway does not "
            "estimate counts",
            param="model",
        )

    def error(self, exc: BaseException) -> ProviderError | None:
        error = super().error(exc)  # type: ignore[misc]
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        request_id = next((headers[name] for name in REQUEST_ID_HEADERS if headers and name in headers), None)
        if error is None or not request_id:
            return error
        return ProviderError(
            f"{error.message} (Azure request id {request_id})",
            status=error.status,
            retry_after_ms=error.retry_after_ms,
            retryable=error.retryable,
            kind=error.kind,
        )


class AzureResponsesProvider(AzureOpenAI, OpenAIResponsesProvider):
    """`openai-responses` on Azure OpenAI."""


class AzureCompletionsProvider(AzureOpenAI, OpenAICompletionsProvider):
    """`openai-completions` on Azure OpenAI."""
