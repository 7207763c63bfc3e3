"""Usage arithmetic: `totalTokens` is the sum of the four counts, cost is tokens × catalog price per million."""

from __future__ import annotations

from typing import Any

from app.catalog import Pricing

_KINDS = ("input", "output", "cacheRead", "cacheWrite")


def new_usage() -> dict[str, Any]:
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0},
    }


def priced_usage(tokens: dict[str, Any], pricing: Pricing | None) -> dict[str, Any]:
    """A full usage dict from token counts (missing kinds count 0, negative counts are clamped to 0)."""
    usage = new_usage()
    cost = usage["cost"]
    total_tokens = 0
    total_cost = 0.0
    for kind in _KINDS:
        count = max(0, int(tokens.get(kind) or 0))
        usage[kind] = count
        total_tokens += count
        if pricing is not None:
            amount = count * getattr(pricing, _PRICE_FIELD[kind]) / 1_000_000
            cost[kind] = amount
            total_cost += amount
    usage["totalTokens"] = total_tokens
    cost["total"] = total_cost
    return usage


_PRICE_FIELD = {"input": "input", "output": "output", "cacheRead": "cache_read", "cacheWrite": "cache_write"}
