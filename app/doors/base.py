"""The door interface: what a door's decoder returns, what its encoder offers, and what it may read of its
turn (`TurnView`; the settled turn itself is `app.core.settled.SettledTurn`). The contract is written down in
`app/doors/__init__.py`."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from app.doors.errors import BadRequest
from app.contract.failures import Failure
from app.contract.request import StreamRequest
from app.core.settled import SettledTurn


@dataclass(frozen=True, slots=True)
class DoorRequest:
    """A client's request as a door decoded it: the unified request and whether to answer as a stream.

    Doors subclass it to carry what their encoder needs besides the unified request."""

    unified: StreamRequest
    stream: bool = True
    response_headers: dict[str, str] | None = None  # headers the door adds to its answer (e.g. what it dropped)
    # Why this answer cannot be resumed (a framing with no place for the `id:` lines a resumption needs, as the
    # Gemini door's JSON-array stream); asking for a resumable stream is then a 400 with this reason. None: it can.
    resume_refused: str | None = None


class EventEncoder(Protocol):
    """A door's per-request encoder of normalized events (see `app/doors/__init__.py`)."""

    hold_until_start: bool

    def encode(self, event: dict[str, Any]) -> bytes: ...

    def ping(self) -> bytes: ...

    def complete(self, result: SettledTurn) -> tuple[int, Any]: ...

    def refuse(self, result: SettledTurn) -> tuple[int, Any] | None: ...


class TurnView(Protocol):
    """What an encoder may read of its running turn besides the events: the usage known so far (a start
    frame that carries usage, as Anthropic's `message_start`), and once the terminal event has been taken,
    the settled turn (an error frame typed by what ended the turn)."""

    def usage(self) -> dict[str, Any]: ...

    def result(self) -> SettledTurn: ...

    def dropped_tools(self) -> tuple[str, ...]:
        """The client's hosted tools the serving vendor was sent without (known once the turn started)."""

    def dropped_params(self) -> tuple[str, ...]:
        """The request's fields the serving vendor was sent without (`drop_params`; known once the turn started)."""


# Names the client's tools the turn was sent without: those a door drops itself (`DoorRequest.response_headers`)
# and the hosted tools the serving vendor does not run (`TurnView.dropped_tools`), comma-separated.
DROPPED_TOOLS_HEADER = "X-Gateway-Dropped-Tools"


def with_dropped_tools(headers: dict[str, str], dropped: Sequence[str]) -> dict[str, str]:
    """`headers` with `dropped` added to `X-Gateway-Dropped-Tools` (each name once, in order)."""
    if not dropped:
        return headers
    named = [n for n in headers.get(DROPPED_TOOLS_HEADER, "").split(", ") if n]
    named += [n for n in dropped if n not in named]
    return {**headers, DROPPED_TOOLS_HEADER: ", ".join(named)}


# Names the request's fields the turn was sent without because it drops params (`TurnView.dropped_params`).
DROPPED_PARAMS_HEADER = "X-Gateway-Dropped-Params"
# A client asks any door to drop what the serving vendor cannot honour instead of a 400 (as `drop_params`).
DROP_PARAMS_HEADER = "x-gateway-drop-params"


def with_dropped_params(headers: dict[str, str], dropped: Sequence[str]) -> dict[str, str]:
    """`headers` with `X-Gateway-Dropped-Params` naming `dropped` (none: unchanged)."""
    return {**headers, DROPPED_PARAMS_HEADER: ", ".join(dropped)} if dropped else headers


def drop_params_asked(headers: Mapping[str, str]) -> bool:
    """`X-Gateway-Drop-Params: true`."""
    return headers.get(DROP_PARAMS_HEADER, "").strip().lower() == "true"


Decoder = Callable[[dict[str, Any], Mapping[str, str]], DoorRequest]
EncoderFactory = Callable[
    [str, Any, TurnView], EventEncoder
]  # (request id, the door's DoorRequest, the turn) → encoder


# The id of the request being answered (its `X-Request-Id`), set by the HTTP edge (`app.api.edge`) for the
# request's task: an error shape that carries the id in its body (Anthropic's `request_id`) reads it here.
REQUEST_ID: ContextVar[str | None] = ContextVar("gateway_request_id", default=None)


