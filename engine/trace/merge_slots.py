"""Summing a merge's gathered records in slots: one packing for all keys, no sort per key.

A merge that gathers a key's records (``merge.merge_into``: more than two batches, or times
the frontier moves) must order them by (value columns, time) and sum equal ones. A
compaction gathers many records per key that are equal once advanced: in 1k/2k
reachability's loop, at batches of 1,000, a key's records of a whole step fold into one per
round. Ordering them by insertion compares columns record against record.

Here every record of the merge packs into one non-negative int64, ordered as its value
columns and advanced time are (lexicographically): each column's offset from the merge's
least value of that column, in the bits its range needs (:func:`packing`, from the
batches' bounds: advancing a time is monotone in each coordinate, so the advanced times'
bounds are the bounds advanced). A key whose packed records span fewer than ``SLOTS``
values sums each record's diff into the slot of its value, marks the slot in a word of bits
(and the word in a second level of bits), and reads the marked slots back in ascending
order (:func:`slot_sums`): linear in its records, and every slot it touched is left zeroed
for the next key. Where the columns need more than 62 bits, or a key spans more slots,
the merge orders records as before; so does a merge of fewer than ``SLOTS_FROM`` records.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from engine.sort_kernels import bit_width
from engine.trace.seek import batch_arrays

__all__ = ["SLOTS", "SLOTS_FROM", "advanced", "packing", "slot_scratch", "slot_sums", "unpack"]

SLOTS = 1 << 15  # a key whose packed records span fewer values than this sums them in slots
# records from which a merge sums in slots: below, its pass over the records for their bounds
# and its slots (up to 256 KiB, zeroed) cost more than ordering a few records by insertion
SLOTS_FROM = 1 << 12
_WORD = 64  # slots per word of bits
_SPAN = _WORD * _WORD  # slots per word of the second level
_low_bit: Any = trailing_zeros  # the index of the lowest set bit (an intrinsic)


@njit(cache=True, nogil=True, inline="always")
def advanced(t: int, since: np.ndarray, c: int) -> int:
    """Coordinate ``c`` of a time, ``t``, advanced by the frontier whose elements are the
    rows of ``since`` (non-empty): the meet of the time's joins with them."""
    x = max(t, since[0, c])
    for f in range(1, since.shape[0]):
        x = min(x, max(t, since[f, c]))
    return x


@njit(cache=True, nogil=True)
def packing(
    table: np.ndarray,
    key_lo: np.ndarray,
    key_hi: np.ndarray,
    kk: int,
    kv: int,
    since: np.ndarray,
    moves: np.ndarray,
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray, int]:
    """How to pack the value columns and times (advanced, in the batches ``moves`` marks)
    of keys ``key_lo[b]:key_hi[b]`` of each batch ``b`` of a seek table: (whether they fit in
    62 bits, each column's least value, shift and mask, and the span of all packed values).
    Columns are value columns first, then time coordinates, the first most significant."""
    nb, d = table.shape[0], since.shape[1]
    w = kv + d
    lows = np.full(w, np.iinfo(np.int64).max, np.int64)
    highs = np.full(w, np.iinfo(np.int64).min, np.int64)
    for b in range(nb):
        _, _, offsets, vals, times, _ = batch_arrays(table, b, kk, kv, d)
        lo, hi = offsets[key_lo[b]], offsets[key_hi[b]]
        if hi <= lo:
            continue
        for c in range(w):
            col = vals[c] if c < kv else times[c - kv]
            low = high = col[lo]
            for p in range(lo + 1, hi):
                low = min(low, col[p])
                high = max(high, col[p])
            if moves[b] and c >= kv:
                low, high = advanced(low, since, c - kv), advanced(high, since, c - kv)
            lows[c] = min(lows[c], low)
            highs[c] = max(highs[c], high)
    shifts = np.zeros(w, np.int64)
    masks = np.zeros(w, np.int64)
    total = 0
    for c in range(w - 1, -1, -1):
        span = highs[c] - lows[c]
        if span < 0:  # no records, or a range that overflows int64
            return False, lows, shifts, masks, 0
        bits = bit_width(np.uint64(span))
        shifts[c], masks[c] = total, (1 << bits) - 1
        total += bits
        if total > 62:
            return False, lows, shifts, masks, 0
    return True, lows, shifts, masks, (1 << total) - 1


@njit(cache=True, nogil=True)
def slot_scratch(span: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Zeroed slots, words of bits and second-level words for keys that span fewer values
    than ``SLOTS`` within a packing whose values span ``span`` (no more are needed)."""
    n = min(span + 1, SLOTS)
    words = (n + _WORD - 1) // _WORD
    return (
        np.zeros(n, np.int64),
        np.zeros(words, np.uint64),
        np.zeros((words + _WORD - 1) // _WORD, np.uint64),
    )


@njit(cache=True, nogil=True, inline="always")
def unpack(v: int, c: int, lows: np.ndarray, shifts: np.ndarray, masks: np.ndarray) -> int:
    """Column ``c`` of the packed value ``v``."""
    return lows[c] + ((v >> shifts[c]) & masks[c])


@njit(cache=True, nogil=True, inline="always")
def slot_sums(
    packed: np.ndarray,
    diffs: np.ndarray,
    m: int,
    least: int,
    span: int,
    scratch: tuple[np.ndarray, np.ndarray, np.ndarray],
    lows: np.ndarray,
    shifts: np.ndarray,
    masks: np.ndarray,
    o_vals: np.ndarray,
    o_times: np.ndarray,
    o_diffs: np.ndarray,
    w: int,
) -> int:
    """One key's ``m`` packed records, spanning ``span < SLOTS`` values from ``least``, with
    their ``diffs``: the non-zero sums of equal ones written in ascending order from record
    ``w`` on (unpacked into value columns and times); returns the new record count. The
    scratch (:func:`slot_scratch`) is left zeroed."""
    slots, bits, tops = scratch
    kv = o_vals.shape[0]
    few = span < _SPAN  # one second-level word covers every word: no need to mark it
    for x in range(m):
        o = packed[x] - least
        slots[o] += diffs[x]
        bits[o >> 6] |= np.uint64(1) << np.uint64(o & 63)
        if not few:
            tops[o >> 12] |= np.uint64(1) << np.uint64((o >> 6) & 63)
    for top in range(1 if few else (span >> 12) + 1):
        if few:
            marked = (np.uint64(2) << np.uint64(span >> 6)) - np.uint64(1)
        else:
            marked, tops[top] = tops[top], 0
        while marked:
            word = top * _WORD + int(_low_bit(marked))
            marked &= marked - np.uint64(1)
            set_bits, bits[word] = bits[word], 0
            while set_bits:
                o = word * _WORD + int(_low_bit(set_bits))
                set_bits &= set_bits - np.uint64(1)
                total, slots[o] = slots[o], 0
                if total == 0:
                    continue
                v = least + o
                for c in range(kv):
                    o_vals[c, w] = unpack(v, c, lows, shifts, masks)
                for c in range(o_times.shape[0]):
                    o_times[c, w] = unpack(v, kv + c, lows, shifts, masks)
                o_diffs[w] = total
                w += 1
    return w
