"""Google Vertex AI as the simulator speaks it (mounted by `simulator.app` under `/vertex`; the service root is
`<simulator>/vertex`).

- `POST /vertex/token`: Google's OAuth 2.0 token endpoint for service accounts. A service-account file whose
  `token_uri` points here (`service_account_info`) makes `google-auth` send a JWT assertion
  (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`); it is checked as Google checks it: RS256 signed
  by the key its `kid` names (the public half of a key made by `service_account_info(registered=True)`),
  `aud` Google's token URI (as google-auth signs it) or this endpoint, `iss` the key's service account, not expired, scope `cloud-platform`. Answers
  `{access_token, expires_in, token_type}`, or 400 `invalid_grant` ("Invalid JWT Signature.").
- `POST /vertex/v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:streamRawPredict`: Claude, the
  Anthropic stream (`simulator.anthropic`); the body must carry `anthropic_version` (the SDK's) and no `model`
  (it is in the path).
- `POST /vertex/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent`: Gemini, the
  Gemini stream (`simulator.google`).
- `POST /vertex/v1/projects/{p}/locations/{l}/publishers/anthropic/models/count-tokens:rawPredict`: Claude's
  token count (`{"input_tokens": N}`); the body must carry `anthropic_version` and the `model`.
- `POST /vertex/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:countTokens`: Gemini's token count on
  Vertex (`{"totalTokens": N, "totalBillableCharacters": …}`), strict about Vertex's request shape: `contents`,
  `systemInstruction`, `tools`, `generationConfig` (and `model`, `instances`) at the top level; any other field,
  the Gemini API's `generateContentRequest` wrapper first, is 400 `INVALID_ARGUMENT` ("Unknown name …").
  The counts are `scenarios.token_count` of the body, recorded with endpoint `count`.

Both model routes want `Authorization: Bearer <a token issued here>`, valid until its expiry plus five
minutes of clock skew (else 401 `UNAUTHENTICATED`); a model named `…;throttle=N` is answered 429
`RESOURCE_EXHAUSTED` the first N times. `POST /vertex/_sim/lifetime?seconds=N` sets the lifetime of the
tokens issued from then on (default 3600; 0: already due for renewal); `GET /vertex/_sim/issued` counts
them; `GET /vertex/_sim/requests` lists what came (path, project, location, model), never a token.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections import Counter
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

SKEW_S = 300
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"  # the audience google-auth signs for, wherever it posts
PUBLIC_KEYS: dict[str, rsa.RSAPublicKey] = {}  # key id → public half, of the registered test keys

VendorCall = Callable[[Request, str, str], Awaitable[Any]]
CountCall = Callable[[Request, str, str, Callable[[int], dict[str, Any]]], Awaitable[Any]]
# What Vertex's `countTokens` request takes (`CountTokensRequest`, v1); any other field (the Gemini API's
# `generateContentRequest`, `toolConfig`, `safetySettings`, `cachedContent`, `labels`) is refused, as Vertex
# refuses unknown JSON fields.
GEMINI_COUNT_FIELDS = frozenset({"model", "instances", "contents", "systemInstruction", "tools", "generationConfig"})


def service_account_info(token_uri: str, *, project: str = "sim-project", registered: bool = True) -> dict[str, str]:
    """A service-account key file's content with a fresh RSA key, for tests and the demo only. `registered`:
    the token endpoint knows its public half (False: a key Google never issued, refused as a bad signature)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_id = secrets.token_hex(20)
    if registered:
        PUBLIC_KEYS[key_id] = key.public_key()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return {
        "type": "service_account",
        "project_id": project,
        "private_key_id": key_id,
        "private_key": pem.decode(),
        "client_email": f"gateway@{project}.iam.gserviceaccount.com",
        "client_id": "100000000000000000001",
        "token_uri": token_uri,
    }


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _google_error(status: int, code: str, message: str) -> Response:
    return JSONResponse({"error": {"code": status, "message": message, "status": code}}, status)


