"""The request ledger (docs/api.md §10): what a record holds, how it is stored, and the store interface.

Times. Every point in time in a record (`createdAt`, `settledAt`, `attempts[].startedAt`/`endedAt`) is an
integer count of milliseconds since the Unix epoch (UTC), like `message.timestamp`; `ttftMs` and
`durationMs` are integer milliseconds. `durationMs` is `settledAt - createdAt`, where `settledAt` is when the
turn's cleanup finished (upstream closed, late frames counted); `ttftMs` is measured on the monotonic clock
from the request's arrival to its first content event. All three come from the turn's settled record
(`app.core.settled`), which the other observers read too.

Life of a record. It is written "open" when the turn starts (`outcome` and `settledAt` null) and replaced by
the settled record when the turn finishes. A record still open when its gateway process is gone is marked
`interrupted` by another process once that one serves (the rule is `app.ledger.liveness`).

Storage. Each row has a few indexed columns (request id, api key id, instance id, created/settled time,
outcome) and the record as JSON text. The columns are authoritative for `outcome` and `settledAt`, so marking
a record `interrupted` is a single UPDATE; `decode_row` merges them back into the record.
"""

from __future__ import annotations

import builtins
import os
import secrets
import socket
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Sequence

import orjson

if TYPE_CHECKING:
    from app.core.job import TurnJob
    from app.core.settled import SettledTurn

WriteKind = Literal["insert", "complete"]


class LedgerUrlError(ValueError):
    """`GATEWAY_DATABASE_URL` names no store the gateway can use (the message never repeats the URL)."""


INTERRUPTED_MESSAGE = "interrupted: the gateway process serving this request stopped before it settled"

# Instance ids created in this process (several gateways can live in one process, e.g. in tests).
PROCESS_INSTANCES: set[str] = set()


def now_ms() -> int:
    return int(time.time() * 1000)


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def new_instance_id() -> str:
    """A gateway process's id, stored on its records: host name, pid and a random suffix."""
    instance = f"{socket.gethostname()[:40]}-{os.getpid()}-{secrets.token_hex(4)}"
    PROCESS_INSTANCES.add(instance)
    return instance


def build_record(
    job: "TurnJob", *, settled: "SettledTurn | None", retain_content: bool, resumed: int = 0
) -> dict[str, Any]:
    """The record (docs/api.md §10) of a turn: open (`settled` None: written when it starts, nothing attempted
    yet) or settled, from its settled record (`app.core.settled`: attempts, `settledAt`, `durationMs`, `ttftMs`,
    …); `resumed`: how many times it was resumed (`app.resume`).

    Called on the event loop thread; the caller serializes it before awaiting anything, because the
    message dict is the live one of the turn.
    """
    turn = job.turn
    request = job.request
    message = turn.message
    attempts = settled.attempts if settled is not None else ()
    last = attempts[-1] if attempts else None
    ttft = None if settled is None or settled.ttft is None else round(settled.ttft * 1000)
    record: dict[str, Any] = {
        "requestId": turn.request_id,
        "createdAt": _ms(request.started_wall) or 0,
        "settledAt": settled.settled_at_ms if settled is not None else None,
        "apiKeyId": request.api_key_id,
        "key": request.api_key_id,
        **request.attribution.record(),  # team, user, tags, session (docs/admin.md)
        "door": request.door,
        "requestedModel": request.requested_model,
        "fallback": list(request.fallback),
        "attempts": [attempt.record() for attempt in attempts],
        "provider": message.get("provider") if last is not None else None,
        "api": message.get("api") if last is not None else None,
        "model": message.get("model") if last is not None else None,
        "deployment": last.deployment if last is not None else None,
        "cloud": last.cloud if last is not None else None,  # the cloud and region that served it (null at the maker)
        "region": last.region if last is not None else None,
        "outcome": settled.outcome if settled is not None else None,
        "stopReason": message.get("stopReason") if settled is not None else None,
        "errorMessage": message.get("errorMessage") if settled is not None else None,
        "usage": message.get("usage"),
        "ttftMs": ttft,
        "durationMs": settled.duration_ms if settled is not None else None,
        "upstreamFrames": settled.upstream_frames if settled is not None else 0,
        "eventsSent": turn.events_sent,
        "lateFramesDropped": turn.late_frames,
        "clientDisconnected": settled.client_disconnected if settled is not None else False,
        "resumable": request.resumable,
        "droppedParams": list(job.params_dropped),
        "resumed": resumed,
    }
    if retain_content:
        record["message"] = message
    return record


@dataclass(frozen=True)
class StoredRow:
    """One row of the `gateway_requests` table, ready for a parameterized statement."""

    request_id: str
    api_key_id: str | None
    instance_id: str
    created_at: int
    settled_at: int | None
    outcome: str | None
    record: str  # JSON text
    door: str | None = None  # the client wire format (schema version 2)

    def params(self) -> tuple[Any, ...]:
        return (
            self.request_id,
            self.api_key_id,
            self.instance_id,
            self.created_at,
            self.settled_at,
            self.outcome,
            self.record,
            self.door,
        )


def encode_record(record: dict[str, Any], instance_id: str) -> StoredRow:
    return StoredRow(
        request_id=record["requestId"],
        api_key_id=record["apiKeyId"],
        instance_id=instance_id,
        created_at=record["createdAt"],
        settled_at=record["settledAt"],
        outcome=record["outcome"],
        # `default=str` and non-str keys: encoding a record never fails.
        record=orjson.dumps(record, default=str, option=orjson.OPT_NON_STR_KEYS).decode(),
        door=record.get("door"),
    )


