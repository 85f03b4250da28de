"""Columnar update batches: ``(data, time, diff)`` triples as numpy arrays.

An :class:`UpdateBatch` holds ``n`` updates of rows with ``k`` columns and ``d`` time
coordinates:

* ``data``  — ``(k, n)`` int64: one contiguous row per column. Floats travel as their
  canonical IEEE bits, bools as 0/1, strings as interned ids (see ``engine.schema``).
* ``times`` — ``(d, n)`` int64: one contiguous row per time coordinate.
* ``diffs`` — ``(n,)`` int64: signed multiplicity changes.
* ``consolidated`` — True only where the producer guarantees that no two updates share a
  row and a time and no diff is zero (a trace batch's updates, a reduce's output), so a
  reader may skip consolidating them; False says nothing.

Batches are immutable by convention: operators build new arrays, never write into inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import SchemaError, TimeError

__all__ = ["UpdateBatch"]

_EMPTY = np.zeros(0, dtype=np.int64)


# Not frozen, for the same reason as ``TraceBatch``: a frozen constructor costs 3x as much.
@dataclass(slots=True, eq=False)
class UpdateBatch:
    data: np.ndarray
    times: np.ndarray
    diffs: np.ndarray
    consolidated: bool = False

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def empty(cls, ncols: int, dims: int) -> UpdateBatch:
        return cls(
            np.zeros((ncols, 0), dtype=np.int64),
            np.zeros((dims, 0), dtype=np.int64),
            _EMPTY,
        )

    @classmethod
    def build(cls, data: np.ndarray, times: np.ndarray, diffs: np.ndarray) -> UpdateBatch:
        """Validate shapes and dtypes, then wrap (arrays are made contiguous int64)."""
        data = np.ascontiguousarray(data, dtype=np.int64)
        times = np.ascontiguousarray(times, dtype=np.int64)
        diffs = np.ascontiguousarray(diffs, dtype=np.int64)
        if data.ndim != 2 or times.ndim != 2 or diffs.ndim != 1:
            raise SchemaError("batch arrays must be (k, n) data, (d, n) times, (n,) diffs")
        n = diffs.shape[0]
        if data.shape[1] != n or times.shape[1] != n:
            raise SchemaError(
                f"batch arrays disagree on length: data {data.shape[1]}, "
                f"times {times.shape[1]}, diffs {n}"
            )
        if times.shape[0] < 1:
            raise TimeError("times need at least one coordinate")
        if n and int(times.min()) < 0:
            raise TimeError("times are non-negative integers")
        return cls(data, times, diffs)

    # -- shape --------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.diffs.shape[0]

    @property
    def ncols(self) -> int:
        return self.data.shape[0]

    @property
    def dims(self) -> int:
        return self.times.shape[0]

    # -- derived batches ----------------------------------------------------------------
    def take(self, index: np.ndarray) -> UpdateBatch:
        """Updates at ``index`` (integer positions or a boolean mask)."""
        if index.dtype == np.bool_:
            return UpdateBatch(self.data[:, index], self.times[:, index], self.diffs[index])
        return UpdateBatch(
            np.take(self.data, index, axis=1),
            np.take(self.times, index, axis=1),
            np.take(self.diffs, index),
        )

    def negate(self) -> UpdateBatch:
        return UpdateBatch(self.data, self.times, -self.diffs)

    def with_data(self, data: np.ndarray) -> UpdateBatch:
        return UpdateBatch(np.ascontiguousarray(data, dtype=np.int64), self.times, self.diffs)

    def enter(self) -> UpdateBatch:
        """Times gain a trailing zero coordinate (entering a nested scope)."""
        zeros = np.zeros((1, len(self)), dtype=np.int64)
        return UpdateBatch(self.data, np.concatenate([self.times, zeros]), self.diffs)

    def leave(self) -> UpdateBatch:
        """Times lose their last coordinate (leaving a nested scope)."""
        return UpdateBatch(self.data, self.times[:-1], self.diffs)

    def nbytes(self) -> int:
        return int(self.data.nbytes + self.times.nbytes + self.diffs.nbytes)

    @staticmethod
    def concat(batches: Sequence[UpdateBatch], ncols: int, dims: int) -> UpdateBatch:
        if len(batches) == 1:  # the usual case, every round of a loop
            one = batches[0]
            return one if one.diffs.shape[0] else UpdateBatch.empty(ncols, dims)
        parts = [b for b in batches if b.diffs.shape[0]]
        if not parts:
            return UpdateBatch.empty(ncols, dims)
        if len(parts) == 1:
            return parts[0]
        return UpdateBatch(
            np.concatenate([b.data for b in parts], axis=1),
            np.concatenate([b.times for b in parts], axis=1),
            np.concatenate([b.diffs for b in parts]),
        )
