"""How steady a run's latency is: the spread of window p99s around each checkpoint.

``python -m bench.reach ... --latencies FILE`` saves every batch latency and its command. A
checkpoint of that run reports the p99 of the last 100 batches, which is about the
second-largest of 100 samples: one heavy update (a big change in what is reachable, or a
merge) in or out of that window moves it by a factor. This tool puts each checkpoint window
beside the windows just before it: for checkpoint ``c`` it takes the ``span`` consecutive
windows of ``window`` batches that end at ``c`` and reports the min, median and max of their
p99s. A run whose latency is flat shows the same spread at every checkpoint, whatever its
single windows say.

``python -m bench.windows FILE [--batch B] [--window 100] [--span 10]`` prints one line per
checkpoint, then the figures as one JSON object on its last line. With ``--baseline FILE2``
(the same run with ``--engine recompute``) and ``--report SECTION`` it writes SECTION of
BENCHMARKS.md: every figure beside the baseline's, as a ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench import report
from bench.reach import CHECKPOINTS, WINDOW

__all__ = ["load", "spread_rows", "window_spread"]


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


def spread_rows(
    spread: dict[str, dict[str, float]],
    baseline: dict[str, dict[str, float]],
    window: int,
    span: int,
) -> list[report.Row]:
    """The figures of two :func:`window_spread` results, in table order."""
    rows = []
    for cp in sorted(set(spread) | set(baseline), key=int):
        a, b = spread.get(cp, {}), baseline.get(cp, {})
        rows.append(
            report.Row(
                f"p99 of the last {window} batches before {int(cp):,} updates",
                a.get("p99"),
                b.get("p99"),
                False,
                "ms",
            )
        )
        for q in ("min", "median", "max"):
            rows.append(
                report.Row(
                    f"{q} p99 of the {span} windows of {window} before {int(cp):,} updates",
                    a.get(q),
                    b.get(q),
                    False,
                    "ms",
                )
            )
    return rows


def load(path: Path) -> tuple[np.ndarray, str]:
    """The latencies (ms) and the command of a ``bench.reach --latencies`` file."""
    with np.load(path) as saved:
        return np.asarray(saved["latencies"], dtype=np.float64), str(saved["command"])


def _load(parser: argparse.ArgumentParser, path: Path) -> tuple[np.ndarray, str]:
    try:
        return load(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"cannot read latencies from {path} (bench.reach --latencies): {exc}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.windows", description=__doc__.split("\n")[0])
    p.add_argument("file", type=Path, help="batch latencies saved by bench.reach --latencies")
    p.add_argument("--batch", type=int, default=1, help="updates per batch of that run")
    p.add_argument("--window", type=int, default=WINDOW, help="batches per window")
    p.add_argument("--span", type=int, default=10, help="windows summarised per checkpoint")
    p.add_argument("--baseline", type=Path, help="the baseline's latencies, for --report")
    p.add_argument("--report", metavar="SECTION", help="write SECTION of BENCHMARKS.md")
    p.add_argument("--report-file", type=Path, default=None, help="default: BENCHMARKS.md")
    a = p.parse_args(argv)
    if a.report and a.baseline is None:
        p.error("--report needs --baseline: every figure is reported beside the baseline's")
    latencies, command = _load(p, a.file)
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
    commands = [command]
    if a.baseline is not None:
        base, base_command = _load(p, a.baseline)
        commands.append(base_command)
        result["baseline"] = window_spread(base, a.batch, a.window, a.span)
    if a.report:
        text = (
            f"Batch latencies saved by `bench.reach --latencies`: {latencies.size:,} batches "
            f"of {a.batch}. A checkpoint's p99 of the last {a.window} batches is about their "
            f"second-largest; beside it, the min, median and max p99 of the {a.span} "
            f"consecutive windows of {a.window} batches that end at the checkpoint. Latency "
            "is flat when the spread is the same at every checkpoint."
        )
        table = report.render_table(spread_rows(spread, result["baseline"], a.window, a.span))
        own = report.command("bench.windows", sys.argv[1:] if argv is None else argv)
        body = report.render_section(a.report, table, "\n".join([*commands, own]), text=text)
        path = report.write_section(a.report, body, a.report_file)
        print(f"wrote section {a.report!r} of {path}", file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