def decode_row(record_json: str, outcome: str | None, settled_at: int | None) -> dict[str, Any]:
    """A stored row back to its record; the `outcome`/`settled_at` columns win over the JSON."""
    record = orjson.loads(record_json)
    record["outcome"] = outcome
    record["settledAt"] = settled_at
    record.setdefault("door", None)  # records written before doors were recorded (schema version 1)
    if outcome == "interrupted" and not record.get("errorMessage"):
        record["errorMessage"] = INTERRUPTED_MESSAGE
    return record


# Columns of `gateway_requests`, in `StoredRow.params()` order.
COLUMNS = "request_id, api_key_id, instance_id, created_at, settled_at, outcome, record, door"
COLUMN_COUNT = COLUMNS.count(",") + 1
UPSERT_SET = (
    "api_key_id = excluded.api_key_id, instance_id = excluded.instance_id, created_at = excluded.created_at, "
    "settled_at = excluded.settled_at, outcome = excluded.outcome, record = excluded.record, door = excluded.door"
)


class Ledger(ABC):
    """A request-record store. Safe to use from one event loop; `write` is called by one writer at a time.

    `api_key_id=None` in `get`/`list` means "not scoped to a key" (authentication is off).
    """

    instance_id: str

    @abstractmethod
    async def start(self) -> None:
        """Connect, migrate the schema, register this instance and start its heartbeat. Nothing destructive:
        a process that then fails to serve (its port is taken) has changed no one's records."""

    @abstractmethod
    async def recover(self) -> int:
        """Mark `interrupted` the open records of instances that are gone (`app.ledger.liveness`), and keep
        doing so on every heartbeat from now on. Called once the process serves. Returns how many were marked."""

    @abstractmethod
    async def write(self, items: Sequence[tuple[WriteKind, "dict[str, Any] | StoredRow"]]) -> None:
        """Write a batch in one transaction: `insert` adds an open record (kept if it exists), `complete`
        replaces it with the settled one. Record dicts are serialized before the first await; a `StoredRow`
        (from `encode_record`) is written as it is."""

    async def insert(self, record: dict[str, Any]) -> None:
        await self.write([("insert", record)])

    async def complete(self, record: dict[str, Any]) -> None:
        await self.write([("complete", record)])

    @abstractmethod
    async def get(self, request_id: str, api_key_id: str | None) -> dict[str, Any] | None: ...

    @abstractmethod
    async def list(self, api_key_id: str | None, limit: int) -> list[dict[str, Any]]:
        """The most recent records, newest first."""

    @abstractmethod
    async def spend(self, api_key_id: str, since_ms: int) -> float:
        """USD spent (records' usage.cost.total) by the settled turns of a key created since `since_ms`."""

    @abstractmethod
    async def last_cost(self, api_key_id: str) -> float:
        """USD cost (usage.cost.total) of the key's most recent settled turn; 0 when it has none."""

    # Stored responses of the OpenAI Responses door (`store: true`): one JSON document per response id, scoped
    # to the client key (None when authentication is off), written when the turn settles, read back by
    # `previous_response_id`, `item_reference` and `GET /v1/responses/{id}` on any replica. Documents created
    # before `since_ms` count as gone (the retention); `save_response` deletes those of every key, and the key's
    # oldest beyond its `keep_per_key` newest (the bound of a key's storage).

    @abstractmethod
    async def save_response(
        self,
        response_id: str,
        api_key_id: str | None,
        created_at: int,
        document: str,
        *,
        expired_before: int,
        keep_per_key: int | None = None,
    ) -> None:
        """Keep (or replace) one stored response, delete every stored response created before `expired_before`
        and, with `keep_per_key`, the key's stored responses beyond its `keep_per_key` newest."""

    @abstractmethod
    async def load_response(self, response_id: str, api_key_id: str | None, since_ms: int) -> str | None:
        """The key's stored response document created since `since_ms`, or None."""

    @abstractmethod
    async def delete_response(self, response_id: str, api_key_id: str | None, since_ms: int) -> bool:
        """Delete the key's stored response; whether one (created since `since_ms`) was there."""

    @abstractmethod
    async def ping(self) -> None:
        """Raise when the store cannot be reached."""

    @abstractmethod
    async def aclose(self) -> None: ...

    def encode(
        self, items: Sequence[tuple[WriteKind, "dict[str, Any] | StoredRow"]]
    ) -> tuple[builtins.list[tuple[Any, ...]], builtins.list[tuple[Any, ...]]]:  # `list` alone: the method
        """Split a batch into (insert params, complete params); the last write of a request id wins."""
        latest: dict[str, tuple[WriteKind, StoredRow]] = {}
        for kind, record in items:
            row = record if isinstance(record, StoredRow) else encode_record(record, self.instance_id)
            previous = latest.get(row.request_id)
            if previous is not None and previous[0] == "complete" and kind == "insert":
                continue
            latest[row.request_id] = (kind, row)
        inserts = [row.params() for kind, row in latest.values() if kind == "insert"]
        completes = [row.params() for kind, row in latest.values() if kind == "complete"]
        return inserts, completes
