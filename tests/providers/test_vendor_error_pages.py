"""A vendor (or a proxy in front of it) that answers an HTML error page: `errorMessage` keeps the status and a
short clean message (the page's title, else its first text), never the markup; for every adapter."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.routing import Route

from tests.conftest import turn
from tests.servers import ServerThread

TITLED = (
    "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>502 Bad Gateway</title>"
    "<style>body { font-family: sans-serif; }</style><script>var x = '<b>';</script></head>\n"
    "<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center>"
    + "<!-- padding -->" * 2000
    + "</body></html>"
)
UNTITLED = (
    "<html><body>\n  <h1>Service   Unavailable</h1>\n  <p>The server is temporarily unable to service your request "
    "&amp; will be back soon. " + "Please try again later. " * 100 + "</p></body></html>"
)


async def _page(request: Request):
    kind = request.path_params["kind"]
    if kind == "titled":
        return HTMLResponse(TITLED, status_code=502)
    if kind == "untitled":
        return HTMLResponse(UNTITLED, status_code=503)
    return PlainTextResponse(
        "upstream connect error or disconnect/reset before headers. reset reason: overflow", status_code=503
    )


@pytest.fixture(scope="module")
def pages():
    server = ServerThread(
        Starlette(routes=[Route("/{kind}/{path:path}", _page, methods=["POST", "GET"])]), "html-pages"
    ).start()
    yield server
    server.stop()


PROVIDERS = {
    "anthropic": "anthropic_base_url",
    "openai": "openai_base_url",
    "google": "google_base_url",
    "compat": "compat",
}
EXPECTED = {
    "titled": (502, "502 Bad Gateway"),
    "untitled": (
        503,
        "Service Unavailable The server is temporarily unable to service your request & will be back soon.",
    ),
    "text": (503, "upstream connect error or disconnect/reset before headers. reset reason: overflow"),
}


@pytest.mark.parametrize("kind", list(EXPECTED))
@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_html_error_page_becomes_status_and_short_text(gateway_factory, pages, provider, kind):
    base = f"{pages.url}/{kind}"
    setting = PROVIDERS[provider]
    overrides = {"base_urls": {"compat": f"{base}/v1"}} if setting == "compat" else {setting: base}
    gw = gateway_factory(retries=0, **overrides)
    result = gw.stream(turn(f"{provider}/some-model"))
    assert result.terminal["type"] == "error"
    message = result.terminal["errorMessage"]
    status, text = EXPECTED[kind]
    assert message.startswith(f"{provider}/some-model returned HTTP {status}: "), message
    assert text[:60] in message, message
    assert "<" not in message and "&amp;" not in message and "\n" not in message and "  " not in message
    assert len(message) <= 400, len(message)
