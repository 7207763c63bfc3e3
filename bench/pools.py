"""`python -m bench.pools [--quick]` — what a pool of deployments costs, and what `lowest-latency` buys.

One simulator; three catalog provider entries (`pool-a`, `pool-b`, `pool-c`, each on the simulator's Anthropic
wire) as the deployments. One gateway process (no Redis: the per-process pool state) serves:

- **cpu**: the same paced scenario (`slow;n=16;delay_ms=5;size=8`) through `anthropic/<scenario>` (a single
  provider) and through the route `pool3` (a weighted pool of the three deployments), in alternating rounds;
  reported: gateway process CPU per turn of each, and the pool's overhead in percent (median over rounds).
- **latency**: pools `weighted3` and `fastest3` of the same three deployments, one of which is slow (its
  frames 60 ms apart, so its first token comes ~120 ms later); after 10 turns that let the estimates settle,
  5 concurrent clients; reported: time to first text delta p50/p99 per strategy, and the share of turns the
  slow deployment served.

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
from bench.stats import ms, pct

RESULTS = Path(__file__).parent / "results"
SCENARIO = "slow;n=16;delay_ms=5;size=8"
SLOW = "slow;n=16;delay_ms=60;size=8"
DEPLOYMENTS = ("pool-a", "pool-b", "pool-c")


def _catalog(directory: str) -> str:
    same = [{"provider": name, "model": SCENARIO} for name in DEPLOYMENTS]
    one_slow = [{"provider": "pool-a", "model": SLOW}, *same[1:]]
    data = {
        "providers": [{"name": name, "api": "anthropic-messages", "keyEnv": "BENCH_POOL_KEY"} for name in DEPLOYMENTS],
        "routes": [
            {"name": "pool3", "pool": {"deployments": same}},
            {"name": "weighted3", "pool": {"deployments": one_slow}},
            {"name": "fastest3", "pool": {"strategy": "lowest-latency", "deployments": one_slow}},
        ],
    }
    path = Path(directory) / "catalog.json"
    path.write_text(json.dumps(data))
    return str(path)


async def _turn(client: httpx.AsyncClient, model: str) -> tuple[float | None, str | None]:
    """One streamed turn: (seconds to the first text delta, the provider that served it)."""
    body = {"model": model, "context": {"messages": [{"role": "user", "content": f"bench-{uuid.uuid4().hex[:16]}"}]},
            "options": {"maxTokens": 4096}}
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


async def run(quick: bool) -> dict[str, Any]:
    workdir = tempfile.mkdtemp(prefix="bench-pools-")
    sim = procs.simulator()
    gateway = None
    try:
        base_urls = {name: f"{sim.url}/anthropic" for name in DEPLOYMENTS}
        gateway = procs.gateway(
            sim, GATEWAY_CATALOG=_catalog(workdir), GATEWAY_BASE_URLS=json.dumps(base_urls), BENCH_POOL_KEY="bench-key"
        )
        single = f"anthropic/{SCENARIO}"
        for model in (single, "pool3"):  # warm up
            await _batch(gateway, model, 4, 5)
        rounds = 3 if quick else 6
        per_round = []
        for r in range(rounds):
            order = (single, "pool3") if r % 2 == 0 else ("pool3", single)
            per_round.append({model: await _batch(gateway, model, 1, 100 if quick else 200) for model in order})
        cpu_single = median(e[single]["cpuMsPerTurn"] for e in per_round)
        cpu_pool = median(e["pool3"]["cpuMsPerTurn"] for e in per_round)
        latency = {}
        for model in ("weighted3", "fastest3"):
            await _batch(gateway, model, 1, 10)  # the estimates settle (steady state)
            latency[model] = await _batch(gateway, model, 5, 40 if quick else 80)
        return {
            "scenario": SCENARIO,
            "slowDeployment": SLOW,
            "rounds": per_round,
            "cpuMsPerTurnSingle": round(cpu_single, 3),
            "cpuMsPerTurnPool3": round(cpu_pool, 3),
            "poolCpuOverheadPct": round((cpu_pool - cpu_single) * 100 / cpu_single, 1),
            "latency": latency,
            "loadavg": os.getloadavg(),
        }
    finally:
        for server in (gateway, sim):
            if server is not None:
                server.stop()


def _markdown(result: dict[str, Any]) -> str:
    lat = result["latency"]
    lines = [
        "# Pools: a pool of three vs one provider (CPU), lowest-latency vs weighted (TTFT)",
        "",
        f"Scenario `{result['scenario']}`; load average at the end {result['loadavg']}.",
        "",
        "| gateway CPU per turn: single provider | pool of three | overhead |",
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
        lines.append(f"| {label} | {row['ttftP50Ms']} ms | {row['ttftP99Ms']} ms | {row['slowShare'] * 100:.1f} % | {row['failed']} |")
    return "\n".join(lines) + "\n"


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
