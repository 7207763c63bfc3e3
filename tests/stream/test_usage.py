"""Usage pricing: costs are what a price list expresses (tokens × price per million, exactly), with no float
noise such as 0.00017999999999999998 in events, records and logs."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from app.contract.catalog_entries import Pricing
from app.stream.pricing import priced_usage

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


def test_one_hour_cache_writes_are_priced_at_the_one_hour_write_price():
    """Issue 39 item 7: of `cacheWrite`, the 1-hour writes cost the catalog's `cacheWrite1h`, or twice the input
    price when the catalog does not say (Anthropic: 2 × input for 1 hour, 1.25 × for 5 minutes)."""
    tokens = {"input": 10, "cacheWrite": 1000, "cacheWrite1h": 600}
    derived = priced_usage(tokens, Pricing(input=3, output=15, cache_read=0.3, cache_write=3.75))
    assert derived["cacheWrite"] == 1000 and derived["cacheWrite1h"] == 600 and derived["totalTokens"] == 1010
    assert derived["cost"]["cacheWrite"] == float(exact(400, 3.75) + exact(600, 6))
    assert derived["cost"]["total"] == float(exact(10, 3) + exact(400, 3.75) + exact(600, 6))
    listed = priced_usage(tokens, Pricing(input=3, cache_write=3.75, cache_write_1h=5))
    assert listed["cost"]["cacheWrite"] == float(exact(400, 3.75) + exact(600, 5))
    # More 1-hour writes than writes (a hostile vendor) count as all of them; none reported: as before.
    assert priced_usage({"cacheWrite": 10, "cacheWrite1h": 99}, Pricing(input=1, cache_write=1))["cacheWrite1h"] == 10
    assert "cacheWrite1h" not in priced_usage({"cacheWrite": 10}, Pricing(input=1, cache_write=1))


def test_the_catalog_prices_a_one_hour_write_or_derives_it(tmp_path):
    from app.catalog import Catalog

    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"models": [
        {"provider": "anthropic", "id": "listed", "cost": {"input": 3, "cacheWrite": 3.75, "cacheWrite1h": 5.5}},
        {"provider": "anthropic", "id": "derived", "cost": {"input": 3, "cacheWrite": 3.75}},
    ]}))  # fmt: skip
    catalog = Catalog.load(str(path))
    assert catalog.model("anthropic", "listed").pricing.one_hour_write == 5.5
    assert catalog.model("anthropic", "derived").pricing.one_hour_write == 6


# ---------------------------------------------------------------------------------------------------------------
# Hostile token counts (issue 24 item 11): a count past 64 bits, or past any float, from any vendor.

import json  # noqa: E402
import math  # noqa: E402

import pytest  # noqa: E402

from app.providers.base import MAX_USAGE_TOKENS, ProviderError, token_count  # noqa: E402
from tests.conftest import HERE, marker, turn  # noqa: E402

KEYED = {"Authorization": "Bearer usage-key-SECRET"}
HUGE = (10**20, 10**400)
PROVIDERS = ("anthropic", "openai", "google", "compat")


@pytest.fixture(scope="module")
def keyed_gateway(gateway_factory, tmp_path_factory):
    """A gateway with a client key, whose catalog prices the simulator models that report a huge input count
    (so the turn has a cost, the key a spend metric)."""
    catalog = json.loads((HERE / "catalog.json").read_text())
    price = {"input": 3, "output": 15}
    catalog["models"] += [
        {"provider": p, "id": f"text;input={n}", "contextWindow": 200000, "maxTokens": 8192, "cost": price}
        for p in PROVIDERS
        for n in HUGE
    ]
    catalog["models"].append({"provider": "anthropic", "id": ONE_HOUR, "cost": {"input": 3, "cacheWrite": 3.75}})
    path = tmp_path_factory.mktemp("catalog") / "catalog.json"
    path.write_text(json.dumps(catalog))
    return gateway_factory(api_keys="usage:usage-key-SECRET", retries=0, catalog=str(path))


@pytest.mark.parametrize("count", HUGE, ids=["1e20", "1e400"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_usage_beyond_64_bits_is_clamped_and_the_turn_settles_with_a_record(keyed_gateway, provider, count):
    gw = keyed_gateway
    result = gw.stream(turn(f"{provider}/text;input={count}", marker()), headers=KEYED)
    assert result.status == 200
    terminal = result.terminal
    assert terminal["type"] == "done", terminal.get("errorMessage")
    assert terminal["usage"]["input"] == MAX_USAGE_TOKENS
    assert 0 < terminal["usage"]["cost"]["total"] < math.inf
    request_id = result.headers["x-request-id"]
    gw.job(request_id)
    record = gw.http.get(f"/v1/requests/{request_id}", headers=KEYED)
    assert record.status_code == 200, record.text
    assert record.json()["outcome"] == "done" and record.json()["usage"]["input"] == MAX_USAGE_TOKENS
    # The whole JSON body of stream=false too (it answered 500).
    complete = gw.http.post("/v1/complete", json=turn(f"{provider}/text;input={count}", marker()), headers=KEYED)
    assert complete.status_code == 200 and complete.json()["usage"]["input"] == MAX_USAGE_TOKENS
    # The doors: Chat Completions (it looked normal without usage) and Messages (an empty 200), whole bodies.
    chat = gw.http.post(
        "/v1/chat/completions",
        headers=KEYED,
        json={"model": f"{provider}/text;input={count}", "messages": [{"role": "user", "content": marker()}]},
    )
    assert chat.status_code == 200 and chat.json()["usage"]["prompt_tokens"] == MAX_USAGE_TOKENS, chat.text
    messages = gw.http.post(
        "/v1/messages",
        headers=KEYED,
        json={
            "model": f"{provider}/text;input={count}",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": marker()}],
        },
    )
    assert messages.status_code == 200 and messages.json()["usage"]["input_tokens"] == MAX_USAGE_TOKENS, messages.text
    metrics = gw.http.get("/metrics").text
    spend = [line for line in metrics.splitlines() if line.startswith('gateway_key_spend_usd_total{key="usage"}')]
    assert spend and math.isfinite(float(spend[0].split()[-1])), spend


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, 0),
        (0, 0),
        (7, 7),
        (-3, 0),
        (12.0, 12),
        (10**20, MAX_USAGE_TOKENS),
        (1e400, MAX_USAGE_TOKENS),
        (MAX_USAGE_TOKENS, MAX_USAGE_TOKENS),
    ],
)
def test_token_count_clamps_whole_numbers_to_the_plausible_range(value, expected):
    assert token_count(value, "prompt_tokens") == expected


@pytest.mark.parametrize("value", ["12", [1], {"a": 1}, True, 1.5, float("nan")])
def test_token_count_refuses_a_value_that_is_not_a_whole_number_as_malformed(value):
    with pytest.raises(ProviderError) as caught:
        token_count(value, "prompt_tokens")
    assert caught.value.kind == "malformed" and "prompt_tokens=" in caught.value.message


ONE_HOUR = "text;cache_write=1000;cache_write_1h=600"


def test_anthropics_one_hour_cache_writes_reach_the_usage_and_the_record_at_their_price(keyed_gateway):
    """Issue 39 item 7, over loopback: Anthropic's `usage.cache_creation.ephemeral_1h_input_tokens` is read from
    the wire; the turn's cost, its record and the key's spend charge those writes 2 × input (the catalog's
    `anthropic/text` lists no 1-hour price), not the 5-minute 1.25 ×, which under-counted them by 37.5 %."""
    gw = keyed_gateway
    result = gw.stream(turn(f"anthropic/{ONE_HOUR}", marker()), headers=KEYED)
    usage = result.terminal["usage"]
    assert (usage["cacheWrite"], usage["cacheWrite1h"]) == (1000, 600)
    written = exact(400, 3.75) + exact(600, 6)
    assert usage["cost"]["cacheWrite"] == float(written)
    request_id = result.headers["x-request-id"]
    gw.job(request_id)
    record = gw.http.get(f"/v1/requests/{request_id}", headers=KEYED).json()
    assert record["usage"]["cost"]["cacheWrite"] == float(written) and record["usage"]["cacheWrite1h"] == 600
