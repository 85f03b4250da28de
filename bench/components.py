"""Sliding-window components: least labels (weak) or the edges inside strong components,
under edge churn.

The graph is seed 000's sliding window (:mod:`bench.workload`: ``N`` nodes, ``M`` edges,
update ``k`` removes eid ``k`` and inserts eid ``M + k`` at time ``k + 1``). Closed loop:
submit ``B`` updates (``B`` distinct logical times), wait until the outputs for all of them
are final, record the batch latency, repeat until ``U`` updates. Two problems (``--kind``):

* ``wcc`` (default): the graph read as undirected; every node's label is the least node of
  its component. ``difflow``: ``labels = iterate(join(labels, edges) + nodes, then the
  least label per node)``, the textbook differential computation (a ``min`` reduce in a
  loop). ``recompute``: ``scipy.sparse.csgraph.connected_components`` over the current
  edges at every update time, their least nodes, diffed against the previous answer.
* ``scc``: the graph read as directed; the output is every edge whose ends lie in one
  strong component (with its multiplicity). ``difflow``: edge trimming with nested loops
  (an outer loop over the edges; each round labels every node with the least node reaching
  it, forward and then backward, each an inner loop of a ``min`` reduce, and keeps the
  edges whose ends share their label). ``recompute``: strong components by scipy at every
  update time, and the edges inside them diffed against the previous answer.

Usage::

    python -m bench.components --nodes 10000 --edges 20000 --updates 2000 --batch 100 --verify
    python -m bench.components --kind scc --nodes 10000 --edges 20000 --updates 200 --batch 10
    python -m bench.components --nodes 10000 --edges 20000 --updates 2000 --batch 100 \\
        --report "components 10k/20k, batch 100"

Progress goes to stderr; the last stdout line is one JSON object with the figures
(``--report`` runs both engines and writes a section of BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from bench import report
from bench.workload import Workload

__all__ = ["least_labels", "main", "run", "strong_edges"]

ENGINES = ("difflow", "recompute")
KINDS = ("wcc", "scc")


def least_labels(nodes: int, edges: np.ndarray) -> np.ndarray:
    """Each node's least component member, for undirected ``edges`` ``(m, 2)``."""
    ones = np.ones(edges.shape[0], dtype=np.int8)
    adj = sp.csr_matrix((ones, (edges[:, 0], edges[:, 1])), shape=(nodes, nodes))
    _, comp = connected_components(adj, directed=False)
    least = np.full(comp.max() + 1, nodes, dtype=np.int64)
    np.minimum.at(least, comp, np.arange(nodes, dtype=np.int64))
    return np.asarray(least[comp], dtype=np.int64)


def strong_edges(nodes: int, edges: np.ndarray) -> np.ndarray:
    """Which of the directed ``edges`` ``(m, 2)`` have both ends in one strong component."""
    ones = np.ones(edges.shape[0], dtype=np.int8)
    adj = sp.csr_matrix((ones, (edges[:, 0], edges[:, 1])), shape=(nodes, nodes))
    _, comp = connected_components(adj, directed=True, connection="strong")
    return np.asarray(comp[edges[:, 0]] == comp[edges[:, 1]])


def _edge_counts(edges: np.ndarray, counts: np.ndarray) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for (a, b), c in zip(edges.tolist(), counts.tolist(), strict=True):
        out[(a, b)] = out.get((a, b), 0) + c
    return {k: c for k, c in out.items() if c}


class _Difflow:
    directed = False

    def __init__(self, w: Workload) -> None:
        from engine import Graph

        self.w = w
        self.graph = Graph()
        self.nodes_in, nodes = self.graph.new_input([("node", "int")])
        self.edges_in, edges = self.graph.new_input([("src", "int"), ("dst", "int")])
        start = nodes.select(node="node", label="node")
        labels = start.iterate(
            lambda lab: (
                lab.join(
                    edges,
                    on=[("node", "src")],
                    columns={"node": "right.dst", "label": "left.label"},
                )
                .concat(start)
                .reduce(["node"], {"label": ("min", "label")})
            )
        )
        self.capture = labels.capture()
        self.parts: list[Any] = []
        self.changes = 0

    def _send(self, e: np.ndarray, times: np.ndarray | int, diff: int) -> None:
        if not self.directed:  # each edge both ways
            e = np.concatenate([e, e[:, ::-1]])
            times = times if isinstance(times, int) else np.concatenate([times, times])
        self.edges_in.send_columns([e[:, 0], e[:, 1]], times, diff)

    def _until(self, t: int) -> None:
        while True:
            self.graph.step()
            upper = self.capture.upper
            if upper.is_empty or not upper.less_equal_time(np.array([t], dtype=np.int64)):
                break
        out = self.capture.drain()
        self.changes += len(out)
        self.parts.append(out)

    def load(self) -> None:
        self.nodes_in.send_columns([np.arange(self.w.nodes, dtype=np.int64)], 0, 1)
        self._send(self.w.initial_edges(), 0, 1)
        self.nodes_in.advance_to(1)
        self.edges_in.advance_to(1)
        self._until(0)

    def apply(self, k0: int, k1: int) -> None:
        times = np.arange(k0 + 1, k1 + 1, dtype=np.int64)
        self._send(self.w.removed_edges(k0, k1), times, -1)
        self._send(self.w.update_edges(k0, k1), times, 1)
        self.nodes_in.advance_to(k1 + 1)
        self.edges_in.advance_to(k1 + 1)
        self._until(k1)

    def answer(self) -> np.ndarray:
        """Every node's label, from all outputs so far."""
        out = self.accumulated()
        live = out.diffs > 0
        labels = np.full(self.w.nodes, -1, dtype=np.int64)
        labels[out.data[0, live]] = out.data[1, live]
        return labels

    def accumulated(self) -> Any:
        """Every output row with its count, summed over all times so far."""
        from engine import UpdateBatch, consolidate

        every = UpdateBatch.concat(self.parts, 2, 1)
        return consolidate(UpdateBatch(every.data, np.zeros_like(every.times), every.diffs))


