"""The interactive API page (`GET /docs`): static files in `app/apidocs/` that read `/openapi.json` and send
requests to this gateway with the key the user types in. Nothing is loaded from another host (the page's
Content-Security-Policy, the console's, allows this origin only), so it works offline and behind firewalls.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import Response

from app.api.console import SECURITY_HEADERS
from app.api.error_responses import ApiError

STATIC_DIR = Path(__file__).resolve().parent.parent / "apidocs"
_FILES = {
    "index.html": "text/html; charset=utf-8",
    "apidocs.js": "text/javascript; charset=utf-8",
    "apidocs.css": "text/css; charset=utf-8",
}


def _file(name: str) -> Response:
    if name not in _FILES:
        raise ApiError(404, "not_found", f"no such file: {name}")
    return Response((STATIC_DIR / name).read_bytes(), media_type=_FILES[name], headers=SECURITY_HEADERS)


def install_api_docs(app: FastAPI) -> None:
    @app.get("/docs", include_in_schema=False)
    async def docs_page() -> Response:
        return _file("index.html")

    @app.get("/docs/{name}", include_in_schema=False)
    async def docs_file(name: str) -> Response:
        return _file(name)
