"""Consolidation: sum the diffs of equal (row, time) updates and drop zeros, by sorting.

Every function here works on whole arrays: a sort (packed integer keys, ``np.lexsort`` or
``np.argsort``), a boundary mask between neighbours, and a segmented sum
(``np.add.reduceat``). No Python loop runs over records. :func:`consolidate`
itself is compiled: few rows in one call (``sort_kernels.consolidate_columns``), many by a
packed sort and one pass that sums each group (``sort_kernels.consolidate_rows_order``).
"""

from __future__ import annotations

import numpy as np

from engine import sort_kernels
from engine.batch import UpdateBatch

__all__ = ["consolidate", "group_starts", "lex_order", "segment_sums"]


def lex_order(keys: list[np.ndarray]) -> np.ndarray:
    """Stable permutation sorting rows by ``keys[0]``, then ``keys[1]``, ... (1-D arrays).

    From ``PACKED_FROM`` rows, one packed integer sort when the keys fit in 64 bits
    (:func:`engine.sort_kernels.packed_order`); otherwise ``np.lexsort``."""
    if not keys:
        return np.zeros(0, dtype=np.int64)
    if keys[0].shape[0] >= sort_kernels.PACKED_FROM:
        order = sort_kernels.packed_order(keys)
        if order is not None:
            return order
    if len(keys) == 1:
        return np.argsort(keys[0], kind="stable")
    return np.lexsort(keys[::-1])


def group_starts(keys: list[np.ndarray], n: int) -> np.ndarray:
    """Boolean mask, true where a sorted row differs from its predecessor (first row true)."""
    starts = np.empty(n, dtype=bool)
    if n == 0:
        return starts
    starts[0] = True
    if not keys:
        starts[1:] = False
        return starts
    diff = keys[0][1:] != keys[0][:-1]
    for k in keys[1:]:
        diff |= k[1:] != k[:-1]
    starts[1:] = diff
    return starts


def segment_sums(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums of ``values`` over the segments that begin where ``starts`` is true."""
    if values.shape[0] == 0:
        return values
    return np.add.reduceat(values, np.flatnonzero(starts))


def consolidate(batch: UpdateBatch) -> UpdateBatch:
    """Sorted by (row, time); equal (row, time) summed; zero diffs dropped."""
    n = len(batch)
    if n == 0:
        return batch
    if n < sort_kernels.PACKED_FROM:  # few rows: one compiled call (C order: one signature)
        data, times = np.ascontiguousarray(batch.data), np.ascontiguousarray(batch.times)
        return UpdateBatch(*sort_kernels.consolidate_columns(data, times, batch.diffs))
    first, diffs = sort_kernels.consolidate_rows_order([*batch.data, *batch.times], batch.diffs)
    return UpdateBatch(
        np.take(batch.data, first, axis=1), np.take(batch.times, first, axis=1), diffs
    )
