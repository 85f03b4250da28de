"""A join in a loop holds the output updates at later iterations than its round until their
round, when there are ``HOLD_FROM`` of them (``Join._by_round``): what it sends on is then
at the round's iteration, and the loop's results are those of a from-scratch reachability
either way."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from bench.reach import build_reach_graph
from engine import Graph
from engine.operators import join as join_module
from engine.operators.join import Join


def loaded(roots: list[int], chain: Counter) -> tuple[Any, Any, Any, Any]:
    """The reachability dataflow (``bench.reach``'s) with ``roots`` and the edges of
    ``chain`` at time 0, stepped to time 1: (graph, roots input, edges input, capture)."""
    g, roots_in, edges_in, capture = build_reach_graph()
    roots_in.send_columns([np.array(roots)], 0, 1)
    src, dst = zip(*chain, strict=True)
    edges_in.send_columns([np.array(src), np.array(dst)], 0, 1)
    for h in (roots_in, edges_in):
        h.advance_to(1)
    g.step()
    return g, roots_in, edges_in, capture


def reachable(edges: Counter, root: int) -> set[int]:
    seen, todo = {root}, [root]
    while todo:
        n = todo.pop()
        for (s, d), c in edges.items():
            if s == n and c > 0 and d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def joins(g: Graph) -> list[Join]:
    found = []

    def walk(ops: list) -> None:
        for op in ops:
            if isinstance(op, Join):
                found.append(op)
            if hasattr(op, "inner"):
                walk(op.inner.operators)

    walk(g.scope.operators)
    return found


def test_updates_at_later_iterations_wait_for_their_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Edges inserted along a chain meet reachability recorded at the chain's later
    iterations: the join's output at those iterations is sent on at each one's round, not
    at round 0 (where the edges arrive), and the loop still reaches everything."""
    monkeypatch.setattr(join_module, "HOLD_FROM", 1)  # hold even these few
    chain = Counter({(i, i + 1): 1 for i in range(1, 12)})
    g, roots_in, edges_in, capture = loaded([0, 1], chain)
    (join,) = joins(g)
    sent: list[tuple[int, int]] = []  # (round, highest iteration sent on)
    held_after_round_0: list[int] = []
    run = Join.run

    def watched(self: Join) -> None:
        run(self)
        if self.output is not None and len(self.output):
            sent.append((self.scope.round, int(self.output.times[-1].max())))
        if self.scope.round == 0:
            held_after_round_0.append(sum(len(b) for bs in self.held.values() for b in bs))

    monkeypatch.setattr(Join, "run", watched)
    new = [(12, 20), (6, 30), (0, 1)]  # reached from root 1 at iterations 11 and 5
    edges_in.send_columns([np.array([s for s, _ in new]), np.array([d for _, d in new])], 1, 1)
    for e in new:
        chain[e] += 1
    for h in (roots_in, edges_in):
        h.advance_to(2)
    g.step()
    assert sent and all(it <= r for r, it in sent)
    assert held_after_round_0 and held_after_round_0[0] >= 2  # (1, 20) and (1, 30), held
    assert join.held == {}
    out = capture.drain()
    got: Counter = Counter()
    for root, node, d in zip(out.data[0], out.data[1], out.diffs, strict=True):
        got[(int(root), int(node))] += int(d)
    want = Counter({(r, n): 1 for r in (0, 1) for n in reachable(chain, r)})
    assert +got == want


def test_held_updates_alone_run_the_loop_to_their_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """An edge added past the end of a chain meets reachability only at the chain's last
    iteration: the join's held output is the only work owed after round 0, and the loop
    goes from round 0 straight to its round to deliver it."""
    monkeypatch.setattr(join_module, "HOLD_FROM", 1)
    chain = Counter({(i, i + 1): 1 for i in range(1, 12)})
    g, roots_in, edges_in, capture = loaded([1], chain)
    capture.drain()
    (join,) = joins(g)
    rounds: list[int] = []
    run = Join.run

    def watched(self: Join) -> None:
        rounds.append(self.scope.round)
        run(self)

    monkeypatch.setattr(Join, "run", watched)
    edges_in.send_columns([np.array([12]), np.array([20])], 1, 1)
    for h in (roots_in, edges_in):
        h.advance_to(2)
    g.step()
    assert rounds[:2] == [0, 11]  # (1, 12) is recorded at iteration 11, and so (1, 20)
    assert join.held == {}
    out = capture.drain()
    got = {
        (int(r), int(n), int(t), int(d))
        for r, n, t, d in zip(*out.data, out.times[0], out.diffs, strict=True)
    }
    assert got == {(1, 20, 1, 1)}


@pytest.mark.parametrize("hold_from", [1, join_module.HOLD_FROM])
def test_held_updates_at_a_time_not_yet_complete_arrive_once_it_is(
    monkeypatch: pytest.MonkeyPatch, hold_from: int
) -> None:
    """Edges written ahead of the frontier: the join's held output at later iterations
    waits across steps until the time is complete (or, below ``HOLD_FROM``, goes on at once
    and waits downstream), and the result at that time is the from-scratch one."""
    monkeypatch.setattr(join_module, "HOLD_FROM", hold_from)
    chain = Counter({(i, i + 1): 1 for i in range(8)})
    g, roots_in, edges_in, capture = loaded([0, 3], chain)
    edges_in.send_columns([np.array([8, 0]), np.array([0, 1])], 5, np.array([1, -1]))
    edges = chain.copy()
    edges[(8, 0)] += 1
    edges[(0, 1)] -= 1
    edges_in.advance_to(3)  # time 5 is not complete yet
    roots_in.advance_to(3)
    g.step()
    for h in (roots_in, edges_in):
        h.advance_to(6)
    g.step()
    (join,) = joins(g)
    assert join.held == {}
    out = capture.drain()
    got: Counter = Counter()
    for root, node, t, d in zip(out.data[0], out.data[1], out.times[0], out.diffs, strict=True):
        if t <= 5:
            got[(int(root), int(node))] += int(d)
    want = Counter({(r, n): 1 for r in (0, 3) for n in reachable(edges, r)})
    assert +got == want
