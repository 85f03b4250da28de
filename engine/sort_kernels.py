"""Compiled and packed sorting: the sorts and consolidations under every batch and trace.

``sort_rows(rows)`` gives the stable lexicographic order of int64 rows by packing each
record's columns into one 64-bit integer (value minus the column's minimum, the record
index in the low bits) and radix sorting those by the bits above the index (``packed_sort``,
``radix_sort``);
rows too wide for that take two passes (``_split_sort``: the leading row apart), or an LSD
sort (``_lsd_sort``: a packed tail, then the rows before it in 63-bit words, least
significant first; a key hash, a float's bits and times). ``consolidate_rows_order`` sums
the diffs of equal rows and drops zero sums, by the fastest path that applies: compiled
merge sorts for few rows (``consolidate_order``), ``sort_rows``, or numpy's lexsort
(``lexsort_consolidate``, also the reference the others are tested against).
``trace_arrays`` builds a trace batch's arrays from consolidated records, and ``batch_row``
a batch's row of a compiled seek table (``engine.trace.seek``), so that kernels that build a
batch can return its row with it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.hashing import row_codes

__all__ = [
    "COMPILED_BELOW",
    "PACKED_FROM",
    "RADIX_FROM",
    "ROW_WIDTH",
    "arrange_rows",
    "batch_row",
    "bit_width",
    "column_less",
    "consolidate_columns",
    "consolidate_hashed",
    "consolidate_order",
    "consolidate_rows_order",
    "feedback_columns",
    "finish_run",
    "kernel_row",
    "key_order",
    "lex_argsort",
    "lexsort_consolidate",
    "packed_order",
    "packed_sort",
    "row_bits",
    "sort_rows",
    "stable_argsort",
]

COMPILED_BELOW = 4096  # rows: above this numpy's lexsort beats the compiled merge sorts
PACKED_FROM = 128  # rows: from here one packed np.sort beats the compiled merge sorts
ROW_WIDTH = 10  # columns of a seek table row (see batch_row)
RADIX_FROM = 4096  # keys: from here a batch's seeks start from a radix index of its codes


@njit(cache=True, nogil=True)
def batch_row(
    codes: np.ndarray,
    keys: np.ndarray,
    offsets: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
) -> np.ndarray:
    """A batch's row of a seek table (``engine.trace.seek.gather_spine``): its C-contiguous
    arrays' addresses, its numbers of keys and of records, and no radix index (columns 8 and
    9: ``seek.table_row`` adds one). A row is only valid while those arrays live: a kernel
    that builds a batch below ``RADIX_FROM`` keys returns the row together with its arrays,
    and the batch holding them keeps it."""
    row = np.zeros(ROW_WIDTH, np.int64)
    row[0] = codes.ctypes.data
    row[1] = keys.ctypes.data
    row[2] = offsets.ctypes.data
    row[3] = vals.ctypes.data
    row[4] = times.ctypes.data
    row[5] = diffs.ctypes.data
    row[6] = codes.shape[0]
    row[7] = diffs.shape[0]
    return row


@njit(cache=True, nogil=True)
def kernel_row(
    codes: np.ndarray,
    keys: np.ndarray,
    offsets: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
) -> np.ndarray:
    """The seek row a kernel returns with a batch it built: :func:`batch_row`, or empty when
    the batch has ``RADIX_FROM`` keys or more (``TraceBatch.addresses`` then builds the row,
    with its radix index)."""
    if codes.shape[0] >= RADIX_FROM:
        return np.zeros(0, np.int64)
    return batch_row(codes, keys, offsets, vals, times, diffs)


@njit(cache=True, nogil=True)
def bit_width(span: np.uint64) -> int:
    """Bits needed to hold the unsigned ``span``."""
    width = 0
    while width < 64 and (span >> np.uint64(width)) != 0:
        width += 1
    return width


@njit(cache=True, nogil=True)
def _span(col: np.ndarray) -> tuple[int, int]:
    lo = col[0]
    hi = col[0]
    for i in range(1, col.shape[0]):
        v = col[i]
        if v < lo:
            lo = v
        elif v > hi:
            hi = v
    return lo, hi


@njit(cache=True, nogil=True)
def _pack_into(key: np.ndarray, col: np.ndarray, lo: int, drop: int, shift: int) -> None:
    d = np.uint64(drop)
    s = np.uint64(shift)
    for i in range(col.shape[0]):
        key[i] |= (np.uint64(col[i] - lo) >> d) << s


@njit(cache=True, nogil=True)
def _ascending(col: np.ndarray, key: np.ndarray, mask: np.uint64) -> bool:
    prev = col[np.int64(key[0] & mask)]
    for i in range(1, key.shape[0]):
        v = col[np.int64(key[i] & mask)]
        if v < prev:
            return False
        prev = v
    return True


def packed_sort(
    rows: list[np.ndarray], truncate: bool = True
) -> tuple[np.ndarray, int, np.ndarray | None] | None:
    """Rows sorted lexicographically (``rows[0]`` most significant) as one sorted uint64
    array, or None when they cannot be.

    Each row contributes ``value - min`` in as many bits as its range needs, and the low
    ``ib`` bits hold the record's index, so one sort of plain integers (``radix_sort``, of
    the bits above the index) gives the stable lexicographic order: ``sorted & (2**ib - 1)``
    is the permutation and ``sorted >> ib`` changes exactly where the rows change. This is many
    times faster than ``np.lexsort`` over several columns.

    When the rows need more than 64 bits, the leading row (typically 64-bit key hashes)
    keeps only its high bits. The order is still exact if the leading row comes out
    ascending, which is checked (else None); equal high bits then no longer mean equal
    rows, so the leading row is returned for group boundaries to compare as well.
    Returns ``(sorted, ib, leading row or None when no bits were dropped)``.
    """
    n = rows[0].shape[0]
    if n == 0:
        return np.zeros(0, np.uint64), 1, None
    if any(col.dtype != np.int64 for col in rows):
        return None  # value - min in 64 bits is only defined here for int64
    ib = max(1, (n - 1).bit_length())
    spans = []
    total = ib
    for col in rows:
        lo, hi = _span(col)
        bits = (int(hi) - int(lo)).bit_length()
        total += bits
        spans.append((int(lo), bits))
    drop = max(0, total - 64)
    # n distinct leading values share truncated bits (and likely fail the check) unless
    # about 2 log2(n) bits remain: do not try then
    if drop and (not truncate or spans[0][1] - drop < 2 * ib + 4):
        return None
    key = np.arange(n, dtype=np.uint64)
    shift = ib
    for j in range(len(rows) - 1, -1, -1):
        lo, bits = spans[j]
        cut = drop if j == 0 else 0
        if bits:
            _pack_into(key, rows[j], lo, cut, shift)
            shift += bits - cut
    radix_sort(key, ib, shift)
    if not drop:
        return key, ib, None
    if not _ascending(rows[0], key, np.uint64((1 << ib) - 1)):
        return None
    return key, ib, rows[0]


_BUCKET_INSERTION = 32  # a bucket of _bucket_argsort up to this many values: by insertion


@njit(cache=True, nogil=True)
def _bucket_argsort(values: np.ndarray) -> tuple[bool, np.ndarray]:
    """The stable ascending order of int64 values by a counting sort into about as many
    buckets as values, by their offset from the least (its high bits), then each bucket
    that holds a range of values by insertion, or when big by a merge sort (unless in
    order already). (False, -) when one big unsorted bucket holds over an eighth of the
    values (bunched values, better left to numpy's sort)."""
    n = values.shape[0]
    order = np.empty(n, np.int64)
    if n == 0:
        return True, order
    lo, hi = values.min(), values.max()
    span = np.uint64(hi) - np.uint64(lo)  # exact in unsigned arithmetic
    width = bit_width(span)
    target = 1
    while (1 << target) < n:
        target += 1
    shift = np.uint64(max(0, width - target))
    nbuckets = int(span >> shift) + 1
    start = np.zeros(nbuckets + 1, np.int64)
    for i in range(n):
        start[int((np.uint64(values[i]) - np.uint64(lo)) >> shift) + 1] += 1
    for b in range(nbuckets):
        start[b + 1] += start[b]
    fill = start[:-1].copy()
    for i in range(n):
        b = int((np.uint64(values[i]) - np.uint64(lo)) >> shift)
        order[fill[b]] = i
        fill[b] += 1
    if shift == 0:  # a bucket per value
        return True, order
    for b in range(nbuckets):  # a bucket holds a range of values: sort it
        a, z = start[b], start[b + 1]
        if z - a > _BUCKET_INSERTION:
            for i in range(a + 1, z):
                if values[order[i]] < values[order[i - 1]]:
                    break
            else:
                continue  # in order already (one repeated value, say)
            if 8 * (z - a) > n:
                return False, order
            run = order[a:z].copy()
            sub = np.argsort(values[run], kind="mergesort")
            for i in range(z - a):
                order[a + i] = run[sub[i]]
            continue
        for i in range(a + 1, z):
            x = order[i]
            j = i - 1
            while j >= a and values[order[j]] > values[x]:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = x
    return True, order


def stable_argsort(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` for int64 values; about linear time when they
    spread out (hashed key codes) or span few distinct values (:func:`_bucket_argsort`),
    numpy's sort otherwise."""
    ok, order = _bucket_argsort(values)
    return order if ok else np.argsort(values, kind="stable")


def _split_sort(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Rows too wide for one packed key: the rows after the first packed (one fast sort),
    then a stable sort by the first row (an LSD sort in two passes, still several times
    faster than ``np.lexsort``). Returns (order, packed rest, first row), all in sorted
    order, or None when even the rest does not fit."""
    n = rows[0].shape[0]
    if rows[0].dtype != np.int64:
        return None
    if len(rows) > 1:
        packed = packed_sort(rows[1:], truncate=False)
        if packed is None:
            return None
        key, ib, _ = packed
        p = (key & np.uint64((1 << ib) - 1)).view(np.int64)
        lead = rows[0][p]
        q = stable_argsort(lead)
        return p[q], (key >> np.uint64(ib))[q], lead[q]
    order = stable_argsort(rows[0])
    return order, np.zeros(n, np.uint64), rows[0][order]


def _lsd_sort(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, None] | None:
    """Rows too wide for :func:`_split_sort` (say a hash, a float's bits and times): the
    longest tail of rows that packs with the record index sorted in one packed sort, then
    the rows before it, least significant first, in words of at most 63 bits (a row whose
    range needs 64 alone, as it is) by a stable sort each (an LSD sort: three passes for
    those rows, where ``np.lexsort`` makes one per row). Returns ``(order, group, None)``
    with ``group`` numbering the distinct rows in sorted order; None when not even the last
    row packs with the index. With the last row alone packed, still 2.8x faster than
    ``np.lexsort`` on a hash, a small count, a float's bits and one time (2M records)."""
    n = rows[0].shape[0]
    if n == 0 or any(col.dtype != np.int64 for col in rows):
        return None
    ib = max(1, (n - 1).bit_length())
    spans = []
    for col in rows:
        lo, hi = _span(col)
        spans.append((int(lo), (int(hi) - int(lo)).bit_length()))
    tail, used = len(rows), ib
    while tail > 0 and used + spans[tail - 1][1] <= 64:
        tail -= 1
        used += spans[tail][1]
    if tail == len(rows):
        return None
    packed = packed_sort(rows[tail:], truncate=False)
    if packed is None:
        return None
    order = (packed[0] & np.uint64((1 << packed[1]) - 1)).view(np.int64)
    j = tail  # rows[:j] are left, taken from the end in words
    while j > 0:
        i, bits = j - 1, spans[j - 1][1]
        if bits < 64:
            while i > 0 and bits + spans[i - 1][1] <= 63:
                i -= 1
                bits += spans[i][1]
        if i == j - 1 and spans[i][1] >= 64:
            word = rows[i][order]
        else:
            key = np.zeros(n, dtype=np.uint64)
            shift = 0
            for c in range(j - 1, i - 1, -1):
                lo, b = spans[c]
                if b:
                    _pack_into(key, rows[c], lo, 0, shift)
                    shift += b
            word = key.view(np.int64)[order]
        order = order[stable_argsort(word)]
        j = i
    changed = np.zeros(n, dtype=bool)
    for col in rows:
        s = col[order]
        changed[1:] |= s[1:] != s[:-1]
    return order, np.cumsum(changed, dtype=np.int64).view(np.uint64), None


def sort_rows(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """The stable lexicographic order of ``rows`` (``rows[0]`` most significant) by packed
    integer sorts: ``(order, high, lead)`` where ``order`` is the permutation and two
    neighbours in sorted order are equal rows exactly when their ``high`` values are equal
    and (when ``lead`` is not None) their ``lead`` values too. None when the rows are too
    wide for each of these (then only ``np.lexsort`` will do)."""
    packed = packed_sort(rows)
    if packed is not None:
        key, ib, lead = packed
        order = (key & np.uint64((1 << ib) - 1)).view(np.int64)
        return order, key >> np.uint64(ib), None if lead is None else lead[order]
    split = _split_sort(rows)
    return split if split is not None else _lsd_sort(rows)


def packed_order(rows: list[np.ndarray]) -> np.ndarray | None:
    """The stable lexicographic permutation of ``rows`` by :func:`sort_rows`, or None."""
    sorted_ = sort_rows(rows)
    return None if sorted_ is None else sorted_[0]


@njit(cache=True, nogil=True)
def _sorted_groups(
    order: np.ndarray, high: np.ndarray, lead: np.ndarray, check: bool, diffs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(first record, summed diff) of each group of equal rows in sorted order (see
    :func:`sort_rows`), zero sums dropped."""
    n = order.shape[0]
    first = np.empty(n, np.int64)
    sums = np.empty(n, np.int64)
    g = -1
    for i in range(n):
        row = order[i]
        if i == 0 or high[i] != high[i - 1] or (check and lead[i] != lead[i - 1]):
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


def _groups(
    sorted_: tuple[np.ndarray, np.ndarray, np.ndarray | None], diffs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    order, high, lead = sorted_
    if lead is None:
        return _sorted_groups(order, high, high, False, diffs)
    return _sorted_groups(order, high, np.ascontiguousarray(lead), True, diffs)


@njit(cache=True, nogil=True)
def row_bits(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """For packing the columns of ``rows`` (``(r, n)``) into integers: each row's least
    value, the bits its range needs, and their total (64 or more when a range overflows
    int64, or the total is too wide to pack)."""
    r, n = rows.shape
    lows = np.zeros(r, np.int64)
    bits = np.zeros(r, np.int64)
    total = 0
    for k in range(r):
        if n == 0:
            continue
        lo, hi = _span(rows[k])
        span = hi - lo
        b = 0
        if span < 0:  # the range overflowed int64
            b = 64
        while b < 63 and (span >> b) > 0:
            b += 1
        lows[k] = lo
        bits[k] = b
        total += b
    return lows, bits, total


_RADIX_SORT_FROM = 1024  # values: from here packed keys are radix sorted (numba's sort is slower)
_DIGIT = 11  # at most this many bits per radix-sort pass


@njit(cache=True, nogil=True)
def radix_sort(values: np.ndarray, low: int, bits: int) -> None:
    """Sort ``values`` (non-negative, below ``2**bits``) in place, where their low ``low``
    bits are distinct and ascend in array order (an index packed under the sort key): a
    stable least-significant-digit radix sort of the bits above them only, in as few passes
    of at most ``_DIGIT`` bits as they need, a pass whose digit every value shares
    skipped; below ``_RADIX_SORT_FROM`` values, numba's sort of the whole values."""
    n = values.shape[0]
    if n < _RADIX_SORT_FROM:
        values.sort()
        return
    span = bits - low
    if span <= 0:
        return
    passes = (span + _DIGIT - 1) // _DIGIT
    digit = (span + passes - 1) // passes
    size = 1 << digit
    mask = np.uint64(size - 1)
    count = np.empty(size, np.int64)
    src, dst = values, np.empty_like(values)
    moved = 0
    shift = low
    while shift < bits:
        s = np.uint64(shift)
        count[:] = 0
        for i in range(n):
            count[(np.uint64(src[i]) >> s) & mask] += 1
        shared = False
        total = 0
        for k in range(size):
            c = count[k]
            shared = shared or c == n
            count[k] = total
            total += c
        if not shared:
            for i in range(n):
                b = (np.uint64(src[i]) >> s) & mask
                dst[count[b]] = src[i]
                count[b] += 1
            src, dst = dst, src
            moved += 1
        shift += digit
    if moved % 2:  # the sorted values are in the other buffer
        values[:] = src


_INSERTION_RUN = 16  # runs of equal sort prefix up to this long are finished by insertion


@njit(cache=True, nogil=True, inline="always")
def key_order(
    a_codes: np.ndarray,
    a_keys: np.ndarray,
    a: int,
    b_codes: np.ndarray,
    b_keys: np.ndarray,
    b: int,
    exact: bool,
) -> int:
    """-1, 0 or 1 as key ``a`` sorts before, with or after key ``b`` in trace order (by
    code, then, where codes are hashes, by key columns). Inlined into the numba IR: callers
    pass batch arrays viewed in place, or call it only where codes tie (a helper that takes
    reference-counted arrays pays atomic reference counts per call)."""
    if a_codes[a] != b_codes[b]:
        return -1 if a_codes[a] < b_codes[b] else 1
    if not exact:
        for j in range(a_keys.shape[0]):
            if a_keys[j, a] != b_keys[j, b]:
                return -1 if a_keys[j, a] < b_keys[j, b] else 1
    return 0


@njit(cache=True, nogil=True)
def column_less(keys: np.ndarray, a: int, b: int) -> bool:
    """Whether column ``a`` of ``keys`` sorts strictly before column ``b``."""
    for k in range(keys.shape[0]):
        if keys[k, a] != keys[k, b]:
            return keys[k, a] < keys[k, b]
    return False


@njit(cache=True, nogil=True)
def finish_run(keys: np.ndarray, order: np.ndarray, lo: int, hi: int) -> None:
    """Sort ``order[lo:hi]`` (in index order) stably by whole columns, in place."""
    if hi - lo <= _INSERTION_RUN:
        for i in range(lo + 1, hi):
            x = order[i]
            j = i - 1
            while j >= lo and column_less(keys, x, order[j]):
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = x
        return
    ordered = True  # often so (a key's records at one time): then there is nothing to do
    for i in range(lo + 1, hi):
        if column_less(keys, order[i], order[i - 1]):
            ordered = False
            break
    if ordered:
        return
    run = order[lo:hi].copy()
    for k in range(keys.shape[0] - 1, -1, -1):  # stable sorts, least significant row first
        col = np.empty(hi - lo, np.int64)
        for i in range(hi - lo):
            col[i] = keys[k, run[i]]
        run = run[np.argsort(col, kind="mergesort")]
    order[lo:hi] = run


@njit(cache=True, nogil=True)
def lex_argsort(keys: np.ndarray) -> np.ndarray:
    """The stable lexicographic order of the columns of ``keys`` (``(r, n)``, row 0 most
    significant), in compiled code: one sort of packed integers (radix sorted when there
    are many), each row's ``value - min`` in as many bits as its range needs and the
    column index in the low bits. When the rows do not fit in 63 bits (hashed key codes),
    the packed prefix ends with the leading bits of the first row that does not fit, and
    each run of columns sharing a prefix (in index order, so the sort stays stable) is
    then sorted by whole columns: by insertion when short, as hashes make them, else by a
    stable sort per row."""
    r, n = keys.shape
    ib = 1
    while (1 << ib) < n:
        ib += 1
    lows, bits, total = row_bits(keys)
    room = 63 - ib  # bits of prefix
    packed = np.empty(n, np.int64)
    for i in range(n):
        v = np.int64(0)
        left = room
        for k in range(r):
            if left == 0:
                break
            if bits[k] <= left:
                v = (v << bits[k]) | (keys[k, i] - lows[k])
                left -= bits[k]
            else:  # the leading ``left`` bits of this row's offset
                off = np.uint64(keys[k, i]) - np.uint64(lows[k])
                v = (v << left) | np.int64(off >> np.uint64(bits[k] - left))
                left = 0
        packed[i] = (v << ib) | i
    radix_sort(packed, ib, ib + min(total, room))
    order = np.empty(n, np.int64)
    mask = (1 << ib) - 1
    for i in range(n):
        order[i] = packed[i] & mask
    if ib + total <= 63:
        return order
    lo = 0
    for i in range(1, n + 1):
        if i == n or (packed[i] >> ib) != (packed[lo] >> ib):
            if i - lo > 1:
                finish_run(keys, order, lo, i)
            lo = i
    return order


@njit(cache=True, nogil=True)
def consolidate_order(keys: np.ndarray, diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r, n = keys.shape
    order = lex_argsort(keys)
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
def consolidate_columns(
    data: np.ndarray, times: np.ndarray, diffs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An update batch's (data, times, diffs) consolidated in one call, for few rows:
    :func:`consolidate_order` of the rows ``[*data, *times]``, then the surviving columns."""
    k, d, n = data.shape[0], times.shape[0], diffs.shape[0]
    rows = np.empty((k + d, n), np.int64)
    rows[:k] = data
    rows[k:] = times
    first, sums = consolidate_order(rows, diffs)
    m = first.shape[0]
    o_data = np.empty((k, m), np.int64)
    o_times = np.empty((d, m), np.int64)
    for i in range(m):
        o_data[:, i] = data[:, first[i]]
        o_times[:, i] = times[:, first[i]]
    return o_data, o_times, sums


@njit(cache=True, nogil=True)
def feedback_columns(
    b_data: np.ndarray,
    b_times: np.ndarray,
    b_diffs: np.ndarray,
    i_data: np.ndarray,
    i_times: np.ndarray,
    i_diffs: np.ndarray,
    max_iteration: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """A loop variable's feedback in one call, for few rows: ``b - i`` consolidated
    (:func:`consolidate_order`), the last time coordinate (the iteration) plus one, and
    updates beyond ``max_iteration`` dropped (none when it is negative). Returns (data,
    times, diffs, least iteration, greatest iteration); the iterations are 0 when empty."""
    k, d = b_data.shape[0], b_times.shape[0]
    nb, ni = b_diffs.shape[0], i_diffs.shape[0]
    rows = np.empty((k + d, nb + ni), np.int64)
    diffs = np.empty(nb + ni, np.int64)
    rows[:k, :nb] = b_data
    rows[k:, :nb] = b_times
    diffs[:nb] = b_diffs
    rows[:k, nb:] = i_data
    rows[k:, nb:] = i_times
    diffs[nb:] = -i_diffs
    first, sums = consolidate_order(rows, diffs)
    m = 0
    for i in range(first.shape[0]):
        if max_iteration < 0 or rows[k + d - 1, first[i]] + 1 <= max_iteration:
            first[m] = first[i]
            sums[m] = sums[i]
            m += 1
    o_data = np.empty((k, m), np.int64)
    o_times = np.empty((d, m), np.int64)
    lo = hi = 0
    for i in range(m):
        o_data[:, i] = rows[:k, first[i]]
        o_times[:, i] = rows[k:, first[i]]
        it = o_times[d - 1, i] + 1
        o_times[d - 1, i] = it
        if i == 0 or it < lo:
            lo = it
        if i == 0 or it > hi:
            hi = it
    return o_data, o_times, sums[:m].copy(), lo, hi


def lexsort_consolidate(rows: list[np.ndarray], diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The numpy reference for :func:`consolidate_order`: ``np.lexsort``, boundaries, and
    ``np.add.reduceat``. Used when the rows neither are few nor fit in 64 bits."""
    from engine.consolidate import group_starts, segment_sums  # it imports this module

    order = np.lexsort(rows[::-1])
    starts = group_starts([r[order] for r in rows], diffs.shape[0])
    sums = segment_sums(diffs[order], starts)
    first = order[starts]
    keep = sums != 0
    return first[keep], sums[keep]


def consolidate_rows_order(
    rows: list[np.ndarray], diffs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`consolidate_order` for any size, by the fastest path that applies: compiled
    merge sorts below ``PACKED_FROM`` rows, packed integer sorts (:func:`sort_rows`) when
    the rows allow, else numpy's lexsort. All give the same (first, sums)."""
    n = diffs.shape[0]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    diffs = np.ascontiguousarray(diffs)
    if not rows:  # every record is the same (empty) row
        total = int(diffs.sum())
        return (np.zeros(1, np.int64), np.full(1, total)) if total else (diffs[:0], diffs[:0])
    if n < PACKED_FROM:
        return consolidate_order(np.stack(rows), diffs)
    sorted_ = sort_rows(rows)
    if sorted_ is not None:
        return _groups(sorted_, diffs)
    return lexsort_consolidate(rows, diffs)


@njit(cache=True, nogil=True)
def _codes_determine_keys(order: np.ndarray, codes: np.ndarray, keys: np.ndarray) -> bool:
    """True when, in sorted order, records with equal codes also have equal keys."""
    for i in range(1, order.shape[0]):
        row, prev = order[i], order[i - 1]
        if codes[row] == codes[prev]:
            for j in range(keys.shape[0]):
                if keys[j, row] != keys[j, prev]:
                    return False
    return True


def consolidate_hashed(
    codes: np.ndarray, keys: np.ndarray, rest: list[np.ndarray], diffs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`consolidate_rows_order` of ``[codes, *keys, *rest]`` where ``codes`` hash the
    key columns: sorted without the key columns (fewer bits to pack) when no two keys in
    the input share a code, which is checked; with them otherwise."""
    n = diffs.shape[0]
    if n and n >= PACKED_FROM:
        sorted_ = sort_rows([codes, *rest])
        if sorted_ is not None and _codes_determine_keys(sorted_[0], codes, keys):
            return _groups(sorted_, np.ascontiguousarray(diffs))
    return consolidate_rows_order([codes, *keys, *rest], diffs)


@njit(cache=True, nogil=True)
def trace_arrays(
    first: np.ndarray,
    codes: np.ndarray,
    keys: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A trace batch's arrays from its consolidated records (``first``: the index of each
    surviving record, in (code, key, value, time) order): the records' values and times,
    then the distinct keys with their offsets. Returns (key codes, keys, offsets, vals,
    times)."""
    kk, kv, d = keys.shape[0], vals.shape[0], times.shape[0]
    m = first.shape[0]
    o_codes = np.empty(m, np.int64)
    o_keys = np.empty((kk, m), np.int64)
    o_vals = np.empty((kv, m), np.int64)
    o_times = np.empty((d, m), np.int64)
    # column by column: each gather a plain loop over one source array. Reading every
    # column of a record in turn took 1.6-2.4x as long for 20k-2M records in random order
    # (the same in sorted order); a step arranging a 2M-row write of a 4-column table took
    # 0.42-0.49 s at best, 0.30-0.33 s now (BENCHMARKS.md, session 65)
    for i in range(m):
        o_codes[i] = codes[first[i]]
    for j in range(kk):
        for i in range(m):
            o_keys[j, i] = keys[j, first[i]]
    for j in range(kv):
        for i in range(m):
            o_vals[j, i] = vals[j, first[i]]
    for j in range(d):
        for i in range(m):
            o_times[j, i] = times[j, first[i]]
    starts = np.empty(m + 1, np.int64)
    u = 0
    for i in range(m):
        new = i == 0 or o_codes[i] != o_codes[i - 1]
        if not new and not exact:
            for j in range(kk):
                if o_keys[j, i] != o_keys[j, i - 1]:
                    new = True
                    break
        if new:
            starts[u] = i
            u += 1
    starts[u] = m
    u_codes = np.empty(u, np.int64)
    u_keys = np.empty((kk, u), np.int64)
    for i in range(u):
        u_codes[i] = o_codes[starts[i]]
        for j in range(kk):
            u_keys[j, i] = o_keys[j, starts[i]]
    return u_codes, u_keys, starts[: u + 1].copy(), o_vals, o_times


@njit(cache=True, nogil=True)
def arrange_rows(
    data: np.ndarray,
    key_cols: np.ndarray,
    val_cols: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A trace batch's arrays (key codes, keys, offsets, vals, times, diffs) and its seek
    row (:func:`kernel_row`) from update rows in one call, for few rows: split the
    columns, hash the keys (``hashing.key_codes``), sort and consolidate
    (:func:`consolidate_order`) and index (:func:`trace_arrays`). The same as those steps
    called one by one."""
    n = diffs.shape[0]
    kk, kv, d = key_cols.shape[0], val_cols.shape[0], times.shape[0]
    kr = 0 if exact else kk
    rows = np.empty((1 + kr + kv + d, n), np.int64)
    keys = np.empty((kk, n), np.int64)
    vals = np.empty((kv, n), np.int64)
    rows[0] = row_codes(data, key_cols)
    for i in range(n):
        for j in range(kk):
            keys[j, i] = data[key_cols[j], i]
            if not exact:
                rows[1 + j, i] = keys[j, i]
        for j in range(kv):
            vals[j, i] = data[val_cols[j], i]
            rows[1 + kr + j, i] = vals[j, i]
        for j in range(d):
            rows[1 + kr + kv + j, i] = times[j, i]
    first, sums = consolidate_order(rows, diffs)
    codes = rows[0].copy()
    u_codes, u_keys, offsets, o_vals, o_times = trace_arrays(first, codes, keys, vals, times, exact)
    row = kernel_row(u_codes, u_keys, offsets, o_vals, o_times, sums)
    return u_codes, u_keys, offsets, o_vals, o_times, sums, row
