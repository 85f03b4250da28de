"""One compiled call for a whole reduce step of a set-like kernel (distinct, threshold).

A single update moves a loop through a dozen rounds of a handful of records each, and the
reduce driver (``engine.operators.reduce``) spends most of such a round between its kernels:
splitting new times into ready and pending, finding the distinct keys, gathering their
histories from both spines, the candidate grid, the differences, keeping the pending set
and building the output batch are each a few numpy calls. :func:`set_step` does all of it
in one call, for the shape that applies to: keys without value columns in and out, and
candidate times on a line (``reduce_line``), where the histories, the candidate line, the
differences and the pending times are one pass per key (``reduce_set_line``, the same
results as the driver's ``line_grid`` and ``scalar_differences``). Otherwise it reports
that it does not apply, before changing anything, and the driver takes its general path;
tests compare the two. The delta and the pending triples both come sorted in trace order,
so the distinct keys and the new pending set are found by merging them, not by sorting.

:func:`run_set_step` splits a big step in two by key range, run at once on two threads
(``engine.parallel``): keys are independent, and the halves' results joined in key order
are the whole step's.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine import parallel
from engine.operators.reduce_line import pinned_round
from engine.operators.reduce_set_line import line_set_differences
from engine.sort_kernels import key_order
from engine.trace import TraceBatch

__all__ = ["SPLIT_FROM", "StepResult", "run_set_step", "set_step"]

SPLIT_FROM = 4096  # delta records plus pending triples from which a step splits in two

StepResult = tuple[
    bool,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
]

# The walks below copy columns and test the frontier in place, not through helpers: a
# compiled helper that takes reference-counted arrays, inlined into the numba IR or not,
# pays atomic reference counts per call, and per record that doubled set_step's time.
# ``key_order`` runs only where two keys' codes tie.


@njit(cache=True, nogil=True)
def set_step(
    d_codes: np.ndarray,
    d_keys: np.ndarray,
    d_offsets: np.ndarray,
    d_times: np.ndarray,
    p_codes: np.ndarray,
    p_keys: np.ndarray,
    p_times: np.ndarray,
    in_table: np.ndarray,
    out_table: np.ndarray,
    felems: np.ndarray,
    exact: bool,
    at_least: int,
    columns: np.ndarray,
) -> StepResult:
    """One reduce step: the input delta (a trace batch's codes, keys, offsets and times)
    and the pending (code, key, time) triples in, against the input and output spines
    (their seek tables, ``Spine.seek_table``) at frontier ``felems``. Returns (applies,
    pending codes, keys and times, output codes, keys, offsets, times and diffs, output
    rows); the output is a trace batch of differences at distinct times, already in trace
    order, and its rows are its keys expanded per record, key column ``j`` as row
    ``columns[j]``. When it does not apply, everything after the flag is empty and nothing
    has been decided."""
    kk, d = d_keys.shape[0], d_times.shape[0]
    nd, n_pend = d_codes.shape[0], p_codes.shape[0]
    z1 = np.zeros(0, np.int64)
    zk = np.zeros((kk, 0), np.int64)
    zt = np.zeros((d, 0), np.int64)
    # walk the delta's keys and the pending triples together in trace order (both come
    # sorted), splitting their times into new (complete now) and waiting: the keys with
    # new times come out distinct and sorted, each new time knowing its key (owner)
    cap = d_times.shape[1] + n_pend
    owner = np.empty(cap, np.int64)
    n_times = np.empty((d, cap), np.int64)
    w_codes = np.empty(cap, np.int64)
    w_keys = np.empty((kk, cap), np.int64)
    w_times = np.empty((d, cap), np.int64)
    k_codes = np.empty(nd + n_pend, np.int64)
    k_keys = np.empty((kk, nd + n_pend), np.int64)
    nn = nw = nkeys = 0
    j = i = 0
    ne = felems.shape[0]
    while j < nd or i < n_pend:
        order = -1 if j < nd else 1
        if j < nd and i < n_pend:  # the delta's key j against pending key i
            if d_codes[j] != p_codes[i]:  # codes decide, without a call, unless they tie
                order = -1 if d_codes[j] < p_codes[i] else 1
            else:
                order = key_order(d_codes, d_keys, j, p_codes, p_keys, i, exact)
        start = nn
        w_start, w_mid = nw, -1  # where the key's waiting triples start, and its pending ones
        if order <= 0:  # the delta's key j
            k_codes[nkeys] = d_codes[j]
            for c in range(kk):
                k_keys[c, nkeys] = d_keys[c, j]
            for rec in range(d_offsets[j], d_offsets[j + 1]):
                waits = False  # frontier_reaches, in place
                for e in range(ne):
                    le = True
                    for c in range(d):
                        le = le and felems[e, c] <= d_times[c, rec]
                    waits = waits or le
                if waits:
                    w_codes[nw] = d_codes[j]
                    for c in range(kk):
                        w_keys[c, nw] = d_keys[c, j]
                    for c in range(d):
                        w_times[c, nw] = d_times[c, rec]
                    nw += 1
                else:
                    owner[nn] = nkeys
                    for c in range(d):
                        n_times[c, nn] = d_times[c, rec]
                    nn += 1
            j += 1
        if order >= 0:  # the pending triples of key i
            w_mid = nw
            k_codes[nkeys] = p_codes[i]
            for c in range(kk):
                k_keys[c, nkeys] = p_keys[c, i]
            first = i
            while i < n_pend:
                if i > first:  # the same key still? (codes, then key columns)
                    same = p_codes[i] == p_codes[first]
                    if same and not exact:
                        for c in range(kk):
                            same = same and p_keys[c, i] == p_keys[c, first]
                    if not same:
                        break
                waits = False
                for e in range(ne):
                    le = True
                    for c in range(d):
                        le = le and felems[e, c] <= p_times[c, i]
                    waits = waits or le
                if waits:
                    w_codes[nw] = p_codes[i]
                    for c in range(kk):
                        w_keys[c, nw] = p_keys[c, i]
                    for c in range(d):
                        w_times[c, nw] = p_times[c, i]
                    nw += 1
                else:
                    owner[nn] = nkeys
                    for c in range(d):
                        n_times[c, nn] = p_times[c, i]
                    nn += 1
                i += 1
        if w_start < w_mid < nw:  # two sorted runs of waiting times: one, by insertion
            for x in range(w_mid, nw):
                y = x
                while y > w_start:
                    later = False
                    for c in range(d):
                        if w_times[c, y - 1] != w_times[c, y]:
                            later = w_times[c, y - 1] > w_times[c, y]
                            break
                    if not later:
                        break
                    for c in range(d):
                        w_times[c, y - 1], w_times[c, y] = w_times[c, y], w_times[c, y - 1]
                    y -= 1
        if nn > start:  # the key has new times: keep it
            nkeys += 1
    owner = owner[:nn]
    n_times = n_times[:, :nn].copy()
    r = pinned_round(n_times, felems) if nn else 0
    if r < 0:
        return False, z1, zk, zt, z1, zk, z1, zt, z1, zk
    k_codes = k_codes[:nkeys]
    k_keys = k_keys[:, :nkeys].copy()
    # histories, candidate line, differences, pending times
    if nn == 0:
        ko, o_t0, diffs, g_owner, g_times = z1, z1, z1, z1, zt
    else:
        ko, o_t0, diffs, g_owner, g_times = line_set_differences(
            nkeys, k_codes, k_keys, owner, n_times, in_table, out_table, felems, exact, at_least, r
        )
    # the output batch: by key, then time, so in trace order
    m = diffs.shape[0]
    u = 0
    for i in range(m):
        if i == 0 or ko[i] != ko[i - 1]:
            u += 1
    out_codes = np.empty(u, np.int64)
    out_keys = np.empty((kk, u), np.int64)
    out_offsets = np.empty(u + 1, np.int64)
    out_times = np.empty((d, m), np.int64)
    out_rows = np.empty((kk, m), np.int64)
    u = 0
    for i in range(m):
        if i == 0 or ko[i] != ko[i - 1]:
            out_codes[u] = k_codes[ko[i]]
            out_keys[:, u] = k_keys[:, ko[i]]
            out_offsets[u] = i
            u += 1
        out_times[0, i] = o_t0[i]
        if d == 2:
            out_times[1, i] = r
        for j in range(kk):
            out_rows[columns[j], i] = k_keys[j, ko[i]]
    out_offsets[u] = m
    # pending: what waits, plus the grid's new pending times, distinct and in trace order.
    # Both come in trace order (the waiting triples sorted by the walk, the grid's by key,
    # then time): one merge, a triple equal to the last one kept written over
    ng = g_owner.shape[0]
    total = nw + ng
    new_codes = np.empty(total, np.int64)
    new_keys = np.empty((kk, total), np.int64)
    new_times = np.empty((d, total), np.int64)
    np_ = 0
    a = b = 0
    while a < nw or b < ng:
        order = -1 if a < nw else 1
        if a < nw and b < ng:  # by code, then key columns (where codes tie), then time
            g = g_owner[b]
            if w_codes[a] != k_codes[g]:
                order = -1 if w_codes[a] < k_codes[g] else 1
            else:
                order = 0
                if not exact:
                    for c in range(kk):
                        if w_keys[c, a] != k_keys[c, g]:
                            order = -1 if w_keys[c, a] < k_keys[c, g] else 1
                            break
                if order == 0:
                    for c in range(d):
                        if w_times[c, a] != g_times[c, b]:
                            order = -1 if w_times[c, a] < g_times[c, b] else 1
                            break
        if order <= 0:
            code = w_codes[a]
            for c in range(kk):
                new_keys[c, np_] = w_keys[c, a]
            for c in range(d):
                new_times[c, np_] = w_times[c, a]
            a += 1
            b += 1 if order == 0 else 0
        else:
            g = g_owner[b]
            code = k_codes[g]
            for c in range(kk):
                new_keys[c, np_] = k_keys[c, g]
            for c in range(d):
                new_times[c, np_] = g_times[c, b]
            b += 1
        new_codes[np_] = code
        repeat = np_ > 0 and new_codes[np_ - 1] == code
        for c in range(kk):
            repeat = repeat and new_keys[c, np_ - 1] == new_keys[c, np_]
        for c in range(d):
            repeat = repeat and new_times[c, np_ - 1] == new_times[c, np_]
        if not repeat:
            np_ += 1
    return (
        True,
        new_codes[:np_].copy(),
        new_keys[:, :np_].copy(),
        new_times[:, :np_].copy(),
        out_codes,
        out_keys,
        out_offsets,
        out_times,
        diffs,
        out_rows,
    )


def run_set_step(
    delta: TraceBatch,
    pending: tuple[np.ndarray, np.ndarray, np.ndarray],
    rest: tuple[np.ndarray, np.ndarray, np.ndarray, bool, int, np.ndarray],
) -> StepResult:
    """:func:`set_step` of the input ``delta`` and the ``pending`` (codes, keys, times), with
    the ``rest`` of its arguments (the spines' seek tables, the frontier, exact, at_least,
    columns), split by key range into two calls on two threads when the step is big
    (``SPLIT_FROM``). Keys sharing a code stay in one half. Every half's new times pin the
    same round when each applies (the frontier holds ``(0, r + 1)`` for one ``r``), so the
    halves apply together exactly when the whole does."""
    d_codes, d_keys, d_offsets, d_times = delta.codes, delta.keys, delta.offsets, delta.times
    # C order whatever made them (the general path's masks leave F order): one signature
    p_codes, p_keys, p_times = (
        pending[0],
        np.ascontiguousarray(pending[1]),
        np.ascontiguousarray(pending[2]),
    )
    cut = None
    if parallel.threads() > 1 and d_times.shape[1] + p_codes.shape[0] >= SPLIT_FROM:
        cut = parallel.middle_cut([d_codes, p_codes])
    if cut is None:
        return set_step(d_codes, d_keys, d_offsets, d_times, p_codes, p_keys, p_times, *rest)
    i, j = int(cut[0]), int(cut[1])

    def low() -> StepResult:
        return set_step(
            d_codes[:i],
            np.ascontiguousarray(d_keys[:, :i]),
            d_offsets[: i + 1],
            d_times,
            p_codes[:j],
            np.ascontiguousarray(p_keys[:, :j]),
            np.ascontiguousarray(p_times[:, :j]),
            *rest,
        )

    def high() -> StepResult:
        return set_step(
            d_codes[i:],
            np.ascontiguousarray(d_keys[:, i:]),
            d_offsets[i:],
            d_times,
            p_codes[j:],
            np.ascontiguousarray(p_keys[:, j:]),
            np.ascontiguousarray(p_times[:, j:]),
            *rest,
        )

    a, b = parallel.both(low, high)
    if not (a[0] and b[0]):
        return a if not a[0] else b
    offsets = np.concatenate([a[6][:-1], b[6] + a[6][-1]])
    return (
        True,
        np.concatenate([a[1], b[1]]),
        np.concatenate([a[2], b[2]], axis=1),
        np.concatenate([a[3], b[3]], axis=1),
        np.concatenate([a[4], b[4]]),
        np.concatenate([a[5], b[5]], axis=1),
        offsets,
        np.concatenate([a[7], b[7]], axis=1),
        np.concatenate([a[8], b[8]]),
        np.concatenate([a[9], b[9]], axis=1),
    )
