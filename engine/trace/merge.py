"""Merging sorted trace batches key by key, in linear passes instead of sorting their union.

Every batch holds its distinct keys sorted by (code, key) and each key's records sorted by
(value, time), consolidated. The merge walks the batches' keys together, least key first:

* a key found in one batch, whose times the frontier does not move, is copied as it lies;
* in a merge of two batches whose times the frontier does not move (the spine's common
  merge; ``_merge_pair``, a loop of its own with both batches' arrays in hand), a key found
  in both merges their two sorted runs, summing equal (value, time) records and dropping
  those that cancel;
* otherwise (more batches, or times the frontier moves, which can put a key's records out
  of order and make distinct times equal) the key's records are gathered with their
  advanced times, ordered and consolidated. Where the value columns and advanced times of
  the whole merge pack into one integer per record (``merge_slots``), each key's records
  are summed in slots by packed value (a compaction makes many records equal), or, when a
  key spans too many slots, ordered by their packed values in runs. Where they do not pack:
  by insertion while at most ``_SMALL_GROUP`` of them are distinct, comparing their columns
  and summing each record into an equal one already placed (each goes past only the
  distinct ones); a key with more distinct records has each packed with its values into one
  integer (relative to the key's own least values; a key whose values span more than 63
  bits in all is ranked by a merge sort instead) and their ascending runs merged.

Only one key's records move together, nothing is unpacked per record, and no comparison
looks beyond one key. Whether the frontier moves a batch's times is decided per batch: it
does not when the least time of each coordinate is already at or beyond one of its
elements. The result is what sorting the union would give (``TraceBatch.from_records``);
tests compare the two.

The comparisons of batch records take arrays viewed in place (no reference counts) and are
written out where they run per record (an inlined helper, ``_record_order``, compiled to
code three times slower); a key's gathered records (reference-counted scratch) are
compared in place when few, and through packed integers by helpers called once per key
when many: a compiled helper that takes reference-counted arrays costs atomic reference
counts per call.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.sort_kernels import kernel_row, key_order, row_bits
from engine.trace.merge_slots import (
    SLOTS,
    SLOTS_FROM,
    advanced,
    packing,
    slot_scratch,
    slot_sums,
    unpack,
)
from engine.trace.seek import batch_arrays

__all__ = [
    "joined_halves",
    "merge_into",
    "merge_outputs",
    "merge_table",
    "merge_whole",
    "range_size",
]

# a batch's six arrays, a merge's output among them: codes, keys, offsets, vals, times, diffs
Outputs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
_SMALL_GROUP = 64  # a key's gathered records are ordered by insertion while this few are distinct


@njit(cache=True, nogil=True, inline="always")
def _record_order(
    a_vals: np.ndarray,
    a_times: np.ndarray,
    a: int,
    b_vals: np.ndarray,
    b_times: np.ndarray,
    b: int,
) -> int:
    """-1, 0 or 1 as record ``a`` sorts before, with or after record ``b`` within a key
    (by value columns, then time)."""
    for j in range(a_vals.shape[0]):
        if a_vals[j, a] != b_vals[j, b]:
            return -1 if a_vals[j, a] < b_vals[j, b] else 1
    for j in range(a_times.shape[0]):
        if a_times[j, a] != b_times[j, b]:
            return -1 if a_times[j, a] < b_times[j, b] else 1
    return 0


@njit(cache=True, nogil=True)
def _times_move(times: np.ndarray, lo: int, hi: int, since: np.ndarray, least: np.ndarray) -> bool:
    """Whether advancing by the frontier with elements ``since`` may change a time among
    records ``lo:hi``: unless their least value of each coordinate (into ``least``) is at
    or beyond one element (then every time is)."""
    d = times.shape[0]
    if since.shape[0] == 0 or hi <= lo:
        return False
    for c in range(d):
        least[c] = times[c, lo]
    for c in range(d):
        for p in range(lo + 1, hi):
            least[c] = min(least[c], times[c, p])
    for f in range(since.shape[0]):
        at_or_beyond = True
        for c in range(d):
            if least[c] < since[f, c]:
                at_or_beyond = False
                break
        if at_or_beyond:
            return False
    return True


@njit(cache=True, nogil=True)
def _pack(cols: np.ndarray, m: int, packed: np.ndarray) -> bool:
    """Each of the first ``m`` columns of ``cols`` packed into one integer that sorts as the
    column sorts lexicographically (each row relative to its least value); False when the
    rows' ranges need more than 63 bits in all."""
    lows, bits, total = row_bits(cols[:, :m])
    if total > 63:
        return False
    for p in range(m):
        x = 0
        for c in range(cols.shape[0]):
            x = (x << bits[c]) | (cols[c, p] - lows[c])
        packed[p] = x
    return True


