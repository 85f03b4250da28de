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
def _find(
    code: int, q_keys: np.ndarray, qi: int, codes: np.ndarray, keys: np.ndarray, exact: bool
) -> int:
    """Index of the key equal to query ``qi`` in a batch, or -1."""
    m = codes.shape[0]
    lo = np.searchsorted(codes, code)
    if exact:
        if lo < m and codes[lo] == code:
            return int(lo)
        return -1
    j = lo
    while j < m and codes[j] == code:
        same = True
        for r in range(keys.shape[0]):
            if keys[r, j] != q_keys[r, qi]:
                same = False
                break
        if same:
            return int(j)
        j += 1
    return -1


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
    hit = np.empty(nq, np.int64)
    n = 0
    for i in range(nq):
        j = _find(q_codes[i], q_keys, i, codes, keys, exact)
        hit[i] = j
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
    hit = np.empty(na, np.int64)
    n = 0
    for i in range(na):
        j = _find(a_codes[i], a_keys, i, b_codes, b_keys, exact)
        hit[i] = j
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
