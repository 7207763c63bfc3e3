"""`python -m bench.cpu_ab --base DIR CASE...` — gateway CPU per turn, this tree against another, in one run.

Starts the simulator and two gateways (uvicorn, uvloop, httptools, one worker each, the bench's environment):
one on this tree and one on the tree at DIR (a directory holding `app/`, e.g. `git archive main | tar -x -C
DIR`, with a `.venv` link), warms both up, then plays each CASE `--rounds` times on both, the order alternating
round by round, and prints the gateway process's CPU (psutil, user + system) per turn, the median over the
rounds and each round's. A CASE is `DELTAS:CONCURRENCY:TURNS:THROTTLE[:PROVIDER]`: turns of DELTAS unpaced
text deltas through `/v1/stream`, THROTTLE the request's `throttleMs` (`default`: the server's; `0`: one event
per upstream delta), PROVIDER `anthropic` (default), `openai` or `google`. E.g. `200:50:150:0:google`.
CPU per 1,000 upstream events is CPU per turn ÷ (DELTAS + 6) (an Anthropic stream's other events).
docs/performance.md, "CPU per event", has the figures this measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import uvloop

from bench import procs
from bench.profile import drive


def _gateway(sim: procs.Server, name: str, root: str) -> procs.Server:
    gateway = procs.Server(name, "app.main:app", health="/readyz")
    port = procs.free_port()
    python = os.path.join(root, ".venv", "bin", "python")
    command = [python if os.path.exists(python) else sys.executable, "-m", "uvicorn", "app.main:app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop", "--http", "httptools"]
    command += ["--log-level", "warning", "--no-access-log", "--backlog", "4096"]
    gateway.start_command(command, port, {**procs.gateway_env(sim), "PYTHONPATH": root})
    return gateway


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cpu_ab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True, help="the other tree (a directory holding app/)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("cases", nargs="+", metavar="CASE")
    args = parser.parse_args()
    sim = procs.simulator()
    gateways: dict[str, procs.Server] = {}
    try:
        for name, root in (("base", os.path.abspath(args.base)), ("this", str(procs.ROOT))):
            gateways[name] = _gateway(sim, f"gateway-{name}", root)
            uvloop.run(drive(gateways[name].port, 200, 10))  # warm-up
        print(f"load average {os.getloadavg()}", flush=True)
        for case in args.cases:
            fields = case.split(":")
            deltas, concurrency, turns = int(fields[0]), int(fields[1]), int(fields[2])
            throttle = None if fields[3] == "default" else int(fields[3])
            provider = fields[4] if len(fields) > 4 else "anthropic"
            per_turn: dict[str, list[float]] = {name: [] for name in gateways}
            for round_ in range(args.rounds):
                for name in list(gateways) if round_ % 2 == 0 else list(reversed(gateways)):
                    gateway = gateways[name]
                    cpu = gateway.cpu()
                    _, failed = uvloop.run(
                        drive(gateway.port, turns, concurrency, deltas=deltas, throttle_ms=throttle, provider=provider)
                    )
                    if failed:
                        raise SystemExit(f"{case} {name}: {failed} turns failed")
                    per_turn[name].append((gateway.cpu() - cpu) / turns * 1000)
            for name, values in per_turn.items():
                median = statistics.median(values)
                rounds = " ".join(f"{v:.3f}" for v in values)
                print(
                    f"{case} {name}: {median:.3f} ms CPU per turn, {median / (deltas + 6) * 1000:.2f} ms per 1,000 "
                    f"upstream events; rounds {rounds}",
                    flush=True,
                )
        print(f"load average {os.getloadavg()}", flush=True)
    finally:
        for gateway in gateways.values():
            gateway.stop()
        sim.stop()


if __name__ == "__main__":
    main()
