"""The HTTP glue of a door's token counting endpoint (`POST /v1/messages/count_tokens`): authenticate, read and
decode the body as the door decodes a turn's (within the same `GATEWAY_MAX_BODY_BYTES`), admit it as a count
against the key's limits (`Gateway.count_tokens`: 429s as a turn's), ask the serving vendor
(`app.core.counting`), answer in the door's shape. Errors before the call are rendered as the door renders a turn's; a vendor failure is classified as a
turn's would be (`app.core.settled.upstream_failure`), a timeout as 504."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from app.api.auth import authorization
from app.api.body import parse_json, parse_off_loop, read_body
from app.api.error_responses import json_response, refusal_error
from app.api.turns import url_body
from app.contract.failures import ErrorKind, Failure
from app.core.settled import retry_headers, upstream_failure
from app.doors.base import TokenCountDoor
from app.doors.errors import BadRequest
from app.gateway import Gateway
from app.providers.base import ProviderError
from app.contract.refusals import Refusal

TIMEOUT_KINDS = frozenset({ErrorKind.TIMEOUT, ErrorKind.CONNECT_TIMEOUT})


async def serve_count(request: Request, door: TokenCountDoor) -> Response:
    gateway: Gateway = request.app.state.gateway
    request_id: str = request.scope["state"]["request_id"]
    headers = {"X-Request-Id": request_id}
    try:
        route = door.route
        key_id = gateway.keys.identify(
            authorization(request.headers, request.query_params if route.key_in_query else None)
        )
        raw = await read_body(request, gateway.settings.max_body_bytes)
        depth = gateway.settings.max_json_depth
        decoded = await parse_off_loop(
            raw,
            lambda body: door.decode(
                url_body(route, request, parse_json(body, depth, door.prose_paths)), request.headers
            ),
        )
        tokens = await gateway.count_tokens(decoded.unified, key_id, request_id)
    except BadRequest as error:
        return json_response(door.error_body(error), error.status, {**headers, **error.headers})
    except Refusal as refusal:
        api_error = refusal_error(refusal)
        return json_response(door.error_body(api_error), api_error.status, {**headers, **api_error.headers})
    except ProviderError as error:
        failure, status = (
            (Failure.TIMEOUT, 504) if error.kind in TIMEOUT_KINDS else upstream_failure(_kind(error.kind), error.status)
        )
        status, body = door.failed(failure, status, error.message, request_id)
        return json_response(body, status, {**headers, **retry_headers(error.retry_after_ms)})
    return json_response(door.answer(tokens), 200, headers)


def _kind(kind: ErrorKind | str) -> ErrorKind:
    try:
        return ErrorKind(kind)
    except ValueError:
        return ErrorKind.UPSTREAM
