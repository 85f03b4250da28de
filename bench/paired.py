"""A/B of one engine setting on the reach workload, paired by fork: small differences
measured on a noisy machine.

Two runs of ``bench.reach`` minutes apart differ by up to 25% on a shared machine, so a
change worth 3% cannot be seen in them. Here one process loads the workload and warms up;
then, for every window of ``--steps`` batches, two forked children run that same window
from the same state, one with the setting at ``--a`` and one at ``--b`` (which goes first
alternates), and each reports its wall time; the parent then runs the window itself (with
``--a``, or ``--b`` with ``--follow b``) and goes on. The two arms of a pair see the same
data, the same state and the same minute, so the per-window ratio ``b / a`` is precise;
its median over many windows is the figure (an A/A run, ``--a`` equal to ``--b``, shows the
harness's own spread). Each child also times its window's batches one by one: the per-window
ratio of their 99th percentiles is the setting's effect on the slow batches (a window's
slowest, with ``--steps`` under 100), seen on the same data in both arms.

The setting is a module attribute read at run time (a spine's ``LAZY_BATCHES``, say), not
a constant compiled into a kernel; several, separated by commas, change together (each arm's
value is then a JSON list, one value per setting). Children pay copy-on-write faults in both
arms, which dilutes a ratio towards 1. A setting whose costs come later (a merge it defers) needs
windows long enough to pay them (``--steps``). Kernels use the engine's threads
(``DIFFLOW_THREADS``): a forked child starts a helper thread of its own, which adds the
same small cost to both arms.

``python -m bench.paired --setting engine.trace.spine:LAZY_BATCHES --a 1 --b 32
[--nodes 1000] [--edges 2000] [--batch 1000] [--pairs 30] [--steps 1] [--warm 3]
[--follow a|b]`` prints one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import struct
import sys
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from bench.reach import DifflowReach
from bench.workload import Workload


class _Settings:
    """One module attribute, or several (``--setting`` names them separated by commas, and
    each arm's value is then a list of as many values, in that order)."""

    def __init__(self, spec: str) -> None:
        self.places: list[tuple[ModuleType, str]] = []
        for one in spec.split(","):
            module, _, attr = one.strip().partition(":")
            mod = importlib.import_module(module)
            if not attr or not hasattr(mod, attr):
                raise SystemExit(
                    f"--setting {one!r}: want module:ATTRIBUTE, an attribute that exists"
                )
            self.places.append((mod, attr))

    def check(self, value: Any) -> None:
        """Refuse an arm's value that does not fit: one per setting."""
        n = len(self.places)
        if n > 1 and not (isinstance(value, list) and len(value) == n):
            raise SystemExit(f"{n} settings: each arm's value must be a list of {n} values")

    def get(self) -> Any:
        values = [getattr(mod, attr) for mod, attr in self.places]
        return values[0] if len(values) == 1 else values

    def set(self, value: Any) -> None:
        values = [value] if len(self.places) == 1 else value
        for (mod, attr), v in zip(self.places, values, strict=True):
            setattr(mod, attr, v)


def _window(engine: DifflowReach, k: int, batch: int, steps: int) -> list[float]:
    """Run one window; the wall seconds of each of its batches."""
    lat = []
    for j in range(steps):
        t = time.perf_counter()
        engine.apply(k + j * batch, k + (j + 1) * batch)
        lat.append(time.perf_counter() - t)
    return lat


def _timed_child(
    engine: DifflowReach, settings: _Settings, value: Any, k: int, batch: int, steps: int
) -> tuple[float, np.ndarray]:
    """Wall seconds of one window run by a forked child with the settings set to ``value``,
    and of each of its batches."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the window, report, leave without cleanup
        os.close(read)
        settings.set(value)
        t = time.perf_counter()
        lat = _window(engine, k, batch, steps)
        data = struct.pack(f"{steps + 1}d", time.perf_counter() - t, *lat)
        while data:
            data = data[os.write(write, data) :]
        os._exit(0)
    os.close(write)
    want, chunks = 8 * (steps + 1), []
    while want > 0 and (chunk := os.read(read, want)):
        chunks.append(chunk)
        want -= len(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if want or status != 0:
        raise RuntimeError(f"the child running {value!r} failed (status {status})")
    values = struct.unpack(f"{steps + 1}d", b"".join(chunks))
    return values[0], np.asarray(values[1:])


def run(
    setting: str,
    a: Any,
    b: Any,
    nodes: int = 1000,
    edges: int = 2000,
    batch: int = 1000,
    pairs: int = 30,
    steps: int = 1,
    warm: int = 3,
    follow: str = "a",
) -> dict[str, Any]:
    settings = _Settings(setting)
    settings.check(a)
    settings.check(b)
    original = settings.get()
    engine = DifflowReach(Workload(nodes, edges, 0))
    engine.load()
    k = 0
    for _ in range(warm):
        engine.apply(k, k + batch)
        k += batch
    times_a: list[float] = []
    times_b: list[float] = []
    p99_a: list[float] = []
    p99_b: list[float] = []
    try:
        for i in range(pairs):
            arms = [(a, times_a, p99_a), (b, times_b, p99_b)]
            for value, into, tail in arms if i % 2 == 0 else arms[::-1]:
                total, lat = _timed_child(engine, settings, value, k, batch, steps)
                into.append(total)
                tail.append(float(np.percentile(lat, 99)))
            settings.set(b if follow == "b" else a)
            _window(engine, k, batch, steps)
            k += steps * batch
    finally:
        settings.set(original)
    ta, tb = np.asarray(times_a) * 1e3, np.asarray(times_b) * 1e3
    qa, qb = np.asarray(p99_a) * 1e3, np.asarray(p99_b) * 1e3
    return {
        "setting": setting,
        "a": a,
        "b": b,
        "nodes": nodes,
        "edges": edges,
        "batch": batch,
        "steps": steps,
        "pairs": pairs,
        "follow": follow,
        "window_ms": _medians(ta, tb),
        "ratio_b_over_a": {**_spread(tb / ta), "of_sums": round(float(tb.sum() / ta.sum()), 4)},
        "batch_p99_ms": _medians(qa, qb),
        "p99_ratio_b_over_a": _spread(qb / qa),
    }


def _medians(a: np.ndarray, b: np.ndarray) -> dict[str, dict[str, float]]:
    """Each arm's median, in ms."""
    return {
        "a": {"median": round(float(np.median(a)), 3)},
        "b": {"median": round(float(np.median(b)), 3)},
    }


def _spread(ratio: np.ndarray) -> dict[str, float]:
    """The per-pair ratios' median and quartiles."""
    return {
        "median": round(float(np.median(ratio)), 4),
        "q25": round(float(np.percentile(ratio, 25)), 4),
        "q75": round(float(np.percentile(ratio, 75)), 4),
    }


def _value(text: str) -> Any:
    """A setting's value from the command line: a JSON literal (1, 0.5, true), else text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.paired", description=__doc__.split("\n")[0])
    p.add_argument(
        "--setting", required=True, help="module:ATTRIBUTE[,module:ATTRIBUTE...], read at run time"
    )
    p.add_argument("--a", required=True, type=_value)
    p.add_argument("--b", required=True, type=_value)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--edges", type=int, default=2000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--pairs", type=int, default=30)
    p.add_argument("--steps", type=int, default=1, help="batches in each timed window")
    p.add_argument("--warm", type=int, default=3, help="batches before the first pair")
    p.add_argument("--follow", choices=("a", "b"), default="a")
    args = p.parse_args(argv)
    result = run(
        args.setting,
        args.a,
        args.b,
        args.nodes,
        args.edges,
        args.batch,
        args.pairs,
        args.steps,
        args.warm,
        args.follow,
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
