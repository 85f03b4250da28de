"""Trace arrays by one packed sort (``trace.packed_arrange``) against the general sorts."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.hashing import key_codes
from engine.sort_kernels import lexsort_consolidate, trace_arrays
from engine.trace import Layout, TraceBatch
from engine.trace.packed_arrange import packed_arrange
from tests.engine.splitting import every_call_split

_LOW = 2**62


def reference(
    codes: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, ...]:
    """Sorted by (code, key columns, values, times) with numpy's lexsort, consolidated, indexed."""
    rows = [codes, *vals, *times] if exact else [codes, *keys, *vals, *times]
    first, sums = lexsort_consolidate(rows, diffs)
    return (*trace_arrays(first, codes, keys, vals, times, exact), sums)


@st.composite
def records(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    n = draw(st.integers(1, 400) | st.integers(1024, 3000))  # the radix sort from 1,024
    how = draw(st.sampled_from(["hashed", "exact", "colliding", "shared high bits"]))
    kk = 1 if how == "exact" else 2  # one integer key column is its own code (exact)
    kv = draw(st.integers(0, 1))
    d = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, draw(st.integers(1, 50)), size=(kk, n), dtype=np.int64)
    wide = draw(st.booleans())  # values and times too wide to pack, sometimes
    span = 2**40 if wide else draw(st.integers(1, 2000))
    vals = rng.integers(-span, span, size=(kv, n), dtype=np.int64)
    times = rng.integers(0, draw(st.integers(1, 30)), size=(d, n), dtype=np.int64)
    diffs = rng.integers(-2, 3, size=n, dtype=np.int64)
    if how == "hashed":
        codes = key_codes(keys)
    elif how == "exact":
        codes = keys[0].copy()
    elif how == "colliding":  # few codes for many keys: the check must notice
        codes = (keys[0] * 7 + keys[-1]) % draw(st.integers(1, 4))
    else:  # the full range, and codes that differ only in low bits that packing drops
        high = rng.integers(0, 3, size=n, dtype=np.int64) << 40
        codes = high + rng.integers(0, 2**30, size=n, dtype=np.int64) - 2**41
        codes[0], codes[-1] = -(2**63), 2**63 - 1
    exact = how == "exact"
    return codes, keys, vals, times, diffs, np.bool_(exact)


@settings(max_examples=300, deadline=None)
@given(records(), st.booleans())
def test_packed_arrange_equals_the_general_sorts(recs: tuple[np.ndarray, ...], split: bool) -> None:
    """Whole, or split into two code ranges arranged on two threads."""
    codes, keys, vals, times, diffs, exact = recs
    expected = reference(codes, keys, vals, times, diffs, bool(exact))
    with every_call_split() if split else nullcontext():
        got = packed_arrange(codes, keys, vals, times, diffs, bool(exact))
    if got is not None:
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert np.array_equal(g, e)
    layout = (
        Layout.by_key(1 + vals.shape[0], [0])
        if exact
        else Layout.by_key(keys.shape[0] + vals.shape[0], list(range(keys.shape[0])))
    )
    assert layout.exact_codes == bool(exact)
    batch = TraceBatch.from_records(layout, codes, keys, vals, times, diffs)
    for g, e in zip(
        (batch.codes, batch.keys, batch.offsets, batch.vals, batch.times, batch.diffs),
        expected,
        strict=True,
    ):
        assert np.array_equal(g, e)


def test_packed_arrange_applies_to_hashed_keys_at_many_times() -> None:
    """The common case packs: hashed two-column keys, a value, times on two coordinates;
    and what it declines it says so (None) rather than answering wrong."""
    rng = np.random.default_rng(7)
    n = 5000
    keys = rng.integers(0, 100, size=(2, n), dtype=np.int64)
    vals = rng.integers(-5, 5, size=(1, n), dtype=np.int64)
    times = np.stack([rng.integers(0, 1000, n), rng.integers(0, 20, n)]).astype(np.int64)
    diffs = rng.integers(-1, 2, size=n, dtype=np.int64)
    codes = key_codes(keys)
    got = packed_arrange(codes, keys, vals, times, diffs, False)
    assert got is not None
    for g, e in zip(got, reference(codes, keys, vals, times, diffs, False), strict=True):
        assert np.array_equal(g, e)
    wide = vals.copy()
    wide[0, 0] = -(2**62)
    wide[0, 1] = 2**62
    assert packed_arrange(codes, keys, wide, times, diffs, False) is None
    collide = np.zeros(n, np.int64)  # one code for every key
    assert packed_arrange(collide, keys, vals, times, diffs, False) is None
    assert packed_arrange(codes, keys, vals.astype(np.float64), times, diffs, False) is None
