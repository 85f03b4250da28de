"""Compiled reduce step for set-like kernels (distinct, threshold): no value columns in or out.

For each candidate time ``c`` of key ``k`` the input accumulation is one number (the row's
count at ``c``), the desired output is 1 if it reaches ``at_least`` and 0 otherwise, and the
output accumulation is one number; ``E = desired - output`` and the Möbius inversion over the
candidate grid (``Grid.neighbours``/``signs``) gives the output differences. This is the
general algorithm of ``engine.operators.reduce`` specialised to scalars, for any number of
time coordinates; tests compare the two.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["scalar_differences"]


@njit(cache=True, nogil=True)
def _leq(a: np.ndarray, i: int, b: np.ndarray, j: int) -> bool:
    for c in range(a.shape[0]):  # noqa: SIM110 - an explicit loop compiles to tight code
        if a[c, i] > b[c, j]:
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
) -> np.ndarray:
    order = np.argsort(owner, kind="mergesort")
    lo = np.zeros(nkeys + 1, np.int64)
    for i in range(owner.shape[0]):
        lo[owner[i] + 1] += 1
    for k in range(nkeys):
        lo[k + 1] += lo[k]
    acc = np.zeros(c_owner.shape[0], np.int64)
    for i in range(c_owner.shape[0]):
        k = c_owner[i]
        s = 0
        for p in range(lo[k], lo[k + 1]):
            rec = order[p]
            if _leq(times, rec, c_times, i):
                s += diffs[rec]
        acc[i] = s
    return acc


@njit(cache=True, nogil=True)
def scalar_differences(
    nkeys: int,
    c_owner: np.ndarray,
    c_times: np.ndarray,
    neighbours: np.ndarray,
    signs: np.ndarray,
    in_owner: np.ndarray,
    in_times: np.ndarray,
    in_diffs: np.ndarray,
    out_owner: np.ndarray,
    out_times: np.ndarray,
    out_diffs: np.ndarray,
    at_least: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(candidate index, output difference) for candidates whose difference is not zero."""
    acc_in = _accumulate(in_owner, in_times, in_diffs, c_owner, c_times, nkeys)
    acc_out = _accumulate(out_owner, out_times, out_diffs, c_owner, c_times, nkeys)
    n = c_owner.shape[0]
    diff = np.zeros(n, np.int64)
    for i in range(n):
        e = (1 if acc_in[i] >= at_least else 0) - acc_out[i]
        if e == 0:
            continue
        diff[i] += e
        for s in range(neighbours.shape[0]):
            nb = neighbours[s, i]
            if nb >= 0:
                diff[nb] += signs[s] * e
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
