"""`python -m bench.partial_arguments` — CPU cost of `partialArguments` per tool-call delta.

In one process, for tool calls whose arguments are about 300 B, 3 KB, 11 KB and 50 KB of JSON streamed in
16-character fragments (about what Anthropic's `input_json_delta` carries), it measures the CPU time
(`time.process_time`, median of the rounds) per `toolcall_delta` of:

- `incremental`: `PartialArguments` (app/stream/partial_arguments.py) — scan the fragment, then build the
  value (`orjson.loads` of the cut text plus closers);
- `reparse`: partial-json-parser's `loads` of the whole accumulated text, as a door would do naively;
- `encode`: the extra cost of encoding the frame with its `partialArguments` (orjson.dumps of the event with
  the field minus without it) — the value goes out on every delta, so this part is linear in the size.

Results go to bench/results/partial-arguments.{json,md}. The machine is shared; the figures are CPU time,
not wall time, but still move with the load (the load average is recorded).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import orjson
import partial_json_parser

from app.stream.partial_arguments import PartialArguments

RESULTS = Path(__file__).parent / "results"
SIZES = (300, 3_000, 11_000, 50_000)
FRAGMENT = 16
ROUNDS = 5


def arguments_of_size(size: int, seed: int) -> str:
    """A realistic tool-call argument object (strings with escapes and unicode, numbers, nested lists)."""
    rng = random.Random(seed)
    words = ["path", "line", "città", "naïve", "emoji 🎉", 'quote "x"', "tab\tend", "back\\slash", "日本語"]
    value: dict[str, Any] = {"file": "src/app/main.py", "edits": []}
    while len(json.dumps(value)) < size:
        value["edits"].append(
            {
                "line": rng.randint(1, 5000),
                "old": " ".join(rng.choices(words, k=4)),
                "new": " ".join(rng.choices(words, k=6)),
                "score": round(rng.random(), 4),
                "flags": [True, None, False][: rng.randint(0, 3)],
            }
        )
    return json.dumps(value)


def fragments(text: str) -> list[str]:
    return [text[i : i + FRAGMENT] for i in range(0, len(text), FRAGMENT)]


def _cpu_per_delta(run: Callable[[], None], deltas: int) -> float:
    """Median CPU microseconds per delta over the rounds."""
    samples = []
    for _ in range(ROUNDS):
        started = time.process_time()
        run()
        samples.append((time.process_time() - started) / deltas * 1e6)
    return statistics.median(samples)


def measure(size: int) -> dict[str, Any]:
    text = arguments_of_size(size, seed=size)
    parts = fragments(text)
    events = [{"type": "toolcall_delta", "contentIndex": 1, "delta": part} for part in parts]

    def incremental() -> None:
        add = PartialArguments()
        for event in events:
            add(event)

    def reparse() -> None:
        seen = ""
        for part in parts:
            seen += part
            try:
                partial_json_parser.loads(seen)
            except Exception:
                pass

    add = PartialArguments()
    with_field = [add(event) for event in events]

    def encode_with() -> None:
        for event in with_field:
            orjson.dumps(event)

    def encode_without() -> None:
        for event in events:
            orjson.dumps(event)

    n = len(parts)
    return {
        "argumentsBytes": len(text.encode()),
        "deltas": n,
        "incrementalUsPerDelta": round(_cpu_per_delta(incremental, n), 2),
        "reparseUsPerDelta": round(_cpu_per_delta(reparse, n), 2),
        "encodeExtraUsPerDelta": round(_cpu_per_delta(encode_with, n) - _cpu_per_delta(encode_without, n), 2),
    }


def main() -> None:
    load = round(os.getloadavg()[0], 2)
    rows = [measure(size) for size in SIZES]
    result = {
        "fragmentChars": FRAGMENT,
        "rounds": ROUNDS,
        "loadAverageAtStart": load,
        "cpus": os.cpu_count(),
        "sizes": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "partial-arguments.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# partialArguments: CPU per tool-call delta",
        "",
        f"Fragments of {FRAGMENT} characters; median of {ROUNDS} rounds of CPU time; load average {load} "
        f"on {os.cpu_count()} CPUs at the start (`python -m bench.partial_arguments`).",
        "",
        "| arguments | deltas | incremental µs/delta | re-parse µs/delta | encoding the field µs/delta |",
        "|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['argumentsBytes']:,} B | {row['deltas']} | {row['incrementalUsPerDelta']} | "
            f"{row['reparseUsPerDelta']} | {row['encodeExtraUsPerDelta']} |"
        )
    (RESULTS / "partial-arguments.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
