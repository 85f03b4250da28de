"""top_k orders by each type's own order, both ways, to the ends of int64, and fills its k
places with counts up to the ends of int64 (a group's running count saturates at k)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Graph
from engine.operators.reduce_kernels import first_k_takes

INTS = st.sampled_from([-(2**63), -(2**63) + 1, -1, 0, 1, 2**63 - 2, 2**63 - 1])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), INTS), min_size=1, max_size=12),
    st.booleans(),
    st.integers(1, 3),
)
def test_top_k_of_ints_to_the_ends_of_int64(
    rows: list[tuple[int, int]], desc: bool, k: int
) -> None:
    g = Graph()
    h, c = g.new_input([("g", "int"), ("v", "int")], name="t")
    out = c.top_k(["g"], [("v", desc)], k).capture()
    data = np.array(rows, dtype=np.int64).T
    h.send_columns([data[0], data[1]], 0, 1)
    h.advance_to(1)
    g.step()
    got = out.drain()
    taken = sorted(zip(got.data[0].tolist(), got.data[1].tolist(), got.diffs.tolist(), strict=True))
    expect = []
    for group in sorted({r[0] for r in rows}):
        values = sorted((v for gr, v in rows if gr == group), reverse=desc)[:k]
        expect += [(group, v, values.count(v)) for v in sorted(set(values))]
    assert taken == expect


# Counts near 2**63: a=22 ends with 2 * (2**62 - 1) = 2**63 - 2, a legal count, but the running
# count of a group passes 2**63 after it. It must stay at k (audit 5: it wrapped negative and
# let a=2 back into the first k places).
BIG = 2**62 - 1
FIRST = [(0, 30, 1), (0, 22, BIG), (0, 20, 1), (0, 13, 1), (0, 10, 3), (0, 2, 1), (1, 5, BIG)]
SECOND = [(0, 22, BIG), (0, 2, 1), (1, 5, BIG), (1, 4, 2), (1, 3, 2**63 - 1)]
EXPECT = [(0, 22, 2), (0, 30, 1), (1, 5, 3)]  # k=3, by g, ordered by v descending


def _top_3_by_steps(steps: list[list[tuple[int, int, int]]]) -> list[tuple[int, int, int]]:
    """The top 3 of each group after sending each step's ``(g, v, count)`` rows at its own
    time, as the accumulated ``(g, v, count)`` output."""
    g = Graph()
    h, c = g.new_input([("g", "int"), ("v", "int")], name="t")
    out = c.top_k(["g"], [("v", True)], 3).capture()
    total: dict[tuple[int, int], int] = {}
    for t, rows in enumerate(steps):
        data = np.array(rows, dtype=np.int64).T
        h.send_columns([data[0], data[1]], t, data[2])
        h.advance_to(t + 1)
        g.step()
        got = out.drain()
        for gr, v, d in zip(
            got.data[0].tolist(), got.data[1].tolist(), got.diffs.tolist(), strict=True
        ):
            total[gr, v] = total.get((gr, v), 0) + d
    return sorted((gr, v, n) for (gr, v), n in total.items() if n)


def test_top_k_running_count_saturates_incrementally() -> None:
    assert _top_3_by_steps([FIRST, SECOND]) == EXPECT


def test_top_k_running_count_saturates_from_scratch() -> None:
    assert _top_3_by_steps([FIRST + SECOND]) == EXPECT


COUNTS = st.one_of(st.integers(1, 4), st.sampled_from([2**62 - 1, 2**62, 2**63 - 2, 2**63 - 1]))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(COUNTS, min_size=1, max_size=6), min_size=1, max_size=4),
    st.sampled_from([0, 1, 3, 2**62, 2**63 - 2, 2**63 - 1]),
)
def test_first_k_takes_matches_a_running_remainder(groups: list[list[int]], k: int) -> None:
    starts = np.concatenate([[True] + [False] * (len(counts) - 1) for counts in groups])
    got = first_k_takes(
        starts, np.array([c for counts in groups for c in counts], dtype=np.int64), k
    ).tolist()
    expect = []
    for counts in groups:
        left = k
        for count in counts:
            expect.append(min(count, left))
            left -= expect[-1]
    assert got == expect


WORDS = st.sampled_from(["", "a", "ab", "b", "\x00", "é", "zz"])


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 5), WORDS, st.integers(-2, 3)), max_size=8),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
    st.integers(0, 3),
)
def test_top_k_of_text_in_groups_of_one_and_more(
    steps: list[list[tuple[int, str, int]]], desc: bool, k: int
) -> None:
    """Groups holding one row (which need no order) beside groups holding several, as the
    rows come and go over several times: the output accumulated to each time is the top k
    of the contents then (rows with a positive count, with multiplicity)."""
    g = Graph()
    h, c = g.new_input([("g", "int"), ("s", "string")], name="t")
    out = c.top_k(["g"], [("s", desc)], k).capture()
    present: dict[tuple[int, str], int] = {}
    total: dict[tuple[int, str], int] = {}
    for t, rows in enumerate(steps):
        rows = [r for r in rows if r[2]]
        if rows:
            ids = g.interner.intern_many([s for _, s, _ in rows])
            groups = np.array([gr for gr, _, _ in rows], dtype=np.int64)
            h.send_columns([groups, ids], t, np.array([d for _, _, d in rows], dtype=np.int64))
        h.advance_to(t + 1)
        g.step()
        got = out.drain()
        words = g.interner.lookup_many(got.data[1])
        for gr, s, d in zip(got.data[0].tolist(), words, got.diffs.tolist(), strict=True):
            total[gr, s] = total.get((gr, s), 0) + d
        for gr, s, d in rows:
            present[gr, s] = present.get((gr, s), 0) + d
        expect: dict[tuple[int, str], int] = {}
        for group in {gr for gr, _ in present}:
            ranked = sorted(
                ((s, n) for (gr, s), n in present.items() if gr == group and n > 0),
                reverse=desc,
            )
            left = k
            for s, n in ranked:
                if left:
                    expect[group, s] = min(n, left)
                    left -= expect[group, s]
        assert {key: n for key, n in total.items() if n} == expect


def test_top_k_breaks_ties_by_the_remaining_columns_in_column_order() -> None:
    """Rows equal in ``order_by`` are ordered by the other columns, the first of them (in
    the input's column order) first, each ascending: here by x, then y (by y first, the
    first place would go to x=2)."""
    g = Graph()
    h, c = g.new_input([("g", "int"), ("x", "int"), ("v", "int"), ("y", "int")], name="t")
    out = c.top_k(["g"], [("v", True)], 2).capture()
    rows = [(0, 2, 7, 0), (0, 1, 7, 9), (0, 1, 7, 5), (0, 0, 3, 0)]
    data = np.array(rows, dtype=np.int64).T
    h.send_columns(list(data), 0, 1)
    h.advance_to(1)
    g.step()
    got = out.drain()
    assert sorted(map(tuple, got.data.T.tolist())) == [(0, 1, 7, 5), (0, 1, 7, 9)]
