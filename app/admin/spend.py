"""The spend report and agent sessions (docs/admin.md): figures computed from the request records themselves,
so a report's cost is the records' costs summed (`math.fsum`: the correctly rounded sum, the same whatever
the records' order).

A record in a group counts its `usage.cost.total` (USD), one turn, and its tokens. `groupBy=tag` counts a
record once in each of its tags (the groups then add up to more than the total); a record without the grouped
field falls in the group `null`. `day` is the UTC date of the record's `createdAt`.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import datetime, timezone
from typing import Any, Iterable, Literal

GroupBy = Literal["key", "team", "user", "tag", "model", "provider", "session", "day"]
FIGURES = ("costUsd", "turns", "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "totalTokens")


def cost_of(record: dict[str, Any]) -> float:
    usage = record.get("usage") or {}
    cost = (usage.get("cost") or {}).get("total")
    return float(cost) if isinstance(cost, (int, float)) else 0.0


def _groups(record: dict[str, Any], group_by: GroupBy) -> list[Any]:
    if group_by == "tag":
        return list(record.get("tags") or []) or [None]
    if group_by == "day":
        return [datetime.fromtimestamp(record["createdAt"] / 1000, timezone.utc).date().isoformat()]
    if group_by == "model":
        return [f"{record['provider']}/{record['model']}" if record.get("model") else record.get("requestedModel")]
    field = "apiKeyId" if group_by == "key" else group_by
    return [record.get(field)]


def spend(records: Iterable[dict[str, Any]], group_by: GroupBy) -> dict[str, Any]:
    """`{"groups": [{"group", costUsd, turns, …tokens}], "total": {…}}`, groups by cost, largest first."""
    costs: dict[Any, list[float]] = {}
    counts: dict[Any, dict[str, int]] = {}
    all_costs: list[float] = []
    total_counts = _zero_counts()
    for record in records:
        cost = cost_of(record)
        all_costs.append(cost)
        _count(total_counts, record)
        for group in _groups(record, group_by):
            costs.setdefault(group, []).append(cost)
            _count(counts.setdefault(group, _zero_counts()), record)
    groups = [{"group": group, "costUsd": math.fsum(costs[group]), **counts[group]} for group in costs]
    groups.sort(key=lambda row: (-row["costUsd"], str(row["group"])))
    return {"groupBy": group_by, "groups": groups, "total": {"costUsd": math.fsum(all_costs), **total_counts}}


def spend_csv(report: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([report["groupBy"], *FIGURES])
    for row in report["groups"]:
        writer.writerow(
            [
                "" if row["group"] is None else row["group"],
                *(repr(row[f]) if f == "costUsd" else row[f] for f in FIGURES),
            ]
        )
    return out.getvalue()


def _zero_counts() -> dict[str, int]:
    return {name: 0 for name in FIGURES if name != "costUsd"}


def _count(counts: dict[str, int], record: dict[str, Any]) -> None:
    usage = record.get("usage") or {}
    counts["turns"] += 1
    counts["inputTokens"] += int(usage.get("input") or 0)
    counts["outputTokens"] += int(usage.get("output") or 0)
    counts["cacheReadTokens"] += int(usage.get("cacheRead") or 0)
    counts["cacheWriteTokens"] += int(usage.get("cacheWrite") or 0)
    counts["totalTokens"] += int(usage.get("totalTokens") or 0)


def session_turn(record: dict[str, Any]) -> dict[str, Any]:
    """One turn of an agent session as `GET /v1/sessions/{id}` lists it."""
    usage = record.get("usage") or {}
    read = int(usage.get("cacheRead") or 0)
    prompt = int(usage.get("input") or 0) + read + int(usage.get("cacheWrite") or 0)
    message = record.get("message")
    tools = None
    if isinstance(message, dict) and isinstance(message.get("content"), list):
        tools = [block.get("name") for block in message["content"] if block.get("type") == "toolCall"]
    return {
        "requestId": record.get("requestId"),
        "createdAt": record.get("createdAt"),
        "door": record.get("door"),
        "key": record.get("apiKeyId"),
        "user": record.get("user"),
        "requestedModel": record.get("requestedModel"),
        "provider": record.get("provider"),
        "model": record.get("model"),
        "toolCalls": tools,  # the names of the tools called (null when content is not retained)
        "stopReason": record.get("stopReason"),
        "inputTokens": int(usage.get("input") or 0),
        "outputTokens": int(usage.get("output") or 0),
        "cacheReadTokens": read,
        "cacheReadShare": read / prompt if prompt else 0.0,  # of the prompt's tokens, those read from cache
        "costUsd": cost_of(record),
        "durationMs": record.get("durationMs"),
        "outcome": record.get("outcome"),
        "errorMessage": record.get("errorMessage"),
    }


def session_view(session: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """A session's turns in order and its totals."""
    turns = [session_turn(record) for record in records]
    return {"session": session, "turns": turns, "totals": _totals(records)}


def sessions(records: Iterable[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The sessions the records belong to, most recently active first, each with its totals."""
    by_session: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record.get("session"):
            by_session.setdefault(record["session"], []).append(record)
    listed = [{"session": session, **_totals(turns)} for session, turns in by_session.items()]
    listed.sort(key=lambda row: -row["lastAt"])
    return listed[:limit]


def _totals(records: list[dict[str, Any]]) -> dict[str, Any]:
    counts = _zero_counts()
    for record in records:
        _count(counts, record)
    prompt = counts["inputTokens"] + counts["cacheReadTokens"] + counts["cacheWriteTokens"]
    return {
        "costUsd": math.fsum(cost_of(record) for record in records),
        **counts,
        "cacheReadShare": counts["cacheReadTokens"] / prompt if prompt else 0.0,
        "firstAt": min((r["createdAt"] for r in records), default=None),
        "lastAt": max((r["createdAt"] for r in records), default=0),
        "models": sorted({f"{r['provider']}/{r['model']}" for r in records if r.get("model")}),
        "keys": sorted({r["apiKeyId"] for r in records if r.get("apiKeyId")}),
        "durationMs": sum(int(r.get("durationMs") or 0) for r in records),
        "errors": sum(1 for r in records if r.get("outcome") != "done"),
    }