def label_plan(e: Any) -> Any:
    """Every node of edges ``e`` with the least node reaching it along them: an iterate (in
    ``e``'s scope) of join, concat and a ``min`` reduce."""
    from engine import iterate

    nodes = e.select(node="src").concat(e.select(node="dst")).distinct()
    start = nodes.select(node="node", label="node")

    def body(v: Any) -> Any:
        step = v["l"].join(
            e, on=[("node", "src")], columns={"node": "right.dst", "label": "left.label"}
        )
        return {"l": step.concat(start).reduce(["node"], {"label": ("min", "label")})}

    return iterate({"l": start}, body, within=e.scope)["l"]


def _trim(e: Any) -> Any:
    """The edges of ``e`` whose ends have one label; reversed."""
    from engine import col

    lab = label_plan(e)
    ends = {"src": "left.src", "dst": "left.dst"}
    a = e.join(lab, on=[("src", "node")], columns={**ends, "ls": "right.label"})
    b = a.join(
        lab,
        on=[("dst", "node")],
        columns={**ends, "ls": "left.ls", "ld": "right.label"},
    )
    return b.filter(col("ls").eq(col("ld"))).select(src="dst", dst="src")


def strong_plan(edges: Any) -> Any:
    """The edges inside strong components, by edge trimming in nested loops (an outer loop
    over the edges, trimmed forward and then backward)."""
    from engine import iterate

    return iterate({"e": edges}, lambda v: {"e": _trim(_trim(v["e"]))})["e"]


class _DifflowStrong(_Difflow):
    """The edges inside strong components, by edge trimming in nested loops."""

    directed = True

    def __init__(self, w: Workload) -> None:
        from engine import Graph

        self.w = w
        self.graph = Graph()
        self.nodes_in, _ = self.graph.new_input([("node", "int")])  # unread: load() feeds it
        self.edges_in, edges = self.graph.new_input([("src", "int"), ("dst", "int")])
        strong = strong_plan(edges)
        self.capture = strong.capture()
        self.parts: list[Any] = []
        self.changes = 0

    def answer(self) -> dict[tuple[int, int], int]:
        out = self.accumulated()
        return _edge_counts(out.data.T, out.diffs)


class _Recompute:
    def __init__(self, w: Workload) -> None:
        self.w = w
        self.current = np.zeros(0, dtype=np.int64)
        self.changes = 0

    def _at(self, updates: int) -> None:
        new = least_labels(self.w.nodes, self.w.window(updates))
        self.changes += 2 * int(np.count_nonzero(new != self.current)) if self.current.size else 0
        self.current = new

    def load(self) -> None:
        self._at(0)
        self.changes = self.w.nodes

    def apply(self, k0: int, k1: int) -> None:
        for k in range(k0, k1):
            self._at(k + 1)

    def answer(self) -> np.ndarray:
        return self.current


class _RecomputeStrong:
    """The edges inside strong components at every time, by eid: what changed is the eids
    that entered or left that set."""

    def __init__(self, w: Workload) -> None:
        self.w = w
        self.inside = np.zeros(0, dtype=np.int64)  # eids of the edges inside, ascending
        self.rows = np.zeros((0, 2), dtype=np.int64)  # those edges
        self.changes = 0

    def _at(self, updates: int) -> None:
        window = self.w.window(updates)
        mask = strong_edges(self.w.nodes, window)
        inside = updates + np.flatnonzero(mask)
        self.changes += int(np.setxor1d(inside, self.inside, assume_unique=True).shape[0])
        self.inside, self.rows = inside, window[mask]

    def load(self) -> None:
        self._at(0)

    def apply(self, k0: int, k1: int) -> None:
        for k in range(k0, k1):
            self._at(k + 1)

    def answer(self) -> dict[tuple[int, int], int]:
        return _edge_counts(self.rows, np.ones(self.rows.shape[0], dtype=np.int64))


def _engine(engine: str, kind: str, w: Workload) -> Any:
    if kind == "scc":
        return _DifflowStrong(w) if engine == "difflow" else _RecomputeStrong(w)
    return _Difflow(w) if engine == "difflow" else _Recompute(w)


