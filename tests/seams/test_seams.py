"""Every private name of a dependency that `app/` relies on (fenced in `app/seams/`) still exists, with the
parameters we call it with: an SDK upgrade that moves one fails here, not in production. Also: no module of
`app/` outside the seams imports a private module of a dependency or reads a fenced private attribute."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


# Stainless (`anthropic`, `openai`)


@pytest.mark.parametrize("sdk_name", ["anthropic", "openai"])
def test_stainless_names(sdk_name):
    import anthropic
    import openai

    from app.seams import stainless

    sdk = {"anthropic": anthropic, "openai": openai}[sdk_name]
    client_class = {"anthropic": anthropic.AsyncAnthropic, "openai": openai.AsyncOpenAI}[sdk_name]
    options = {"anthropic": stainless.AnthropicRequestOptions, "openai": stainless.OpenAIRequestOptions}[sdk_name]
    assert options.__module__ == f"{sdk_name}._models" and options.__name__ == "FinalRequestOptions"
    assert {"method", "url", "headers", "content", "idempotency_key"} <= set(options.model_fields)
    assert parameters(options.model_copy) == ["self", "update", "deep"]
    template = options.construct(method="post", url="http://127.0.0.1:9/v1/x")
    copy = template.model_copy(update={"content": b"{}", "idempotency_key": "k", "headers": {"a": "b"}})
    assert (copy.method, copy.url, copy.content, copy.idempotency_key) == (
        "post",
        "http://127.0.0.1:9/v1/x",
        b"{}",
        "k",
    )
    assert template.content is None
    assert parameters(client_class._prepare_url) == ["self", "url"]
    assert parameters(client_class.request) == ["self", "cast_to", "options", "stream", "stream_cls"]
    client = client_class(api_key="k", base_url="http://127.0.0.1:9/base")
    assert stainless.absolute_url(client, "/v1/messages") == "http://127.0.0.1:9/base/v1/messages"
    assert sdk.AsyncStream[object] is not None and callable(sdk.DefaultAioHttpClient)


# google-genai


def test_genai_names():
    from google import genai
    from google.genai import types

    from app.seams import genai as seam

    assert seam.GenerateContentParameters.__name__ == "_GenerateContentParameters"
    assert {"model", "contents", "config"} <= set(seam.GenerateContentParameters.model_fields)
    for convert in (seam.parameters_to_wire, seam.parameters_to_mldev, seam.parameters_to_vertex):
        assert parameters(convert) == ["api_client", "from_object", "parent_object", "root_object"]
    assert parameters(seam.convert_to_dict)[0] == "obj"
    assert parameters(seam.encode_unserializable_types) == ["data"]
    for method in (seam.ApiClient.async_request_streamed, seam.ApiClient.async_request):
        assert parameters(method) == ["self", "http_method", "path", "request_dict", "http_options"]
    # `stream_chunks` does what `async_request_streamed` does, through its two private steps.
    assert parameters(seam.ApiClient._build_request) == ["self", "http_method", "path", "request_dict", "http_options"]
    assert parameters(seam.ApiClient._async_request) == ["self", "http_request", "http_options", "stream"]
    streamed = inspect.getsource(seam.ApiClient.async_request_streamed)
    assert "self._build_request(" in streamed and "self._async_request(" in streamed
    assert "chunk_dump.startswith('{\"error\":')" in streamed and "raise_error_async(" in streamed
    client = genai.Client(
        api_key="k",
        vertexai=False,
        http_options=types.HttpOptions(base_url="http://127.0.0.1:9/", api_version="v1beta"),
    )
    try:
        assert isinstance(seam.api_client(client), seam.ApiClient)
        assert seam.api_base_url(client) == "http://127.0.0.1:9/"
        # The conversion runs end to end on this SDK version.
        parameters_ = seam.GenerateContentParameters(
            model="gemini-x", contents="hi", config=types.GenerateContentConfig()
        )
        body = seam.parameters_to_wire(seam.api_client(client), parameters_, None, parameters_)
        body = seam.encode_unserializable_types(seam.convert_to_dict(body))
        assert body["_url"] == {"model": "models/gemini-x"} and body["contents"][0]["parts"] == [{"text": "hi"}]
    finally:
        client.close()


# httpx2


async def test_httpx2_names():
    import httpx2

    from app.seams.httpx2 import take_content_decoder, wrap_transports

    client = httpx2.AsyncClient(mounts={"http://proxied": httpx2.AsyncHTTPTransport()})
    try:
        assert isinstance(client._transport, httpx2.AsyncBaseTransport) and isinstance(client._mounts, dict)
        wrapped: list[object] = []
        wrap_transports(client, lambda transport: wrapped.append(transport) or transport)
        assert len(wrapped) == 2
    finally:
        await client.aclose()
    response = httpx2.Response(200, headers={"content-encoding": "gzip"})
    decoder = take_content_decoder(response)
    assert callable(decoder.decode) and callable(decoder.flush) and not hasattr(response, "_decoder")


# uvicorn


def test_uvicorn_names():
    import uvicorn

    from app.seams.uvicorn import HttpToolsProtocol, Server

    assert Server is uvicorn.Server
    assert HttpToolsProtocol.__module__ == "uvicorn.protocols.http.httptools_impl"
    assert parameters(Server.shutdown) == ["self", "sockets"]
    # The signal handler is the server's bound `handle_exit` (sse-starlette replaces the function on the class,
    # so its own parameters are not checked: what `app.server.hosting` reads is the handler's `__self__`).
    assert callable(Server.handle_exit)
    assert "signal.signal(sig, self.handle_exit)" in inspect.getsource(Server.capture_signals)
    server = Server(uvicorn.Config(app=None))
    assert (server.should_exit, server.force_exit, server.started) == (False, False, False)
    assert "self.servers" in inspect.getsource(Server.startup)
    for name, expected in {
        "__init__": ["self", "config", "server_state", "app_state", "_loop"],
        "connection_made": ["self", "transport"],
        "connection_lost": ["self", "exc"],
        "data_received": ["self", "data"],
        "on_message_begin": ["self"],
        "on_headers_complete": ["self"],
    }.items():
        assert parameters(getattr(HttpToolsProtocol, name)) == expected, name
    source = inspect.getsource(HttpToolsProtocol)
    for attribute in ("self.loop =", "self.transport =", "self.client ="):
        assert attribute in source, attribute


# OpenTelemetry


def test_opentelemetry_names():
    from opentelemetry.sdk import _configuration

    from app.seams import opentelemetry as seam

    assert parameters(_configuration._import_sampler) == ["sampler_name"]
    assert parameters(_configuration._get_sampler) == []
    assert parameters(_configuration._import_exporters) == [
        "trace_exporter_names",
        "metric_exporter_names",
        "log_exporter_names",
    ]
    assert parameters(_configuration._get_exporter_entry_point) == ["exporter_name", "signal_type"]
    assert seam.OTLP_HTTP_EXPORTER == "otlp_proto_http"
    assert seam.exporter_entry_point("console") == "console"
    assert "console" in seam.span_exporter_classes(["console"])


# The fence itself

PRIVATE_ATTRIBUTES = {
    "_prepare_url",
    "_api_client",
    "_http_options",
    "_get_content_decoder",
    "_decoder",
    "_mounts",
    "_transport",
}


def _private_imports_and_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level and not node.module.startswith("app"):
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            if any(part.startswith("_") and not part.startswith("__") for m in modules for part in m.split(".")):
                found.append(f"line {node.lineno}: from {node.module} import …")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(part.startswith("_") for part in alias.name.split(".")):
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_private_names_only_in_seams():
    outside = {
        str(path.relative_to(APP.parent)): found
        for path in sorted(APP.rglob("*.py"))
        if "seams" not in path.relative_to(APP).parts and (found := _private_imports_and_reads(path))
    }
    assert not outside, f"private names of dependencies outside app/seams/: {outside}"
