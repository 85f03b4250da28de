"""Compiled sorting and consolidation: one call instead of a dozen numpy calls per batch.

``consolidate_order(keys, diffs)`` sorts rows by the rows of ``keys`` (first row most
significant; a stable lexicographic sort done as successive stable merge sorts), sums the
diffs of equal rows and drops zero sums. It returns, for each surviving group, the index of
its first row (into the original arrays) and its summed diff. ``engine.consolidate`` holds
the numpy reference (``lex_order``, ``group_starts``, ``segment_sums``) it is tested against.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["COMPILED_BELOW", "consolidate_order", "consolidate_rows_order", "key_starts"]

COMPILED_BELOW = 4096  # rows: above this numpy's lexsort beats the compiled merge sorts


@njit(cache=True, nogil=True)
def consolidate_order(keys: np.ndarray, diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r, n = keys.shape
    order = np.arange(n)
    for k in range(r - 1, -1, -1):
        col = np.empty(n, np.int64)
        for i in range(n):
            col[i] = keys[k, order[i]]
        order = order[np.argsort(col, kind="mergesort")]
    first = np.empty(n, np.int64)
    sums = np.empty(n, np.int64)
    g = -1
    for i in range(n):
        row = order[i]
        new = i == 0
        if not new:
            prev = order[i - 1]
            for k in range(r):
                if keys[k, row] != keys[k, prev]:
                    new = True
                    break
        if new:
            g += 1
            first[g] = row
            sums[g] = diffs[row]
        else:
            sums[g] += diffs[row]
    m = 0
    for j in range(g + 1):
        if sums[j] != 0:
            first[m] = first[j]
            sums[m] = sums[j]
            m += 1
    return first[:m], sums[:m]


@njit(cache=True, nogil=True)
def key_starts(keys: np.ndarray) -> np.ndarray:
    """Positions where a sorted ``(r, n)`` key block changes (the first position included)."""
    r, n = keys.shape
    out = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        new = i == 0
        if not new:
            for k in range(r):
                if keys[k, i] != keys[k, i - 1]:
                    new = True
                    break
        if new:
            out[m] = i
            m += 1
    return out[:m]


def consolidate_rows_order(keys: np.ndarray, diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`consolidate_order` for any size: compiled for small inputs, numpy above
    ``COMPILED_BELOW`` rows."""
    if keys.shape[1] < COMPILED_BELOW:
        return consolidate_order(np.ascontiguousarray(keys), np.ascontiguousarray(diffs))
    from engine.consolidate import group_starts, lex_order, segment_sums

    rows = list(keys)
    order = lex_order(rows)
    starts = group_starts([r[order] for r in rows], keys.shape[1])
    sums = segment_sums(diffs[order], starts)
    first = order[starts]
    keep = sums != 0
    return first[keep], sums[keep]


@njit(cache=True, nogil=True)
def trace_arrays(
    codes: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A trace batch's arrays in one pass: records sorted by (code, key, value, time) and
    consolidated, then the distinct keys with their offsets. Returns (key codes, keys,
    offsets, vals, times, diffs). The numpy reference is ``TraceBatch.from_records``'s
    large-input path."""
    n = codes.shape[0]
    kk, kv, d = keys.shape[0], vals.shape[0], times.shape[0]
    sk = np.empty((1 + (0 if exact else kk) + kv + d, n), np.int64)
    sk[0] = codes
    r = 1
    if not exact:
        for j in range(kk):
            sk[r] = keys[j]
            r += 1
    for j in range(kv):
        sk[r] = vals[j]
        r += 1
    for j in range(d):
        sk[r] = times[j]
        r += 1
    first, sums = consolidate_order(sk, diffs)
    m = first.shape[0]
    o_codes = np.empty(m, np.int64)
    o_keys = np.empty((kk, m), np.int64)
    o_vals = np.empty((kv, m), np.int64)
    o_times = np.empty((d, m), np.int64)
    for i in range(m):
        f = first[i]
        o_codes[i] = codes[f]
        for j in range(kk):
            o_keys[j, i] = keys[j, f]
        for j in range(kv):
            o_vals[j, i] = vals[j, f]
        for j in range(d):
            o_times[j, i] = times[j, f]
    starts = np.empty(m + 1, np.int64)
    u = 0
    for i in range(m):
        new = i == 0 or o_codes[i] != o_codes[i - 1]
        if not new and not exact:
            for j in range(kk):
                if o_keys[j, i] != o_keys[j, i - 1]:
                    new = True
                    break
        if new:
            starts[u] = i
            u += 1
    starts[u] = m
    u_codes = np.empty(u, np.int64)
    u_keys = np.empty((kk, u), np.int64)
    for i in range(u):
        u_codes[i] = o_codes[starts[i]]
        for j in range(kk):
            u_keys[j, i] = o_keys[j, starts[i]]
    return u_codes, u_keys, starts[: u + 1].copy(), o_vals, o_times, sums
