"""The request's edge: the request id every response carries, and the fast path that answers the turn routes
without FastAPI's per-request machinery.

For every request FastAPI runs a stack of ASGI layers (server errors, telemetry, body limit, our middleware,
exception handlers, an exit stack, the router, the route's own exception handlers and two more exit stacks)
before the endpoint, and an open stream holds all of them until it ends: about 11 KB of frames, closures,
`AsyncExitStack`s and `Request` objects per open stream, and about 7 % of the CPU of a short turn. The turn
routes use none of it: their endpoints take the plain `Request` and return a `Response`, without
dependencies, body parameters or response models.

The fast path is the outermost layer of the app (`GatewayApp.__call__`, before Starlette's middleware stack).
It answers a POST on a turn route itself, in one coroutine (which an open stream holds): it gives the request
its id, calls the endpoint, maps an exception to a response with the app's own exception handlers (looked up
by `TurnRoutes` as Starlette's `ExceptionMiddleware` does) and sends the response. The turn routes are the
`TurnRoute`s of the one route table (`app.api.routes`, from the doors' own description): FastAPI declares
them (the OpenAPI document, FastAPI's 405 for other methods), and `GatewayApp.start_fast_path` collects them
at start-up. Anything else (other paths, a trailing slash, a root path) goes through FastAPI.

Middleware does not see the turn routes, so at start-up `start_fast_path` refuses an app with middleware the
fast path does not stand in for (`FAST_PATH_COVERS`): CORS, GZip or FastAPI's native OpenTelemetry would
silently skip the main routes. The gateway's tracing wraps the fast path instead (`app.api.traced`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.error_responses import ApiError, error_response, json_response
from app.doors.registry import DoorTable
from app.server.startup_messages import StartupError, StartupErrorMessages
from app.doors.base import REQUEST_ID

log = logging.getLogger("gateway")

Endpoint = Callable[[Request], Awaitable[Response]]
INTERNAL_ERROR = {"error": {"type": "internal_error", "message": "internal error", "param": None}}


OPEN_TO_ANY_HOST = frozenset({"/healthz", "/readyz"})  # probes, which show nothing (a kubelet sends the pod's IP)


def request_host(scope: Scope) -> str | None:
    """The request's `Host` name, lowercase, without its port (`[::1]:8080` → `::1`); None without one."""
    for name, value in scope.get("headers", ()):
        if name == b"host":
            host = value.decode("latin-1").strip().lower()
            if host.startswith("["):
                return host[1 : host.find("]")] if "]" in host else host
            name_part, sep, port = host.rpartition(":")
            return name_part if sep and port.isdigit() else host
    return None


def host_allowed(scope: Scope, allowed: frozenset[str] | None) -> bool:
    """Whether the request names a host this gateway answers (`GATEWAY_ALLOWED_HOSTS`): a page on another
    site that rebinds its DNS name to 127.0.0.1 still sends its own name as `Host`. A request without `Host`
    (HTTP/1.0) and the probes are let through."""
    if allowed is None or scope.get("path") in OPEN_TO_ANY_HOST:
        return True
    host = request_host(scope)
    return host is None or host in allowed


def host_refused(scope: Scope) -> ApiError:
    return ApiError(
        400,
        "host_not_allowed",
        f"Host {request_host(scope)!r} is not a name this gateway answers (GATEWAY_ALLOWED_HOSTS)",
    )


def new_request_id() -> str:
    """Time-ordered, unguessable: 12 hex digits of milliseconds, then 16 random hex digits."""
    return f"req_{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


def route_path(scope: Scope) -> str:
    """The request's path inside the app, without the root path it is served under (as Starlette routes it)."""
    path: str = scope["path"]
    root_path = scope.get("root_path", "")
    if root_path and path.startswith(root_path) and path[len(root_path) : len(root_path) + 1] == "/":
        return path[len(root_path) :]
    return path


def _route_path(scope: Scope) -> Scope:
    """pi's client joins its proxyUrl verbatim: `//api/stream` is accepted as `/api/stream`."""
    if scope["path"].startswith("//"):
        return {**scope, "path": "/" + scope["path"].lstrip("/")}
    return scope


class SendWithId:
    """`send`, adding `X-Request-Id` to the response's start (replacing one the response set itself), and
    noting that the response has started.

    A plain callable returning the server's own awaitable (not a coroutine of its own): every frame of a
    stream passes through it."""

    __slots__ = ("send", "header", "started")

    def __init__(self, send: Send, request_id: str) -> None:
        self.send = send
        self.header = (b"x-request-id", request_id.encode())
        self.started = False

    def __call__(self, message: Message) -> Awaitable[None]:
        if message["type"] == "http.response.start":
            self.started = True
            headers = [h for h in message.get("headers", []) if h[0].lower() != b"x-request-id"]
            message["headers"] = [*headers, self.header]
        return self.send(message)


def _with_id(scope: Scope, send: Send) -> tuple[str, SendWithId]:
    request_id = new_request_id()
    scope.setdefault("state", {})["request_id"] = request_id
    REQUEST_ID.set(request_id)  # for error bodies that carry it (this request's task and what it awaits)
    return request_id, SendWithId(send, request_id)


async def _internal_error(request_id: str, scope: Scope, receive: Receive, send: SendWithId) -> None:
    """A bug of ours: log it with the request id, answer 500 without a stack trace (unless already answering)."""
    log.exception("unhandled error in request %s on %s", request_id, scope.get("path"))
    if not send.started:
        await json_response(INTERNAL_ERROR, 500)(scope, receive, send)


