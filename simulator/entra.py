"""A Microsoft Entra ID managed-identity token endpoint, as App Service and Azure Functions serve one to
`azure-identity` (`IDENTITY_ENDPOINT` + `IDENTITY_HEADER`): `GET /entra/msi/token?api-version=2019-08-01&
resource=<resource>` with the `X-IDENTITY-HEADER` secret answers `{access_token, expires_on, resource,
token_type}`. The Azure routes (`simulator.azure`) accept a bearer token it issued until its `expires_on`
plus five minutes (Entra ID's clock-skew allowance).

`POST /entra/_sim/lifetime?seconds=N` sets the lifetime of the tokens it issues from then on (default 3600;
0: a token already at its expiry, which a client must renew before its next request);
`GET /entra/_sim/issued` says how many it issued.
"""

from __future__ import annotations

import secrets
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

IDENTITY_HEADER = "entra-sim-identity-header-0123"  # the value the test sets as IDENTITY_HEADER
SKEW_S = 300


class Entra:
    def __init__(self) -> None:
        self.lifetime = 3600
        self.expiry: dict[str, int] = {}  # token → expires_on (epoch seconds)

    def valid(self, token: str) -> bool:
        expires_on = self.expiry.get(token)
        return expires_on is not None and time.time() <= expires_on + SKEW_S

    def routes(self) -> list[Route]:
        async def token(request: Request) -> Response:
            if request.headers.get("x-identity-header") != IDENTITY_HEADER:
                return JSONResponse({"statusCode": 400, "message": "X-IDENTITY-HEADER is missing or wrong"}, 400)
            resource = request.query_params.get("resource")
            if not resource:
                return JSONResponse({"statusCode": 400, "message": "resource is required"}, 400)
            issued = f"entra-sim-{secrets.token_hex(8)}"
            expires_on = int(time.time()) + self.lifetime
            self.expiry[issued] = expires_on
            return JSONResponse(
                {
                    "access_token": issued,
                    "expires_on": str(expires_on),
                    "resource": resource,
                    "token_type": "Bearer",
                    "client_id": "00000000-0000-0000-0000-00000000c10d",
                }
            )

        async def lifetime(request: Request) -> Response:
            self.lifetime = int(request.query_params["seconds"])
            return JSONResponse({"lifetime": self.lifetime})

        async def issued(request: Request) -> Response:
            return JSONResponse({"issued": len(self.expiry)})

        return [
            Route("/entra/msi/token", token, methods=["GET"]),
            Route("/entra/_sim/lifetime", lifetime, methods=["POST"]),
            Route("/entra/_sim/issued", issued, methods=["GET"]),
        ]
