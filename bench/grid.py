"""Scattered multi-dimensional times through the general reduce (audit 24's slow write).

``R`` rows of one group, ``(a int, b int)`` with ``a = 0`` and ``b`` in 0..9, each at its own
time of ``D`` coordinates, every coordinate distinct within its dimension (drawn without
replacement from 0..9,999), go into an input whose frontier stays at the least time; then one
step closes it (``advance_to []``) and the reduce ``count`` and ``max(b)`` (no ``by``) must
produce its output at every join of those times. That closing step is what is timed: the
reduce's candidate grid has ``R**D`` points, and its output changes at each join (150 rows
at 3-D: 120,135 times, 476,091 changes).

Baseline: the same outputs from scratch, ``count`` and ``max`` of the rows at or below each
output time the engine reported (numpy, in chunks). With ``--verify`` the engine's output,
accumulated, is compared with that from-scratch answer at up to 2,000 output times and 2,000
other times of the grid.

Usage::

    python -m bench.grid --rows 150 --dims 3
    python -m bench.grid --rows 60 --dims 4 --verify

The last stdout line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

_CHUNK = 1 << 22  # (time, row) comparisons per from-scratch chunk


def workload(rows: int, dims: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(b values ``(R,)``, times ``(D, R)``)."""
    rng = np.random.Generator(np.random.PCG64([seed, rows, dims]))
    b = rng.integers(0, 10, size=rows, dtype=np.int64)
    times = np.stack([rng.choice(10_000, size=rows, replace=False) for _ in range(dims)])
    return b, times.astype(np.int64)


def from_scratch(b: np.ndarray, times: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, ...]:
    """``count`` and ``max(b)`` of the rows at or below each time of ``at`` ``(D, T)``."""
    per = max(1, _CHUNK // max(1, b.shape[0]))
    count = np.empty(at.shape[1], dtype=np.int64)
    most = np.empty(at.shape[1], dtype=np.int64)
    for s in range(0, at.shape[1], per):
        below = (times[:, None, :] <= at[:, s : s + per, None]).all(axis=0)
        count[s : s + per] = below.sum(axis=1)
        most[s : s + per] = np.where(below, b[None, :], -1).max(axis=1)
    return count, most


def run(rows: int, dims: int, seed: int, verify: bool) -> dict[str, Any]:
    from engine import Graph
    from engine.consolidate import group_starts

    b, times = workload(rows, dims, seed)
    g = Graph()
    handle, table = g.new_input([("a", "int"), ("b", "int")], dims=dims, name="t")
    capture = table.reduce([], {"n": ("count", None), "m": ("max", "b")}).capture()
    handle.send_columns([np.zeros(rows, dtype=np.int64), b], times, 1)
    g.step()  # the rows wait: the frontier is still the least time
    t0 = time.perf_counter()
    handle.close()
    g.step()
    engine_s = time.perf_counter() - t0
    out = capture.drain()
    by_time = out.times[:, np.lexsort(out.times[::-1])]
    out_times = by_time[:, group_starts(list(by_time), by_time.shape[1])]
    t0 = time.perf_counter()
    count, most = from_scratch(b, times, out_times)
    baseline_s = time.perf_counter() - t0
    verified = None
    if verify:
        rng = np.random.default_rng(seed)
        pick = out_times[:, rng.permutation(out_times.shape[1])[:2000]]
        grid = np.stack([rng.choice(np.unique(times[j]), size=2000) for j in range(dims)])
        verified = _check(out, b, times, np.concatenate([pick, grid], axis=1))
    return {
        "rows": rows,
        "dims": dims,
        "seed": seed,
        "engine_s": round(engine_s, 4),
        "baseline_s": round(baseline_s, 4),
        "engine_vs_baseline": round(engine_s / baseline_s, 3) if baseline_s else None,
        "output_changes": len(out),
        "output_times": int(out_times.shape[1]),
        "final_count": int(count.max(initial=0)),
        "final_max": int(most.max(initial=-1)),
        "verified": verified,
    }


def _check(out: Any, b: np.ndarray, times: np.ndarray, at: np.ndarray) -> bool:
    """The engine's output accumulated at each time of ``at`` is the one row (count, max)
    from scratch there (nothing where no row is at or below it)."""
    count, most = from_scratch(b, times, at)
    for i in range(at.shape[1]):
        below = (out.times <= at[:, i : i + 1]).all(axis=0)
        acc: dict[tuple[int, int], int] = {}
        for n, m, w in zip(out.data[0][below], out.data[1][below], out.diffs[below], strict=True):
            acc[(int(n), int(m))] = acc.get((int(n), int(m)), 0) + int(w)
        got = {k: w for k, w in acc.items() if w}
        want = {(int(count[i]), int(most[i])): 1} if count[i] else {}
        if got != want:
            return False
    return True


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.grid", description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=150, help="rows R, each at its own time")
    p.add_argument("--dims", type=int, default=3, help="time coordinates D")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verify", action="store_true", help="check sampled times from scratch")
    a = p.parse_args(argv)
    print(json.dumps(run(a.rows, a.dims, a.seed, a.verify)))


if __name__ == "__main__":
    main()
