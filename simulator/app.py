"""The vendor simulator: an ASGI app that speaks each vendor's streaming wire format.

Routes (mounted wherever; the gateway's demo mode mounts it at `/_simulator`):

- `POST /anthropic/v1/messages`                             Anthropic Messages
- `POST /openai/v1/responses`                               OpenAI Responses
- `POST /google/v1beta/models/{model}:streamGenerateContent`  Gemini (`?alt=sse`; the model is in the path)
- `POST /compat/v1/chat/completions`                        OpenAI Chat Completions (api `openai-completions`)
- `POST /bedrock/model/{modelId}/invoke-with-response-stream` Anthropic on Amazon Bedrock (`simulator/bedrock.py`)
- `POST /anthropic/v1/messages/count_tokens`                Anthropic's token count (`{"input_tokens"}`)
- `POST /openai/v1/responses/input_tokens`                  OpenAI's input token count (`response.input_tokens`)
- `POST /google/v1beta/models/{model}:countTokens`          Gemini's token count (`{"totalTokens"}`)
- Bedrock's `CountTokens` and Vertex AI's count paths: `simulator/bedrock.py`, `simulator/vertex.py`
- `GET  /_sim/requests?contains=…`                          what it saw, newest last
- `GET  /_sim/wait?contains=…&until=closed|finished&timeout=` long-poll until a matching request got there
  (`&all=1`: until every matching request got there; answers the list)
- `DELETE /_sim/requests`                                   forget everything

The counting endpoints answer `scenarios.token_count(body)` (deterministic), or the scenario's HTTP error
(`anthropic/http-429` is a 429 there too); the Chat Completions server has none, as vendors of that api have
none. Every request is recorded; a count's `endpoint` is `count` (a turn's `stream`).
Mounted with a `log_guard` (the gateway's demo mode with keys), the request log is scoped: each caller sees,
waits for and clears only the requests sent on its behalf (`X-Gateway-Caller`, which the gateway adds to its
upstream requests in demo mode: `app.providers.calls.DEMO_CALLER`).

For every request it records the body, the scenario, frames sent, whether the whole scenario was sent
(`completed`) and whether the client closed the connection before the end (`clientClosed`, `closedAt`).

A model id with `;prompt_cache=1` turns on the instance's simulated prompt cache for that request: its usage
reports as cache read the part of the prompt whose prefix this instance served before
(`simulator/prompt_cache.py`).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from simulator import anthropic, bedrock, scenarios as s
from simulator import openai
from simulator import google
from simulator import openai_completions
from simulator import faults as sim_faults
from simulator import azure
from simulator.entra import Entra
from simulator.vertex import Vertex
from simulator.prompt_cache import PromptCache, wanted as prompt_cache_wanted

RECORDED_HEADERS = ("anthropic-beta", "anthropic-version", "baggage")  # what a test may check a request carried
SAMPLES = Path(__file__).resolve().parent.parent / "tests" / "wire_samples"  # the recorded vendor streams


@dataclass
class Seen:
    id: int
    vendor: str
    model: str
    scenario: dict[str, Any]
    body: dict[str, Any]
    raw: str
    auth_sha256: str | None
    caller: str | None = None  # `X-Gateway-Caller`: the gateway key the request was sent for (demo mode)
    headers: dict[str, str] = field(default_factory=dict)  # the RECORDED_HEADERS it came with (never credentials)
    traceparent: str | None = None  # the W3C trace context the caller sent (the gateway's, when tracing is on)
    started_at: float = field(default_factory=time.time)
    status: int | None = None
    frames_sent: int = 0
    completed: bool = False
    client_closed: bool = False
    closed_at: float | None = None
    finished_at: float | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    endpoint: str = "stream"  # stream | count

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "vendor": self.vendor,
            "model": self.model,
            "scenario": self.scenario,
            "body": self.body,
            "authSha256": self.auth_sha256,
            "headers": self.headers,
            "traceparent": self.traceparent,
            "startedAt": self.started_at,
            "status": self.status,
            "framesSent": self.frames_sent,
            "completed": self.completed,
            "clientClosed": self.client_closed,
            "closedAt": self.closed_at,
            "finishedAt": self.finished_at,
            "endpoint": self.endpoint,
        }

    def touch(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class SimulatorState:
    def __init__(self, keep: int = 5000) -> None:
        self.seen: list[Seen] = []
        self.keep = keep
        self._ids = itertools.count(1)
        self.added = asyncio.Event()

    def add(self, **fields: Any) -> Seen:
        entry = Seen(id=next(self._ids), **fields)
        self.seen.append(entry)
        if len(self.seen) > self.keep:
            del self.seen[: len(self.seen) - self.keep]
        self.added.set()
        self.added = asyncio.Event()
        return entry

    def matching(self, contains: str | None, scope: "LogScope | None" = None) -> list[Seen]:
        return [e for e in self.seen if (not contains or contains in e.raw) and (scope is None or scope.shows(e))]

    def forget(self, scope: "LogScope") -> None:
        self.seen = [e for e in self.seen if not scope.shows(e)]


@dataclass
class Vendor:
    """How one vendor's wire format is produced from a scenario."""

    name: str
    encode: Callable[[s.Scenario, str, list[s.Step] | None], Iterator[bytes | s.Step]]
    prompt_of: Callable[[dict[str, Any]], str]
    tool_results_of: Callable[[dict[str, Any]], list[str]]  # the tool results that end the conversation
    error_body: Callable[[s.HttpError], dict[str, Any]]
    sample_prefix: str  # where its recorded samples are, relative to tests/wire_samples (see `simulator.scenarios`)


