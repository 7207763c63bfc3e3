"""Usage arithmetic: `totalTokens` is the sum of the four counts, cost is tokens × catalog price per million;
`reasoning` (how many of `output` are reasoning tokens) only where the adapter reported it, and `cacheWrite1h`
(how many of `cacheWrite` went to a 1-hour cache) likewise: those are priced at the 1-hour write price
(`Pricing.one_hour_write`), the rest of `cacheWrite` at `cacheWrite`'s.

Costs are computed in decimal from the prices as the catalog writes them (`0.3`, not the binary float
0.29999999999999998…), so each cost is the exact product and `total` the exact sum, and the floats sent out
are the nearest ones to those (`0.00018`, never `0.00017999999999999998`).
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import Any, Mapping

from app.contract.catalog_entries import Pricing

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


def priced_usage(tokens: Mapping[str, Any], pricing: Pricing | None) -> dict[str, Any]:
    """A full usage dict from token counts (missing kinds count 0, negative counts are clamped to 0)."""
    usage = new_usage()
    for kind in _KINDS:
        usage[kind] = max(0, int(tokens.get(kind) or 0))
    usage["totalTokens"] = sum(usage[kind] for kind in _KINDS)
    reasoning = int(tokens.get("reasoning") or 0)
    if reasoning > 0:  # part of `output` (priced with it), where the vendor counts it apart
        usage["reasoning"] = min(reasoning, usage["output"])
    one_hour = min(max(0, int(tokens.get("cacheWrite1h") or 0)), usage["cacheWrite"])
    if one_hour > 0:  # part of `cacheWrite`, written for an hour (priced at the 1-hour write price)
        usage["cacheWrite1h"] = one_hour
    if pricing is None:
        return usage
    cost = usage["cost"]
    total_cost = Decimal(0)
    for kind in _KINDS:
        count = usage[kind] - (one_hour if kind == "cacheWrite" else 0)
        amount = count * _per_token(getattr(pricing, _PRICE_FIELD[kind])) if count else Decimal(0)
        if kind == "cacheWrite" and one_hour:
            amount += one_hour * _per_token(pricing.one_hour_write)
        if amount:  # a zero count costs 0.0 (the default)
            cost[kind] = float(amount)
            total_cost += amount
    cost["total"] = float(total_cost)
    return usage


@lru_cache(maxsize=1024)
def _per_token(price_per_million: float) -> Decimal:
    """A catalog price per million tokens as the exact decimal it was written as, per token."""
    return Decimal(repr(price_per_million)).scaleb(-6)


_PRICE_FIELD = {"input": "input", "output": "output", "cacheRead": "cache_read", "cacheWrite": "cache_write"}
