"""A loop's ``distinct`` checks a key's later rounds ahead (``reduce_set_line._first_change``)
and owes a pending time only at the first round where its output would change: the loop's
results stay those of a from-scratch reachability at every time, whatever arrives later
(edge changes at many times in one step, times written ahead of the frontier, the join's
output held until its round or sent on at once)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.reach import build_reach_graph
from engine.operators import join as join_module

from .test_join_rounds import reachable

_edge = st.tuples(st.integers(0, 9), st.integers(0, 9))
# a step: (updates as (time offset, edge, insert?), how far the frontier then moves)
_step = st.tuples(
    st.lists(st.tuples(st.integers(0, 7), _edge, st.booleans()), max_size=14),
    st.integers(1, 8),
)


@settings(max_examples=100, deadline=None)
@given(
    hold_from=st.sampled_from([1, join_module.HOLD_FROM]),
    roots=st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True),
    initial=st.lists(_edge, min_size=1, max_size=25),
    steps=st.lists(_step, min_size=1, max_size=6),
)
def test_reachability_at_every_time_with_pending_times_checked_ahead(
    hold_from: int, roots: list[int], initial: list[tuple[int, int]], steps: list
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(join_module, "HOLD_FROM", hold_from)
        _check(roots, initial, steps)


def _check(roots: list[int], initial: list[tuple[int, int]], steps: list) -> None:
    g, roots_in, edges_in, capture = build_reach_graph()
    roots_in.send_columns([np.array(roots)], 0, 1)
    src, dst = zip(*initial, strict=True)
    edges_in.send_columns([np.array(src), np.array(dst)], 0, 1)
    changes: list[tuple[int, tuple[int, int], int]] = [(0, e, 1) for e in initial]
    frontier = 1
    for h in (roots_in, edges_in):
        h.advance_to(frontier)
    g.step()  # the load, final before any change
    for ups, move in steps:
        for off, edge, insert in ups:
            t = frontier + off  # up to 7 ahead: some not complete after this step
            if not insert and not _present_from(changes, edge, t):
                continue  # every edge's count stays >= 0 at every time
            d = 1 if insert else -1
            edges_in.send_columns([np.array([edge[0]]), np.array([edge[1]])], t, d)
            changes.append((t, edge, d))
        frontier += move
        for h in (roots_in, edges_in):
            h.advance_to(frontier)
        g.step()
    out = capture.drain()
    outputs = list(zip(out.data[0], out.data[1], out.times[0], out.diffs, strict=True))
    for t in range(frontier):
        edges = Counter()
        for tc, e, d in changes:
            if tc <= t:
                edges[e] += d
        got: Counter = Counter()
        for root, node, tt, d in outputs:
            if tt <= t:
                got[(int(root), int(node))] += int(d)
        want = Counter({(r, n): 1 for r in roots for n in reachable(edges, r)})
        assert +got == want and not -got, f"at time {t}"


def _present_from(changes: list, edge: tuple[int, int], t: int) -> bool:
    """Whether ``edge`` is present at ``t`` and at every later time it changes at."""
    times = {t} | {tc for tc, e, _ in changes if e == edge and tc > t}
    return all(sum(d for tc, e, d in changes if e == edge and tc <= u) >= 1 for u in times)


def test_outside_a_loop_a_two_dimensional_frontier_is_not_a_round() -> None:
    """Outside a loop, frontier ``[(0, 1)]`` says row 0 is final and the traces forget it
    (a record at ``(2, 0)`` is compacted to ``(2, 1)``): an update at ``(2, 4)`` must not be
    taken as a new time at ``(2, 0)``, which once retracted a row there (audit 29)."""
    from engine import Graph

    g = Graph()
    h, rows = g.new_input([("a", "int"), ("b", "int")], dims=2)
    cap = rows.distinct().capture()
    writes = [
        ((2, 0), (0, 1), 1), ((1, 8), (2, 0), 1), ((0, 5), (0, 0), 1), ((3, 5), (3, 0), -1),
        ((0, 7), (2, 3), -1), ((3, 2), (2, 1), 1), ((2, 9), (3, 2), 1), ((1, 9), (1, 2), 1),
        ((1, 8), (2, 4), 1),
    ]  # fmt: skip
    for i, (row, t, w) in enumerate(writes):
        h.send_rows([row], t, w)
        if i == 5:
            h.advance_to([(0, 1)])
        g.step()
    h.advance_to([])
    g.step()
    out = cap.drain()
    at: Counter = Counter()
    for j in range(len(out)):
        if out.times[0, j] <= 3 and out.times[1, j] == 0:
            at[tuple(int(x) for x in out.data[:, j])] += int(out.diffs[j])
    assert +at == Counter({(0, 5): 1, (1, 8): 1}) and not -at
