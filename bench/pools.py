"""`python -m bench.pools [--quick]` — what a pool of deployments costs, and what `lowest-latency` buys.

One simulator; three catalog provider entries (`pool-a`, `pool-b`, `pool-c`, each on the simulator's Anthropic
wire) as the deployments. One gateway process (no Redis: the per-process pool state) serves:

- **cpu**: the same paced scenario (`slow;n=16;delay_ms=5;size=8`) through `anthropic/<scenario>` (a single
  provider) and through the route `pool3` (a weighted pool of the three deployments), in alternating rounds;
  reported: gateway process CPU per turn of each (median over rounds), and the pool's overhead in percent: the
  median over rounds of pool ÷ single in the same round (paired, as `bench.stats.compare`: the machine's load
  moves between rounds more than the pool costs).
- **latency**: pools `weighted3` and `fastest3` of the same three deployments, one of which is slow (its
  frames 60 ms apart, so its first token comes ~120 ms later); after 10 turns that let the estimates settle,
  5 concurrent clients; reported: time to first text delta p50/p99 per strategy, and the share of turns the
  slow deployment served.
- **cache**: a weighted pool `cache3` of three deployments (`cache-a`, `cache-b`, `cache-c`), each a simulator
  process of its own with its prompt cache on (`text;prompt_cache=1`: a deployment reports as cache read the
  prompt prefix it served before, simulator/prompt_cache.py); 10-turn conversations, each turn sending the
  whole conversation so far, with a conversation key (`options.sessionId`) and without one; reported: the
  cache-read share of the prompt tokens (cache read ÷ (input + cache read)) over turns 2..10, each way, and
  their ratio.

Results: bench/results/pools.{json,md}. The machine is shared: compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from statistics import median
from typing import Any

import httpx

from bench import procs
from bench.stats import compare, ms, pct

RESULTS = Path(__file__).parent / "results"
SCENARIO = "slow;n=16;delay_ms=5;size=8"
SLOW = "slow;n=16;delay_ms=60;size=8"
DEPLOYMENTS = ("pool-a", "pool-b", "pool-c")
CACHED = "text;prompt_cache=1"
CACHE_DEPLOYMENTS = ("cache-a", "cache-b", "cache-c")  # each on a simulator process of its own
CONVERSATION_TURNS = 10
USER_MESSAGE = "Please go on with the analysis, looking at the next part of the system in detail. " * 10  # ~200 tokens


def _catalog(directory: str) -> str:
    same = [{"provider": name, "model": SCENARIO} for name in DEPLOYMENTS]
    one_slow = [{"provider": "pool-a", "model": SLOW}, *same[1:]]
    data = {
        "providers": [
            {"name": name, "api": "anthropic-messages", "keyEnv": "BENCH_POOL_KEY"}
            for name in DEPLOYMENTS + CACHE_DEPLOYMENTS
        ],
        "routes": [
            {"name": "pool3", "pool": {"deployments": same}},
            {
                "name": "cache3",
                "pool": {"deployments": [{"provider": name, "model": CACHED} for name in CACHE_DEPLOYMENTS]},
            },
            {"name": "weighted3", "pool": {"deployments": one_slow}},
            {"name": "fastest3", "pool": {"strategy": "lowest-latency", "deployments": one_slow}},
        ],
    }
    path = Path(directory) / "catalog.json"
    path.write_text(json.dumps(data))
    return str(path)


async def _turn(client: httpx.AsyncClient, model: str) -> tuple[float | None, str | None]:
    """One streamed turn: (seconds to the first text delta, the provider that served it)."""
    body = {
        "model": model,
        "context": {"messages": [{"role": "user", "content": f"bench-{uuid.uuid4().hex[:16]}"}]},
        "options": {"maxTokens": 4096},
    }
    start = time.perf_counter()
    ttft = provider = None
    async with client.stream("POST", "/v1/stream", json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            if ttft is None and '"text_delta"' in line:
                ttft = time.perf_counter() - start
            elif provider is None and '"type":"start"' in line.replace(" ", ""):
                provider = json.loads(line[5:]).get("provider")
    return ttft, provider


async def _batch(gateway: procs.Server, model: str, concurrency: int, per_worker: int) -> dict[str, Any]:
    results: list[tuple[float | None, str | None]] = []
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:

        async def worker() -> None:
            for _ in range(per_worker):
                results.append(await _turn(client, model))

        cpu0 = gateway.cpu()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        cpu = gateway.cpu() - cpu0
    ttfts = [t for t, _ in results if t is not None]
    return {
        "turns": len(results),
        "failed": len(results) - len(ttfts),
        "cpuMsPerTurn": round(cpu * 1000 / len(results), 3),
        "ttftP50Ms": ms(pct(ttfts, 50)),
        "ttftP99Ms": ms(pct(ttfts, 99)),
        "slowShare": round(sum(1 for _, p in results if p == "pool-a") / len(results), 3),
    }


async def _conversation(client: httpx.AsyncClient, keyed: bool) -> list[dict[str, int]]:
    """One conversation of `CONVERSATION_TURNS` turns through `cache3`, each sending the conversation so far:
    each turn's usage."""
    messages: list[dict[str, Any]] = []
    options: dict[str, Any] = {"sessionId": f"bench-{uuid.uuid4().hex}"} if keyed else {}
    usages = []
    for index in range(CONVERSATION_TURNS):
        messages.append({"role": "user", "content": f"{index + 1}/{uuid.uuid4().hex[:8]}: {USER_MESSAGE}"})
        response = await client.post(
            "/v1/complete", json={"model": "cache3", "context": {"messages": messages}, "options": options}
        )
        response.raise_for_status()
        message = response.json()
        usages.append(message["usage"])
        messages.append({k: v for k, v in message.items() if k != "requestId"})
    return usages


