"""The default read time (``service.history.latest_complete``) against an enumeration."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Antichain
from service.history import frontier_join, latest_complete


def enumerated(frontier: list[tuple[int, ...]], extent: tuple[int, ...]) -> tuple[int, ...] | None:
    """The lexicographically greatest complete time below the frontier's maximum less one,
    raised to ``extent`` where that is more."""
    upper = np.maximum(np.maximum(np.max(frontier, axis=0) - 1, 0), extent)
    complete = [
        t
        for t in itertools.product(*(range(int(u) + 1) for u in upper))
        if not any(all(a >= b for a, b in zip(t, f, strict=True)) for f in frontier)
    ]
    return max(complete, default=None)


@st.composite
def frontiers(draw: st.DrawFn) -> list[tuple[int, ...]]:
    d = draw(st.integers(1, 3))
    times = draw(st.sets(st.tuples(*[st.integers(0, 5)] * d), min_size=1, max_size=4))
    return [  # the minimal ones: an antichain
        f
        for f in times
        if not any(g != f and all(a <= b for a, b in zip(g, f, strict=True)) for g in times)
    ]


@settings(max_examples=300, deadline=None)
@given(frontiers(), st.tuples(*[st.integers(0, 4)] * 3))
def test_latest_complete_is_the_greatest_complete_time(
    frontier: list[tuple[int, ...]], extent3: tuple[int, ...]
) -> None:
    d = len(frontier[0])
    extent = extent3[:d]
    got = latest_complete(Antichain(np.array(frontier, dtype=np.int64), d), np.array(extent))
    assert got == enumerated(frontier, extent)


def test_examples() -> None:
    def at(*elements: tuple[int, ...]) -> tuple[int, ...] | None:
        return latest_complete(Antichain(np.array(elements, dtype=np.int64), len(elements[0])))

    assert at((8,)) == (7,) and at((0,)) is None
    assert at((4, 5)) == (3, 4)  # one element: one below it
    assert at((0, 2), (2, 0)) == (1, 1)  # one below the meet would be (-1, -1)
    assert at((0, 3), (1, 2), (3, 0)) == (2, 1)  # several latest: (0, 2) and (2, 1)
    assert at((0, 2)) == (0, 1)  # (x, 1) is complete for every x: the data's greatest x
    # (x, 6) is complete for every x: data at (3, 1) is read at (3, 6), not (0, 6)
    assert latest_complete(Antichain(np.array([(1, 7)]), 2), np.array([3, 1])) == (3, 6)
    assert latest_complete(Antichain(np.array([(0, 2)]), 2), np.array([5, 3])) == (5, 1)
    assert at((2**62, 2**62)) == (2**62 - 1, 2**62 - 1)
    assert latest_complete(Antichain.closed(2)) is None


def test_frontier_join() -> None:
    def f(*elements: tuple[int, ...]) -> Antichain:
        return Antichain(np.array(elements, dtype=np.int64), len(elements[0]))

    assert frontier_join(f((1,)), f((8,))) == f((8,))
    assert frontier_join(f((0, 3), (2, 0)), f((1, 1))) == f((1, 3), (2, 1))
    assert frontier_join(f((0, 3), (3, 0)), f((0, 4), (4, 0))) == f((0, 4), (4, 0))
    assert frontier_join(f((0, 3), (3, 0)), f((2, 2))) == f((2, 3), (3, 2))
    assert frontier_join(f((5, 5)), Antichain.closed(2)).is_empty
