"""Private names of the `google-genai` SDK, used by `app.providers.google` (see its `wire.py`).

The public `AsyncModels.generate_content_stream` converts the whole request in Python on the event loop and
parses every streamed chunk into a typed `GenerateContentResponse` (~12x the CPU per event of the other
adapters). The adapter instead runs the same steps as the SDK's private `AsyncModels._generate_content_stream`,
through these names:

- `GenerateContentParameters` (`types._GenerateContentParameters`), `parameters_to_wire`
  (`models._GenerateContentParameters_to_mldev(api_client, from_object, parent_object, root_object)`, or
  `…_to_vertex` for a Vertex AI client),
  `convert_to_dict` and `encode_unserializable_types` (`_common`): the SDK's own request conversion, run in a
  worker thread for a long history;
- `ApiClient` (`_api_client.BaseApiClient`) and `api_client(client)` (`Client._api_client`): the client whose
  `async_request_streamed` / `async_request(http_method, path, request_dict, http_options)` send a converted
  request as the SDK would (headers, key, base URL, errors) and hand back each chunk's raw JSON;
- `stream_chunks(api_client, http_method, path, request_dict, http_options)`: what `async_request_streamed`
  does (`BaseApiClient._build_request`, `._async_request(stream=True)`, a chunk whose first key is `error`
  raised as `errors.APIError.raise_error_async` raises it), yielding each chunk as the dict the SDK decoded
  rather than a `HttpResponse` whose body is that dict encoded again (`json.dumps`, which the adapter then
  decoded again, and a pydantic object per chunk: about a fifth of the adapter's CPU per event);
- `api_base_url(client)` (`BaseApiClient._http_options.base_url`): where the requests go, for the logs.
"""

from __future__ import annotations

from typing import Any, AsyncGenerator

from google import genai
from google.genai import _api_client, _common, errors, types
from google.genai import models as _genai_models

__all__ = [
    "ApiClient",
    "GenerateContentParameters",
    "api_base_url",
    "api_client",
    "convert_to_dict",
    "encode_unserializable_types",
    "parameters_to_wire",
    "stream_chunks",
]

ApiClient = _api_client.BaseApiClient
GenerateContentParameters = types._GenerateContentParameters


parameters_to_mldev = _genai_models._GenerateContentParameters_to_mldev
parameters_to_vertex = _genai_models._GenerateContentParameters_to_vertex


def parameters_to_wire(
    api_client: _api_client.BaseApiClient,
    from_object: object,
    parent_object: dict[str, Any] | None,
    root_object: object,
) -> dict[str, Any]:
    """The SDK's conversion of `GenerateContentParameters` for the client's API: Vertex AI's
    (`_GenerateContentParameters_to_vertex`) or the Gemini Developer API's (`…_to_mldev`)."""
    convert = parameters_to_vertex if api_client.vertexai else parameters_to_mldev
    return convert(api_client, from_object, parent_object, root_object)


convert_to_dict = _common.convert_to_dict
encode_unserializable_types = _common.encode_unserializable_types


def api_client(client: genai.Client) -> _api_client.BaseApiClient:
    """The client's lower-level API client (the one its `models` and `aio.models` send through)."""
    return client._api_client


def api_base_url(client: genai.Client) -> str:
    """The base URL the client sends to ("" when the SDK's default applies)."""
    return str(client._api_client._http_options.base_url or "")


async def stream_chunks(
    client: _api_client.BaseApiClient,
    http_method: str,
    path: str,
    request_dict: dict[str, Any],
    http_options: Any = None,
) -> AsyncGenerator[Any, None]:
    """`client.async_request_streamed(...)`, each chunk as the decoded JSON the SDK read (see the module's doc).
    The request is sent (and an HTTP error raised) before this returns, as with the SDK's method."""
    http_request = client._build_request(http_method, path, request_dict, http_options)
    response = await client._async_request(http_request=http_request, http_options=http_options, stream=True)

    async def chunks() -> AsyncGenerator[Any, None]:
        async for chunk in response:
            # The SDK tests `json.dumps(chunk).startswith('{"error":')`: a dict whose first key is `error`.
            if isinstance(chunk, dict) and next(iter(chunk), None) == "error":
                error = chunk.get("error", {})
                code: Any = error.get("code") if isinstance(error, dict) else None
                await errors.APIError.raise_error_async(code, chunk, response)
            yield chunk

    return chunks()
