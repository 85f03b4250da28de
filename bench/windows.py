"""How steady a run's latency is: the spread of window p99s around each checkpoint.

``python -m bench.reach ... --latencies FILE`` saves every batch latency. A checkpoint of
that run reports the p99 of the last 100 batches, which is about the second-largest of 100
samples: one heavy update (a big change in what is reachable, or a merge) in or out of that
window moves it by a factor. This tool puts each checkpoint window beside the windows just
before it: for checkpoint ``c`` it takes the ``span`` consecutive windows of ``window``
batches that end at ``c`` and reports the min, median and max of their p99s. A run whose
latency is flat shows the same spread at every checkpoint, whatever its single windows say.

``python -m bench.windows FILE [--batch B] [--window 100] [--span 10]`` prints one line per
checkpoint, then the figures as one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.reach import CHECKPOINTS, WINDOW

__all__ = ["window_spread"]


def window_spread(
    latencies: np.ndarray, batch: int = 1, window: int = WINDOW, span: int = 10
) -> dict[str, dict[str, float]]:
    """For each checkpoint (in updates) that the run reached and that has ``span`` whole
    windows before it: the checkpoint window's p99 (as ``bench.reach`` reports it) and the
    min, median and max p99 of the ``span`` windows of ``window`` batches ending there."""
    if batch < 1 or window < 1 or span < 1:
        raise ValueError("batch, window and span must be at least 1")
    lat = np.asarray(latencies, dtype=np.float64)
    out: dict[str, dict[str, float]] = {}
    for cp in CHECKPOINTS:
        end = -(-cp // batch)  # batches done when the checkpoint is reported
        if end > lat.size or end < window * span:
            continue
        p99s = [
            float(np.percentile(lat[end - (i + 1) * window : end - i * window], 99))
            for i in range(span)
        ]
        out[str(cp)] = {
            "p99": round(p99s[0], 4),
            "min": round(min(p99s), 4),
            "median": round(float(np.median(p99s)), 4),
            "max": round(max(p99s), 4),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.windows", description=__doc__.split("\n")[0])
    p.add_argument("file", type=Path, help="a .npy of batch latencies (bench.reach --latencies)")
    p.add_argument("--batch", type=int, default=1, help="updates per batch of that run")
    p.add_argument("--window", type=int, default=WINDOW, help="batches per window")
    p.add_argument("--span", type=int, default=10, help="windows summarised per checkpoint")
    a = p.parse_args(argv)
    try:
        latencies = np.load(a.file)
    except (OSError, ValueError) as exc:
        p.error(f"cannot read latencies from {a.file}: {exc}")
    spread = window_spread(latencies, a.batch, a.window, a.span)
    if not spread:
        p.error(
            f"{latencies.size} batches reach no checkpoint with {a.span} windows of "
            f"{a.window} before it"
        )
    for cp, s in spread.items():
        print(
            f"{cp:>9} updates: p99 {s['p99']:.2f} ms; the {a.span} windows of {a.window} "
            f"before it: p99 min {s['min']:.2f}, median {s['median']:.2f}, max {s['max']:.2f} ms"
        )
    result: dict[str, Any] = {"window": a.window, "span": a.span, "checkpoints": spread}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