def _cache_share(conversations: list[list[dict[str, int]]]) -> float:
    """Cache read ÷ (input + cache read) over turns 2..10 of every conversation."""
    later = [usage for usages in conversations for usage in usages[1:]]
    read = sum(u["cacheRead"] for u in later)
    return round(read / max(read + sum(u["input"] for u in later), 1), 3)


async def _cache(gateway: procs.Server, conversations: int) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
        with_key = [await _conversation(client, True) for _ in range(conversations)]
        without_key = [await _conversation(client, False) for _ in range(conversations)]
    keyed, unkeyed = _cache_share(with_key), _cache_share(without_key)
    return {
        "conversations": conversations,
        "turns": CONVERSATION_TURNS,
        "shareWithKey": keyed,
        "shareWithoutKey": unkeyed,
        "ratio": round(keyed / unkeyed, 2) if unkeyed else None,
        "firstTurnCacheRead": sum(c[0]["cacheRead"] for c in with_key + without_key),
    }


async def run(quick: bool) -> dict[str, Any]:
    workdir = tempfile.mkdtemp(prefix="bench-pools-")
    sim = procs.simulator()
    caches: list[procs.Server] = []
    gateway = None
    try:
        caches = [procs.simulator() for _ in CACHE_DEPLOYMENTS]
        base_urls = {name: f"{sim.url}/anthropic" for name in DEPLOYMENTS}
        base_urls.update({name: f"{cache.url}/anthropic" for name, cache in zip(CACHE_DEPLOYMENTS, caches)})
        gateway = procs.gateway(
            sim, GATEWAY_CATALOG=_catalog(workdir), GATEWAY_BASE_URLS=json.dumps(base_urls), BENCH_POOL_KEY="bench-key"
        )
        single = f"anthropic/{SCENARIO}"
        for model in (single, "pool3"):  # warm up
            await _batch(gateway, model, 4, 5)
        rounds = 3 if quick else 8
        per_round = []
        for r in range(rounds):
            order = (single, "pool3") if r % 2 == 0 else ("pool3", single)
            per_round.append({model: await _batch(gateway, model, 1, 100 if quick else 200) for model in order})
        cpu_single = median(e[single]["cpuMsPerTurn"] for e in per_round)
        cpu_pool = median(e["pool3"]["cpuMsPerTurn"] for e in per_round)
        paired = compare([{"direct": e[single], "gateway": e["pool3"]} for e in per_round], ["cpuMsPerTurn"])
        ratio = paired["ratio"]["cpuMsPerTurn"]
        overhead = None if ratio is None else round((ratio - 1) * 100, 1)
        latency = {}
        for model in ("weighted3", "fastest3"):
            await _batch(gateway, model, 1, 10)  # the estimates settle (steady state)
            latency[model] = await _batch(gateway, model, 5, 40 if quick else 80)
        cache = await _cache(gateway, 10 if quick else 30)
        return {
            "scenario": SCENARIO,
            "slowDeployment": SLOW,
            "rounds": per_round,
            "cpuMsPerTurnSingle": round(cpu_single, 3),
            "cpuMsPerTurnPool3": round(cpu_pool, 3),
            "poolCpuOverheadPct": overhead,
            "latency": latency,
            "lowestLatencyP99Ratio": round(latency["fastest3"]["ttftP99Ms"] / latency["weighted3"]["ttftP99Ms"], 3),
            "cache": cache,
            "quick": quick,
            "loadavg": os.getloadavg(),
        }
    finally:
        for server in (gateway, sim, *caches):
            if server is not None:
                server.stop()


