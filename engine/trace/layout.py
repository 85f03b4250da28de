"""Which columns of a row form an arrangement's key, and how rows split and reassemble."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Layout"]


@dataclass(frozen=True, slots=True)
class Layout:
    """A row of ``ncols`` columns split into key columns (in the order given) and value
    columns (the rest, in row order)."""

    ncols: int
    key_cols: tuple[int, ...]
    val_cols: tuple[int, ...]
    # the column tuples as int64 arrays, for compiled code
    key_index: np.ndarray = field(init=False, compare=False, repr=False)
    val_index: np.ndarray = field(init=False, compare=False, repr=False)
    # whether the key is the whole row in column order (``by_self``): its keys are the rows
    whole_row: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key_index", np.array(self.key_cols, dtype=np.int64))
        object.__setattr__(self, "val_index", np.array(self.val_cols, dtype=np.int64))
        object.__setattr__(self, "whole_row", self.key_cols == tuple(range(self.ncols)))

    @classmethod
    def by_key(cls, ncols: int, key_cols: Sequence[int]) -> Layout:
        keys = tuple(int(k) for k in key_cols)
        vals = tuple(i for i in range(ncols) if i not in keys)
        return cls(ncols, keys, vals)

    @classmethod
    def by_self(cls, ncols: int) -> Layout:
        return cls(ncols, tuple(range(ncols)), ())

    @property
    def exact_codes(self) -> bool:
        """Whether key codes identify keys exactly (no hash collisions possible)."""
        return len(self.key_cols) <= 1

    def split(self, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The key and value columns of ``(ncols, n)`` rows; an arrangement by the whole
        row (in column order) takes ``data`` itself as its keys, without a copy (C order, as
        the copy would be: one signature for the kernels that read them)."""
        if self.whole_row:
            data = np.ascontiguousarray(data)
            return data, data[:0]
        return data[list(self.key_cols)], data[list(self.val_cols)]

    def assemble(self, keys: np.ndarray, vals: np.ndarray) -> np.ndarray:
        n = keys.shape[1] if keys.shape[0] else vals.shape[1]
        out = np.empty((self.ncols, n), dtype=np.int64)
        if self.key_cols:
            out[list(self.key_cols)] = keys
        if self.val_cols:
            out[list(self.val_cols)] = vals
        return out
