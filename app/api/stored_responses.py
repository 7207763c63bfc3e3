"""Stored responses (a door's `StoredResponses`: the Responses door's `store`, `previous_response_id`,
`item_reference`, `GET` and `DELETE /v1/responses/{id}`), read and written in the ledger's database, so every
replica sees them and they survive restarts, scoped to the client key, and gone after
`GATEWAY_RESPONSES_RETENTION_DAYS`.

A turn's response is written once the turn settles: before the answer of a non-streamed request, before the
terminal frame of a streamed one, so a follow-up on any replica finds it; a resumable stream's when its turn's
task ends (a follow-up on this process waits for that write; one on another replica may come too early)."""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any, Awaitable, Callable, Mapping

import orjson
from starlette.requests import Request
from starlette.responses import Response

from app.api.auth import authorization
from app.api.body import off_loop, parse_off_loop
from app.api.error_responses import json_response, refusal_error
from app.core.job import TurnJob
from app.doors.base import Door, DoorRequest, EventEncoder, StoredResponse, StoredResponses
from app.doors.errors import BadRequest
from app.gateway import Gateway
from app.ledger.base import now_ms
from app.contract.refusals import Refusal

log = logging.getLogger("gateway")
DAY_MS = 86_400_000
# Items serialised per orjson call when a stored document is written: orjson holds the interpreter for the whole
# of one call, so a conversation serialised in one call would hold the event loop even from a worker thread.
SLICE_ITEMS = 1000

# The writes still running, per gateway: response id → its task (a follow-up on this process waits for it).
_PENDING: "weakref.WeakKeyDictionary[Gateway, dict[str, asyncio.Task[None]]]" = weakref.WeakKeyDictionary()


def _since(gateway: Gateway) -> int:
    """Stored responses created before this (epoch ms) are past the retention: not found, and deleted."""
    return now_ms() - int(gateway.settings.responses_retention_days * DAY_MS)


async def _document(gateway: Gateway, response_id: str, key_id: str | None) -> str | None:
    """The key's stored response document (once a write of it still running on this process is done)."""
    pending = _PENDING.get(gateway, {}).get(response_id)
    if pending is not None:
        await asyncio.wait({pending})
    return await gateway.ledger.load_response(response_id, key_id, _since(gateway))


async def _parsed(document: str) -> StoredResponse:
    """A stored document parsed, off the event loop when it is large (`off_loop`)."""
    stored = await off_loop(len(document), lambda: orjson.loads(document))
    return StoredResponse(response=stored["response"], items=stored["items"], size=len(document))


def document_of(response: StoredResponse) -> str:
    """The stored document of `response` (`{"response": …, "items": […]}`), its items serialised `SLICE_ITEMS`
    at a time: run in a worker thread (`off_loop`), the event loop gets the interpreter back between slices."""
    parts = ['{"response":', orjson.dumps(response.response).decode(), ',"items":[']
    items = response.items
    for start in range(0, len(items), SLICE_ITEMS):
        if start:
            parts.append(",")
        parts.append(orjson.dumps(items[start : start + SLICE_ITEMS])[1:-1].decode())
    parts.append("]}")
    return "".join(parts)


async def _load(gateway: Gateway, response_id: str, key_id: str | None) -> StoredResponse | None:
    document = await _document(gateway, response_id, key_id)
    return None if document is None else await _parsed(document)


def max_conversation_bytes(gateway: Gateway) -> int:
    """`GATEWAY_RESPONSES_MAX_BYTES`, by default `GATEWAY_MAX_BODY_BYTES`."""
    return gateway.settings.responses_max_bytes or gateway.settings.max_body_bytes


def _too_large(gateway: Gateway, param: str, size: int, bound: int) -> BadRequest:
    """The 413 of a request whose stored conversation and body together pass `bound` (naming both and the
    setting), in the door's error shape."""
    setting = "GATEWAY_RESPONSES_MAX_BYTES"
    if gateway.settings.responses_max_bytes is None:
        setting += ", unset: GATEWAY_MAX_BODY_BYTES"
    return BadRequest(
        413,
        "conversation_too_large",
        f"the stored conversation this request builds on and its body come to {size} bytes, more than the "
        f"gateway's limit of {bound} bytes ({setting}): start a new conversation, or compact this one and send "
        "it in full",
        param,
    )


async def decode(
    gateway: Gateway,
    stored: StoredResponses,
    raw: bytes,
    parse: Callable[[bytes], dict[str, Any]],
    headers: Mapping[str, str],
    key_id: str | None,
    admit: Callable[[list[str]], Awaitable[object]],
) -> tuple[DoorRequest, int]:
    """The door's decode of `raw`, with the stored responses the body builds on (a 404 when the one it
    continues is not there: another key's, expired, deleted, never stored), and the bytes of the conversation
    it carries (the body and those stored documents: about what keeping its response costs, `Keeping`). The
    store is read only when the body names a stored response, and only once the turn is admitted:
    `admit(models)` (`Gateway.admit_ahead`) runs first, so a key its limits refuse costs no read, and reading
    and decoding a large conversation runs off the event loop."""
    body = await parse_off_loop(raw, parse)
    previous, referred = stored.wanted(body)
    found: dict[str, StoredResponse] = {}
    if previous is not None or referred:
        await admit(stored.models(body))
    bound, size = max_conversation_bytes(gateway), len(raw)
    for response_id in ([previous] if previous else []) + sorted(referred):
        document = await _document(gateway, response_id, key_id)
        if document is None:
            continue
        size += len(document)
        if size > bound:  # refused before it is parsed: a chain of continuations stops growing here
            raise _too_large(gateway, "previous_response_id" if response_id == previous else "input", size, bound)
        found[response_id] = await _parsed(document)
    if previous is not None and previous not in found:
        raise stored.not_found("previous_response_id", previous)
    return await off_loop(size, lambda: stored.decode(body, headers, found)), size


