"""Sliding-window reachability benchmark (seed 000's "sustained latency" workload).

Closed loop: submit ``B`` updates (``B`` distinct logical times), wait until the outputs for
all of them are final, record the batch latency, repeat until ``U`` updates. The workload is
defined in :mod:`bench.workload`. Engines:

* ``difflow``: the engine library, one :class:`~engine.Graph` with inputs ``roots(node)`` and
  ``edges(src, dst)``, reachability as ``iterate(join + concat + distinct)``, and a capture of
  the output;
* ``recompute``: the from-scratch baseline: for every update time, reachability from the 10
  roots by BFS (``scipy.sparse.csgraph.breadth_first_order``) over the current edge multiset,
  diffed against the previous answer.

Usage::

    python -m bench.reach --nodes 1000 --edges 2000 --updates 10000 --batch 1 --verify
    python -m bench.reach --nodes 1000 --edges 2000 --updates 10000 --batch 1 --report "1k/2k"

Progress goes to stderr; the last stdout line is one JSON object with the figures.
``--report SECTION`` runs both engines (each in its own process, so peak RSS is per engine)
with the same arguments and writes the section into BENCHMARKS.md (see :mod:`bench.report`).
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from bench import report
from bench.workload import NUM_ROOTS, Workload

__all__ = [
    "CHECKPOINTS",
    "Changes",
    "DifflowReach",
    "ReachEngine",
    "RecomputeReach",
    "build_reach_graph",
    "engine_state_bytes",
    "main",
    "reachable",
    "run",
]

CHECKPOINTS = (1_000, 10_000, 100_000, 1_000_000)
WINDOW = 100  # batch latencies summarised at each checkpoint
ENGINES = ("difflow", "recompute")


# -- the oracle ---------------------------------------------------------------------------
def reachable(nodes: int, edges: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """``(len(roots), nodes)`` bool: ``[i, v]`` iff ``v`` is reachable from ``roots[i]``
    along the ``(m, 2)`` directed ``edges`` (a root reaches itself)."""
    m = edges.shape[0]
    graph = sp.csr_matrix(
        (np.ones(m, dtype=np.float64), (edges[:, 0], edges[:, 1])), shape=(nodes, nodes)
    )
    out = np.zeros((roots.shape[0], nodes), dtype=bool)
    for i, r in enumerate(roots.tolist()):
        out[i, breadth_first_order(graph, r, directed=True, return_predecessors=False)] = True
    return out


@dataclass(frozen=True, slots=True)
class Changes:
    """Output changes ``(root index, node)`` with diffs at times, sorted by
    (time, root, node) and consolidated."""

    times: np.ndarray
    roots: np.ndarray
    nodes: np.ndarray
    diffs: np.ndarray

    def __len__(self) -> int:
        return int(self.diffs.shape[0])

    @classmethod
    def build(
        cls, times: np.ndarray, roots: np.ndarray, nodes: np.ndarray, diffs: np.ndarray
    ) -> Changes:
        """Sort by (time, root, node), sum equal rows and drop zeros."""
        order = np.lexsort((nodes, roots, times))
        t, r, v, d = times[order], roots[order], nodes[order], diffs[order]
        n = d.shape[0]
        if n == 0:
            return cls(t, r, v, d)
        starts = np.ones(n, dtype=bool)
        starts[1:] = (t[1:] != t[:-1]) | (r[1:] != r[:-1]) | (v[1:] != v[:-1])
        idx = np.flatnonzero(starts)
        summed = np.add.reduceat(d, idx)
        keep = summed != 0
        first = idx[keep]
        return cls(t[first], r[first], v[first], summed[keep])

    def equals(self, other: Changes) -> bool:
        return all(
            np.array_equal(a, b)
            for a, b in zip(
                (self.times, self.roots, self.nodes, self.diffs),
                (other.times, other.roots, other.nodes, other.diffs),
                strict=True,
            )
        )


# -- engines ------------------------------------------------------------------------------
class ReachEngine(ABC):
    """One way to maintain the reachable set under the workload's updates.

    With ``track`` the engine keeps the accumulated output (:meth:`reachable`) and the
    changes of the last batch (``last_changes``); without it only what it needs to run.
    """

    name = "engine"

    def __init__(self, workload: Workload, track: bool = False) -> None:
        self.workload = workload
        self.track = track
        self.last_changes: Changes | None = None
        self.output_changes = 0  # output updates produced so far (consolidated per time)

    @abstractmethod
    def load(self) -> None:
        """Load roots and the initial edges at time 0; return once the output at 0 is final."""

    @abstractmethod
    def apply(self, k0: int, k1: int) -> None:
        """Updates ``k0 .. k1-1`` at times ``k0+1 .. k1``; return once their outputs are final."""

    @abstractmethod
    def reachable(self) -> np.ndarray:
        """The accumulated output as ``(10, N)`` bool (needs ``track``)."""

    @abstractmethod
    def state_bytes(self) -> int:
        """Bytes the engine holds as state."""

    def after_apply(self) -> None:  # noqa: B027 - optional hook
        """Bookkeeping outside the timed region (``track``)."""


def build_reach_graph() -> tuple[Any, Any, Any, Any]:
    """The reachability dataflow: ``(graph, roots_input, edges_input, capture)``."""
    from engine import Graph

    g = Graph()
    roots_in, roots = g.new_input([("node", "int")], name="roots")
    edges_in, edges = g.new_input([("src", "int"), ("dst", "int")], name="edges")
    start = roots.select(root="node", node="node")
    reach = start.iterate(
        lambda r: (
            r.join(edges, on=[("node", "src")], columns={"root": "left.root", "node": "right.dst"})
            .concat(start)
            .distinct()
        )
    )
    return g, roots_in, edges_in, reach.capture()


def engine_state_bytes(operators: Any) -> int:
    """Bytes held in the traces of ``operators`` (loop regions included, recursively)."""
    total = 0
    for op in operators:
        spine = getattr(op, "spine", None)
        if spine is not None:
            total += int(spine.nbytes())
        inner = getattr(op, "inner", None)
        if inner is not None:
            total += engine_state_bytes(inner.operators)
    return total


class DifflowReach(ReachEngine):
    """The engine library: one graph, two inputs, the iterate, a capture."""

    name = "difflow"

    def __init__(self, workload: Workload, track: bool = False) -> None:
        super().__init__(workload, track)
        self.graph, self.roots_in, self.edges_in, self.capture = build_reach_graph()
        self.roots = workload.roots()
        self.counts = np.zeros((NUM_ROOTS, workload.nodes), dtype=np.int64) if track else None
        self._pending: Any = None
        self.steps = 0

    def _step_until(self, time_: int) -> None:
        """Step until the capture's frontier says outputs at ``time_`` are final."""
        while True:
            self.graph.step()
            self.steps += 1
            upper = self.capture.upper
            if upper.is_empty or not upper.less_equal_time(np.array([time_], dtype=np.int64)):
                return

    def _drain(self) -> None:
        out = self.capture.drain()
        self.output_changes += len(out)
        self._pending = out if self.track else None

    def load(self) -> None:
        w = self.workload
        e = w.initial_edges()
        self.roots_in.send_columns([self.roots], 0, 1)
        self.edges_in.send_columns([e[:, 0], e[:, 1]], 0, 1)
        self.roots_in.advance_to(1)
        self.edges_in.advance_to(1)
        self._step_until(0)
        self._drain()

    def apply(self, k0: int, k1: int) -> None:
        w = self.workload
        times = np.arange(k0 + 1, k1 + 1, dtype=np.int64)
        gone = w.removed_edges(k0, k1)
        new = w.update_edges(k0, k1)
        self.edges_in.send_columns([gone[:, 0], gone[:, 1]], times, -1)
        self.edges_in.send_columns([new[:, 0], new[:, 1]], times, 1)
        self.roots_in.advance_to(k1 + 1)
        self.edges_in.advance_to(k1 + 1)
        self._step_until(k1)
        self._drain()

    def after_apply(self) -> None:
        out = self._pending
        self._pending = None
        if out is None or self.counts is None:
            return
        root_col, node_col = out.data[0], out.data[1]
        ri = np.searchsorted(self.roots, root_col)
        ok = (ri < NUM_ROOTS) & (self.roots[np.minimum(ri, NUM_ROOTS - 1)] == root_col)
        if not ok.all():
            raise AssertionError(f"output row with a root that is not a root: {root_col[~ok][:5]}")
        np.add.at(self.counts, (ri, node_col), out.diffs)
        self.last_changes = Changes.build(out.times[0], ri, node_col, out.diffs)

    def reachable(self) -> np.ndarray:
        if self.counts is None:
            raise RuntimeError("DifflowReach keeps its output only with track=True")
        bad = (self.counts != 0) & (self.counts != 1)
        if bad.any():
            i, v = np.argwhere(bad)[0]
            raise AssertionError(
                f"output multiplicity {int(self.counts[i, v])} for (root {int(self.roots[i])}, "
                f"node {int(v)}); distinct output must be 0 or 1"
            )
        return self.counts == 1

    def state_bytes(self) -> int:
        return engine_state_bytes(self.graph.scope.operators)