@dataclass(frozen=True, slots=True)
class DoorRoute:
    """One HTTP route of a door, as the route table (`app.api.routes`) declares it and the OpenAPI document
    (`app.api.openapi`) describes it."""

    path: str
    name: str  # the endpoint's name; the OpenAPI `operationId` is `<name>_<path>_<method>`
    summary: str
    tags: tuple[str, ...]
    operation: Callable[[], dict[str, Any]]  # the OpenAPI operation's `requestBody` and `responses`
    method: str = "POST"
    # Answer as a stream (True), as one JSON body (False), or as the request's own `stream` field says (None).
    stream: bool | None = None
    # Where the route table (and so the OpenAPI document) lists the route among the doors' routes; routes with
    # the same number keep the order of `DOORS` (`app.doors.registry`). A new door leaves the default.
    listed: int = 100
    # The route's own decoder, when its body is not the door's turn request (the door's `decode` when None); such
    # a route builds on no stored response.
    decode: Decoder | None = None
    # A route with path parameters (the Gemini door's `{model}`): what the request's URL adds to the parsed body
    # before the door's `decode` reads it, `(body, path parameters, query parameters) → body`. None: the body alone.
    from_url: Callable[[dict[str, Any], Mapping[str, str], Mapping[str, str]], dict[str, Any]] | None = None
    # Whether the client key may also come as the `key` query parameter (Google's `?key=`).
    key_in_query: bool = False
    # The same route at other paths (the Gemini door's `/v1/…` beside `/v1beta/…`), named `<name>_<n>`.
    more_paths: tuple[str, ...] = ()

    def paths(self) -> tuple[str, ...]:
        return (self.path, *self.more_paths)


