"""Doors: the wire formats clients speak, each the mirror of an adapter (docs/doors/).

An adapter (`app/providers/<vendor>/`) turns the unified request into a vendor's wire request and the
vendor's wire events into normalized events. A door does the opposite on the client side:

    client wire ──door.decode──▶ StreamRequest ──dispatch──▶ adapter ──▶ normalized events ──door encoder──▶ client wire

The request path therefore reads door → dispatch → adapter → event stream → door. A door knows neither
providers, nor the dispatcher's internals, nor the ledger; the generic HTTP glue (`app/api/turns.py`: auth,
body limits, errors, SSE keep-alive, disconnect → cancel, shutdown grace, the `sent` metric) serves every
door the same way.

Doors: `unified/` (`/v1/stream`, `/v1/complete`), `pi/` (`/api/stream`), `openai_chat/`
(`/v1/chat/completions`), `openai_responses/` (`/v1/responses`), `anthropic_messages/` (`/v1/messages`,
`/v1/messages/count_tokens`), `gemini/` (`/v1beta/models/{model}:streamGenerateContent`, `:generateContent`,
`:countTokens`). Doors are peers: no door package imports another; what two doors share is a module of this
package (`fields.py`, `signatures.py`, `structured_output.py`, `openai_fields.py`, `openai_errors.py`,
`unified_frames.py`, `openapi.py`, `validation.py`). The same role has the same file name in every door. Each
package has

- `request.py` — `decode(body: dict, headers: Headers) -> DoorRequest`: the parsed JSON body (already
  size- and depth-checked) to the unified `StreamRequest` plus how to answer (`stream`). Bad input raises
  `BadRequest` (`app.doors.errors`) with a status, a type, a message and the offending `param`; the door renders
  it in its own error shape (below). A door-specific subclass of `DoorRequest` carries what its encoder
  needs (e.g. `include_usage`, the model name as the client wrote it); its `response_headers` go on the
  answer (e.g. the Responses door's `X-Gateway-Dropped-Tools`).
- `events.py` — the event encoder: a small class constructed per request with what it needs (request id,
  the decoded request, a `TurnView` of the running turn: its usage so far and, after the terminal event,
  the settled turn, `SettledTurn` from `app.core.settled`, the one module of the core a door imports), with
    - `encode(event: dict) -> bytes`: one normalized event (from `Turn.next_event()`) as wire bytes,
      `b""` when the event produces nothing on this wire. The terminal event's bytes end the stream
      (e.g. the usage chunk and `data: [DONE]`).
    - `ping() -> bytes`: the keep-alive frame (`: ping\\n\\n` comment, or Anthropic's `event: ping`).
    - `complete(result: SettledTurn) -> tuple[int, Any]`: the non-streaming answer (status, JSON body).
    - `refuse(result: SettledTurn) -> tuple[int, Any] | None`, used when `hold_until_start` is true: the
      glue waits for the turn's first event before sending response headers, and when that event is the
      terminal `error` (the turn never started: vendor HTTP error, timeout before the first token) the
      client gets this HTTP error instead of a stream that fails at once — what the vendors' own APIs do.
- `errors.py` — `error_body(error: BadRequest) -> Any`, the error shape: `{"type": "error", "error": {"type",
  "message"}}` for Anthropic, Google's `{"error": {"code", "message", "status"}}` for Gemini, docs/api.md §9
  `{"error": {"type", "message", "param"}}` for unified, a string for pi; the two OpenAI doors share OpenAI's
  `{"error": {"message", "type", "param", "code"}}` (`openai_errors.py`).
- `openapi.py` — its routes' OpenAPI operations and schemas; and where a door has them, `conversation.py` (the
  conversation part of its decoder), `count_tokens.py` (its token counting route), `models.py` (the gateway's
  model list in its shape) and `signatures.py` (where its wire carries the origin-wrapped signatures of
  `app.doors.signatures`).

Each door package exports one `DOOR = Door(...)` (`app/doors/base.py`), everything the shared glue knows of
it: `name` is what records (`door`) and metrics (`door` label) show (the names are listed by `DOORS`,
`app/doors/registry.py`); `routes` its HTTP routes (`DoorRoute`: path, OpenAPI summary, tags
and operation, whether the route answers as a stream); `frames_carry_ids` whether its frames have their own `id:` line (a
resumable stream adds one otherwise); `prose_paths` name where in the body a person's text lives (lone UTF-16
surrogates are removed there and refused anywhere else, `app.api.body`; `app.doors.validation.ANY_INDEX`
stands for any list index); `schemas` the OpenAPI schemas its operations name (`openapi.py`); `count_tokens`
a token counting route (`TokenCountDoor`), when it has one; `stored` the responses it keeps for later
requests (`StoredResponses`: what a body builds on, what a settled turn leaves; `app/api/stored_responses.py`
reads and writes them in the ledger's database), when it keeps any; `models` the gateway's model list in its
shape (`ModelListing`: its own model routes, and how it recognises its clients on `GET /v1/models`), when its
clients list models. `app/doors/registry.py` lists every door in `DOORS`; an app serves a `DoorTable` of them
(`create_app(doors=...)`), from which the route table, the OpenAPI document and the edge's error shapes are read.
"""

from app.doors.base import Door, DoorRequest, EventEncoder, TurnView

__all__ = ["Door", "DoorRequest", "EventEncoder", "TurnView"]
