"""Merging sorted trace batches in linear passes instead of sorting their union.

Every batch holds its records sorted by (code, key, value, time). Advancing times by a
frontier never changes a record's (code, key, value) *row*, so the union of batches is
sorted by row after a k-way merge (pairwise passes by row and advanced time, stable:
``O(n log k)``); only the times inside a group of equal rows may be out of order, where
advancing reordered them within a batch, and those groups are re-sorted on their own (most
are already in order). One more pass finds the groups, checks their order and sums equal
(row, time) records. The result is what sorting the union would give
(``TraceBatch.from_records``); tests compare the two.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.sort_kernels import RADIX_FROM, batch_row, row_bits, trace_arrays
from engine.trace.seek import unpack_table

__all__ = ["merge_consolidate", "merge_table", "merge_whole"]

_SMALL_GROUP = 16  # groups up to this size re-sort their times by insertion


@njit(cache=True, nogil=True)
def _compare_rows(
    codes: np.ndarray, keys: np.ndarray, vals: np.ndarray, a: int, b: int, exact: bool
) -> int:
    """-1, 0 or 1 as row ``a`` sorts before, with, or after row ``b``."""
    if codes[a] != codes[b]:
        return -1 if codes[a] < codes[b] else 1
    if not exact:
        for j in range(keys.shape[0]):
            if keys[j, a] != keys[j, b]:
                return -1 if keys[j, a] < keys[j, b] else 1
    for j in range(vals.shape[0]):
        if vals[j, a] != vals[j, b]:
            return -1 if vals[j, a] < vals[j, b] else 1
    return 0


@njit(cache=True, nogil=True)
def _compare_records(
    codes: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
    tk: np.ndarray,
    a: int,
    b: int,
    exact: bool,
) -> int:
    """-1, 0 or 1 as record ``a`` sorts before, with, or after record ``b``: by row, then
    by time key."""
    c = _compare_rows(codes, keys, vals, a, b, exact)
    if c != 0 or tk[a] == tk[b]:
        return c
    return -1 if tk[a] < tk[b] else 1


@njit(cache=True, nogil=True)
def _merge_runs(
    codes: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
    tk: np.ndarray,
    bounds: np.ndarray,
    exact: bool,
) -> np.ndarray:
    """The stable order of records by (row, time key), merging the sorted runs
    ``bounds[i]:bounds[i+1]`` two at a time."""
    n = codes.shape[0]
    perm = np.arange(n)
    buf = np.empty(n, np.int64)
    starts = bounds.copy()
    while starts.shape[0] > 2:
        runs = starts.shape[0] - 1
        nxt = np.empty((runs + 1) // 2 + 1, np.int64)
        w = 0
        for r in range(0, runs, 2):
            nxt[w] = starts[r]
            w += 1
            lo, mid = starts[r], starts[r + 1]
            hi = starts[r + 2] if r + 1 < runs else mid
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if _compare_records(codes, keys, vals, tk, perm[j], perm[i], exact) < 0:
                    buf[k] = perm[j]
                    j += 1
                else:
                    buf[k] = perm[i]
                    i += 1
                k += 1
            while i < mid:
                buf[k] = perm[i]
                i += 1
                k += 1
            while j < hi:
                buf[k] = perm[j]
                j += 1
                k += 1
        nxt[w] = starts[runs]
        perm, buf = buf, perm
        starts = nxt[: w + 1]
    return perm


@njit(cache=True, nogil=True)
def _time_keys(times: np.ndarray) -> tuple[np.ndarray, bool]:
    """Each time packed into one int64 that sorts as the time sorts lexicographically, and
    whether the times fit (63 bits)."""
    d, n = times.shape
    tk = np.zeros(n, np.int64)
    if n == 0:
        return tk, True
    lows, bits, total = row_bits(times)
    if total > 63:
        return tk, False
    for i in range(n):
        v = 0
        for j in range(d):
            v = (v << bits[j]) | (times[j, i] - lows[j])
        tk[i] = v
    return tk, True


@njit(cache=True, nogil=True)
def _sort_group_times(perm: np.ndarray, tk: np.ndarray, lo: int, hi: int) -> None:
    """Order ``perm[lo:hi]`` by time key (in place)."""
    ordered = True
    for i in range(lo + 1, hi):
        if tk[perm[i]] < tk[perm[i - 1]]:
            ordered = False
            break
    if ordered:
        return
    if hi - lo <= _SMALL_GROUP:
        for i in range(lo + 1, hi):
            x = perm[i]
            j = i - 1
            while j >= lo and tk[perm[j]] > tk[x]:
                perm[j + 1] = perm[j]
                j -= 1
            perm[j + 1] = x
        return
    seg = perm[lo:hi].copy()
    order = np.argsort(tk[seg])
    for i in range(hi - lo):
        perm[lo + i] = seg[order[i]]


@njit(cache=True, nogil=True)
def merge_consolidate(
    codes: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    bounds: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(first, sums, ok) for records concatenated from sorted batches (batch ``i`` at
    ``bounds[i]:bounds[i+1]``, times already advanced): the index of each surviving record
    in (code, key, value, time) order and its summed diff, as
    ``sort_kernels.consolidate_rows_order`` gives them. ``ok`` is False when the times do
    not pack into 63 bits (then sort instead)."""
    tk, ok = _time_keys(times)
    if not ok:
        z = np.zeros(0, np.int64)
        return z, z, False
    perm = _merge_runs(codes, keys, vals, tk, bounds, exact)
    n = perm.shape[0]
    first = np.empty(n, np.int64)
    sums = np.empty(n, np.int64)
    m = 0
    lo = 0
    while lo < n:  # a group of equal rows: its times in order, then equal times summed
        hi = lo + 1
        ordered = True
        while hi < n and _compare_rows(codes, keys, vals, perm[hi], perm[lo], exact) == 0:
            ordered = ordered and tk[perm[hi - 1]] <= tk[perm[hi]]
            hi += 1
        if not ordered:
            _sort_group_times(perm, tk, lo, hi)
        g = lo
        while g < hi:
            head = perm[g]
            s = diffs[head]
            h = g + 1
            while h < hi and tk[perm[h]] == tk[head]:
                s += diffs[perm[h]]
                h += 1
            if s != 0:
                first[m] = head
                sums[m] = s
                m += 1
            g = h
        lo = hi
    return first[:m], sums[:m], True


