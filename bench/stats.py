"""Percentiles and the direct-vs-gateway comparison every scenario reports."""

from __future__ import annotations

import statistics
from typing import Any, Iterable

import numpy as np


def pct(values: Iterable[float], q: float) -> float | None:
    data = np.fromiter(values, dtype=float)
    if data.size == 0:
        return None
    return float(np.percentile(data, q))


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


def median(values: Iterable[float | None]) -> float | None:
    data = [v for v in values if v is not None]
    return round(statistics.median(data), 3) if data else None


def compare(rounds: list[dict[str, dict[str, Any]]], keys: Iterable[str]) -> dict[str, dict[str, float | None]]:
    """Per round gateway − direct and gateway / direct for each key; the medians over the rounds."""
    added, ratio = {}, {}
    for key in keys:
        diffs, ratios = [], []
        for r in rounds:
            d, g = r["direct"].get(key), r["gateway"].get(key)
            if d is None or g is None:
                continue
            diffs.append(g - d)
            if d:
                ratios.append(g / d)
        added[key] = median(diffs)
        ratio[key] = median(ratios)
    return {"added": added, "ratio": ratio}
