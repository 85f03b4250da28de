"""The one-call reduce steps (``reduce_agg``, ``reduce_set``) in nested loops.

A reduce inside an inner loop sees three-dimensional times: (time, outer round, inner
round). At a round of the nested loops, every new time shares its trailing coordinates and
the frontier pins them (``reduce_line.step_tail``), and the one-call steps apply as they do
in a single loop. They must give the general driver's output at every time, with and
without splitting each step in two, and the right answer: the edges inside strong
components (a ``min`` reduce in each inner loop, a ``distinct`` in the outer one) and the
edges reachable from a root (a ``distinct`` in the inner loop)."""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.components import strong_plan
from engine import Graph, col, iterate
from engine.operators.reduce_agg import agg_step
from engine.operators.reduce_set import set_step
from tests.engine.splitting import every_call_split
from tests.engine.test_reduce_agg import _general_steps, _outputs
from tests.engine.test_reduce_paths import _reduces


def _reachable_edges(edges: Any) -> Any:
    """The edges whose source node 0 reaches: an outer loop trimming the edges to those, and
    in it an inner loop of join, concat and ``distinct`` from node 0."""

    def trimmed(e: Any) -> Any:
        roots = e.filter(col("src").eq(0)).select(node="src").distinct()
        reach = iterate(
            {"r": roots},
            lambda v: {
                "r": v["r"]
                .join(e, on=[("node", "src")], columns={"node": "right.dst"})
                .concat(roots)
                .distinct()
            },
            within=e.scope,
        )["r"]
        return e.semijoin(reach, on=[("src", "node")])

    return iterate({"e": edges}, lambda v: {"e": trimmed(v["e"])})["e"]


def _run(build: Any, initial: list, changes: list, one_call: bool, split: bool) -> tuple:
    """``build`` over an edge input: the edges at time 0, then one change per time in each
    of two steps. Returns the outputs and the general driver's steps of the reduces in the
    inner loops (the only ones with three-dimensional times)."""
    g = Graph()
    edges_in, edges = g.new_input([("src", "int"), ("dst", "int")])
    cap = build(edges).capture()
    nested = [op for op in _reduces(g.scope.operators) if op.dims == 3]
    assert nested
    taken = _general_steps(nested, one_call)
    with every_call_split() if split else nullcontext():
        edges_in.send_rows(initial, 0)
        half = len(changes) // 2
        for lo, hi in ((0, 0), (0, half), (half, len(changes))):  # the load, then two steps
            for t in range(lo + 1, hi + 1):
                a, b, d = changes[t - 1]
                edges_in.send_rows([(a, b)], t, d)
            edges_in.advance_to(hi + 1)
            g.step()
    return _outputs(cap.drain()), taken[0], nested


def _stream(n: int, initial: list, changes: list) -> tuple[list, list]:
    """Distinct initial edges, and changes that add an absent edge or remove a present one."""
    live = {(a % n, b % n) for a, b in initial}
    first = sorted(live)
    stream = []
    for a, b in changes:
        e = (a % n, b % n)
        stream.append((*e, -1 if e in live else 1))
        live ^= {e}
    return first, stream


def _reaches(n: int, edges: set) -> np.ndarray:
    """``r[a, b]``: whether ``a`` reaches ``b`` (every node reaches itself)."""
    r = np.eye(n, dtype=bool)
    for a, b in edges:
        r[a, b] = True
    for k in range(n):
        r |= r[:, k : k + 1] & r[k : k + 1, :]
    return r


def _strong_truth(n: int, edges: set) -> set:
    r = _reaches(n, edges)
    return {(a, b) for a, b in edges if r[b, a]}


def _reachable_truth(n: int, edges: set) -> set:
    r = _reaches(n, edges)
    if not any(a == 0 for a, _ in edges):
        return set()
    return {(a, b) for a, b in edges if r[0, a]}


def _check_every_time(got: Counter, n: int, first: list, stream: list, truth: Any) -> None:
    live = set(first)
    for t in range(len(stream) + 1):
        if t:
            a, b, _ = stream[t - 1]
            live ^= {(a, b)}
        acc: Counter = Counter()
        for (row, (tt,)), c in got.items():
            if tt <= t:
                acc[row] += c
        acc = Counter({k: v for k, v in acc.items() if v})
        assert set(acc) == truth(n, live), t
        assert all(c == 1 for c in acc.values())


graphs = (
    st.integers(2, 7),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=12),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=10),
)


@settings(max_examples=30, deadline=None)
@given(*graphs)
def test_strong_components_step_in_one_call_in_their_inner_loops(
    n: int, initial: list, changes: list
) -> None:
    """The edges inside strong components, by nested loops whose inner ``min`` reduces
    step in one call: the general driver's output, split or not, right at every time."""
    first, stream = _stream(n, initial, changes)
    general, taken, _ = _run(strong_plan, first, stream, one_call=False, split=False)
    assert taken or not first
    for split in (False, True):
        got, taken, nested = _run(strong_plan, first, stream, one_call=True, split=split)
        assert [op.one_call for op in nested] == [agg_step, agg_step]
        assert got == general
    _check_every_time(general, n, first, stream, _strong_truth)


@settings(max_examples=30, deadline=None)
@given(*graphs)
def test_reachable_edges_step_in_one_call_in_their_inner_loop(
    n: int, initial: list, changes: list
) -> None:
    """The edges whose source a root reaches, by nested loops whose inner ``distinct`` steps
    in one call: the general driver's output, split or not, right at every time."""
    first, stream = _stream(n, initial, changes)
    general, _, _ = _run(_reachable_edges, first, stream, one_call=False, split=False)
    for split in (False, True):
        got, _, nested = _run(_reachable_edges, first, stream, one_call=True, split=split)
        assert [op.one_call for op in nested] == [set_step]
        assert got == general
    _check_every_time(general, n, first, stream, _reachable_truth)


@pytest.mark.parametrize("seed", [0, 1])
def test_strong_components_of_a_bigger_graph_take_no_general_step(seed: int) -> None:
    """40 nodes, 70 edges, 30 changes: every step of the inner loops' reduces is one call."""
    rng = np.random.default_rng(seed)
    n = 40
    pairs = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(70, 2))]
    changes = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(30, 2))]
    first, stream = _stream(n, pairs, changes)
    general, _, _ = _run(strong_plan, first, stream, one_call=False, split=False)
    got, taken, _ = _run(strong_plan, first, stream, one_call=True, split=False)
    assert taken == 0
    assert got == general
    _check_every_time(got, n, first, stream, _strong_truth)