VENDORS: dict[str, Vendor] = {
    "anthropic": Vendor(
        "anthropic",
        anthropic.encode,
        anthropic.prompt_of,
        anthropic.tool_results_of,
        anthropic.error_body,
        "anthropic-",
    ),
    "openai": Vendor(
        "openai", openai.encode, openai.prompt_of, openai.tool_results_of, openai.error_body, "openai-responses-"
    ),
    "google": Vendor("google", google.encode, google.prompt_of, google.tool_results_of, google.error_body, "gemini-"),
    "compat": Vendor(
        "compat",
        openai_completions.encode,
        openai_completions.prompt_of,
        openai_completions.tool_results_of,
        openai_completions.error_body,
        "chat/chat-",
    ),
}


class _Abort(Exception):
    """Raised inside the ASGI app to make the server drop the connection mid-body."""


class ScenarioResponse:
    """Plays a scenario as an SSE body, watching for the client closing the connection."""

    def __init__(
        self, vendor: Vendor, scenario: s.Scenario, model: str, entry: Seen, fault: sim_faults.Fault | None = None
    ) -> None:
        self.vendor = vendor
        self.scenario = scenario
        self.model = model
        self.entry = entry
        self.fault = fault  # simulator/faults.py: applied to the frames below

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        entry = self.entry
        task = asyncio.current_task()
        assert task is not None  # an ASGI app runs in a task
        watcher = asyncio.create_task(self._watch(receive, task))
        try:
            await self._play(send)
        except asyncio.CancelledError:
            if not entry.client_closed:
                raise
            task.uncancel()
        finally:
            watcher.cancel()
            entry.finished_at = time.time()
            entry.touch()

    async def _watch(self, receive: Receive, player: asyncio.Task | None) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.entry.client_closed = True
                self.entry.closed_at = time.time()
                self.entry.touch()
                if player is not None:
                    player.cancel()
                return

    async def _play(self, send: Send) -> None:
        scenario, entry = self.scenario, self.entry
        if scenario.hang_before_headers:
            await asyncio.Event().wait()
        if scenario.http_error is not None:
            error = scenario.http_error
            entry.status = error.status
            body = json.dumps(self.vendor.error_body(error)).encode()
            headers = [
                (b"content-type", b"application/json"),
                *((k.encode(), v.encode()) for k, v in error.headers.items()),
            ]
            await send({"type": "http.response.start", "status": error.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            entry.completed = True
            return
        entry.status = 200
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        delay = scenario.delay_ms / 1000
        for item in sim_faults.apply(self.fault, self.vendor.name, self.vendor.encode, self.model, self._items()):
            if isinstance(item, bytes):
                if delay and entry.frames_sent:
                    await asyncio.sleep(delay)
                await send({"type": "http.response.body", "body": item, "more_body": True})
                entry.frames_sent += 1
            elif isinstance(item, s.Truncate):
                break
            elif isinstance(item, s.Reset):
                raise _Abort("simulated connection reset")
            elif isinstance(item, s.Hang):
                await asyncio.Event().wait()
            elif isinstance(item, sim_faults.Drip):
                for offset in range(0, len(item.data), item.chunk):
                    await asyncio.sleep(item.interval)
                    await send(
                        {
                            "type": "http.response.body",
                            "body": item.data[offset : offset + item.chunk],
                            "more_body": True,
                        }
                    )
                entry.frames_sent += 1
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        entry.completed = True

    def _items(self) -> Iterator[bytes | s.Step]:
        if self.scenario.replay is not None:
            name = self.scenario.replay
            path = SAMPLES / f"{name}.sse"
            data = path.read_bytes()
            # Frames are separated by a blank line (LF or CRLF); replay them one by one, byte for byte.
            sep = b"\r\n\r\n" if b"\r\n\r\n" in data else b"\n\n"
            parts = data.split(sep)
            for part in parts[:-1]:
                yield part + sep
            if parts[-1]:
                yield parts[-1]
            return
        yield from self.vendor.encode(self.scenario, self.model, None)
        if self.scenario.late:
            yield from self.vendor.encode(self.scenario, self.model, self.scenario.late)


def _auth_sha256(request: Request) -> str | None:
    """The SHA-256 of the key the caller sent (tests check which key reached the vendor, never the key)."""
    auth = (
        request.headers.get("x-api-key")
        or request.headers.get("authorization", "").removeprefix("Bearer ")
        or request.headers.get("x-goog-api-key")
    )
    return hashlib.sha256(auth.encode()).hexdigest() if auth else None


@dataclass(frozen=True)
class LogScope:
    """Whose requests a reader of the request log sees: `caller`'s only, or every one (`caller` None)."""

    caller: str | None = None

    def shows(self, entry: Seen) -> bool:
        return self.caller is None or entry.caller == self.caller


EVERYONE = LogScope()
# Runs before the request log answers: a Response refuses the reader, a LogScope says what it may see.
LogGuard = Callable[[Request], "Response | LogScope"]
MAX_WAIT_S = 300.0


def create_simulator(log_guard: LogGuard | None = None, declared_tools_only: bool = False) -> Starlette:
    """`log_guard(request)` runs before the request log (`/_sim/*`) answers: a response it returns is sent
    instead, a `LogScope` limits what the reader sees, waits for and clears (the gateway's demo mode refuses
    callers without a gateway key when auth is on, and shows each key its own requests).
    `declared_tools_only` (the gateway's demo mode): a scenario calls only the tools the request declares
    (`scenarios.only_declared_tools`); the test suite's simulator calls its tools whatever was declared."""
    state = SimulatorState()
    entra = Entra()
    cache = PromptCache()  # this instance's prompt prefixes, for requests that ask (`prompt_cache=1`)

    def scope_of(request: Request) -> Response | LogScope:
        return EVERYONE if log_guard is None else log_guard(request)

    async def read_json(request: Request) -> tuple[str, dict[str, Any]] | Response:
        """The request's body as text and as JSON, or the vendor's 400 for a body that is not JSON."""
        raw = (await request.body()).decode("utf-8", "replace")
        try:
            return raw, (json.loads(raw) if raw else {})
        except ValueError:
            return JSONResponse({"error": {"type": "invalid_request_error", "message": "invalid JSON"}}, 400)

    def record(
        request: Request, vendor: Vendor, model: str, scenario: Any, body: dict[str, Any], raw: str, **more: Any
    ) -> Seen:
        """Log one vendor request with what tests read of its headers (never a credential, only its SHA-256)."""
        return state.add(
            vendor=vendor.name,
            model=model,
            scenario=s.summary(scenario),
            body=body,
            raw=raw,
            auth_sha256=_auth_sha256(request),
            caller=request.headers.get("x-gateway-caller"),
            headers={name: request.headers[name] for name in RECORDED_HEADERS if name in request.headers},
            traceparent=request.headers.get("traceparent"),
            **more,
        )

    async def vendor_call(request: Request, vendor: Vendor, model: str) -> Response | ScenarioResponse:
        parsed = await read_json(request)
        if isinstance(parsed, Response):
            return parsed
        raw, body = parsed
        model = model or str(body.get("model", ""))
        scenario = s.build(model, vendor.prompt_of(body), vendor.tool_results_of(body))
        if declared_tools_only:
            s.only_declared_tools(scenario, s.declared_tools(body))
        if vendor.name == "google" and (refused := google.request_error(scenario, body)) is not None:
            scenario.http_error = refused
        if vendor.name == "anthropic" and (refused := anthropic.request_error(scenario, body)) is not None:
            scenario.http_error = refused
        if prompt_cache_wanted(model):
            cache.apply(scenario, body)
        fault = sim_faults.parse(model)
        sim_faults.prepare(fault, scenario)
        if scenario.replay is not None:
            scenario.replay = vendor.sample_prefix + scenario.replay  # `replay-<name>` → `<prefix><name>.sse`
        if scenario.replay is not None and not (SAMPLES / f"{scenario.replay}.sse").is_file():
            return JSONResponse({"error": {"type": "not_found_error", "message": f"no sample {scenario.replay}"}}, 404)
        entry = record(request, vendor, model, scenario, body, raw)
        return ScenarioResponse(vendor, scenario, model, entry, fault)

    async def count_call(
        request: Request, vendor: Vendor, model: str, answer: Callable[[int], dict[str, Any]]
    ) -> Response:
        """A vendor's token counting endpoint: the scenario's HTTP error (its `error-<status>` or a fault before
        headers), or `answer(token_count(body))`."""
        parsed = await read_json(request)
        if isinstance(parsed, Response):
            return parsed
        raw, body = parsed
        model = model or str(body.get("model", ""))
        scenario = s.build(model, "")
        sim_faults.prepare(sim_faults.parse(model), scenario)  # a status or a hang before headers, as a turn's
        entry = record(request, vendor, model, scenario, body, raw, endpoint="count")
        if scenario.hang_before_headers:  # no answer until the client leaves
            while (await request.receive())["type"] != "http.disconnect":
                pass
            entry.client_closed = True
            entry.closed_at = entry.finished_at = time.time()
            entry.touch()
            return Response(status_code=499)
        entry.completed = True
        entry.finished_at = time.time()
        entry.touch()
        if scenario.http_error is not None:
            entry.status = scenario.http_error.status
            return JSONResponse(
                vendor.error_body(scenario.http_error), scenario.http_error.status, scenario.http_error.headers
            )
        entry.status = 200
        return JSONResponse(answer(s.token_count(body)))

    async def anthropic_count(request: Request) -> Response:
        return await count_call(request, VENDORS["anthropic"], "", lambda n: {"input_tokens": n})

    async def openai_count(request: Request) -> Response:
        return await count_call(
            request, VENDORS["openai"], "", lambda n: {"object": "response.input_tokens", "input_tokens": n}
        )

    async def google_count(request: Request) -> Response:
        return await count_call(
            request,
            VENDORS["google"],
            request.path_params["model"],
            lambda n: {"totalTokens": n, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": n}]},
        )

    async def anthropic_messages(request: Request) -> Response | ScenarioResponse:
        return await vendor_call(request, VENDORS["anthropic"], "")

    async def openai_responses(request: Request) -> Response | ScenarioResponse:
        return await vendor_call(request, VENDORS["openai"], "")

    async def chat_completions(request: Request) -> Response | ScenarioResponse:
        return await vendor_call(request, VENDORS["compat"], "")

    async def google_stream(request: Request) -> Response | ScenarioResponse:
        return await vendor_call(request, VENDORS["google"], request.path_params["model"])

    async def requests_seen(request: Request) -> Response:
        scope = scope_of(request)
        if isinstance(scope, Response):
            return scope
        if request.method == "DELETE":
            state.forget(scope)
            return JSONResponse({"cleared": True})
        return JSONResponse([e.public() for e in state.matching(request.query_params.get("contains"), scope)])

    async def wait(request: Request) -> Response:
        """Long-poll: the newest request containing `contains` once it reached `until` (closed | finished)."""
        contains = request.query_params.get("contains")
        until = request.query_params.get("until", "finished")
        scope = scope_of(request)
        if isinstance(scope, Response):
            return scope
        every = request.query_params.get("all") == "1"  # every matching request, not only the newest
        try:
            timeout = float(request.query_params.get("timeout", "10"))
        except ValueError:
            timeout = float("nan")
        if not 0 <= timeout <= MAX_WAIT_S:  # also NaN
            message = f"timeout must be a number of seconds from 0 to {MAX_WAIT_S:g}"
            return JSONResponse({"error": {"type": "invalid_request_error", "message": message}}, 400)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    found = state.matching(contains, scope)
                    entry = found[-1] if found else None
                    reached = [
                        e for e in found if (e.client_closed if until == "closed" else e.finished_at is not None)
                    ]
                    if every and found and len(reached) == len(found):
                        return JSONResponse([e.public() for e in found])
                    if every and found:
                        entry = next(e for e in found if all(e is not r for r in reached))
                    elif entry is not None and any(entry is r for r in reached):
                        return JSONResponse(entry.public())
                    await (entry.changed.wait() if entry is not None else state.added.wait())
        except TimeoutError:
            found = state.matching(contains, scope)
            return JSONResponse({"timeout": True, "entry": found[-1].public() if found else None}, 408)

    bedrock_wire = bedrock.BedrockWire(record)  # its routes check SigV4 against the test credentials it holds
    app = Starlette(
        routes=[
            *bedrock_wire.routes,
            Route(anthropic.ROUTE, anthropic_messages, methods=["POST"]),
            Route(openai.ROUTE, openai_responses, methods=["POST"]),
            Route(google.ROUTE, google_stream, methods=["POST"]),
            Route(openai_completions.ROUTE, chat_completions, methods=["POST"]),
            Route(anthropic.COUNT_ROUTE, anthropic_count, methods=["POST"]),
            Route(openai.COUNT_ROUTE, openai_count, methods=["POST"]),
            Route(google.COUNT_ROUTE, google_count, methods=["POST"]),
            *azure.routes(lambda request, vendor, model: vendor_call(request, VENDORS[vendor], model), entra.valid),
            *entra.routes(),
            *Vertex(
                lambda request, vendor, model: vendor_call(request, VENDORS[vendor], model),
                lambda request, vendor, model, answer: count_call(request, VENDORS[vendor], model, answer),
            ).routes(),
            Route("/_sim/requests", requests_seen, methods=["GET", "DELETE"]),
            Route("/_sim/wait", wait, methods=["GET"]),
        ]
    )
    app.state.sim = state
    app.state.bedrock = bedrock_wire
    return app


app = create_simulator()
