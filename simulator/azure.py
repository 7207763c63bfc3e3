"""Azure OpenAI as the simulator speaks it (mounted by `simulator.app` under `/azure`; the resource endpoint
is `<simulator>/azure`).

Paths, as an Azure OpenAI resource serves them:
- the v1 API: `POST /azure/openai/v1/responses`, `POST /azure/openai/v1/chat/completions` (deployment name in
  the body's `model`);
- the dated API (`?api-version=` required, else 404 as Azure answers): `POST /azure/openai/responses`,
  `POST /azure/openai/deployments/{deployment}/chat/completions`.

Authentication as Azure checks it: an `api-key` header equal to `AZURE_KEY`, or `Authorization: Bearer` with
that key (the v1 API) or with an Entra ID token this simulator issued (`simulator.entra`), not past its
expiry; anything else is Azure's 401. The streams are the OpenAI ones (`simulator.openai`,
`simulator.openai_completions`) chosen by the deployment name, like every scenario.

Throttling: a deployment name with `throttle=N` (`text;throttle=1;t=<tag>`) is answered 429 the first N
times it is called, with Azure's body and `retry-after-ms` / `retry-after` headers.
Every response carries an `apim-request-id`. `GET /azure/_sim/requests` lists what came (path, api-version,
deployment, auth scheme: `api-key` | `bearer-key` | `bearer-entra`), never a credential.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

AZURE_KEY = "azure-sim-key-0123456789abcdef"
RETRY_AFTER_MS = 40
UNAUTHORIZED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an "
    "active subscription and use a correct regional API endpoint for your resource."
)

VendorCall = Callable[[Request, str, str], Awaitable[Any]]  # (request, simulator vendor, model) → its answer


def _error(status: int, code: str, message: str, **headers: str) -> Response:
    request_id = str(uuid.uuid4())
    return JSONResponse(
        {"error": {"code": code, "message": message}},
        status,
        {"apim-request-id": request_id, "x-request-id": request_id, **headers},
    )


def routes(vendor_call: VendorCall, entra_tokens: Callable[[str], bool]) -> list[Route]:
    """The Azure routes; `entra_tokens(token)` says whether an Entra ID token is one issued and still valid."""
    throttled: Counter[str] = Counter()
    log: list[dict[str, Any]] = []

    def auth_scheme(request: Request) -> str | None:
        if request.headers.get("api-key") == AZURE_KEY:
            return "api-key"
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        if bearer == AZURE_KEY and "/azure/openai/v1/" in request.url.path:  # mounted anywhere
            return "bearer-key"
        if bearer and entra_tokens(bearer):
            return "bearer-entra"
        return None

    async def serve(request: Request, vendor: str, deployment: str | None, dated: bool) -> Any:
        api_version = request.query_params.get("api-version")
        if dated and not api_version:
            return _error(404, "404", "Resource not found")
        scheme = auth_scheme(request)
        if deployment is None:
            try:
                deployment = str((await request.json()).get("model", ""))
            except ValueError:
                deployment = ""
        log.append({"path": request.url.path, "apiVersion": api_version, "deployment": deployment, "auth": scheme})
        if scheme is None:
            return _error(401, "401", UNAUTHORIZED)
        limit = next((int(p[len("throttle=") :]) for p in deployment.split(";") if p.startswith("throttle=")), 0)
        if throttled[deployment] < limit:
            throttled[deployment] += 1
            return _error(
                429,
                "429",
                f"Requests to the {vendor} operation under Azure OpenAI API version {api_version or 'v1'} have exceeded "
                "the token rate limit of your current pricing tier. Please retry after 1 second.",
                **{"retry-after-ms": str(RETRY_AFTER_MS), "retry-after": "1"},
            )
        return await vendor_call(request, vendor, deployment)

    async def v1_responses(request: Request) -> Any:
        return await serve(request, "openai", None, dated=False)

    async def v1_chat(request: Request) -> Any:
        return await serve(request, "compat", None, dated=False)

    async def dated_responses(request: Request) -> Any:
        return await serve(request, "openai", None, dated=True)

    async def dated_chat(request: Request) -> Any:
        return await serve(request, "compat", request.path_params["deployment"], dated=True)

    async def requests_seen(request: Request) -> Response:
        if request.method == "DELETE":
            log.clear()
        return JSONResponse(log)

    return [
        Route("/azure/openai/v1/responses", v1_responses, methods=["POST"]),
        Route("/azure/openai/v1/chat/completions", v1_chat, methods=["POST"]),
        Route("/azure/openai/responses", dated_responses, methods=["POST"]),
        Route("/azure/openai/deployments/{deployment}/chat/completions", dated_chat, methods=["POST"]),
        Route("/azure/_sim/requests", requests_seen, methods=["GET", "DELETE"]),
    ]