class RecomputeReach(ReachEngine):
    """From scratch at every time: BFS from the roots over the current multiset of edges."""

    name = "recompute"

    def __init__(self, workload: Workload, track: bool = False) -> None:
        super().__init__(workload, track)
        m = workload.edges
        self.src = np.empty(m, dtype=np.int64)  # slot eid % M holds edge eid
        self.dst = np.empty(m, dtype=np.int64)
        self.ones = np.ones(m, dtype=np.float64)
        self.roots = workload.roots()
        self.current = np.zeros((NUM_ROOTS, workload.nodes), dtype=bool)
        self._parts: list[Changes] = []

    def _recompute(self, time_: int) -> None:
        n = self.workload.nodes
        graph = sp.csr_matrix((self.ones, (self.src, self.dst)), shape=(n, n))
        new = np.zeros_like(self.current)
        for i, r in enumerate(self.roots.tolist()):
            new[i, breadth_first_order(graph, r, directed=True, return_predecessors=False)] = True
        ri, v = np.nonzero(new != self.current)
        self.output_changes += int(ri.shape[0])
        if self.track:
            d = np.where(new[ri, v], 1, -1).astype(np.int64)
            self._parts.append(Changes(np.full(ri.shape[0], time_, dtype=np.int64), ri, v, d))
        self.current = new

    def load(self) -> None:
        e = self.workload.initial_edges()
        self.src[:] = e[:, 0]
        self.dst[:] = e[:, 1]
        self._recompute(0)

    def apply(self, k0: int, k1: int) -> None:
        m = self.workload.edges
        new = self.workload.update_edges(k0, k1)
        for k in range(k0, k1):
            slot = k % m  # eid k leaves, eid M + k takes its slot
            self.src[slot], self.dst[slot] = new[k - k0]
            self._recompute(k + 1)

    def after_apply(self) -> None:
        if self.track:
            parts = self._parts
            self._parts = []
            z = np.zeros(0, dtype=np.int64)
            self.last_changes = Changes.build(
                *(np.concatenate([getattr(p, f) for p in parts] or [z]) for f in Changes.__slots__)
            )

    def reachable(self) -> np.ndarray:
        return self.current.copy()

    def state_bytes(self) -> int:
        return int(self.src.nbytes + self.dst.nbytes + self.current.nbytes)


