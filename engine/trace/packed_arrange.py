"""A trace batch's arrays from unsorted records: one packed sort and one compiled pass.

Each record packs into one unsigned integer: its code's offset from the least code (high
bits; only the top ones when there are too many), then its value columns and time
coordinates (each ``column - least`` in the bits its range needs), then its index. One
radix sort of these (``sort_kernels.radix_sort``, of the bits above the index: the index
ascends already) orders the records by (code, values, times); a
single compiled pass then checks what packing could not promise (codes ascending where
their low bits were dropped; records of one code having one key where codes hash keys),
sums equal records, drops zeros, and writes the arrays, reading values and times back out
of the packed integers. ``TraceBatch.from_records`` otherwise makes a dozen passes (sort,
check, group, gather); where this does not apply (more than 64 bits, or a failed check) it
still does. The results are the same; the tests compare them.

From ``SPLIT_FROM`` records the work splits by key range on two threads
(``engine.parallel``): each packs the records whose codes fall on its side of a sampled
median code, sorts them and writes their arrays, and the two ranges are joined in order
(1.46-1.56x faster at a million records). In 1k/2k reachability's loop rounds, at batches
of 1,000, splitting from 8k records took the arrangements from 23.2 to 18.7 ms a batch;
from 32k, 20.6 ms; from 2k-4k, no better than from 8k.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine import parallel
from engine.sort_kernels import bit_width, radix_sort
from engine.trace.seek import prefetch

__all__ = ["packed_arrange"]

_AHEAD = 16  # records ahead whose memory is asked for

PackedArrays = tuple[bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]
SPLIT_FROM = 1 << 13  # records from which the two key ranges are arranged on two threads


@njit(cache=True, nogil=True)
def _bounds(
    codes: np.ndarray, vals: np.ndarray, times: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The least and greatest code, then value column, then time coordinate (of at least
    one record)."""
    kv, d = vals.shape[0], times.shape[0]
    least = np.empty(1 + kv + d, np.int64)
    most = np.empty(1 + kv + d, np.int64)
    for j in range(1 + kv + d):
        col = codes if j == 0 else (vals[j - 1] if j - 1 < kv else times[j - 1 - kv])
        low = high = col[0]
        for i in range(1, codes.shape[0]):
            low = min(low, col[i])
            high = max(high, col[i])
        least[j], most[j] = low, high
    return least, most


@njit(cache=True, nogil=True)
def _layout(least: np.ndarray, most: np.ndarray, n: int) -> tuple[bool, np.ndarray, int]:
    """(applies, layout, bits in use) for ``n`` records whose code and columns span
    ``least`` to ``most``: the layout holds the index bits, the code bits dropped, and the
    bits of each value column and time coordinate; the packed integers use their low
    ``bits in use`` bits (at most 64). Does not apply when the values and times with the
    index need more than 64 bits, or the codes keep too few bits to be likely distinct
    (about ``2 log2 n``)."""
    r = least.shape[0] - 1
    layout = np.zeros(2 + r, np.int64)
    ib = max(1, bit_width(np.uint64(n - 1)))
    total = ib
    for j in range(r + 1):
        width = bit_width(np.uint64(most[j]) - np.uint64(least[j]))
        if j:
            layout[1 + j] = width
        total += width
    code_bits = total - ib - layout[2:].sum()
    drop = max(0, total - 64)
    layout[0], layout[1] = ib, drop
    return not (drop and code_bits - drop < 2 * ib + 4), layout, total - drop


