"""Seeking keys in sorted trace batches, and expanding ranges, without per-key Python.

``match_keys`` finds, for many query keys at once, the positions of equal keys in a batch
(``np.searchsorted`` on key codes, then a column check where codes are hashes).
``expand_ranges`` turns ``[start, end)`` ranges into the flat positions they cover.
"""

from __future__ import annotations

import numpy as np

__all__ = ["expand_ranges", "match_keys"]


def expand_ranges(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, position) for every position in every range; owner indexes the ranges."""
    counts = ends - starts
    total = int(counts.sum()) if counts.shape[0] else 0
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    owner = np.repeat(np.arange(starts.shape[0], dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    pos = np.arange(total, dtype=np.int64) - np.repeat(first - starts, counts)
    return owner, pos


def match_keys(
    q_codes: np.ndarray,
    q_keys: np.ndarray,
    codes: np.ndarray,
    keys: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(i, j)`` with query key ``i`` equal to batch key ``j``.

    ``codes`` is sorted; ``keys`` is ``(kk, m)`` with the batch's keys. With exact codes a key
    matches at most one position; with hashed codes every equal-code position is checked.
    """
    lo = np.searchsorted(codes, q_codes, side="left")
    if exact:
        hit = lo < codes.shape[0]
        hit[hit] = codes[lo[hit]] == q_codes[hit]
        qi = np.flatnonzero(hit)
        return qi, lo[qi]
    hi = np.searchsorted(codes, q_codes, side="right")
    qi, pos = expand_ranges(lo, hi)
    if qi.shape[0]:
        same = np.ones(qi.shape[0], dtype=bool)
        for r in range(keys.shape[0]):
            same &= keys[r][pos] == q_keys[r][qi]
        qi, pos = qi[same], pos[same]
    return qi, pos
