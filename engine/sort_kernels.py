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

__all__ = ["consolidate_order", "key_starts"]


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
