"""A trace batch's arrays from unsorted records: one packed sort and one compiled pass.

Each record packs into one unsigned integer: its code's offset from the least code (high
bits; only the top ones when there are too many), then its value columns and time
coordinates (each ``column - least`` in the bits its range needs), then its index. One
``np.sort`` of these (numpy's SIMD sort) orders the records by (code, values, times); a
single compiled pass then checks what packing could not promise (codes ascending where
their low bits were dropped; records of one code having one key where codes hash keys),
sums equal records, drops zeros, and writes the arrays, reading values and times back out
of the packed integers. ``TraceBatch.from_records`` otherwise makes a dozen passes (sort,
check, group, gather); where this does not apply (more than 64 bits, or a failed check) it
still does. The results are the same; the tests compare them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.sort_kernels import bit_width
from engine.trace.seek import prefetch

__all__ = ["packed_arrange"]

_AHEAD = 16  # records ahead whose memory is asked for

PackedArrays = tuple[bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@njit(cache=True, nogil=True)
def _pack(
    codes: np.ndarray, vals: np.ndarray, times: np.ndarray
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """(applies, packed records, layout, least values): the layout holds the index bits,
    the code bits dropped, and the bits of each value column and time coordinate; the least
    values are the code's, then each column's. Does not apply when the values and times
    with the index need more than 64 bits, or the codes keep too few bits to be likely
    distinct (about ``2 log2 n``)."""
    kv, d, n = vals.shape[0], times.shape[0], codes.shape[0]
    r = kv + d
    layout = np.zeros(2 + r, np.int64)
    least = np.zeros(1 + r, np.int64)
    ib = max(1, bit_width(np.uint64(n - 1)))
    total = ib
    for j in range(r + 1):
        col = codes if j == 0 else (vals[j - 1] if j - 1 < kv else times[j - 1 - kv])
        lo = hi = col[0]
        for i in range(1, n):
            lo = min(lo, col[i])
            hi = max(hi, col[i])
        least[j] = lo
        width = bit_width(np.uint64(hi) - np.uint64(lo))
        if j:
            layout[1 + j] = width
        total += width
    code_bits = total - ib - layout[2:].sum()
    drop = max(0, total - 64)
    layout[0], layout[1] = ib, drop
    packed = np.arange(n).astype(np.uint64)
    if drop and code_bits - drop < 2 * ib + 4:
        return False, packed, layout, least
    shift = ib
    for j in range(r, -1, -1):
        col = codes if j == 0 else (vals[j - 1] if j - 1 < kv else times[j - 1 - kv])
        width = code_bits - drop if j == 0 else layout[1 + j]
        if width:
            s, base, cut = np.uint64(shift), np.uint64(least[j]), np.uint64(drop if j == 0 else 0)
            for i in range(n):
                packed[i] |= ((np.uint64(col[i]) - base) >> cut) << s
        shift += width
    return True, packed, layout, least


@njit(cache=True, nogil=True)
def _arrays(
    packed: np.ndarray,
    layout: np.ndarray,
    least: np.ndarray,
    codes: np.ndarray,
    keys: np.ndarray,
    diffs: np.ndarray,
    exact: bool,
) -> PackedArrays:
    """The arrays from the sorted packed records (see :func:`packed_arrange`), the value
    columns and time coordinates as the rows of one array."""
    n, kk, r = packed.shape[0], keys.shape[0], layout.shape[0] - 2
    ib, drop = np.uint64(layout[0]), layout[1]
    rest_bits = np.uint64(layout[2:].sum())
    z1 = np.zeros(0, np.int64)
    fail = (False, z1, np.zeros((kk, 0), np.int64), z1, np.zeros((r, 0), np.int64), z1)
    o_codes = np.empty(n, np.int64)
    o_keys = np.empty((kk, n), np.int64)
    offsets = np.empty(n + 1, np.int64)
    rest = np.empty((r, n), np.int64)
    o_diffs = np.empty(n, np.int64)
    low = (np.uint64(1) << ib) - np.uint64(1)
    m = nk = 0
    # the first record of the previous group, and its code
    prev, prev_code = np.int64(-1), np.int64(0)
    i = 0
    while i < n:
        if i + _AHEAD < n:  # ask for the memory of a record a few places ahead
            a = np.int64(packed[i + _AHEAD] & low)
            prefetch(diffs.ctypes.data + 8 * a)
            if drop:
                prefetch(codes.ctypes.data + 8 * a)
            for c in range(0 if exact else kk):
                prefetch(keys.ctypes.data + 8 * (c * n + a))
        x = np.int64(packed[i] & low)
        high = packed[i] >> ib
        # the code: read where its low bits were dropped, else out of the packed bits
        code = codes[x] if drop else least[0] + np.int64(high >> rest_bits)
        if prev >= 0 and code == prev_code:
            for c in range(0 if exact else kk):
                if keys[c, x] != keys[c, prev]:
                    return fail  # two keys share a code: the order is not by key
        elif prev >= 0 and code < prev_code:
            return fail  # codes out of order where their low bits were dropped
        prev, prev_code = x, code
        total = diffs[x]
        i += 1
        while i < n and (packed[i] >> ib) == high:  # the same record, unless codes differ
            y = np.int64(packed[i] & low)
            if drop and codes[y] != code:
                break
            for c in range(0 if exact else kk):
                if keys[c, y] != keys[c, x]:
                    return fail
            total += diffs[y]
            i += 1
        if total == 0:
            continue
        if nk == 0 or code != o_codes[nk - 1]:
            o_codes[nk] = code
            for c in range(kk):
                o_keys[c, nk] = keys[c, x]
            offsets[nk] = m
            nk += 1
        shift = np.uint64(0)
        for j in range(r - 1, -1, -1):  # value columns and time coordinates, unpacked
            width = np.uint64(layout[2 + j])
            field = (high >> shift) & ((np.uint64(1) << width) - np.uint64(1))
            rest[j, m] = least[1 + j] + np.int64(field)
            shift += width
        o_diffs[m] = total
        m += 1
    offsets[nk] = m
    return (
        True,
        o_codes[:nk].copy(),
        o_keys[:, :nk].copy(),
        offsets[: nk + 1].copy(),
        rest[:, :m].copy(),
        o_diffs[:m].copy(),
    )


def packed_arrange(
    codes: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(key codes, keys, offsets, vals, times, diffs) of the trace batch holding the
    records (``codes`` of their ``keys``, exact or hashes; C-contiguous arrays), or None
    where packing does not apply (arrays not int64, too wide, or a failed check)."""
    if codes.shape[0] == 0:
        return None
    if any(a.dtype != np.int64 for a in (codes, keys, vals, times, diffs)):
        return None  # offsets from the least value are defined here for int64 only
    ok, packed, layout, least = _pack(codes, vals, times)
    if not ok:
        return None
    packed.sort()
    ok, o_codes, o_keys, offsets, rest, o_diffs = _arrays(
        packed, layout, least, codes, keys, diffs, exact
    )
    if not ok:
        return None
    kv = vals.shape[0]
    return o_codes, o_keys, offsets, rest[:kv], rest[kv:], o_diffs
