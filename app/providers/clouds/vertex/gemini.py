"""Gemini on Google Vertex AI: the `google-generative-ai` adapter with `google-genai`'s `vertexai=True`
client, catalog `cloud: {kind: "vertex", project, region}` (docs/clouds/vertex.md). The SDK sends
`<base>/v1/projects/<project>/locations/<region>/publishers/google/models/<model>:streamGenerateContent` with a
bearer token from Application Default Credentials (`auth.py`); the request body is the SDK's
Vertex conversion (`app.seams.genai.parameters_to_wire`), the chunks the same as the Gemini API's."""

from __future__ import annotations

import httpx2
from google import genai
from google.genai import types

from app.providers.base import ProviderError
from app.providers.config import ProviderConfig
from app.providers.google import GoogleProvider
from app.providers.clouds.vertex.auth import credentials_error

DEFAULT_REGION = "global"


class VertexGoogleProvider(GoogleProvider):
    def new_client(self, config: ProviderConfig, http: httpx2.AsyncClient) -> genai.Client:
        cloud = config.cloud
        assert cloud is not None
        return genai.Client(
            vertexai=True,
            project=cloud.project,
            location=cloud.region or DEFAULT_REGION,
            http_options=types.HttpOptions(base_url=config.base_url or None, api_version="v1", httpx_async_client=http),
        )

    def error(self, exc: BaseException) -> ProviderError | None:
        return credentials_error(exc) or super().error(exc)
