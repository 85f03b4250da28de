"""Float sums per segment are the correctly rounded sums of the exact products, whatever
the order of their terms (``engine.exact_sum``), checked against exact rational arithmetic
(the oracle's ``exact_float_sum``); and a float ``sum`` aggregate in a graph no longer
keeps the rounding of a large value added and retracted (audit 20)."""

from __future__ import annotations

import math
from random import Random

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine import Graph
from engine.exact_sum import segment_fsums
from tests.oracle.evaluate import exact_float_sum

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
counts = st.integers(min_value=-(2**62), max_value=2**62).filter(bool)
terms = st.lists(st.tuples(finite | st.sampled_from([1e15, -1e15, 0.1, 0.2]), counts), max_size=12)
# terms near the float's range whose partial sums overflow though their products do not
huge = st.sampled_from([1e308, -1e308, 1.7976931348623157e308, -8.98846567431158e307, 5e-324])
near_range = st.lists(st.tuples(huge | finite, st.integers(-3, 3).filter(bool)), max_size=8)


def _run(segments: list[list[tuple[float, int]]]) -> np.ndarray:
    flat = [t for s in segments for t in s]
    starts = np.array([i == 0 for s in segments for i in range(len(s))], dtype=bool)
    values = np.array([v for v, _ in flat], dtype=np.float64)
    cs = np.array([c for _, c in flat], dtype=np.int64)
    return segment_fsums(values, cs, starts)


def _exact_in_any_order(segments: list[list[tuple[float, int]]], rnd: Random) -> None:
    got = _run(segments)
    # NaN (an overflowing term and its opposite) equal to NaN
    np.testing.assert_array_equal(got, [exact_float_sum(s) for s in segments], strict=True)
    shuffled = [rnd.sample(s, len(s)) for s in segments]
    np.testing.assert_array_equal(_run(shuffled), got, strict=True)


@given(st.lists(terms.filter(bool), min_size=1, max_size=5), st.randoms())
def test_segment_sums_are_exact_sums_rounded_once_in_any_order(segments, rnd) -> None:
    _exact_in_any_order(segments, rnd)


@given(st.lists(near_range.filter(bool), min_size=1, max_size=5), st.randoms())
def test_sums_whose_partials_overflow_are_exact_in_any_order(segments, rnd) -> None:
    _exact_in_any_order(segments, rnd)


def test_partial_sums_beyond_the_float_range() -> None:
    """Audit 47: ``1e308, 1e308, -1e308`` summed to NaN (the partials overflowed), though
    its exact sum is 1e308; in another order it gave 1e308."""
    big = 1e308
    cases = [
        [(big, 1), (big, 1), (-big, 1)],
        [(big, 1), (-big, 1), (big, 1)],
        [(big, 1), (big, 1), (-big, 1), (-big, 1), (5.0, 1)],
        [(big, 1), (big, 1)],
        [(-big, 2)],
        [(big, 1), (1.0, 1)],
    ]
    assert _run(cases).tolist() == [big, big, 5.0, math.inf, -math.inf, big]


def test_counts_whose_halves_would_overflow_where_the_product_does_not() -> None:
    """A count is split in two 32-bit halves of its sign: split as ``2**32 - 2**31``, the
    product ``v * 2**31`` near the float range overflowed in its first half and summed to
    NaN (found by hypothesis in session 40)."""
    v = 4.185580496821357e298
    cases = [[(v, 2**31)], [(v, -(2**31))], [(1.0, -(2**63)), (1.0, 2**63 - 1)], [(v, 2**31 + 1)]]
    assert _run(cases).tolist() == [exact_float_sum(s) for s in cases]


def test_non_finite_terms() -> None:
    inf, nan = math.inf, math.nan
    got = _run(
        [[(inf, 2), (1.0, 1)], [(inf, 1), (-inf, 1)], [(nan, 1), (2.0, 3)], [(1e300, 10**10)]]
    )
    assert got[0] == inf and math.isnan(got[1]) and math.isnan(got[2]) and got[3] == inf


def test_products_beyond_the_float_range_of_finite_values_are_summed_exactly() -> None:
    """Audit 102: a row ``1e308`` of count 2 beside ``-1e308`` summed to infinity (the
    product overflowed, and was summed as an infinite term), where two rows ``1e308`` of
    count 1 summed to ``1e308``: the sum of a multiset depended on its equal rows being
    merged. Only infinite and NaN values are summed as IEEE floats now."""
    big, inf = 1e308, math.inf
    cases = [
        [(big, 2), (-big, 1)],
        [(-big, 1), (big, 2)],
        [(big, 1), (big, 1), (-big, 1)],
        [(big, 2), (-big, 2), (3.0, 1)],
        [(big, 2), (inf, 1)],
        [(big, 2), (-inf, 1)],
        [(big, 3)],
        [(5e-324, 2**62), (1e300, -(2**40)), (1e300, 2**40)],
    ]
    got = _run(cases).tolist()
    assert got[:7] == [big, big, big, 3.0, inf, -inf, inf]
    assert got == [exact_float_sum(s) for s in cases]


def test_a_float_sum_keeps_no_rounding_of_retracted_values() -> None:
    """Rows 1e15, 0.2 and -1e15 for one key, then 1e15 retracted and added back: the sum at
    every time is the exact sum of the rows present, rounded once (added in their order,
    the first time's rows sum to 0.25; in another, to 0.2)."""
    g = Graph()
    inp, rows = g.new_input([("k", "int"), ("x", "float")], name="t")
    cap = rows.reduce(["k"], {"s": ("sum", "x")}).capture()
    writes = [[(1e15, 1), (0.2, 1), (-1e15, 1)], [(1e15, -1)], [(1e15, 1), (0.1, 1)]]
    present: dict[float, int] = {}
    acc: dict[tuple[int, float], int] = {}
    for t, w in enumerate(writes):
        for x, d in w:
            inp.send_rows([(7, x)], t, d)
            present[x] = present.get(x, 0) + d
        inp.advance_to(t + 1)
        g.step()
        out = cap.drain()
        sums = np.ascontiguousarray(out.data[1]).view(np.float64)
        for k, v, d in zip(out.data[0].tolist(), sums.tolist(), out.diffs.tolist(), strict=True):
            acc[(k, v)] = acc.get((k, v), 0) + d
        acc = {r: c for r, c in acc.items() if c}
        expect = exact_float_sum(list(present.items()))
        assert acc == {(7, expect): 1}, (t, acc, expect)


def test_a_float_sum_is_the_same_whether_equal_rows_are_merged() -> None:
    """Audit 102's view: rows ``(1, 1e308)``, ``(2, 1e308)``, ``(3, -1e308)`` of one key,
    summed as they are and with the ids dropped first (the two ``1e308`` rows then one of
    count 2): both sums are ``1e308`` (the second was an infinity)."""
    g = Graph()
    inp, rows = g.new_input([("k", "int"), ("id", "int"), ("x", "float")], name="t")
    as_is = rows.reduce(["k"], {"s": ("sum", "x")}).capture()
    merged = rows.select({"k": "k", "x": "x"}).reduce(["k"], {"s": ("sum", "x")}).capture()
    inp.send_rows([(1, 1, 1e308), (1, 2, 1e308), (1, 3, -1e308)], 0, 1)
    inp.advance_to(1)
    g.step()
    for cap in (as_is, merged):
        out = cap.drain()
        sums = np.ascontiguousarray(out.data[1]).view(np.float64).tolist()
        assert (sums, out.diffs.tolist()) == ([1e308], [1])
