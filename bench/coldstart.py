"""The first answer after a fresh install: compiling the engine's kernels, with and without
the warm-up (``service.warmup``).

Each run gets its own empty numba cache (``NUMBA_CACHE_DIR`` in a temporary directory), as a
fresh install has:

* baseline: ``python -m bench.reach`` (10 single updates) straight away; its load (the first
  answer) waits while every kernel it meets compiles;
* difflow: ``difflow warmup`` first (what a fresh server runs in the background, and the
  Docker build in the foreground), then the same ``bench.reach``.

``python -m bench.coldstart [--nodes 1000] [--edges 2000] [--report SECTION]`` prints one JSON
object with the figures on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], cache: Path) -> tuple[float, str]:
    """Run ``argv`` with ``cache`` as numba's cache: (wall seconds, stdout)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    t = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def _reach(nodes: int, edges: int, cache: Path) -> dict[str, Any]:
    argv = [
        sys.executable,
        "-m",
        "bench.reach",
        "--nodes",
        str(nodes),
        "--edges",
        str(edges),
        "--updates",
        "10",
        "--batch",
        "1",
        "--quiet",
    ]
    seconds, out = _run(argv, cache)
    r = json.loads(out.strip().splitlines()[-1])
    return {"process_s": round(seconds, 3), "load_s": r["load_s"], "p99_ms": r["latency_ms"]["p99"]}


def run(nodes: int, edges: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="difflow-cold-") as tmp:
        cold = _reach(nodes, edges, Path(tmp) / "cold")
        warm_s, _ = _run([sys.executable, "-m", "clients.cli", "warmup"], Path(tmp) / "warm")
        warm = _reach(nodes, edges, Path(tmp) / "warm")
    return {
        "nodes": nodes,
        "edges": edges,
        "cold": cold,
        "warmup_s": round(warm_s, 3),
        "warm": warm,
    }


def write_report(section: str, r: dict[str, Any], command: str, path: Path | None = None) -> Path:
    from bench import report

    rows = [
        report.Row(
            "first answer (reach load)", r["warm"]["load_s"], r["cold"]["load_s"], False, "s"
        ),
        report.Row(
            "bench.reach process, 10 single updates",
            r["warm"]["process_s"],
            r["cold"]["process_s"],
            False,
            "s",
        ),
        report.Row("p99 of the 10 updates", r["warm"]["p99_ms"], r["cold"]["p99_ms"], False, "ms"),
        report.Row("the warm-up itself (difflow warmup)", r["warmup_s"], None, False, "s"),
    ]
    text = (
        f"Reachability ({r['nodes']:,} nodes, {r['edges']:,} edges) from an empty numba cache, as"
        " after a fresh install. Baseline: straight away, compiling every kernel on first use."
        " difflow: after `difflow warmup` filled the cache (a fresh `difflow serve` runs it in a"
        " background process)."
    )
    table = report.render_table(rows, name="after warm-up", baseline="cold")
    body = report.render_section(section, table, command, None, text)
    return report.write_section(section, body, path)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m bench.coldstart", description=__doc__.split("\n")[0]
    )
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--edges", type=int, default=2000)
    p.add_argument("--report", metavar="SECTION", help="write SECTION of BENCHMARKS.md")
    args = p.parse_args(argv)
    r = run(args.nodes, args.edges)
    if args.report:
        from bench import report

        write_report(args.report, r, report.command("bench.coldstart", sys.argv[1:]))
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
