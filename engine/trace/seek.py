"""Compiled seeks into one trace batch: find many keys, gather their records, pair them.

These are the per-batch loops of ``Spine.gather`` and ``join_pairs``: a binary search per
query key on the batch's sorted codes (with a column check where codes are hashes), then a
copy of each matched key's record range. numpy needs a dozen calls per batch for this; the
compiled loop needs one (numba, cached on disk). ``engine.trace.cursor`` holds the numpy
reference the tests compare against.

``gather_spine`` gathers from every batch of a spine in one call: the batches' arrays are
passed as a table of their addresses (``TraceBatch.addresses``) and viewed in place, since a
call per batch (several µs of dispatch each) costs more than the seeks for small queries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

__all__ = ["gather_spine", "pair_batches", "table_row"]


def _int64_at_typing(typingctx: Any, address: Any) -> Any:
    sig = types.CPointer(types.int64)(types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.int64)))

    return sig, codegen


# An int64 address as a pointer to int64 (to view an array in place with carray).
_int64_at: Any = intrinsic(_int64_at_typing)


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
    lo += 1
    while lo < hi:
        mid = (lo + hi) // 2
        if codes[mid] < code:
            lo = mid + 1
        else:
            hi = mid
    return lo


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
        same = True
        for r in range(keys.shape[0]):
            if keys[r, j] != q_keys[r, qi]:
                same = False
                break
        if same:
            return j
        j += 1
    return -1


@njit(cache=True, nogil=True)
def _find_all(
    q_codes: np.ndarray, q_keys: np.ndarray, codes: np.ndarray, keys: np.ndarray, exact: bool
) -> np.ndarray:
    """For each query, the index of its key in the batch or -1. Queries may come in any
    order; runs of ascending codes (the usual case: queries are sorted keys) gallop."""
    nq = q_codes.shape[0]
    hit = np.empty(nq, np.int64)
    base = 0
    for i in range(nq):
        code = q_codes[i]
        if i > 0 and code < q_codes[i - 1]:
            base = 0
        base = _lower_bound(codes, code, base)
        hit[i] = _find(base, code, q_keys, i, codes, keys, exact)
    return hit


@njit(cache=True, nogil=True)
def pair_batches(
    a_codes: np.ndarray,
    a_keys: np.ndarray,
    a_offsets: np.ndarray,
    b_codes: np.ndarray,
    b_keys: np.ndarray,
    b_offsets: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Record pairs with equal keys: (a record, a key, b record, b key)."""
    na = a_codes.shape[0]
    hit = _find_all(a_codes, a_keys, b_codes, b_keys, exact)
    n = 0
    for i in range(na):
        j = hit[i]
        if j >= 0:
            n += (a_offsets[i + 1] - a_offsets[i]) * (b_offsets[j + 1] - b_offsets[j])
    ai = np.empty(n, np.int64)
    ak = np.empty(n, np.int64)
    bi = np.empty(n, np.int64)
    bk = np.empty(n, np.int64)
    p = 0
    for i in range(na):
        j = hit[i]
        if j < 0:
            continue
        for x in range(a_offsets[i], a_offsets[i + 1]):
            for y in range(b_offsets[j], b_offsets[j + 1]):
                ai[p] = x
                ak[p] = i
                bi[p] = y
                bk[p] = j
                p += 1
    return ai, ak, bi, bk


@njit(cache=True, nogil=True)
def table_row(
    codes: np.ndarray,
    keys: np.ndarray,
    offsets: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
) -> np.ndarray:
    """A batch's row of a :func:`gather_spine` table: its arrays' addresses, its numbers of
    keys and records."""
    row = np.empty(8, np.int64)
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
    nq, kk, nb = q_codes.shape[0], q_keys.shape[0], table.shape[0]
    hits = np.empty((nb, nq), np.int64)
    n = 0
    for b in range(nb):
        nk = table[b, 6]
        codes = carray(_int64_at(table[b, 0]), (nk,))
        keys = carray(_int64_at(table[b, 1]), (kk, nk))
        offsets = carray(_int64_at(table[b, 2]), (nk + 1,))
        hits[b] = _find_all(q_codes, q_keys, codes, keys, exact)
        for i in range(nq):
            j = hits[b, i]
            if j >= 0:
                n += offsets[j + 1] - offsets[j]
    owner = np.empty(n, np.int64)
    ov = np.empty((kv, n), np.int64)
    ot = np.empty((d, n), np.int64)
    od = np.empty(n, np.int64)
    p = 0
    for b in range(nb):
        nk, nr = table[b, 6], table[b, 7]
        offsets = carray(_int64_at(table[b, 2]), (nk + 1,))
        vals = carray(_int64_at(table[b, 3]), (kv, nr))
        times = carray(_int64_at(table[b, 4]), (d, nr))
        diffs = carray(_int64_at(table[b, 5]), (nr,))
        for i in range(nq):
            j = hits[b, i]
            if j < 0:
                continue
            for rec in range(offsets[j], offsets[j + 1]):
                owner[p] = i
                for c in range(kv):
                    ov[c, p] = vals[c, rec]
                for c in range(d):
                    ot[c, p] = times[c, rec]
                od[p] = diffs[rec]
                p += 1
    return owner, ov, ot, od