class Vertex:
    def __init__(self, vendor_call: VendorCall, count_call: CountCall) -> None:
        self.vendor_call = vendor_call
        self.count_call = count_call
        self.lifetime = 3600
        self.expiry: dict[str, float] = {}
        self.throttled: Counter[str] = Counter()
        self.log: list[dict[str, Any]] = []

    def check_assertion(self, assertion: str, token_uri: str) -> str | None:
        """Why the JWT assertion is refused, or None when Google would accept it."""
        try:
            header_b64, claims_b64, signature_b64 = assertion.split(".")
            header, claims = json.loads(_b64(header_b64)), json.loads(_b64(claims_b64))
        except ValueError:
            return "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe."
        public = PUBLIC_KEYS.get(header.get("kid", ""))
        if header.get("alg") != "RS256" or public is None:
            return "Invalid JWT Signature."
        try:
            public.verify(
                _b64(signature_b64), f"{header_b64}.{claims_b64}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature:
            return "Invalid JWT Signature."
        now = time.time()
        if claims.get("aud") not in (token_uri, GOOGLE_TOKEN_URI) or not (
            claims.get("iat", 0) - SKEW_S <= now <= claims.get("exp", 0) + SKEW_S
        ):
            return "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe."
        if "https://www.googleapis.com/auth/cloud-platform" not in str(claims.get("scope", "")).split():
            return "Invalid OAuth scope or ID token audience provided."
        return None

    def routes(self) -> list[Route]:
        async def token(request: Request) -> Response:
            form = {k: v[-1] for k, v in parse_qs((await request.body()).decode()).items()}
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
                return JSONResponse({"error": "unsupported_grant_type", "error_description": "Invalid grant_type"}, 400)
            refused = self.check_assertion(str(form.get("assertion", "")), str(request.url))
            if refused is not None:
                return JSONResponse({"error": "invalid_grant", "error_description": refused}, 400)
            issued = f"ya29.sim-{secrets.token_hex(12)}"
            self.expiry[issued] = time.time() + self.lifetime
            return JSONResponse({"access_token": issued, "expires_in": self.lifetime, "token_type": "Bearer"})

        async def model_call(request: Request, vendor: str, model: str | None = None, count: bool = False) -> Any:
            params = request.path_params
            model = model if model is not None else params["model"]
            self.log.append(
                {"path": request.url.path, "project": params["project"], "location": params["location"], "model": model}
            )
            bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
            expires = self.expiry.get(bearer)
            if expires is None or time.time() > expires + SKEW_S:
                return _google_error(
                    401,
                    "UNAUTHENTICATED",
                    "Request had invalid authentication credentials. Expected OAuth 2 "
                    "access token, login cookie or other valid authentication credential.",
                )
            body = await request.json() if vendor == "anthropic" or count else {}
            if vendor == "anthropic" and not body.get("anthropic_version"):
                return _google_error(400, "INVALID_ARGUMENT", "anthropic_version is required")
            if (
                vendor == "anthropic" and ("model" in body) != count
            ):  # a turn's model is in the path, a count's in the body
                return _google_error(
                    400, "INVALID_ARGUMENT", "the model goes in the body of a count, in the path of a turn"
                )
            if vendor == "google" and count:
                unknown = sorted(set(body) - GEMINI_COUNT_FIELDS) if isinstance(body, dict) else ["(not an object)"]
                if unknown:
                    return _google_error(
                        400,
                        "INVALID_ARGUMENT",
                        f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.',
                    )
            limit = next((int(p[len("throttle=") :]) for p in model.split(";") if p.startswith("throttle=")), 0)
            if self.throttled[model] < limit:
                self.throttled[model] += 1
                return _google_error(
                    429,
                    "RESOURCE_EXHAUSTED",
                    "Resource exhausted. Please try again later. Please refer to "
                    "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details.",
                )
            if count and vendor == "anthropic":
                return await self.count_call(request, vendor, model, lambda n: {"input_tokens": n})
            if count:
                return await self.count_call(
                    request, vendor, model, lambda n: {"totalTokens": n, "totalBillableCharacters": 4 * n}
                )
            return await self.vendor_call(request, vendor, model)

        async def claude(request: Request) -> Any:
            return await model_call(request, "anthropic")

        async def gemini(request: Request) -> Any:
            return await model_call(request, "google")

        async def claude_count(request: Request) -> Any:
            body = await request.json()
            return await model_call(
                request, "anthropic", str(body.get("model", "")) if isinstance(body, dict) else "", count=True
            )

        async def gemini_count(request: Request) -> Any:
            return await model_call(request, "google", count=True)

        async def lifetime(request: Request) -> Response:
            self.lifetime = int(request.query_params["seconds"])
            return JSONResponse({"lifetime": self.lifetime})

        async def issued(request: Request) -> Response:
            return JSONResponse({"issued": len(self.expiry)})

        async def requests_seen(request: Request) -> Response:
            return JSONResponse(self.log)

        models = "/vertex/v1/projects/{project}/locations/{location}/publishers"
        return [
            Route("/vertex/token", token, methods=["POST"]),
            Route(models + "/anthropic/models/{model}:streamRawPredict", claude, methods=["POST"]),
            Route(models + "/google/models/{model}:streamGenerateContent", gemini, methods=["POST"]),
            Route(models + "/anthropic/models/count-tokens:rawPredict", claude_count, methods=["POST"]),
            Route(models + "/google/models/{model}:countTokens", gemini_count, methods=["POST"]),
            Route("/vertex/_sim/lifetime", lifetime, methods=["POST"]),
            Route("/vertex/_sim/issued", issued, methods=["GET"]),
            Route("/vertex/_sim/requests", requests_seen, methods=["GET"]),
        ]