def make_engine(name: str, workload: Workload, track: bool = False) -> ReachEngine:
    if name == "difflow":
        return DifflowReach(workload, track)
    if name == "recompute":
        return RecomputeReach(workload, track)
    raise ValueError(f"unknown engine {name!r}; use one of {ENGINES}")


# -- the closed loop ----------------------------------------------------------------------
def _ms(values: np.ndarray, q: float) -> float:
    return round(float(np.percentile(values, q)) * 1e3, 4) if values.size else float("nan")


def peak_rss_mib() -> float:
    """Peak resident set size of this process (MiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run(
    engine: str,
    nodes: int,
    edges: int,
    updates: int,
    batch: int,
    seed: int = 0,
    verify: bool = False,
    verify_each: bool = False,
    progress: bool = True,
    profile: Path | None = None,
    latencies_path: Path | None = None,
    command: str = "",
) -> dict[str, Any]:
    """Run the closed loop and return the figures (the JSON object of the CLI). With
    ``profile``, pyinstrument samples the update phase (not the load) and its call tree goes
    to that file; the profiler slows the run, so its figures are not for reporting. With
    ``latencies_path``, every batch's latency (ms, float64) is saved there, with the
    ``command`` that ran, as an ``.npz`` (arrays ``latencies`` and ``command``) for
    ``python -m bench.windows``."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    verify = verify or verify_each
    w = Workload(nodes, edges, seed)
    eng = make_engine(engine, w, track=verify)

    def log(msg: str) -> None:
        if progress:
            print(f"[{engine}] {msg}", file=sys.stderr, flush=True)

    def check(done: int) -> bool:
        truth = reachable(nodes, w.window(done), w.roots())
        got = eng.reachable()
        if np.array_equal(got, truth):
            return True
        diff = np.argwhere(got != truth)
        i, v = diff[0]
        log(
            f"WRONG after {done} updates: {diff.shape[0]} (root, node) pairs differ, e.g. root "
            f"{int(w.roots()[i])} node {int(v)}: engine {bool(got[i, v])}, BFS {bool(truth[i, v])}"
        )
        return False

    w.initial_edges()
    t0 = time.perf_counter()
    eng.load()
    load_s = time.perf_counter() - t0
    eng.after_apply()
    log(f"loaded N={nodes} M={edges} in {load_s:.3f}s, {eng.output_changes} output rows")
    verified = check(0) if verify_each else True

    latencies = np.zeros((updates + batch - 1) // batch, dtype=np.float64)
    checkpoints: dict[str, dict[str, float]] = {}
    pending_cps = [c for c in CHECKPOINTS if c <= updates]
    nb = 0
    done = 0
    elapsed = 0.0
    last_log = time.perf_counter()
    profiler = None
    if profile is not None:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001)
        profiler.start()
    while done < updates:
        k1 = min(done + batch, updates)
        w.update_edges(done, k1)  # generate outside the timed region (cached)
        w.removed_edges(done, k1)
        t = time.perf_counter()
        eng.apply(done, k1)
        dt = time.perf_counter() - t
        elapsed += dt
        latencies[nb] = dt
        nb += 1
        done = k1
        eng.after_apply()
        if verify_each and verified:
            verified = check(done)
        while pending_cps and done >= pending_cps[0]:
            cp = pending_cps.pop(0)
            recent = latencies[max(0, nb - WINDOW) : nb]
            state = eng.state_bytes()
            # the answer's size by BFS, outside the timed region: state that grows with it
            # is not state that grows with time
            pairs = int(reachable(nodes, w.window(done), w.roots()).sum())
            checkpoints[str(cp)] = {
                "p50": _ms(recent, 50),
                "p99": _ms(recent, 99),
                "state_bytes": state,
                "reachable_pairs": pairs,
                "state_bytes_per_pair": round(state / pairs, 1),
            }
            log(f"checkpoint {cp}: {checkpoints[str(cp)]}")
        now = time.perf_counter()
        if now - last_log >= 2.0:
            last_log = now
            recent = latencies[max(0, nb - WINDOW) : nb]
            log(
                f"{done}/{updates} updates, {done / elapsed:.1f} updates/s, last {recent.size} "
                f"batches p50 {_ms(recent, 50)} ms p99 {_ms(recent, 99)} ms"
            )
    if profiler is not None and profile is not None:
        profiler.stop()
        profile.write_text(profiler.output_text(unicode=True))
        log(f"profile of the update phase written to {profile}")
    if verify and not verify_each:
        verified = check(done)
    lat = latencies[:nb]
    if latencies_path is not None:
        with latencies_path.open("wb") as f:
            np.savez(f, latencies=lat * 1000.0, command=np.array(command))
        log(f"{nb} batch latencies (ms) written to {latencies_path}")
    result: dict[str, Any] = {
        "engine": engine,
        "nodes": nodes,
        "edges": edges,
        "updates": done,
        "batch": batch,
        "seed": seed,
        "seconds": round(elapsed, 6),
        "updates_per_s": round(done / elapsed, 2) if elapsed > 0 else None,
        "latency_ms": {"p50": _ms(lat, 50), "p99": _ms(lat, 99), "max": _ms(lat, 100)},
        "checkpoints": checkpoints,
        "rss_mib": peak_rss_mib(),
        "verified": verified if verify else None,
        "load_s": round(load_s, 6),
        "state_bytes": eng.state_bytes(),
        "output_changes": eng.output_changes,
    }
    log(
        f"done: {done} updates in {elapsed:.3f}s ({result['updates_per_s']} updates/s), "
        f"latency {result['latency_ms']}, verified {result['verified']}"
    )
    return result


