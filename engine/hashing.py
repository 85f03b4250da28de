"""64-bit mixing for key codes and the ``hash`` function (vectorised, wrapping arithmetic)."""

from __future__ import annotations

import numpy as np
from numba import njit

from engine import parallel

__all__ = ["SPLIT_FROM", "key_codes", "mix64", "row_codes", "row_codes_into"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
SPLIT_FROM = 1 << 16  # rows from which key_codes hashes on two threads


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array."""
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def key_codes(keys: np.ndarray) -> np.ndarray:
    """One int64 per key row of a ``(kk, n)`` block: the value itself for a single column
    (exact), a mixed hash for several columns (equal keys, equal codes; collisions possible),
    zeros for no columns. From ``SPLIT_FROM`` rows two threads hash a half each."""
    kk, n = keys.shape
    if kk == 0:
        return np.zeros(n, dtype=np.int64)
    if kk == 1:
        return keys[0]
    cols, out = np.arange(kk, dtype=np.int64), np.empty(n, dtype=np.int64)
    if n < SPLIT_FROM or parallel.threads() < 2:  # the same kernel either way: one compile
        row_codes_into(keys, cols, out, 0, n)
        return out
    h = n // 2
    parallel.both(
        lambda: row_codes_into(keys, cols, out, 0, h), lambda: row_codes_into(keys, cols, out, h, n)
    )
    return out


@njit(cache=True, nogil=True)
def _mix64_scalar(x: np.uint64) -> np.uint64:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True)
def row_codes(data: np.ndarray, key_cols: np.ndarray) -> np.ndarray:
    """:func:`key_codes` of the key columns ``key_cols`` of a ``(ncols, n)`` block, in one
    compiled pass (numpy's version is a dozen whole-array operations per key column; a
    compiled call per row costs ~30 ns in reference counts)."""
    out = np.empty(data.shape[1], np.int64)
    row_codes_into(data, key_cols, out, 0, data.shape[1])
    return out


@njit(cache=True, nogil=True)
def row_codes_into(
    data: np.ndarray, key_cols: np.ndarray, out: np.ndarray, lo: int, hi: int
) -> None:
    """:func:`row_codes` of rows ``lo:hi``, written to ``out[lo:hi]`` (two threads each
    write their half of one array, with nothing to join after)."""
    kk = key_cols.shape[0]
    for i in range(lo, hi):
        if kk == 0:
            out[i] = 0
        elif kk == 1:
            out[i] = data[key_cols[0], i]
        else:
            h = np.uint64(0x9E3779B97F4A7C15)
            for j in range(kk):
                h = _mix64_scalar(h ^ np.uint64(data[key_cols[j], i]))
            out[i] = np.int64(h)
