"""Compiled seeks into one trace batch: find many keys, gather their records, pair them.

These are the per-batch loops of ``Spine.gather`` and ``join_pairs``: a binary search per
query key on the batch's sorted codes (with a column check where codes are hashes), then a
copy of each matched key's record range. numpy needs a dozen calls per batch for this; the
compiled loop needs one (numba, cached on disk). ``engine.trace.cursor`` holds the numpy
reference the tests compare against.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["gather_batch", "pair_batches"]


@njit(cache=True, nogil=True)
def _lower_bound(codes: np.ndarray, code: int, base: int) -> int:
    """First position ``>= base`` whose code is ``>= code``, given every code before
    ``base`` is smaller: a galloping search from ``base``. Queries in ascending order each
    start from the previous answer, so their searches stay short and touch nearby memory
    instead of walking a binary search down from the whole array's middle."""
    m = codes.shape[0]
    if base >= m or codes[base] >= code:
        return base
    lo = base  # codes[lo] < code
    step = 1
    while lo + step < m and codes[lo + step] < code:
        lo += step
        step *= 2
    hi = min(lo + step, m)  # codes[hi] >= code, or hi == m
    lo += 1
    while lo < hi:
        mid = (lo + hi) // 2
        if codes[mid] < code:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _find(
    lo: int,
    code: int,
    q_keys: np.ndarray,
    qi: int,
    codes: np.ndarray,
    keys: np.ndarray,
    exact: bool,
) -> int:
    """Index of the key equal to query ``qi`` in a batch, or -1; ``lo`` is the lower bound
    of ``code`` in ``codes``."""
    m = codes.shape[0]
    if exact:
        if lo < m and codes[lo] == code:
            return lo
        return -1
    j = lo
    while j < m and codes[j] == code:
        same = True
        for r in range(keys.shape[0]):
            if keys[r, j] != q_keys[r, qi]:
                same = False
                break
        if same:
            return j
        j += 1
    return -1


@njit(cache=True, nogil=True)
def _find_all(
    q_codes: np.ndarray, q_keys: np.ndarray, codes: np.ndarray, keys: np.ndarray, exact: bool
) -> np.ndarray:
    """For each query, the index of its key in the batch or -1. Queries may come in any
    order; runs of ascending codes (the usual case: queries are sorted keys) gallop."""
    nq = q_codes.shape[0]
    hit = np.empty(nq, np.int64)
    base = 0
    for i in range(nq):
        code = q_codes[i]
        if i > 0 and code < q_codes[i - 1]:
            base = 0
        base = _lower_bound(codes, code, base)
        hit[i] = _find(base, code, q_keys, i, codes, keys, exact)
    return hit


@njit(cache=True, nogil=True)
def gather_batch(
    q_codes: np.ndarray,
    q_keys: np.ndarray,
    codes: np.ndarray,
    keys: np.ndarray,
    offsets: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every record of every query key found in the batch: (owner, vals, times, diffs)."""
    nq = q_codes.shape[0]
    hit = _find_all(q_codes, q_keys, codes, keys, exact)
    n = 0
    for i in range(nq):
        j = hit[i]
        if j >= 0:
            n += offsets[j + 1] - offsets[j]
    owner = np.empty(n, np.int64)
    ov = np.empty((vals.shape[0], n), np.int64)
    ot = np.empty((times.shape[0], n), np.int64)
    od = np.empty(n, np.int64)
    p = 0
    for i in range(nq):
        j = hit[i]
        if j < 0:
            continue
        for rec in range(offsets[j], offsets[j + 1]):
            owner[p] = i
            for c in range(vals.shape[0]):
                ov[c, p] = vals[c, rec]
            for c in range(times.shape[0]):
                ot[c, p] = times[c, rec]
            od[p] = diffs[rec]
            p += 1
    return owner, ov, ot, od


@njit(cache=True, nogil=True)
def pair_batches(
    a_codes: np.ndarray,
    a_keys: np.ndarray,
    a_offsets: np.ndarray,
    b_codes: np.ndarray,
    b_keys: np.ndarray,
    b_offsets: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Record pairs with equal keys: (a record, a key, b record, b key)."""
    na = a_codes.shape[0]
    hit = _find_all(a_codes, a_keys, b_codes, b_keys, exact)
    n = 0
    for i in range(na):
        j = hit[i]
        if j >= 0:
            n += (a_offsets[i + 1] - a_offsets[i]) * (b_offsets[j + 1] - b_offsets[j])
    ai = np.empty(n, np.int64)
    ak = np.empty(n, np.int64)
    bi = np.empty(n, np.int64)
    bk = np.empty(n, np.int64)
    p = 0
    for i in range(na):
        j = hit[i]
        if j < 0:
            continue
        for x in range(a_offsets[i], a_offsets[i + 1]):
            for y in range(b_offsets[j], b_offsets[j + 1]):
                ai[p] = x
                ak[p] = i
                bi[p] = y
                bk[p] = j
                p += 1
    return ai, ak, bi, bk