def _truth(kind: str, nodes: int, w: Workload, updates: int) -> Any:
    if kind == "scc":
        window = w.window(updates)
        rows = window[strong_edges(nodes, window)]
        return _edge_counts(rows, np.ones(rows.shape[0], dtype=np.int64))
    return least_labels(nodes, w.window(updates))


def run(
    engine: str,
    nodes: int,
    edges: int,
    updates: int,
    batch: int,
    seed: int,
    verify: bool,
    kind: str = "wcc",
) -> dict[str, Any]:
    w = Workload(nodes, edges, seed)
    e = _engine(engine, kind, w)
    t0 = time.perf_counter()
    e.load()
    load_s = time.perf_counter() - t0
    lat = []
    t0 = time.perf_counter()
    for k0 in range(0, updates, batch):
        k1 = min(k0 + batch, updates)
        s = time.perf_counter()
        e.apply(k0, k1)
        lat.append(time.perf_counter() - s)
        if len(lat) % 10 == 0:
            print(f"{engine}: {k1} updates", file=sys.stderr)
    seconds = time.perf_counter() - t0
    ms = np.asarray(lat) * 1e3
    verified = None
    if verify:
        got, want = e.answer(), _truth(kind, nodes, w, updates)
        verified = bool(np.array_equal(got, want)) if kind == "wcc" else got == want
    return {
        "engine": engine,
        "kind": kind,
        "nodes": nodes,
        "edges": edges,
        "updates": updates,
        "batch": batch,
        "seed": seed,
        "load_s": round(load_s, 4),
        "seconds": round(seconds, 4),
        "updates_per_s": round(updates / seconds, 2),
        "latency_ms": {
            "p50": round(float(np.percentile(ms, 50)), 3),
            "p99": round(float(np.percentile(ms, 99)), 3),
            "max": round(float(ms.max()), 3),
        },
        "output_changes": e.changes,
        "verified": verified,
    }


def _rows(a: dict[str, Any], b: dict[str, Any]) -> list[report.Row]:
    la, lb = a["latency_ms"], b["latency_ms"]
    return [
        report.Row("throughput", a["updates_per_s"], b["updates_per_s"], True, "updates/s"),
        report.Row("batch latency p50", la["p50"], lb["p50"], False, "ms"),
        report.Row("batch latency p99", la["p99"], lb["p99"], False, "ms"),
        report.Row("initial load", a["load_s"], b["load_s"], False, "s"),
    ]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(
        prog="python -m bench.components", description=__doc__.split("\n")[0]
    )
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--edges", type=int, default=20_000)
    p.add_argument("--updates", type=int, default=2_000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kind", choices=KINDS, default="wcc", help="weak labels or strong edges")
    p.add_argument("--engine", choices=ENGINES, default="difflow")
    p.add_argument("--verify", action="store_true", help="check the final answer")
    p.add_argument("--report", metavar="SECTION", help="run both engines, write BENCHMARKS.md")
    a = p.parse_args(argv)
    if a.nodes < 1 or a.edges < 1 or a.updates < 1 or a.batch < 1:
        p.error("--nodes, --edges, --updates and --batch must be positive")
    args = (a.nodes, a.edges, a.updates, a.batch, a.seed)
    if not a.report:
        result = run(a.engine, *args, verify=a.verify, kind=a.kind)
        print(json.dumps(result))
        return 0 if result["verified"] is not False else 1
    results = {name: run(name, *args, verify=True, kind=a.kind) for name in ENGINES}
    ours, base = results["difflow"], results["recompute"]
    window = (
        f"{a.nodes:,} nodes, {a.edges:,} edges, seed {a.seed}; {a.updates:,} updates in "
        f"batches of {a.batch:,} distinct times, closed loop"
    )
    if a.kind == "scc":
        text = (
            f"Strong components under seed 000's sliding window of directed edges ({window}): "
            "every edge whose ends lie in one strong component, by edge trimming in nested "
            "iterates (an outer loop over the edges; in each round, every node labelled with "
            "the least node reaching it, forward and then backward, each an inner loop of "
            "join, concat and a `min` reduce, and the edges whose ends differ dropped). "
            "Baseline: scipy's strong `connected_components` over the whole graph at every "
            "time, the edges inside diffed against the previous answer. Final edges verified "
            f"against it: difflow {'yes' if ours['verified'] else 'no'}."
        )
    else:
        text = (
            f"Connected components under seed 000's sliding window of edges, read as "
            f"undirected ({window}): every node labelled with the least node of its "
            "component, as an iterate of join, concat and a `min` reduce. Baseline: scipy's "
            "`connected_components` over the whole graph at every time, diffed against the "
            "previous labels. Final labels verified against it: "
            f"difflow {'yes' if ours['verified'] else 'no'}."
        )
    body = report.render_section(
        a.report,
        report.render_table(_rows(ours, base)),
        report.command("bench.components", argv),
        text=text,
    )
    path = report.write_section(a.report, body)
    print(f"wrote section {a.report!r} of {path}", file=sys.stderr)
    print(json.dumps({"section": a.report, "file": str(path), "results": results}))
    return 0 if all(r["verified"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
