"""Usage pricing: costs are what a price list expresses (tokens × price per million, exactly), with no float
noise such as 0.00017999999999999998 in events, records and logs."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from app.catalog import Pricing
from app.stream.usage import priced_usage

PRICES = st.sampled_from([0.0, 0.02, 0.075, 0.1, 0.15, 0.3, 0.4, 1.1, 1.25, 2.5, 3.0, 3.75, 15.0, 18.75, 75.0])


def exact(count: int, price: float) -> Decimal:
    return Decimal(count) * Decimal(str(price)) / 1_000_000


def test_costs_have_no_float_noise():
    usage = priced_usage(
        {"input": 73, "output": 25, "cacheRead": 999, "cacheWrite": 1234},
        Pricing(input=0.3, output=1.1, cache_read=0.075, cache_write=0.1),
    )
    cost = usage["cost"]
    assert [repr(cost[k]) for k in ("input", "output", "cacheRead", "cacheWrite")] == [
        "2.19e-05", "2.75e-05", "7.4925e-05", "0.0001234",
    ]  # fmt: skip
    assert repr(cost["total"]) == "0.000247725"
    assert usage["totalTokens"] == 73 + 25 + 999 + 1234  # the usage shape is unchanged
    assert set(usage) == {"input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"}
    assert set(cost) == {"input", "output", "cacheRead", "cacheWrite", "total"}


@given(st.lists(st.integers(0, 10_000_000), min_size=4, max_size=4), st.lists(PRICES, min_size=4, max_size=4))
def test_each_cost_is_the_exact_product_and_the_total_their_exact_sum(counts, prices):
    kinds = ("input", "output", "cacheRead", "cacheWrite")
    usage = priced_usage(dict(zip(kinds, counts)), Pricing(*prices))
    parts = [exact(count, price) for count, price in zip(counts, prices)]
    assert [usage["cost"][k] for k in kinds] == [float(p) for p in parts]
    assert usage["cost"]["total"] == float(sum(parts))