@njit(cache=True, nogil=True, inline="always")
def _merge_runs(
    src: np.ndarray,
    dst: np.ndarray,
    lo: int,
    mid: int,
    hi: int,
    packed: np.ndarray,
    cols: np.ndarray,
    wide: bool,
) -> None:
    """The ascending runs ``src[lo:mid]`` and ``src[mid:hi]`` (of record indices, by their
    ``packed`` values, or by their ``cols`` lexicographically when ``wide``) merged into
    ``dst[lo:hi]``, the first run's first on ties."""
    none = cols[:0]
    i, j, k = lo, mid, lo
    while i < mid and j < hi:
        if wide:
            second = _record_order(cols, none, src[j], cols, none, src[i]) < 0
        else:
            second = packed[src[j]] < packed[src[i]]
        if second:
            dst[k] = src[j]
            j += 1
        else:
            dst[k] = src[i]
            i += 1
        k += 1
    while i < mid:
        dst[k] = src[i]
        i += 1
        k += 1
    while j < hi:
        dst[k] = src[j]
        j += 1
        k += 1


@njit(cache=True, nogil=True)
def _order_packed(
    packed: np.ndarray, m: int, perm: np.ndarray, buf: np.ndarray, starts: np.ndarray
) -> np.ndarray:
    """The order of ``packed[:m]`` (a key's records, more than ``_SMALL_GROUP`` of them
    distinct), by merging its ascending runs (their starts go in ``starts``) two at a time.
    Returns the array (``perm`` or ``buf``) whose first ``m`` entries hold it."""
    no_cols = np.empty((0, 0), np.int64)
    for i in range(m):
        perm[i] = i
    runs = 0
    for i in range(m):
        if i == 0 or packed[i - 1] > packed[i]:
            starts[runs] = i
            runs += 1
    starts[runs] = m
    src, dst = perm, buf
    while runs > 1:
        w = 0
        for r in range(0, runs, 2):
            lo, mid = starts[r], starts[r + 1]
            hi = starts[r + 2] if r + 1 < runs else mid
            starts[w] = lo
            w += 1
            _merge_runs(src, dst, lo, mid, hi, packed, no_cols, False)
        starts[w] = m
        runs = w
        src, dst = dst, src
    return src


