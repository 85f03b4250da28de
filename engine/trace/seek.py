"""Compiled seeks into one trace batch: find many keys, gather their records, pair them.

The loops of ``Spine.gather`` and ``Join``: a galloping search per query key on each
batch's sorted codes (with a column check where codes are hashes), then a copy of each
matched key's record range (or of each pair of records, for a join). numpy needs a dozen
calls per batch for this; these need one call per spine (numba, cached on disk): the
batches' arrays are passed as a table of their addresses (``TraceBatch.addresses``) and
viewed in place, since a call per batch (several µs of dispatch each) costs more than the
seeks of a small query. In big batches every step of a seek misses the cache; the loops ask
for the memory of the query a few places ahead (``prefetch``), so misses overlap.
``engine.trace.cursor`` and ``operators.join.join_pairs`` hold the numpy references the
tests compare against.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from engine.sort_kernels import RADIX_FROM, ROW_WIDTH, batch_row

__all__ = [
    "RADIX_FROM",
    "ROW_WIDTH",
    "batch_arrays",
    "batch_records",
    "bisect_at_least",
    "gather_spine",
    "join_spine",
    "prefetch",
    "prefetch_records",
    "radix_index",
    "record_ranges",
    "table_row",
]


def _int64_at_typing(typingctx: Any, address: Any) -> Any:
    sig = types.CPointer(types.int64)(types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.int64)))

    return sig, codegen


# An int64 address as a pointer to int64 (to view an array in place with carray).
_int64_at: Any = intrinsic(_int64_at_typing)


def _prefetch_typing(typingctx: Any, address: Any) -> Any:
    sig = types.void(types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ptr, i32 = ir.PointerType(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ptr, i32, i32, i32]), "llvm.prefetch.p0"
        )
        # read, keep in all cache levels, data
        builder.call(fn, [builder.inttoptr(args[0], ptr), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


# Start loading the cache line at an address, without waiting for it: seeks into big
# batches miss the cache at every step, and asking a few queries ahead overlaps the misses.
prefetch: Any = intrinsic(_prefetch_typing)
_AHEAD = 8  # queries ahead whose memory is asked for


@njit(cache=True, nogil=True)
def bisect_at_least(codes: np.ndarray, code: int, lo: int, hi: int) -> int:
    """First position in ``lo:hi`` whose code is ``>= code`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if codes[mid] < code:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _lower_bound(codes: np.ndarray, code: int, base: int) -> int:
    """First position ``>= base`` whose code is ``>= code``, given every code before
    ``base`` is smaller: a galloping search from ``base``. Queries in ascending order each
    start from the previous answer, so their searches stay short and touch nearby memory
    instead of walking a binary search down from the whole array's middle."""
    m = codes.shape[0]
    if base >= m or codes[base] >= code:
        return base
    lo = base  # codes[lo] < code
    step = 1
    while lo + step < m and codes[lo + step] < code:
        lo += step
        step *= 2
    hi = min(lo + step, m)  # codes[hi] >= code, or hi == m
    return bisect_at_least(codes, code, lo + 1, hi)


@njit(cache=True, nogil=True)
def _same_key(keys: np.ndarray, j: int, q_keys: np.ndarray, qi: int) -> bool:
    """Whether key ``j`` of a batch has the key columns of query ``qi``."""
    for r in range(keys.shape[0]):  # noqa: SIM110 - an explicit loop compiles to tight code
        if keys[r, j] != q_keys[r, qi]:
            return False
    return True


@njit(cache=True, nogil=True)
def _find(
    lo: int,
    code: int,
    q_keys: np.ndarray,
    qi: int,
    codes: np.ndarray,
    keys: np.ndarray,
    exact: bool,
) -> int:
    """Index of the key equal to query ``qi`` in a batch, or -1; ``lo`` is the lower bound
    of ``code`` in ``codes``."""
    m = codes.shape[0]
    if exact:
        if lo < m and codes[lo] == code:
            return lo
        return -1
    j = lo
    while j < m and codes[j] == code:
        if _same_key(keys, j, q_keys, qi):
            return j
        j += 1
    return -1


@njit(cache=True, nogil=True)
def _find_all(
    q_codes: np.ndarray,
    q_keys: np.ndarray,
    codes: np.ndarray,
    keys: np.ndarray,
    exact: bool,
    radix: np.ndarray,
    shift: int,
    hit: np.ndarray,
) -> None:
    """For each query, the index of its key in the batch or -1, into ``hit``. Queries may
    come in any order; each reads a bucket of the batch's radix index when it has one
    (``radix`` not empty), else runs of ascending codes (the usual case: queries are sorted
    keys) gallop."""
    nq = q_codes.shape[0]
    if radix.shape[0]:
        last = radix.shape[0] - 1
        for i in range(nq):
            a = i + 2 * _AHEAD  # its bucket's bounds first, then the bucket itself
            if a < nq and q_codes[a] > codes[0]:
                b = min(_bucket(codes, q_codes[a], shift), last)
                prefetch(radix.ctypes.data + 8 * b)
            a = i + _AHEAD
            if a < nq and q_codes[a] > codes[0]:
                j = radix[min(_bucket(codes, q_codes[a], shift), last)]
                prefetch(codes.ctypes.data + 8 * j)
                for r in range(keys.shape[0]):
                    prefetch(keys.ctypes.data + 8 * (r * keys.shape[1] + j))
            lo = _radix_lower_bound(codes, q_codes[i], radix, shift)
            hit[i] = _find(lo, q_codes[i], q_keys, i, codes, keys, exact)
        return
    base = 0
    for i in range(nq):
        code = q_codes[i]
        if i > 0 and code < q_codes[i - 1]:
            base = 0
        base = _lower_bound(codes, code, base)
        hit[i] = _find(base, code, q_keys, i, codes, keys, exact)


_RADIX_SPREAD = 8  # keys per radix bucket, on average


@njit(cache=True, nogil=True)
def _radix_size(n: int) -> int:
    """Entries of the radix index of ``n`` codes (buckets + 1)."""
    buckets = 1
    while buckets * _RADIX_SPREAD < n:
        buckets *= 2
    return buckets + 1


@njit(cache=True, nogil=True)
def _bucket(codes: np.ndarray, code: int, shift: int) -> np.int64:
    """The radix bucket of ``code`` (not below ``codes[0]``): its offset from the least
    code, shifted right by ``shift``."""
    return np.int64((np.uint64(code) - np.uint64(codes[0])) >> np.uint64(shift))


@njit(cache=True, nogil=True)
def radix_index(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """For sorted ``codes`` of a big batch: (``first``, ``shift``) where bucket ``b`` holds
    the codes whose offset from the least code, shifted right by ``shift``, is ``b``, and
    ``first[b]`` is the position of its first code (``first[-1]`` = the number of codes). A
    seek reads one bucket instead of searching the whole array: key codes are hashes or
    dense ids, so buckets hold a few codes each (skewed codes only make some buckets
    bigger, and those are binary searched). Empty below ``RADIX_FROM`` codes."""
    n = codes.shape[0]
    if n < RADIX_FROM:
        return np.zeros(0, np.int64), 0
    buckets = _radix_size(n) - 1
    span = np.uint64(codes[n - 1]) - np.uint64(codes[0])
    shift = 0
    while shift < 64 and (span >> np.uint64(shift)) >= np.uint64(buckets):
        shift += 1
    first = np.empty(buckets + 1, np.int64)
    b = 0
    for i in range(n):
        bi = _bucket(codes, codes[i], shift)
        while b <= bi:
            first[b] = i
            b += 1
    while b <= buckets:
        first[b] = n
        b += 1
    return first, shift


@njit(cache=True, nogil=True)
def _radix_lower_bound(codes: np.ndarray, code: int, first: np.ndarray, shift: int) -> int:
    """The lower bound of ``code`` through a :func:`radix_index`: one bucket, binary
    searched. It does not start from the previous query's answer, as galloping does: in a
    big batch each seek misses the cache, and independent seeks overlap their misses."""
    m = codes.shape[0]
    if code <= codes[0]:
        return 0
    if code > codes[m - 1]:
        return m
    b = _bucket(codes, code, shift)
    return bisect_at_least(codes, code, first[b], first[b + 1])


# C-contiguous int64 arrays only: anything else does not match and raises TypeError
_C1, _C2 = types.int64[::1], types.int64[:, ::1]


@njit(
    types.int64[::1](_C1, _C2, _C1, _C2, _C2, _C1, _C1, types.int64),
    cache=True,
    nogil=True,
)
def table_row(
    codes: np.ndarray,
    keys: np.ndarray,
    offsets: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    radix: np.ndarray,
    shift: int,
) -> np.ndarray:
    """A batch's row of a :func:`gather_spine` table: its arrays' addresses, its numbers of
    keys and records (``sort_kernels.batch_row``), and its :func:`radix_index` (address,
    shift; 0, 0 without one)."""
    row = batch_row(codes, keys, offsets, vals, times, diffs)
    row[8] = radix.ctypes.data if radix.shape[0] else 0
    row[9] = shift
    return row


_FEW_KEYS = 8  # a batch with fewer keys than 1/8 of the (sorted) queries is walked key by key
_DENSE = 16  # sorted queries at least 1/16 of a batch's keys gallop, not use its radix index


@njit(cache=True, nogil=True)
def _find_few(
    q_codes: np.ndarray,
    q_keys: np.ndarray,
    codes: np.ndarray,
    keys: np.ndarray,
    exact: bool,
    hit: np.ndarray,
) -> None:
    """:func:`_find_all` for ascending queries and a batch of few keys: each batch key
    gallops to its code among the queries, instead of every query searching the batch.
    Both write into their row of the caller's hits (no array per batch)."""
    nq = q_codes.shape[0]
    hit[:] = -1
    q = 0
    for j in range(codes.shape[0]):
        q = _lower_bound(q_codes, codes[j], q)
        i = q
        while i < nq and q_codes[i] == codes[j]:
            if exact or _same_key(keys, j, q_keys, i):
                hit[i] = j
            i += 1


@njit(cache=True, nogil=True)
def _table_hits(
    q_codes: np.ndarray, q_keys: np.ndarray, table: np.ndarray, exact: bool
) -> np.ndarray:
    """For each batch of a seek table and each query, the index of its key or -1. Sorted
    queries that are many beside a batch's keys (``_DENSE``) gallop through its codes
    instead of reading its radix index: their reads go forward through memory, and over a
    step's seeks at 1k/2k (batches of 1,000, replayed) that took 6.2 ms instead of 8.0."""
    nq, kk, nb = q_codes.shape[0], q_keys.shape[0], table.shape[0]
    hits = np.empty((nb, nq), np.int64)
    no_radix = np.zeros(0, np.int64)
    ascending = True
    for i in range(1, nq):
        if q_codes[i] < q_codes[i - 1]:
            ascending = False
            break
    for b in range(nb):
        nk = table[b, 6]
        codes = carray(_int64_at(table[b, 0]), (nk,))
        keys = carray(_int64_at(table[b, 1]), (kk, nk))
        if ascending and nk * _FEW_KEYS < nq:
            _find_few(q_codes, q_keys, codes, keys, exact, hits[b])
            continue
        radix = no_radix
        if table[b, 8] != 0 and not (ascending and nq * _DENSE >= nk):
            radix = carray(_int64_at(table[b, 8]), (_radix_size(nk),))
        _find_all(q_codes, q_keys, codes, keys, exact, radix, table[b, 9], hits[b])
    return hits


@njit(cache=True, nogil=True)
def record_ranges(
    q_codes: np.ndarray, q_keys: np.ndarray, table: np.ndarray, exact: bool
) -> tuple[np.ndarray, np.ndarray, int]:
    """Where each query key's records lie in each batch of a seek table: (starts, ends,
    total), ``(batches, queries)`` record ranges, the start -1 where the batch lacks the key."""
    nq, nb = q_codes.shape[0], table.shape[0]
    starts = _table_hits(q_codes, q_keys, table, exact)
    ends = np.empty((nb, nq), np.int64)  # hits become record ranges: offsets are read once
    n = 0
    for b in range(nb):
        offsets = carray(_int64_at(table[b, 2]), (table[b, 6] + 1,))
        for i in range(nq):
            if i + _AHEAD < nq and starts[b, i + _AHEAD] >= 0:
                prefetch(table[b, 2] + 8 * starts[b, i + _AHEAD])
            j = starts[b, i]
            if j >= 0:
                starts[b, i], ends[b, i] = offsets[j], offsets[j + 1]
                n += ends[b, i] - starts[b, i]
    return starts, ends, n


@njit(cache=True, nogil=True)
def batch_arrays(
    table: np.ndarray, b: int, kk: int, kv: int, d: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The codes, keys, offsets, vals, times and diffs of batch ``b`` of a seek table, in
    place (``kk`` key columns, ``kv`` value columns, ``d`` time coordinates)."""
    nk, nr = table[b, 6], table[b, 7]
    return (
        carray(_int64_at(table[b, 0]), (nk,)),
        carray(_int64_at(table[b, 1]), (kk, nk)),
        carray(_int64_at(table[b, 2]), (nk + 1,)),
        carray(_int64_at(table[b, 3]), (kv, nr)),
        carray(_int64_at(table[b, 4]), (d, nr)),
        carray(_int64_at(table[b, 5]), (nr,)),
    )


@njit(cache=True, nogil=True)
def batch_records(table: np.ndarray, b: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The times ``(d, records)`` and diffs of batch ``b`` of a seek table, in place."""
    nr = table[b, 7]
    return carray(_int64_at(table[b, 4]), (d, nr)), carray(_int64_at(table[b, 5]), (nr,))


@njit(cache=True, nogil=True, inline="always")
def prefetch_records(table: np.ndarray, b: int, rec: int, d: int) -> None:
    """Ask for the memory of record ``rec`` of batch ``b`` (its times and diff)."""
    nr = table[b, 7]
    for c in range(d):
        prefetch(table[b, 4] + 8 * (c * nr + rec))
    prefetch(table[b, 5] + 8 * rec)


@njit(cache=True, nogil=True)
def gather_spine(
    q_codes: np.ndarray,
    q_keys: np.ndarray,
    table: np.ndarray,
    exact: bool,
    kv: int,
    d: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every record of every query key found in any batch of a spine: (owner, vals, times,
    diffs), batch by batch.
    ``table`` has one row per batch: the addresses of its codes, keys, offsets, vals, times
    and diffs (C-contiguous int64 arrays that outlive the call), then its numbers of keys
    and records. ``kv`` and ``d`` are the numbers of value columns and time coordinates."""
    nq, nb = q_codes.shape[0], table.shape[0]
    hits, ends, n = record_ranges(q_codes, q_keys, table, exact)
    owner = np.empty(n, np.int64)
    ov = np.empty((kv, n), np.int64)
    ot = np.empty((d, n), np.int64)
    od = np.empty(n, np.int64)
    p = 0
    for b in range(nb):
        nr = table[b, 7]
        vals = carray(_int64_at(table[b, 3]), (kv, nr))
        times = carray(_int64_at(table[b, 4]), (d, nr))
        diffs = carray(_int64_at(table[b, 5]), (nr,))
        for i in range(nq):
            a = i + _AHEAD
            if a < nq and hits[b, a] >= 0:
                prefetch_records(table, b, hits[b, a], d)
            if hits[b, i] < 0:
                continue
            for rec in range(hits[b, i], ends[b, i]):
                owner[p] = i
                for c in range(kv):
                    ov[c, p] = vals[c, rec]
                for c in range(d):
                    ot[c, p] = times[c, rec]
                od[p] = diffs[rec]
                p += 1
    return owner, ov, ot, od


@njit(cache=True, nogil=True)
def join_spine(
    codes: np.ndarray,
    keys: np.ndarray,
    offsets: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
    table: np.ndarray,
    exact: bool,
    other_kv: int,
    spec: np.ndarray,
    round_: int,
    most: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
    """Join one batch (the *delta*) with every batch of a spine (the *other* side, as a
    :func:`gather_spine` table): for every pair of records with equal keys, the output row,
    the join (coordinate-wise max) of their times and the product of their diffs, batch by
    batch; and how many outputs have a last time coordinate above ``round_`` (in a loop: at
    later iterations than the round). ``spec`` has a row per output column: (from the
    delta?, from the key?, column index among that side's key or value columns). More than
    ``most`` pairs are not made: then the outputs are empty, the count is -1, and the last
    array holds each delta key's number of pairs (otherwise it is empty)."""
    nq, kk, d, nb = codes.shape[0], keys.shape[0], times.shape[0], table.shape[0]
    hits = _table_hits(codes, keys, table, exact)
    pairs = np.zeros(nq, np.int64)
    for b in range(nb):
        o_offsets = carray(_int64_at(table[b, 2]), (table[b, 6] + 1,))
        for i in range(nq):
            j = hits[b, i]
            if j >= 0:
                pairs[i] += (offsets[i + 1] - offsets[i]) * (o_offsets[j + 1] - o_offsets[j])
    n = pairs.sum()
    ncols = spec.shape[0]
    if n > most:
        no = np.empty(0, np.int64)
        return np.empty((ncols, 0), np.int64), np.empty((d, 0), np.int64), no, -1, pairs
    data = np.empty((ncols, n), np.int64)
    out_t = np.empty((d, n), np.int64)
    out_d = np.empty(n, np.int64)
    p = later = 0
    for b in range(nb):
        nk, nr = table[b, 6], table[b, 7]
        o_keys = carray(_int64_at(table[b, 1]), (kk, nk))
        o_offsets = carray(_int64_at(table[b, 2]), (nk + 1,))
        o_vals = carray(_int64_at(table[b, 3]), (other_kv, nr))
        o_times = carray(_int64_at(table[b, 4]), (d, nr))
        o_diffs = carray(_int64_at(table[b, 5]), (nr,))
        for i in range(nq):
            j = hits[b, i]
            if j < 0:
                continue
            for x in range(offsets[i], offsets[i + 1]):
                for y in range(o_offsets[j], o_offsets[j + 1]):
                    for c in range(ncols):
                        idx = spec[c, 2]
                        if spec[c, 0] == 1:
                            data[c, p] = keys[idx, i] if spec[c, 1] == 1 else vals[idx, x]
                        else:
                            data[c, p] = o_keys[idx, j] if spec[c, 1] == 1 else o_vals[idx, y]
                    for c in range(d):
                        out_t[c, p] = max(times[c, x], o_times[c, y])
                    later += out_t[d - 1, p] > round_
                    out_d[p] = diffs[x] * o_diffs[y]
                    p += 1
    return data, out_t, out_d, later, np.empty(0, np.int64)