class RequestIdMiddleware:
    """Gives every request an id (in `scope["state"]["request_id"]`) and every response `X-Request-Id`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope = _route_path(scope)
        request_id, send_with_id = _with_id(scope, send)
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            await _internal_error(request_id, scope, receive, send_with_id)


class TurnRoute(APIRoute):
    """A door's turn route (`app.api.routes`): declared with FastAPI, answered by the fast path."""


class TurnRoutes:
    """The turn routes of `app` (path → endpoint of each `TurnRoute` in its route table) and its exception
    handlers, for the fast path."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        # The app's routes as its router matches them (an included router's with their prefix); a route with
        # path parameters (the Gemini door's `{model}`) is matched by its pattern, after the plain paths.
        self.endpoints: dict[str, Endpoint] = {}
        self.patterns: list[tuple[Any, str, Endpoint]] = []
        for context in iter_route_contexts(app.routes):
            route, path, endpoint = context.original_route, context.path, context.endpoint
            if not isinstance(route, TurnRoute) or path is None or endpoint is None:
                continue
            if "{" in path:
                self.patterns.append((route.path_regex, path, endpoint))
            else:
                self.endpoints[path] = endpoint

    def endpoint(self, scope: Scope) -> Endpoint | None:
        """The endpoint that answers this request directly, or None (FastAPI answers it). A route with path
        parameters puts them in the scope (`path_params`) as Starlette's router does."""
        matched = self.match(scope)
        return None if matched is None else matched[1]

    def match(self, scope: Scope) -> tuple[str, Endpoint] | None:
        """The route template and endpoint that answer this request directly, or None."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path") or self.app.root_path:
            return None
        path = scope["path"]
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        endpoint = self.endpoints.get(path)
        if endpoint is not None:
            return path, endpoint
        for regex, template, endpoint in self.patterns:
            found = regex.match(path)
            if found is not None:
                scope["path_params"] = found.groupdict()
                return template, endpoint
        return None

    def handler(self, exc: Exception) -> Callable[[Request, Exception], Awaitable[Response]] | None:
        """The app's handler for `exc`, looked up as Starlette's `ExceptionMiddleware` does (a status handler
        for an `HTTPException`, then the nearest class in its MRO). The gateway's handlers are all async."""
        handlers: dict[Any, Any] = self.app.exception_handlers
        if isinstance(exc, HTTPException) and exc.status_code in handlers:
            return handlers[exc.status_code]
        for cls in type(exc).__mro__:
            if cls in handlers:
                return handlers[cls]
        return None


class GatewayApp(FastAPI):
    """The gateway's FastAPI app; once `start_fast_path` ran, POSTs on the turn routes skip FastAPI's stack."""

    # Middleware the fast path stands in for: it gives the request its id itself (`RequestIdMiddleware`), and
    # start-up messages concern the lifespan only (`StartupErrorMessages`).
    FAST_PATH_COVERS: tuple[type, ...] = (RequestIdMiddleware, StartupErrorMessages)

    turn_routes: TurnRoutes | None = None
    # The doors the app serves (`create_app(doors=...)`): their routes are in its route table, and an error on a
    # door's path is answered in that door's shape.
    doors: DoorTable = DoorTable()
    # The Host names requests may carry (None: any), from `Settings.allowed_host_names`, checked here for every
    # request on either path; a door route's refusal is in its door's error shape.
    allowed_hosts: frozenset[str] | None = None

    def start_fast_path(self) -> None:
        """Answer the route table's turn routes on the fast path from now on; a `StartupError` when middleware
        was added that the fast path would skip (called at start-up, once the app is complete)."""
        skipped = [
            getattr(m.cls, "__name__", repr(m.cls)) for m in self.user_middleware if m.cls not in self.FAST_PATH_COVERS
        ]
        if skipped:
            raise StartupError(
                f"middleware {', '.join(skipped)} would not see the turn routes, which skip Starlette's middleware "
                "stack (app/api/edge.py)",
                "wrap the whole app instead (as app/api/traced.py does), or make the fast path stand in for it",
            )
        self.turn_routes = TurnRoutes(self)

    async def _refuse_host(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope = _route_path(scope)
        _, send_with_id = _with_id(scope, send)
        response = error_response(host_refused(scope), self.doors.door_at(route_path(scope)))
        await response(scope, receive, send_with_id)

    def route_of(self, scope: Scope) -> str | None:
        """The route template the request matched: the turn route's path on the fast path, else the route
        FastAPI's router matched (it notes it in the scope; None for a 404)."""
        turn_routes = self.turn_routes
        matched = turn_routes.match(scope) if turn_routes is not None else None
        if matched is not None:
            return matched[0]
        return getattr(scope.get("route"), "path", None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        turn_routes = self.turn_routes
        endpoint = None if turn_routes is None else turn_routes.endpoint(scope)
        if scope["type"] == "http" and not host_allowed(scope, self.allowed_hosts):
            await self._refuse_host(scope, receive, send)
            return
        if endpoint is None:
            await super().__call__(scope, receive, send)
            return
        # A turn route, answered here as FastAPI would (in this one frame: an open stream holds it).
        scope = _route_path(scope)
        scope["app"] = self
        request_id, send_with_id = _with_id(scope, send)
        request = Request(scope, receive)
        try:
            try:
                response = await endpoint(request)
                await response(scope, receive, send_with_id)
            except Exception as exc:
                handler = turn_routes.handler(exc)  # type: ignore[union-attr]
                if handler is None or send_with_id.started:
                    raise
                response = await handler(request, exc)
                await response(scope, receive, send_with_id)
        except Exception:
            await _internal_error(request_id, scope, receive, send_with_id)