@njit(cache=True, nogil=True)
def _fill(
    codes: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    layout: np.ndarray,
    least: np.ndarray,
    pivot: int,
    below: bool,
) -> np.ndarray:
    """The records whose code is below ``pivot`` (or, with ``below`` False, not below it),
    each packed into one integer: its code's kept bits, then each column's bits, then its
    index."""
    kv, r, n = vals.shape[0], layout.shape[0] - 2, codes.shape[0]
    packed = np.empty(n, np.uint64)
    k = 0
    for i in range(n):  # without a branch: the comparison of hashed codes is a coin toss
        packed[k] = np.uint64(i)
        k += (codes[i] < pivot) == below
    packed = packed[:k]
    low = (np.uint64(1) << np.uint64(layout[0])) - np.uint64(1)  # the index bits
    shift = layout[0]
    for j in range(r, -1, -1):
        if j == 0 and shift >= 64:
            break  # no bits left: every record has the least code
        col = codes if j == 0 else (vals[j - 1] if j - 1 < kv else times[j - 1 - kv])
        width = layout[1 + j] if j else 64 - shift  # the code: the bits left
        if width:
            s, base = np.uint64(shift), np.uint64(least[j])
            cut = np.uint64(layout[1] if j == 0 else 0)
            for p in range(k):
                x = np.int64(packed[p] & low)
                packed[p] |= ((np.uint64(col[x]) - base) >> cut) << s
        shift += width
    return packed


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
    columns and time coordinates as the rows of one array: (applies, codes, keys, offsets,
    rest, diffs, keys written, records written), the arrays as long as ``packed`` (the
    caller keeps what was written)."""
    n, kk, r = packed.shape[0], keys.shape[0], layout.shape[0] - 2
    ib, drop = np.uint64(layout[0]), layout[1]
    rest_bits = np.uint64(layout[2:].sum())
    o_codes = np.empty(n, np.int64)
    o_keys = np.empty((kk, n), np.int64)
    offsets = np.empty(n + 1, np.int64)
    rest = np.empty((r, n), np.int64)
    o_diffs = np.empty(n, np.int64)
    fail = (False, o_codes, o_keys, offsets, rest, o_diffs, 0, 0)
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
                prefetch(keys.ctypes.data + 8 * (c * codes.shape[0] + a))
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
    return True, o_codes, o_keys, offsets, rest, o_diffs, nk, m


def _pivot(codes: np.ndarray) -> int | None:
    """A code about halfway up ``codes`` (the median of a sample; above its least): the
    records below it and the others are two key ranges of about equal size. None when
    every code of the sample is the same."""
    sample = np.sort(codes[:: max(1, codes.shape[0] // 255)])
    pivot = sample[sample.shape[0] // 2]
    if pivot == sample[0]:
        above = sample[sample > pivot]
        if above.shape[0] == 0:
            return None
        pivot = above[0]
    return int(pivot)


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
    where packing does not apply (arrays not int64, too wide, or a failed check).

    From ``SPLIT_FROM`` records, on two threads (``engine.parallel``): each packs, sorts
    and writes the records on one side of a sampled median code (:func:`_pivot`); the two
    key ranges are joined in order."""
    n = codes.shape[0]
    if n == 0:
        return None
    if any(a.dtype != np.int64 for a in (codes, keys, vals, times, diffs)):
        return None  # offsets from the least value are defined here for int64 only
    least, most = _bounds(codes, vals, times)
    ok, layout, bits = _layout(least, most, n)
    if not ok:
        return None

    def side(pivot: int, below: bool) -> PackedArrays:
        packed = _fill(codes, vals, times, layout, least, pivot, below)
        radix_sort(packed, int(layout[0]), bits)
        return _arrays(packed, layout, least, codes, keys, diffs, exact)

    pivot = _pivot(codes) if n >= SPLIT_FROM and parallel.threads() > 1 else None
    if pivot is None:  # one side: every code is at least the least
        parts = [side(int(least[0]), False)]
    else:
        parts = list(parallel.both(lambda: side(pivot, True), lambda: side(pivot, False)))
    if not all(p[0] for p in parts):
        return None
    kv = vals.shape[0]
    if len(parts) == 1:
        _, o_codes, o_keys, offsets, rest, o_diffs, nk, m = parts[0]
        offsets[nk] = m
        return (
            o_codes[:nk].copy(),
            o_keys[:, :nk].copy(),
            offsets[: nk + 1].copy(),
            rest[:kv, :m].copy(),
            rest[kv:, :m].copy(),
            o_diffs[:m].copy(),
        )
    (_, c0, k0, f0, r0, d0, nk0, m0), (_, c1, k1, f1, r1, d1, nk1, m1) = parts
    f1[nk1] = m1
    return (
        np.concatenate([c0[:nk0], c1[:nk1]]),
        np.concatenate([k0[:, :nk0], k1[:, :nk1]], axis=1),
        np.concatenate([f0[:nk0], f1[: nk1 + 1] + m0]),
        np.concatenate([r0[:kv, :m0], r1[:kv, :m1]], axis=1),
        np.concatenate([r0[kv:, :m0], r1[kv:, :m1]], axis=1),
        np.concatenate([d0[:m0], d1[:m1]]),
    )