# -- command line -------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.reach", description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, required=True, help="number of nodes N")
    p.add_argument("--edges", type=int, required=True, help="window width M (edges)")
    p.add_argument("--updates", type=int, required=True, help="number of updates U")
    p.add_argument("--batch", type=int, default=1, help="updates (distinct times) per step")
    p.add_argument("--seed", type=int, default=0, help="workload seed s")
    p.add_argument("--engine", choices=ENGINES, default="difflow")
    p.add_argument("--verify", action="store_true", help="check the final reachable set by BFS")
    p.add_argument(
        "--verify-each",
        action="store_true",
        help="check the reachable set after every batch (small runs; implies --verify)",
    )
    p.add_argument(
        "--report",
        metavar="SECTION",
        help="run difflow and recompute with these arguments and write SECTION of BENCHMARKS.md",
    )
    p.add_argument(
        "--report-file",
        type=Path,
        default=None,
        help="file to write the report section to (default: BENCHMARKS.md at the repo root)",
    )
    p.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="write a pyinstrument call tree of the update phase to FILE (slows the run)",
    )
    p.add_argument(
        "--latencies",
        type=Path,
        metavar="FILE",
        help="save every batch latency (ms) to FILE as .npz (see python -m bench.windows)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _run_child(engine: str, argv: list[str]) -> dict[str, Any]:
    """Run one engine in a fresh interpreter (its own peak RSS) and parse its JSON line."""
    drop_next = False
    child = []
    for a in argv:
        if drop_next:
            drop_next = False
            continue
        if a in ("--report", "--report-file", "--engine"):
            drop_next = True
            continue
        if a.startswith(("--report=", "--report-file=", "--engine=")):
            continue
        child.append(a)
    cmd = [sys.executable, "-m", "bench.reach", *child, "--engine", engine]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"{shlex.join(cmd)} exited with {proc.returncode} and no figures")
    return dict(json.loads(lines[-1]))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    a = parser.parse_args(argv)
    if a.report and a.latencies:
        parser.error("--latencies saves one engine's run: use it without --report")
    if a.report:
        results = {e: _run_child(e, argv) for e in ENGINES}
        path = report.write_reach_section(
            a.report,
            results["difflow"],
            results["recompute"],
            report.command("bench.reach", argv),
            a.report_file,
        )
        print(f"wrote section {a.report!r} of {path}", file=sys.stderr)
        print(json.dumps({"section": a.report, "file": str(path), "results": results}))
        return 0 if all(r.get("verified") is not False for r in results.values()) else 1
    result = run(
        a.engine,
        a.nodes,
        a.edges,
        a.updates,
        a.batch,
        a.seed,
        verify=a.verify,
        verify_each=a.verify_each,
        progress=not a.quiet,
        profile=a.profile,
        latencies_path=a.latencies,
        command=report.command("bench.reach", argv),
    )
    print(json.dumps(result))
    return 0 if result["verified"] is not False else 1


if __name__ == "__main__":
    sys.exit(main())