@dataclass(frozen=True, slots=True)
class TokenCountDoor:
    """A door's token counting endpoint (`app.api.count_tokens`): its route, the same body as the door's turns
    (`decode`), the vendor's count in the door's shape (`answer`), a vendor failure in the door's error shape
    (`failed`: (failure, status, message, request id) → (status, body)), and errors before the call
    (`error_body`)."""

    route: DoorRoute
    decode: Decoder
    answer: Callable[[int], Any]
    failed: Callable[[Failure, int, str, str], tuple[int, Any]]
    error_body: Callable[[BadRequest], Any]
    prose_paths: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A response kept for later requests (the Responses door's `store: true`): the response object `GET`
    answers with, and the conversation up to and including its output, as the door's wire items; `size`, the
    bytes of its stored document (what reading it costs: the edge works on a large one off the event loop)."""

    response: dict[str, Any]
    items: list[dict[str, Any]]
    size: int = 0


@dataclass(frozen=True, slots=True)
class StoredResponses:
    """A door whose requests build on responses stored earlier (`app.api.stored_responses` reads and writes them
    in the ledger's database; the door never sees the store):

    - `wanted(body)`: the stored response the body continues (None for none) and the ids of the other stored
      responses it refers to (items it names by id); a malformed reference raises `BadRequest`;
    - `models(body)`: the model names the body asks for (its model, then its fallbacks), or a `BadRequest`: a
      body that builds on stored responses is admitted with them before any stored response is read;
    - `decode(body, headers, loaded)`: the door's decode, with the stored responses found (by id, the key's
      own only); the one the body continues is always among them;
    - `keep(request, encoder, result)`: what to store of a settled turn (with its response id), None for nothing;
    - `response_id(request_id)`: the id of the response a turn answers with;
    - `not_found(param, response_id)`: the error for a stored response that is not there (another key's,
      expired, deleted, never stored), `param` None on the `GET` and `DELETE` routes;
    - `path`: the route (with `{response_id}`) whose `GET` answers a stored response and whose `DELETE` removes
      it, with `deleted(response_id)` as the body; `operation(method)` describes them in the OpenAPI document;
    - `items_path`: the route whose `GET` lists a stored response's input items, `input_items(stored, query)`
      the answer for the query's (name, value) pairs (a bad parameter raises `BadRequest`), `items_operation()`
      its OpenAPI description."""

    wanted: Callable[[dict[str, Any]], tuple[str | None, frozenset[str]]]
    models: Callable[[dict[str, Any]], list[str]]
    response_id: Callable[[str], str]
    decode: Callable[[dict[str, Any], Mapping[str, str], Mapping[str, StoredResponse]], DoorRequest]
    keep: Callable[[Any, Any, SettledTurn], tuple[str, StoredResponse] | None]
    not_found: Callable[[str | None, str], BadRequest]
    path: str
    deleted: Callable[[str], dict[str, Any]]
    operation: Callable[[str], dict[str, Any]]
    items_path: str
    input_items: Callable[[StoredResponse, Sequence[tuple[str, str]]], dict[str, Any]]
    items_operation: Callable[[], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """A `GET` route of a door's own that answers the gateway's model list in the door's shape (Gemini's
    `/v1beta/models`), or one model of it when its path has the `{model}` parameter (`{model:path}`: the name
    may hold `/`), as the route table (`app.api.routes`) declares it and the OpenAPI document shows it: the
    endpoint's `name` (the `operationId` is `<name>_<path>_get`), `summary`, `description` and `tags`, and the
    OpenAPI `responses` by status."""

    path: str
    name: str
    summary: str
    description: str
    responses: Mapping[int | str, dict[str, Any]]
    tags: tuple[str, ...] = ("catalog",)

    @property
    def one_model(self) -> bool:
        return "{model" in self.path


@dataclass(frozen=True, slots=True)
class ModelListing:
    """The gateway's model list (the catalog's entries, `GET /v1/models`'s `data`) in a door's own shape, for
    the clients of its wire whose SDKs list models:

    - `answer(entries)`: the list body; `model(entries, name)` one model's, raising a 404 `BadRequest` for a name
      the list does not hold (used by the routes whose path has `{model}`);
    - `asked(headers, query)`: whether a `GET /v1/models` comes from such a client (its SDK lists models there):
      the shared route answers it in the first door's shape that claims it, else in OpenAI's;
    - `routes`: the door's own model routes (`ModelRoute`), when its wire lists models elsewhere;
    - `key_in_query`: whether the client key may come as the `key` query parameter there (Google's `?key=`).

    Errors of those requests (a missing key, a model not listed) are in the door's shape (`Door.error_body`)."""

    answer: Callable[[list[dict[str, Any]]], Any]
    asked: Callable[[Mapping[str, str], Mapping[str, str]], bool]
    routes: tuple[ModelRoute, ...] = ()
    model: Callable[[list[dict[str, Any]], str], Any] | None = None
    key_in_query: bool = False


@dataclass(frozen=True, slots=True)
class Door:
    """One door, all the shared glue knows of it: its name (records' `door`, the metrics' `door` label), its
    routes, decoder, encoder and error shape, and what its frames and OpenAPI description need."""

    name: str
    routes: tuple[DoorRoute, ...]
    decode: Decoder
    encoder: EncoderFactory
    error_body: Callable[[BadRequest], Any]
    # Whether the encoder's frames carry their own `id:` line; a resumable stream adds one to frames without.
    frames_carry_ids: bool
    # Where in the body a person's text lives (`app.doors.validation.ANY_INDEX` for any list index): lone UTF-16
    # surrogates are removed there and refused anywhere else.
    prose_paths: tuple[tuple[str, ...], ...] = ()
    schemas: Mapping[str, Any] = field(default_factory=dict)  # the OpenAPI component schemas its routes name
    count_tokens: TokenCountDoor | None = None  # its token counting route, when it has one
    stored: StoredResponses | None = None  # responses it keeps for later requests, when it keeps any
    # A path where its clients try a WebSocket upgrade before they fall back to HTTP (Codex CLI on `GET
    # /v1/responses`), with the refusal that makes them fall back at once (a 426); None: no such path.
    websocket_refused: tuple[str, BadRequest] | None = None
    models: ModelListing | None = None  # the gateway's model list in its shape, when its clients list models
