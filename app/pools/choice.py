"""The order in which a turn tries a pool's deployments, by the pool's strategy (docs/pools.md).

`order` ranks the deployments that may be sent a request now (neither cooled nor at a quota) by the strategy,
the others after them (soonest ready first: the acquire step skips them unless they became ready); a
conversation's deployment, when it may be sent a request, goes first whatever the strategy.
"""

from __future__ import annotations

import random
from typing import Sequence

from app.contract.catalog_entries import Deployment, Pool
from app.pools.state import Snapshot

EXPLORE = 0.05  # lowest-latency: the chance a turn probes a deployment whose estimate is stale
PROBE_AFTER_MS = 10_000  # lowest-latency: an estimate older than this is stale (probed again, rarely)
GAPS_PER_TURN = 50  # lowest-latency scores a deployment as its TTFT plus this many inter-frame gaps


def latency_score(ttft: float | None, gap: float | None) -> float:
    """Expected seconds to the first token plus a short reply's stream."""
    return (ttft or 0.0) + GAPS_PER_TURN * (gap or 0.0)


def weighted_shuffle(deployments: Sequence[Deployment], rng: random.Random) -> list[Deployment]:
    """Deployments in a random order where each comes first with probability weight / total weight
    (Efraimidis–Spirakis: sort by u^(1/w))."""
    return sorted(deployments, key=lambda d: rng.random() ** (1.0 / d.weight), reverse=True)


def order(
    pool: Pool,
    candidates: Sequence[Deployment],
    snapshot: Snapshot,
    now_ms: int,
    rng: random.Random,
    prices: dict[str, float],
) -> list[Deployment]:
    """`candidates` in the order to try them (`prices`: each deployment's USD per million input + output
    tokens, for `cost`)."""
    states = snapshot.states
    ready_at = {d.name: states[d.name].ready_at_ms(d, now_ms) for d in candidates}
    ready = [d for d in candidates if ready_at[d.name] <= now_ms]
    waiting = sorted((d for d in candidates if ready_at[d.name] > now_ms), key=lambda d: ready_at[d.name])
    shuffled = weighted_shuffle(ready, rng)  # the tie-break of every strategy
    strategy = pool.strategy
    if strategy == "least-in-flight":
        ranked = sorted(shuffled, key=lambda d: states[d.name].in_flight / d.weight)
    elif strategy == "lowest-latency":
        scores = {
            d.name: latency_score(states[d.name].ttft, states[d.name].gap)
            for d in shuffled
            if states[d.name].ttft is not None
        }
        best = min(scores.values(), default=0.0)  # a deployment without samples ties with the best one
        # The tolerance band: deployments within `tolerance_percent` of the best estimate, or `tolerance_ms` of
        # it, are as good as the best and keep their weighted order (they share the traffic by weight: two
        # equally fast keys each take their share, so one key's rate limit does not take it all).
        band = best + max(best * pool.tolerance_percent / 100, pool.tolerance_ms / 1000)
        ranked = sorted(shuffled, key=lambda d: max(scores.get(d.name, best), band))
        stale = [i for i, d in enumerate(ranked) if i and states[d.name].sampled_at_ms < now_ms - PROBE_AFTER_MS]
        if stale and rng.random() < EXPLORE:  # a deployment that recovered is noticed, at little cost to the tail
            ranked.insert(0, ranked.pop(rng.choice(stale)))
    elif strategy == "cost":
        ranked = sorted(shuffled, key=lambda d: prices.get(d.name, 0.0))
    else:  # weighted
        ranked = shuffled
    stuck = snapshot.affinity
    if stuck is not None:
        for index, d in enumerate(ranked):
            if d.name == stuck:
                ranked.insert(0, ranked.pop(index))
                break
    return ranked + waiting
