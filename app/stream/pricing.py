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
    """A full usage dict from token counts (missing kinds count 0, negative counts are clamped to 0).

    Called for every usage event a turn gets (Gemini sends one per chunk), so it is written out kind by kind
    rather than looped, with each pricing's per-token prices looked up once (`_prices`)."""
    get = tokens.get
    input_ = max(0, int(get("input") or 0))
    output = max(0, int(get("output") or 0))
    cache_read = max(0, int(get("cacheRead") or 0))
    cache_write = max(0, int(get("cacheWrite") or 0))
    cost = {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}
    usage: dict[str, Any] = {
        "input": input_,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": input_ + output + cache_read + cache_write,
        "cost": cost,
    }
    reasoning = int(get("reasoning") or 0)
    if reasoning > 0:  # part of `output` (priced with it), where the vendor counts it apart
        usage["reasoning"] = min(reasoning, output)
    one_hour = min(max(0, int(get("cacheWrite1h") or 0)), cache_write)
    if one_hour > 0:  # part of `cacheWrite`, written for an hour (priced at the 1-hour write price)
        usage["cacheWrite1h"] = one_hour
    if pricing is None:
        return usage
    per_input, per_output, per_read, per_write, per_write_1h = _prices(pricing)
    total = _ZERO
    # A zero count costs 0.0 (the default); each cost is the exact decimal product, the total their exact sum.
    if input_ and (amount := input_ * per_input):
        cost["input"] = float(amount)
        total += amount
    if output and (amount := output * per_output):
        cost["output"] = float(amount)
        total += amount
    if cache_read and (amount := cache_read * per_read):
        cost["cacheRead"] = float(amount)
        total += amount
    if cache_write:
        five_minutes = cache_write - one_hour
        amount = five_minutes * per_write if five_minutes else _ZERO
        if one_hour:
            amount += one_hour * per_write_1h
        if amount:
            cost["cacheWrite"] = float(amount)
            total += amount
    cost["total"] = float(total)
    return usage


_ZERO = Decimal(0)


@lru_cache(maxsize=1024)
def _prices(pricing: Pricing) -> tuple[Decimal, Decimal, Decimal, Decimal, Decimal]:
    """A pricing's prices per token (input, output, cache read, cache write, 1-hour cache write), exact."""
    return (
        _per_token(pricing.input),
        _per_token(pricing.output),
        _per_token(pricing.cache_read),
        _per_token(pricing.cache_write),
        _per_token(pricing.one_hour_write),
    )


@lru_cache(maxsize=1024)
def _per_token(price_per_million: float) -> Decimal:
    """A catalog price per million tokens as the exact decimal it was written as, per token."""
    return Decimal(repr(price_per_million)).scaleb(-6)