def table(result: dict[str, Any]) -> list[str]:
    """The run's figures as Markdown lines (also the pools section of `make bench`'s summary, bench/report.py)."""
    lat = result["latency"]
    lines = [
        f"{'Quick' if result.get('quick') else 'Full'} run. Scenario `{result['scenario']}`; load average at the end "
        f"{[round(x, 2) for x in result['loadavg']]}.",
        "",
        "| gateway CPU per turn: single provider | pool of three | overhead (median of per-round ratios) |",
        "|---|---|---|",
        f"| {result['cpuMsPerTurnSingle']} ms | {result['cpuMsPerTurnPool3']} ms | {result['poolCpuOverheadPct']} % |",
        "",
        f"One deployment slow (`{result['slowDeployment']}`), 5 concurrent clients:",
        "",
        "| strategy | TTFT p50 | TTFT p99 | turns on the slow deployment | failed |",
        "|---|---|---|---|---|",
    ]
    for name, label in (("weighted3", "weighted"), ("fastest3", "lowest-latency")):
        row = lat[name]
        lines.append(
            f"| {label} | {row['ttftP50Ms']} ms | {row['ttftP99Ms']} ms | {row['slowShare'] * 100:.1f} % | {row['failed']} |"
        )
    cache = result.get("cache")
    if cache:
        lines += [
            "",
            f"Prompt cache: {cache['conversations']} conversations of {cache['turns']} turns each way through a weighted pool",
            "of three deployments, each with its own prompt cache; cache read ÷ (input + cache read) over turns 2..10:",
            "",
            "| with a conversation key | without | ratio |",
            "|---|---|---|",
            f"| {cache['shareWithKey'] * 100:.1f} % | {cache['shareWithoutKey'] * 100:.1f} % | {cache['ratio']}× |",
        ]
    return lines


def _markdown(result: dict[str, Any]) -> str:
    title = "# Pools: a pool of three vs one provider (CPU), lowest-latency vs weighted (TTFT), sticky conversations (prompt cache)"
    return "\n".join([title, "", *table(result)]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(run(args.quick))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pools.json").write_text(json.dumps(result, indent=2))
    (RESULTS / "pools.md").write_text(_markdown(result))
    print(_markdown(result))


if __name__ == "__main__":
    main()