@njit(cache=True, nogil=True)
def merge_table(
    table: np.ndarray,
    key_lo: np.ndarray,
    key_hi: np.ndarray,
    kk: int,
    kv: int,
    since: np.ndarray,
    exact: bool,
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Keys ``key_lo[b]:key_hi[b]`` of each batch ``b`` of a seek table, unpacked with
    their times advanced by ``since`` (``seek.unpack_table``), merged and consolidated, in
    one call: (True, codes, keys, offsets, vals, times, diffs) of the merged batch; or,
    when the times do not pack into 63 bits, (False, codes, keys, -, vals, times, diffs)
    of the unpacked records, for a sort."""
    d = since.shape[1]
    codes, keys, vals, times, diffs, bounds = unpack_table(table, key_lo, key_hi, kk, kv, d, since)
    first, sums, ok = merge_consolidate(codes, keys, vals, times, diffs, bounds, exact)
    if not ok:
        return False, codes, keys, bounds, vals, times, diffs
    o_codes, o_keys, offsets, o_vals, o_times = trace_arrays(first, codes, keys, vals, times, exact)
    return True, o_codes, o_keys, offsets, o_vals, o_times, sums


@njit(cache=True, nogil=True)
def merge_whole(
    table: np.ndarray, kk: int, kv: int, since: np.ndarray, exact: bool
) -> tuple[
    bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]:
    """:func:`merge_table` of every key of every batch of ``table`` (each row's key count is
    in the row), and the merged batch's own seek row (``sort_kernels.batch_row``; empty when
    the batch needs a radix index)."""
    key_lo = np.zeros(table.shape[0], np.int64)
    key_hi = table[:, 6].copy()
    ok, codes, keys, offsets, vals, times, diffs = merge_table(
        table, key_lo, key_hi, kk, kv, since, exact
    )
    own = ok and codes.shape[0] < RADIX_FROM  # else TraceBatch.addresses builds the row
    row = batch_row(codes, keys, offsets, vals, times, diffs) if own else np.zeros(0, np.int64)
    return ok, codes, keys, offsets, vals, times, diffs, row