@njit(cache=True, nogil=True)
def _order_wide(cols: np.ndarray, m: int, perm: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """:func:`_order_packed` for keys whose values do not pack (ranges of more than 63
    bits in all: float value columns, say): the order of the first ``m`` columns of
    ``cols`` lexicographically, by a bottom-up merge sort (``ranks`` its scratch; insertion
    took a key of 60,000 records, a float sum's history in 4-D times, a minute), and each
    column's rank in ``ranks`` (equal columns share one), which then stands in for its
    packed value."""
    none = cols[:0]
    for i in range(m):
        perm[i] = i
    src, dst = perm, ranks
    in_perm = True
    width = 1
    while width < m:
        for lo in range(0, m, 2 * width):
            mid, hi = min(lo + width, m), min(lo + 2 * width, m)
            _merge_runs(src, dst, lo, mid, hi, ranks, cols, True)
        src, dst = dst, src
        in_perm = not in_perm
        width *= 2
    if not in_perm:
        for i in range(m):
            perm[i] = src[i]
    for i in range(m):
        ranks[perm[i]] = i
        if i and _record_order(cols, none, perm[i], cols, none, perm[i - 1]) == 0:
            ranks[perm[i]] = ranks[perm[i - 1]]
    return perm


@njit(cache=True, nogil=True)
def _consolidate(
    order: np.ndarray,
    packed: np.ndarray,
    cols: np.ndarray,
    diffs: np.ndarray,
    m: int,
    o_vals: np.ndarray,
    o_times: np.ndarray,
    o_diffs: np.ndarray,
    w: int,
) -> int:
    """The first ``m`` gathered records (value columns then times in ``cols``), in
    ``order``, written from record ``w`` on with equal ones (equal ``packed``) summed and
    cancelled ones dropped; returns the new record count."""
    kv = o_vals.shape[0]
    i = 0
    while i < m:
        head = order[i]
        s = diffs[head]
        i += 1
        while i < m and packed[order[i]] == packed[head]:
            s += diffs[order[i]]
            i += 1
        if s != 0:
            for c in range(kv):
                o_vals[c, w] = cols[c, head]
            for c in range(o_times.shape[0]):
                o_times[c, w] = cols[kv + c, head]
            o_diffs[w] = s
            w += 1
    return w


@njit(cache=True, nogil=True)
def _outputs(nk: int, n: int, kk: int, kv: int, d: int) -> Outputs:
    """A merge's output arrays (codes, keys, offsets, vals, times, diffs) for at most ``nk``
    keys and ``n`` records."""
    return (
        np.empty(nk, np.int64),
        np.empty((kk, nk), np.int64),
        np.empty(nk + 1, np.int64),
        np.empty((kv, n), np.int64),
        np.empty((d, n), np.int64),
        np.empty(n, np.int64),
    )


@njit(cache=True, nogil=True)
def _first_columns(a: np.ndarray, m: int) -> np.ndarray:
    """The first ``m`` columns of the C-contiguous ``(rows, n)`` array ``a``, C-contiguous,
    in ``a``'s own memory: each row moves down to follow the one before it (a forward copy
    is safe, as each row moves to a lower address)."""
    rows, n = a.shape
    if m == n:
        return a
    flat = a.reshape(rows * n)
    for c in range(1, rows):
        for i in range(m):
            flat[c * m + i] = flat[c * n + i]
    return flat[: rows * m].reshape((rows, m))


@njit(cache=True, nogil=True)
def _trimmed(out: Outputs, u: int, w: int) -> Outputs:
    """A merge's output arrays (:func:`merge_outputs`) cut to the ``u`` keys and ``w``
    records it wrote. Keys that two batches share make ``u`` smaller than the arrays almost
    always: the key arrays are copied (a fifth of the records' size, or less); the records'
    arrays stay where they are (``w`` is smaller only where records cancelled), their rows
    closed up in place."""
    o_codes, o_keys, o_offsets, o_vals, o_times, o_diffs = out
    if u < o_codes.shape[0]:
        o_codes, o_keys, o_offsets = (
            o_codes[:u].copy(),
            o_keys[:, :u].copy(),
            o_offsets[: u + 1].copy(),
        )
    return (
        o_codes,
        o_keys,
        o_offsets,
        _first_columns(o_vals, w),
        _first_columns(o_times, w),
        o_diffs[:w],
    )


@njit(cache=True, nogil=True)
def _merge_pair(
    a: Outputs,
    b: Outputs,
    a_keys: tuple[int, int],
    b_keys: tuple[int, int],
    out: Outputs,
    u: int,
    w: int,
) -> tuple[int, int]:
    """:func:`merge_into` of two batches whose times do not move (the common merge): keys
    ``a_keys`` of batch ``a`` and ``b_keys`` of ``b`` (each batch's six arrays). One walk
    over both key lists, a key in one batch copied as it lies, a key in both merged run
    against run; nothing goes through the seek table per key. Batches without value
    columns and with two time coordinates (a loop's arrangements of whole rows) take a copy
    of the walk compiled with those numbers known: their merges, replayed at 1k/2k
    reachability, took 8.2 ms a batch instead of 10.7."""
    if a[3].shape[0] == 0 and a[4].shape[0] == 2:
        return _pair_walk(a, b, a_keys, b_keys, out, u, w, 0, 2)
    return _pair_walk(a, b, a_keys, b_keys, out, u, w, a[3].shape[0], a[4].shape[0])


@njit(cache=True, nogil=True, inline="always")
def _pair_walk(
    a: Outputs,
    b: Outputs,
    a_keys: tuple[int, int],
    b_keys: tuple[int, int],
    out: Outputs,
    u: int,
    w: int,
    kv: int,
    d: int,
) -> tuple[int, int]:
    """:func:`_merge_pair` for ``kv`` value columns and ``d`` time coordinates."""
    a_codes, a_kcols, a_offsets, a_vals, a_times, a_diffs = a
    b_codes, b_kcols, b_offsets, b_vals, b_times, b_diffs = b
    o_codes, o_keys, o_offsets, o_vals, o_times, o_diffs = out
    kk = a_kcols.shape[0]
    i, i_end = a_keys
    j, j_end = b_keys
    while i < i_end or j < j_end:
        if j == j_end:
            side = -1
        elif i == i_end:
            side = 1
        elif a_codes[i] != b_codes[j]:
            side = -1 if a_codes[i] < b_codes[j] else 1
        else:
            side = 0
            for c in range(kk):
                if a_kcols[c, i] != b_kcols[c, j]:
                    side = -1 if a_kcols[c, i] < b_kcols[c, j] else 1
                    break
        start = w
        if side != 0:  # a key in one batch: copied as it lies
            codes, kcols, offsets, vals, times, diffs = a if side < 0 else b
            k = i if side < 0 else j
            o_codes[u] = codes[k]
            for c in range(kk):
                o_keys[c, u] = kcols[c, k]
            for p in range(offsets[k], offsets[k + 1]):
                for c in range(kv):
                    o_vals[c, w] = vals[c, p]
                for c in range(d):
                    o_times[c, w] = times[c, p]
                o_diffs[w] = diffs[p]
                w += 1
            if side < 0:
                i += 1
            else:
                j += 1
        else:
            o_codes[u] = a_codes[i]
            for c in range(kk):
                o_keys[c, u] = a_kcols[c, i]
            p, p_end = a_offsets[i], a_offsets[i + 1]
            q, q_end = b_offsets[j], b_offsets[j + 1]
            while p < p_end or q < q_end:
                if q == q_end:
                    order = -1
                elif p == p_end:
                    order = 1
                else:  # _record_order, written out: inlined, it runs three times slower
                    order = 0
                    for c in range(kv):
                        if a_vals[c, p] != b_vals[c, q]:
                            order = -1 if a_vals[c, p] < b_vals[c, q] else 1
                            break
                    if order == 0:
                        for c in range(d):
                            if a_times[c, p] != b_times[c, q]:
                                order = -1 if a_times[c, p] < b_times[c, q] else 1
                                break
                if order <= 0:
                    for c in range(kv):
                        o_vals[c, w] = a_vals[c, p]
                    for c in range(d):
                        o_times[c, w] = a_times[c, p]
                    o_diffs[w] = a_diffs[p] + (b_diffs[q] if order == 0 else 0)
                    p += 1
                    q += 1 if order == 0 else 0
                else:
                    for c in range(kv):
                        o_vals[c, w] = b_vals[c, q]
                    for c in range(d):
                        o_times[c, w] = b_times[c, q]
                    o_diffs[w] = b_diffs[q]
                    q += 1
                if o_diffs[w] != 0:
                    w += 1
            i += 1
            j += 1
        if w > start:
            o_offsets[u] = start
            u += 1
    return u, w


@njit(cache=True, nogil=True)
def merge_into(
    table: np.ndarray,
    key_lo: np.ndarray,
    key_hi: np.ndarray,
    kk: int,
    kv: int,
    since: np.ndarray,
    exact: bool,
    out: Outputs,
    u: int,
    w: int,
) -> tuple[int, int]:
    """Keys ``key_lo[b]:key_hi[b]`` of each batch ``b`` of a seek table merged, consolidated
    and compacted (times advanced by the frontier whose elements are the rows of ``since``;
    no rows: unchanged), written into the output arrays (:func:`merge_outputs`) from key
    ``u`` and record ``w`` on; returns where the writing ended. The offset after the last
    key is the caller's to write (two key ranges may write one set of arrays)."""
    nb, d = table.shape[0], since.shape[1]
    moves = np.zeros(nb, np.bool_)
    least_time = np.empty(d, np.int64)
    for b in range(nb):
        offsets, times = batch_arrays(table, b, kk, kv, d)[2:5:2]
        lo, hi = offsets[key_lo[b]], offsets[key_hi[b]]
        moves[b] = _times_move(times, lo, hi, since, least_time)
    if nb == 2 and not moves[0] and not moves[1]:
        return _merge_pair(
            batch_arrays(table, 0, kk, kv, d),
            batch_arrays(table, 1, kk, kv, d),
            (key_lo[0], key_hi[0]),
            (key_lo[1], key_hi[1]),
            out,
            u,
            w,
        )
    most = 0  # records one key can have, at most: its most in each batch, summed
    for b in range(nb):
        offsets = batch_arrays(table, b, kk, kv, d)[2]
        longest = 0
        for k in range(key_lo[b], key_hi[b]):
            longest = max(longest, offsets[k + 1] - offsets[k])
        most += longest
    o_codes, o_keys, o_offsets, o_vals, o_times, o_diffs = out
    pos = key_lo.copy()
    member = np.empty(nb, np.int64)  # the batches holding the least key
    # a key's gathered records: value columns then times, diffs, packed, and their order
    g_cols = np.empty((kv + d, most), np.int64)
    g_diffs = np.empty(most, np.int64)
    perm = np.empty(most, np.int64)
    packed = np.empty(most, np.int64)
    buf = np.empty(most, np.int64)
    starts = np.empty(most + 1, np.int64)
    next_code = np.zeros(nb, np.int64)  # each batch's next key's code
    packs, lows, shifts, masks, span = False, least_time[:0], least_time[:0], least_time[:0], 0
    if range_size(table, key_lo, key_hi, kk, kv, d)[1] >= SLOTS_FROM:  # else no bounds pass
        packs, lows, shifts, masks, span = packing(table, key_lo, key_hi, kk, kv, since, moves)
    scratch = slot_scratch(span if packs else 0)
    for b in range(nb):
        if pos[b] < key_hi[b]:
            next_code[b] = batch_arrays(table, b, kk, kv, d)[0][pos[b]]
    while True:
        least = -1
        r = 0
        moved = False
        for b in range(nb):  # codes first: keys are compared only where codes tie
            if pos[b] >= key_hi[b] or (least >= 0 and next_code[b] > next_code[least]):
                continue
            if least >= 0 and next_code[b] == next_code[least]:
                if not exact:
                    codes, keys = batch_arrays(table, b, kk, kv, d)[:2]
                    l_codes, l_keys = batch_arrays(table, least, kk, kv, d)[:2]
                    order = key_order(codes, keys, pos[b], l_codes, l_keys, pos[least], exact)
                else:
                    order = 0
                if order > 0:
                    continue
                if order == 0:
                    member[r] = b
                    r += 1
                    moved = moved or moves[b]
                    continue
            least = b
            member[0] = b
            r = 1
            moved = moves[b]
        if least < 0:
            break
        codes, keys = batch_arrays(table, least, kk, kv, d)[:2]
        o_codes[u] = codes[pos[least]]
        for j in range(kk):
            o_keys[j, u] = keys[j, pos[least]]
        o_offsets[u] = w
        start = w
        if r == 1 and not moved:  # one sorted, consolidated run: as it lies
            _, _, offsets, vals, times, diffs = batch_arrays(table, member[0], kk, kv, d)
            for p in range(offsets[pos[member[0]]], offsets[pos[member[0]] + 1]):
                for c in range(kv):
                    o_vals[c, w] = vals[c, p]
                for c in range(d):
                    o_times[c, w] = times[c, p]
                o_diffs[w] = diffs[p]
                w += 1
        elif packs:  # more runs, or times that move: packed and summed in slots
            m, least_v, most_v = 0, span, 0
            for i in range(r):
                b = member[i]
                _, _, offsets, vals, times, diffs = batch_arrays(table, b, kk, kv, d)
                for p in range(offsets[pos[b]], offsets[pos[b] + 1]):
                    v = 0
                    for c in range(kv):
                        v |= (vals[c, p] - lows[c]) << shifts[c]
                    for c in range(d):
                        t = advanced(times[c, p], since, c) if moves[b] else times[c, p]
                        v |= (t - lows[kv + c]) << shifts[kv + c]
                    packed[m] = v
                    g_diffs[m] = diffs[p]
                    least_v, most_v = min(least_v, v), max(most_v, v)
                    m += 1
            if m and most_v - least_v < SLOTS:
                w = slot_sums(
                    packed,
                    g_diffs,
                    m,
                    least_v,
                    most_v - least_v,
                    scratch,
                    lows,
                    shifts,
                    masks,
                    o_vals,
                    o_times,
                    o_diffs,
                    w,
                )
            else:  # too many slots: ordered by their packed values, merged in runs
                for x in range(m):
                    for c in range(kv + d):
                        g_cols[c, x] = unpack(packed[x], c, lows, shifts, masks)
                order_ = _order_packed(packed, m, perm, buf, starts)
                w = _consolidate(order_, packed, g_cols, g_diffs, m, o_vals, o_times, o_diffs, w)
        else:  # as above, where the columns do not pack: gathered, ordered, consolidated
            m = 0
            for i in range(r):
                b = member[i]
                _, _, offsets, vals, times, diffs = batch_arrays(table, b, kk, kv, d)
                for p in range(offsets[pos[b]], offsets[pos[b] + 1]):
                    for c in range(kv):
                        g_cols[c, m] = vals[c, p]
                    for c in range(d):
                        t = times[c, p]
                        g_cols[kv + c, m] = advanced(t, since, c) if moves[b] else t
                    g_diffs[m] = diffs[p]
                    m += 1
            # by insertion, comparing in place (no calls per key): each record goes into the
            # sorted distinct records so far (``perm``), or adds to the one equal to it (sums
            # in ``buf``; compaction makes many equal), until more than ``_SMALL_GROUP`` are
            # distinct (then the records are packed and merged in runs instead)
            width = kv + d
            u_ = 0
            for x in range(m):
                if u_ > _SMALL_GROUP:
                    break
                j = u_ - 1
                cmp = -1
                while j >= 0:
                    cmp = 0
                    for c in range(width):
                        if g_cols[c, perm[j]] != g_cols[c, x]:
                            cmp = 1 if g_cols[c, perm[j]] > g_cols[c, x] else -1
                            break
                    if cmp <= 0:
                        break
                    j -= 1
                if j >= 0 and cmp == 0:
                    buf[j] += g_diffs[x]
                    continue
                for i in range(u_, j + 1, -1):
                    perm[i] = perm[i - 1]
                    buf[i] = buf[i - 1]
                perm[j + 1] = x
                buf[j + 1] = g_diffs[x]
                u_ += 1
            if u_ <= _SMALL_GROUP:
                for i in range(u_):
                    if buf[i] != 0:
                        head = perm[i]
                        for c in range(kv):
                            o_vals[c, w] = g_cols[c, head]
                        for c in range(d):
                            o_times[c, w] = g_cols[kv + c, head]
                        o_diffs[w] = buf[i]
                        w += 1
            else:
                if _pack(g_cols, m, packed):
                    order_ = _order_packed(packed, m, perm, buf, starts)
                else:
                    order_ = _order_wide(g_cols, m, perm, packed)
                w = _consolidate(order_, packed, g_cols, g_diffs, m, o_vals, o_times, o_diffs, w)
        for i in range(r):
            b = member[i]
            pos[b] += 1
            if pos[b] < key_hi[b]:
                next_code[b] = batch_arrays(table, b, kk, kv, d)[0][pos[b]]
        if w > start:
            u += 1
    return u, w


@njit(cache=True, nogil=True)
def range_size(
    table: np.ndarray, key_lo: np.ndarray, key_hi: np.ndarray, kk: int, kv: int, d: int
) -> tuple[int, int]:
    """The keys and records of keys ``key_lo[b]:key_hi[b]`` of each batch ``b``."""
    nk = n = 0
    for b in range(table.shape[0]):
        offsets = batch_arrays(table, b, kk, kv, d)[2]
        nk += key_hi[b] - key_lo[b]
        n += offsets[key_hi[b]] - offsets[key_lo[b]]
    return nk, n


@njit(cache=True, nogil=True)
def merge_outputs(
    table: np.ndarray, key_lo: np.ndarray, key_hi: np.ndarray, kk: int, kv: int, d: int
) -> Outputs:
    """Output arrays (codes, keys, offsets, vals, times, diffs) for a merge of keys
    ``key_lo[b]:key_hi[b]`` of each batch ``b``: room for all of their keys and records."""
    nk, n = range_size(table, key_lo, key_hi, kk, kv, d)
    return _outputs(nk, n, kk, kv, d)


@njit(cache=True, nogil=True)
def merge_table(
    table: np.ndarray,
    key_lo: np.ndarray,
    key_hi: np.ndarray,
    kk: int,
    kv: int,
    since: np.ndarray,
    exact: bool,
) -> Outputs:
    """Keys ``key_lo[b]:key_hi[b]`` of each batch ``b`` of a seek table merged into one
    consolidated batch, compacted by ``since`` (:func:`merge_into`): (codes, keys, offsets,
    vals, times, diffs)."""
    out = merge_outputs(table, key_lo, key_hi, kk, kv, since.shape[1])
    u, w = merge_into(table, key_lo, key_hi, kk, kv, since, exact, out, 0, 0)
    out[2][u] = w  # the offset after the last key
    return _trimmed(out, u, w)


@njit(cache=True, nogil=True)
def joined_halves(
    out: Outputs,
    nk_a: int,
    n_a: int,
    u_a: int,
    w_a: int,
    u_b: int,
    w_b: int,
) -> Outputs:
    """One batch from a merge written as two key ranges into one set of output arrays: the
    first from key 0 and record 0 to ``u_a`` and ``w_a``, the second from ``nk_a`` and
    ``n_a`` (the first range's keys and records before merging) to ``u_b`` and ``w_b``.
    The second range's keys, and its records where the first one's shrank, move down to
    follow the first's (towards lower addresses: a forward copy is safe)."""
    o_codes, o_keys, o_offsets, o_vals, o_times, o_diffs = out
    dk, dr = nk_a - u_a, n_a - w_a
    kk = o_keys.shape[0]
    if dk > 0 or dr > 0:
        for i in range(nk_a, u_b):
            o_codes[i - dk] = o_codes[i]
            for c in range(kk):
                o_keys[c, i - dk] = o_keys[c, i]
            o_offsets[i - dk] = o_offsets[i] - dr
    if dr > 0:
        for p in range(n_a, w_b):
            for c in range(o_vals.shape[0]):
                o_vals[c, p - dr] = o_vals[c, p]
            for c in range(o_times.shape[0]):
                o_times[c, p - dr] = o_times[c, p]
            o_diffs[p - dr] = o_diffs[p]
    u, w = u_b - dk, w_b - dr
    o_offsets[u] = w
    return _trimmed(out, u, w)


@njit(cache=True, nogil=True)
def merge_whole(
    table: np.ndarray, kk: int, kv: int, since: np.ndarray, exact: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`merge_table` of every key of every batch of ``table`` (each row's key count is
    in the row), and the merged batch's own seek row (``sort_kernels.kernel_row``)."""
    key_lo = np.zeros(table.shape[0], np.int64)
    key_hi = table[:, 6].copy()
    codes, keys, offsets, vals, times, diffs = merge_table(
        table, key_lo, key_hi, kk, kv, since, exact
    )
    row = kernel_row(codes, keys, offsets, vals, times, diffs)
    return codes, keys, offsets, vals, times, diffs, row
