"""Compiled reduce step for set-like kernels (distinct, threshold): no value columns in or out.

For each candidate time ``c`` of key ``k`` the input accumulation is one number (the row's
count at ``c``), the desired output is 1 if it reaches ``at_least`` and 0 otherwise, and the
output accumulation is one number; ``E = desired - output`` and the Möbius inversion over the
candidate grid (``Grid.preds``/``signs``) gives the output differences. This is the
general algorithm of ``engine.operators.reduce`` specialised to scalars, for any number of
time coordinates; tests compare the two.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.wrapping import wrapping_add

__all__ = ["group_by_owner", "scalar_differences"]


@njit(cache=True, nogil=True)
def _leq(a: np.ndarray, i: int, b: np.ndarray, j: int) -> bool:
    for c in range(a.shape[0]):  # noqa: SIM110 - an explicit loop compiles to tight code
        if a[c, i] > b[c, j]:
            return False
    return True


PAIRS_UP_TO = 256  # per key, candidates x records up to which the pairwise sum is cheapest


@njit(cache=True, nogil=True)
def group_by_owner(owner: np.ndarray, nkeys: int) -> tuple[np.ndarray, np.ndarray]:
    """A stable counting sort by owner: (order, start of each key's run, length nkeys + 1)."""
    lo = np.zeros(nkeys + 1, np.int64)
    for i in range(owner.shape[0]):
        lo[owner[i] + 1] += 1
    for k in range(nkeys):
        lo[k + 1] += lo[k]
    fill = lo[:-1].copy()
    order = np.empty(owner.shape[0], np.int64)
    for i in range(owner.shape[0]):
        order[fill[owner[i]]] = i
        fill[owner[i]] += 1
    return order, lo


@njit(cache=True, nogil=True)
def _shares_rest(c_times: np.ndarray) -> bool:
    """Whether every candidate has the same coordinates after the first (a line)."""
    for c in range(1, c_times.shape[0]):
        for i in range(1, c_times.shape[1]):
            if c_times[c, i] != c_times[c, 0]:
                return False
    return True


@njit(cache=True, nogil=True)
def _accumulate(
    owner: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    c_owner: np.ndarray,
    c_times: np.ndarray,
    nkeys: int,
    pairs_up_to: int,
) -> np.ndarray:
    """Input (or output) accumulation at every candidate, key by key: the sum over the
    key's records at times ``<=`` the candidate. A key with few (candidates x records) sums
    pairwise; on a line (every candidate sharing its coordinates after the first) a bigger
    key sorts the records that pass those coordinates and sweeps them beside its sorted
    candidates, ``O((candidates + records) log)`` instead of their product."""
    order, lo = group_by_owner(owner, nkeys)
    c_order, c_lo = group_by_owner(c_owner, nkeys)
    line = _shares_rest(c_times)
    d = times.shape[0]
    acc = np.zeros(c_owner.shape[0], np.int64)
    for k in range(nkeys):
        h0, h1 = lo[k], lo[k + 1]
        c0, c1 = c_lo[k], c_lo[k + 1]
        if c1 == c0 or h1 == h0:
            continue
        if not line or (c1 - c0) * (h1 - h0) <= pairs_up_to:
            for ci in range(c0, c1):
                i = c_order[ci]
                s = 0
                for p in range(h0, h1):
                    rec = order[p]
                    if _leq(times, rec, c_times, i):
                        s = wrapping_add(s, diffs[rec])
                acc[i] = s
            continue
        rt = np.empty(h1 - h0, np.int64)
        rd = np.empty(h1 - h0, np.int64)
        m = 0
        for p in range(h0, h1):
            rec = order[p]
            ok = True
            for c in range(1, d):
                if times[c, rec] > c_times[c, c_order[c0]]:
                    ok = False
                    break
            if ok:
                rt[m] = times[0, rec]
                rd[m] = diffs[rec]
                m += 1
        r_sorted = np.argsort(rt[:m])
        cands = c_order[c0:c1]
        c_sorted = cands[np.argsort(c_times[0][cands])]
        p = 0
        s = 0
        for i in c_sorted:
            t = c_times[0, i]
            while p < m and rt[r_sorted[p]] <= t:
                s = wrapping_add(s, rd[r_sorted[p]])
                p += 1
            acc[i] = s
    return acc


@njit(cache=True, nogil=True)
def scalar_differences(
    nkeys: int,
    c_owner: np.ndarray,
    c_times: np.ndarray,
    preds: np.ndarray,
    signs: np.ndarray,
    in_owner: np.ndarray,
    in_times: np.ndarray,
    in_diffs: np.ndarray,
    out_owner: np.ndarray,
    out_times: np.ndarray,
    out_diffs: np.ndarray,
    at_least: int,
    pairs_up_to: int = PAIRS_UP_TO,
) -> tuple[np.ndarray, np.ndarray]:
    """(candidate index, output difference) for candidates whose difference is not zero."""
    acc_in = _accumulate(in_owner, in_times, in_diffs, c_owner, c_times, nkeys, pairs_up_to)
    acc_out = _accumulate(out_owner, out_times, out_diffs, c_owner, c_times, nkeys, pairs_up_to)
    n = c_owner.shape[0]
    e = np.empty(n, np.int64)
    for i in range(n):
        e[i] = (1 if acc_in[i] >= at_least else 0) - acc_out[i]
    diff = e.copy()
    for s in range(preds.shape[0]):
        for i in range(n):
            p = preds[s, i]
            if p >= 0:
                diff[i] += signs[s] * e[p]
    m = 0
    for i in range(n):
        if diff[i] != 0:
            m += 1
    idx = np.empty(m, np.int64)
    out = np.empty(m, np.int64)
    m = 0
    for i in range(n):
        if diff[i] != 0:
            idx[m] = i
            out[m] = diff[i]
            m += 1
    return idx, out
