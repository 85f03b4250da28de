"""Lattice laws, advance_by, and seed 000's worked compaction example."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import TimeError
from engine.lattice import Antichain, advance_by, as_times, join, leq, meet, time_tuples
from engine.progress import RoundFrontiers, round_frontier

times2 = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=6)


def T(*ts: tuple[int, ...]) -> np.ndarray:
    return np.asarray(ts, dtype=np.int64).T.copy()


def test_seed_000_worked_example() -> None:
    # ((a,b),+1)@(0,0) ((b,c),+1)@(0,1) ((a,c),+1)@(1,0) ((b,c),-1)@(1,1)
    times = T((0, 0), (0, 1), (1, 0), (1, 1))
    f1 = Antichain([(0, 3), (1, 2), (2, 0)])
    assert time_tuples(advance_by(times, f1)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    f2 = Antichain([(1, 2), (2, 0)])
    assert time_tuples(advance_by(times, f2)) == [(1, 0), (1, 1), (1, 0), (1, 1)]
    f3 = Antichain([(0, 3), (1, 1)])
    assert time_tuples(advance_by(times, f3)) == [(0, 1), (0, 1), (1, 1), (1, 1)]
    f4 = Antichain([(1, 1)])
    assert time_tuples(advance_by(times, f4)) == [(1, 1)] * 4


@given(times2, times2)
def test_join_meet_laws(a: list, b: list) -> None:
    n = min(len(a), len(b))
    x, y = T(*a[:n]), T(*b[:n])
    j, m = join(x, y), meet(x, y)
    assert leq(x, j).all() and leq(y, j).all()
    assert leq(m, x).all() and leq(m, y).all()
    assert (join(x, m) == x).all() and (meet(x, j) == x).all()  # absorption


@given(times2, times2, times2)
def test_advance_by_correct_and_optimal(ts: list, fs: list, gs: list) -> None:
    """s and advance_by(s, F) compare equally with every g >= F (seed 000's claim)."""
    frontier = Antichain(fs)
    s = T(*ts)
    t = advance_by(s, frontier)
    assert leq(s, t).all()
    g = T(*gs)
    beyond = frontier.beyond(g)
    for gi in np.flatnonzero(beyond):
        col = g[:, gi : gi + 1]
        assert (leq(s, col) == leq(t, col)).all()


def test_antichain_minimal_and_ordered() -> None:
    a = Antichain([(2, 0), (0, 2), (2, 2), (1, 1)])
    assert a.to_list() == [[0, 2], [1, 1], [2, 0]]
    assert Antichain([(1, 1)]).precedes(a) is False
    assert Antichain([(0, 0)]).precedes(a)
    assert a.precedes(Antichain([(3, 3)]))
    assert a.precedes(Antichain.closed(2))
    assert not Antichain.closed(2).precedes(a)
    assert a.meet(Antichain([(0, 0)])) == Antichain([(0, 0)])


def test_complete_and_beyond() -> None:
    f = Antichain([(2, 5), (5, 2)])
    ts = T((1, 4), (4, 1), (4, 4), (2, 5), (6, 6))
    assert f.complete(ts).tolist() == [True, True, True, False, False]
    assert Antichain.closed(2).complete(ts).all()


times3 = st.lists(st.tuples(*[st.integers(0, 4)] * 3), max_size=6)


@given(times3, times3, times3)
def test_beyond_and_precedes_follow_the_product_order(fs: list, gs: list, ts: list) -> None:
    f, g = Antichain(fs, dims=3), Antichain(gs, dims=3)
    t = np.asarray(ts, dtype=np.int64).reshape(-1, 3).T.copy()
    want = [any(all(a <= b for a, b in zip(e, x, strict=True)) for e in f.to_list()) for x in ts]
    assert f.beyond(t).tolist() == want
    covered = all(any(all(a <= b for a, b in zip(e, x, strict=True)) for e in fs) for x in gs)
    assert f.precedes(g) == covered
    with pytest.raises(TimeError):
        f.beyond(t[:2])
    with pytest.raises(TimeError):
        f.precedes(Antichain([(1, 1)]))


@given(times3, times3)
def test_meet_is_the_minimal_elements_of_the_union(fs: list, gs: list) -> None:
    """Whether or not one frontier precedes the other (its shortcut), either one closed."""
    f, g = Antichain(fs, dims=3), Antichain(gs, dims=3)
    union = fs + gs
    want = {
        x
        for x in union
        if not any(y != x and all(a <= b for a, b in zip(y, x, strict=True)) for y in union)
    }
    for m in (f.meet(g), g.meet(f)):
        assert {tuple(e) for e in m.to_list()} == want
        assert m.to_list() == sorted(m.to_list())
    with pytest.raises(TimeError):
        f.meet(Antichain([(1, 1)]))


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=4), st.integers(0, 5))
def test_round_frontiers(parent: list, round_: int) -> None:
    """A round's frontier: the parent's elements extended by 0, and the bump (0, 0, r + 1)."""
    p = Antichain(parent, dims=2)
    want = Antichain([(*e, 0) for e in p.to_list()] + [(0, 0, round_ + 1)], dims=3)
    assert RoundFrontiers(p).at(round_) == want
    assert round_frontier(p, round_) == want


def test_as_times_validates() -> None:
    assert as_times(3, 1).tolist() == [[3]]
    assert as_times([1, 2], 2).tolist() == [[1], [2]]
    with pytest.raises(TimeError):
        as_times([-1], 1)
    with pytest.raises(TimeError):
        as_times(np.zeros((3, 2), dtype=np.int64), 2)