class Keeping:
    """What the door keeps of one turn, written once, as soon as the turn has settled: before a stream's terminal
    frame goes out (`TurnFrames`' `before_end`) or a non-streamed answer is sent, so that a follow-up on any
    replica finds it; otherwise (a resumable stream) when the turn's task ends. `task` ends once it is written
    (or nothing was kept); a follow-up on this process waits for it (`_PENDING`). `conversation_bytes`: what
    `decode` said the request carries; a document of a conversation that large is serialised off the event loop
    (`off_loop`, `document_of`)."""

    def __init__(
        self,
        gateway: Gateway,
        stored: StoredResponses,
        request: DoorRequest,
        encoder: EventEncoder,
        job: TurnJob,
        key_id: str | None,
        conversation_bytes: int,
    ) -> None:
        self.gateway, self.stored, self.request, self.encoder, self.job, self.key_id = (
            gateway,
            stored,
            request,
            encoder,
            job,
            key_id,
        )
        self.conversation_bytes = conversation_bytes
        self.response_id = stored.response_id(job.turn.request_id)
        self._write: asyncio.Task[None] | None = None
        self.task = asyncio.create_task(self._after_the_turn(), name=f"store-{self.response_id}")
        _PENDING.setdefault(gateway, {})[self.response_id] = self.task

    async def settled(self) -> None:
        """Write it now (the turn has settled), once; a client leaving meanwhile does not cancel the write."""
        if self._write is None:
            self._write = asyncio.create_task(self._kept())
        await asyncio.shield(self._write)

    async def _after_the_turn(self) -> None:
        try:
            await asyncio.shield(self.job.pump)
            await self.settled()
        finally:
            _PENDING.get(self.gateway, {}).pop(self.response_id, None)

    async def _kept(self) -> None:
        try:
            kept = self.stored.keep(self.request, self.encoder, self.job.result())
            if kept is None:
                return
            kept_id, response = kept
            document = await off_loop(self.conversation_bytes, lambda: document_of(response))
            await self.gateway.ledger.save_response(
                kept_id,
                self.key_id,
                now_ms(),
                document,
                expired_before=_since(self.gateway),
                keep_per_key=self.gateway.settings.responses_max_per_key,
            )
        except Exception as exc:  # the answer stands; only its later use is lost
            log.warning("could not store response %s: %s", self.response_id, type(exc).__name__)


async def _stored_route(
    request: Request, door: Door, response_id: str, act: Callable[[Gateway, str | None], Any]
) -> Response:
    gateway: Gateway = request.app.state.gateway
    stored = door.stored
    assert stored is not None
    try:
        key_id = gateway.keys.identify(authorization(request.headers))
        answer = await act(gateway, key_id)
        if answer is None:
            raise stored.not_found(None, response_id)
    except BadRequest as error:
        return json_response(door.error_body(error), error.status, error.headers)
    except Refusal as refusal:
        api_error = refusal_error(refusal)
        return json_response(door.error_body(api_error), api_error.status, api_error.headers)
    return json_response(answer)


async def get(request: Request, door: Door, response_id: str) -> Response:
    """`GET /v1/responses/{id}`: the stored response object, the key's own and within the retention."""

    async def read(gateway: Gateway, key_id: str | None) -> Any:
        response = await _load(gateway, response_id, key_id)
        return None if response is None else response.response

    return await _stored_route(request, door, response_id, read)


async def input_items(request: Request, door: Door, response_id: str) -> Response:
    """`GET /v1/responses/{id}/input_items`: a page of the stored response's input items (the door's listing)."""
    stored = door.stored
    assert stored is not None

    async def listed(gateway: Gateway, key_id: str | None) -> Any:
        response = await _load(gateway, response_id, key_id)
        if response is None:
            return None
        query = list(request.query_params.multi_items())
        return await off_loop(response.size, lambda: stored.input_items(response, query))

    return await _stored_route(request, door, response_id, listed)


async def delete(request: Request, door: Door, response_id: str) -> Response:
    """`DELETE /v1/responses/{id}`: the key's stored response deleted (404 when it has none by that id)."""
    stored = door.stored
    assert stored is not None

    async def remove(gateway: Gateway, key_id: str | None) -> Any:
        pending = _PENDING.get(gateway, {}).get(response_id)
        if pending is not None:
            await asyncio.wait({pending})
        deleted = await gateway.ledger.delete_response(response_id, key_id, _since(gateway))
        return stored.deleted(response_id) if deleted else None

    return await _stored_route(request, door, response_id, remove)
