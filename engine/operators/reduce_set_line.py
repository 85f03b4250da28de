"""A set-like reduce step on a line of candidate times, key by key, in one pass per key.

The same results as ``reduce_line.line_grid`` followed by ``reduce_scalar.scalar_differences``
(which the general driver uses), computed in the order the work falls: each key's records
are read where they lie in every batch of both spines (no gathered copy, grouped again by
owner); those at or below the key's least new time only add to two sums; the rest of each
batch's run, already sorted by first coordinate, is merged with the others and with the
key's new times, and that one sweep gives the distinct first coordinates, the input and
output accumulations at each, the differences and the pending times. The general pieces
sort the gathered records by owner for the grid, and again for each accumulation."""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.trace.seek import batch_records, prefetch_records, record_ranges

__all__ = ["line_set_differences"]

_INF = np.iinfo(np.int64).max
_AHEAD = 4  # keys ahead whose records are asked for


@njit(cache=True, nogil=True)
def _most_records(
    n_lo: np.ndarray,
    i_lo: np.ndarray,
    i_hi: np.ndarray,
    o_lo: np.ndarray,
    o_hi: np.ndarray,
) -> np.ndarray:
    """Per key: its new times plus its records in both spines."""
    nkeys = n_lo.shape[0] - 1
    count = np.empty(nkeys, np.int64)
    for k in range(nkeys):
        m = n_lo[k + 1] - n_lo[k]
        for b in range(i_lo.shape[0]):
            if i_lo[b, k] >= 0:
                m += i_hi[b, k] - i_lo[b, k]
        for b in range(o_lo.shape[0]):
            if o_lo[b, k] >= 0:
                m += o_hi[b, k] - o_lo[b, k]
        count[k] = m
    return count


@njit(cache=True, nogil=True)
def line_set_differences(
    nkeys: int,
    k_codes: np.ndarray,
    k_keys: np.ndarray,
    owner: np.ndarray,
    n_times: np.ndarray,
    in_table: np.ndarray,
    out_table: np.ndarray,
    felems: np.ndarray,
    exact: bool,
    at_least: int,
    r: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For keys with new times (``owner`` ascending, times ``(d, n)`` all at round ``r``
    when ``d == 2``) against the input and output spines at frontier ``felems``: (output
    owner, output first coordinates, output differences, pending owner, pending times
    ``(d, P)``), both by key, then time, ascending. The output's times are at round ``r``."""
    d = n_times.shape[0]
    ne = felems.shape[0]
    i_lo, i_hi, _ = record_ranges(k_codes, k_keys, in_table, exact)
    o_lo, o_hi, _ = record_ranges(k_codes, k_keys, out_table, exact)
    n_lo = np.zeros(nkeys + 1, np.int64)
    for i in range(owner.shape[0]):
        n_lo[owner[i] + 1] += 1
    for k in range(nkeys):
        n_lo[k + 1] += n_lo[k]
    count = _most_records(n_lo, i_lo, i_hi, o_lo, o_hi)
    most = count.max() if nkeys else 0
    # scratch for one key: its runs (a run per batch holding it, and its new times), then
    # the distinct first coordinates with the accumulations there
    nruns = i_lo.shape[0] + o_lo.shape[0] + 1
    run_side = np.empty(nruns, np.int64)  # 0 input, 1 output, 2 new times
    run_batch = np.empty(nruns, np.int64)
    run_at = np.empty(nruns, np.int64)
    run_end = np.empty(nruns, np.int64)
    head = np.empty(nruns, np.int64)  # each run's next first coordinate
    new_t0 = np.empty(most, np.int64)
    v = np.empty(most, np.int64)
    acc_in = np.empty(most, np.int64)
    acc_out = np.empty(most, np.int64)
    diff = np.empty(most, np.int64)
    pend0 = np.empty(ne * owner.shape[0] + 1, np.int64)
    pend1 = np.empty(ne * owner.shape[0] + 1, np.int64)
    q1 = np.zeros(ne, np.int64)
    for e in range(ne):
        q1[e] = max(r, felems[e, 1]) if d == 2 else 0
    # a point (p, r) is complete (reduce_line.point_complete) iff p is below this
    complete_below = _INF
    for e in range(ne):
        if d == 1 or felems[e, 1] <= r:
            complete_below = min(complete_below, felems[e, 0])
    best = np.empty(ne, np.int64)
    total = count.sum()
    r_owner = np.empty(total, np.int64)
    r_t0 = np.empty(total, np.int64)
    r_diff = np.empty(total, np.int64)
    g_owner = np.empty(ne * owner.shape[0], np.int64)
    g_times = np.empty((d, ne * owner.shape[0]), np.int64)
    nr = ng = 0
    for k in range(nkeys):
        a = k + _AHEAD
        if a < nkeys:
            for b in range(i_lo.shape[0]):
                if i_lo[b, a] >= 0:
                    prefetch_records(in_table, b, i_lo[b, a], d)
            for b in range(o_lo.shape[0]):
                if o_lo[b, a] >= 0:
                    prefetch_records(out_table, b, o_lo[b, a], d)
        least = _INF
        for i in range(n_lo[k], n_lo[k + 1]):
            least = min(least, n_times[0, i])
        for e in range(ne):
            best[e] = r if (d == 2 and r >= q1[e]) else _INF
        # the key's records: those at or below its least new time only add to the sums;
        # the rest of each batch's run (sorted by first coordinate) is merged below
        base_in = base_out = 0
        runs = 0
        for side in range(2):
            table = in_table if side == 0 else out_table
            lo = i_lo if side == 0 else o_lo
            hi = i_hi if side == 0 else o_hi
            for b in range(lo.shape[0]):
                if lo[b, k] < 0:
                    continue
                times, diffs = batch_records(table, b, d)
                above = hi[b, k]
                for rec in range(lo[b, k], hi[b, k]):
                    t1 = times[1, rec] if d == 2 else 0
                    for e in range(ne):
                        if t1 >= q1[e] and t1 < best[e]:
                            best[e] = t1
                    if times[0, rec] > least:
                        above = min(above, rec)
                    elif t1 <= r:
                        if side == 0:
                            base_in += diffs[rec]
                        else:
                            base_out += diffs[rec]
                if above < hi[b, k]:
                    run_side[runs], run_batch[runs] = side, b
                    run_at[runs], run_end[runs] = above, hi[b, k]
                    head[runs] = times[0, above]
                    runs += 1
        # the key's new times, sorted (few), as one more run without contributions
        nt = 0
        for i in range(n_lo[k], n_lo[k + 1]):
            x = n_times[0, i]
            j = nt
            while j > 0 and new_t0[j - 1] > x:
                new_t0[j] = new_t0[j - 1]
                j -= 1
            new_t0[j] = x
            nt += 1
        run_side[runs], run_at[runs], run_end[runs], head[runs] = 2, 0, nt, new_t0[0]
        runs += 1
        # merge the runs: the distinct first coordinates and the accumulations there
        s_in, s_out = base_in, base_out
        L = 0
        while True:
            t = _INF
            for q in range(runs):
                if run_at[q] < run_end[q] and head[q] < t:
                    t = head[q]
            if t == _INF:
                break
            for q in range(runs):
                if run_at[q] >= run_end[q] or head[q] != t:
                    continue
                if run_side[q] == 2:
                    while run_at[q] < run_end[q] and new_t0[run_at[q]] == t:
                        run_at[q] += 1
                    if run_at[q] < run_end[q]:
                        head[q] = new_t0[run_at[q]]
                    continue
                table = in_table if run_side[q] == 0 else out_table
                times, diffs = batch_records(table, run_batch[q], d)
                rec = run_at[q]
                while rec < run_end[q] and times[0, rec] == t:
                    if d == 1 or times[1, rec] <= r:
                        if run_side[q] == 0:
                            s_in += diffs[rec]
                        else:
                            s_out += diffs[rec]
                    rec += 1
                run_at[q] = rec
                if rec < run_end[q]:
                    head[q] = times[0, rec]
            v[L], acc_in[L], acc_out[L] = t, s_in, s_out
            diff[L] = 0
            L += 1
        # the differences: each complete point's error, less its complete successor's
        # share (the Möbius inversion on a line)
        for j in range(L):
            if v[j] >= complete_below:
                continue
            err = (1 if acc_in[j] >= at_least else 0) - acc_out[j]
            if err == 0:
                continue
            diff[j] += err
            if j + 1 < L and v[j + 1] < complete_below:
                diff[j + 1] -= err
        for j in range(L):
            if diff[j] != 0:
                r_owner[nr], r_t0[nr], r_diff[nr] = k, v[j], diff[j]
                nr += 1
        # pending: the least distinct first coordinate at or above join(new time, f), at
        # the least second coordinate at or above f's (grid ceilings)
        np_ = 0
        for e in range(ne):
            if d == 2 and best[e] == _INF:
                continue
            q1_ = best[e] if d == 2 else 0
            for i in range(n_lo[k], n_lo[k + 1]):
                q0 = max(n_times[0, i], felems[e, 0])
                at, upto = 0, L  # the first distinct coordinate >= q0 (searched in place)
                while at < upto:
                    mid = (at + upto) >> 1
                    if v[mid] < q0:
                        at = mid + 1
                    else:
                        upto = mid
                if at == L:
                    continue
                a = v[at]  # into the sorted distinct pending pairs, in place
                j = np_
                while j > 0 and (pend0[j - 1] > a or (pend0[j - 1] == a and pend1[j - 1] > q1_)):
                    j -= 1
                if j > 0 and pend0[j - 1] == a and pend1[j - 1] == q1_:
                    continue
                for x in range(np_, j, -1):
                    pend0[x], pend1[x] = pend0[x - 1], pend1[x - 1]
                pend0[j], pend1[j] = a, q1_
                np_ += 1
        for i in range(np_):
            g_owner[ng] = k
            g_times[0, ng] = pend0[i]
            if d == 2:
                g_times[1, ng] = pend1[i]
            ng += 1
    return r_owner[:nr], r_t0[:nr], r_diff[:nr], g_owner[:ng], g_times[:, :ng].copy()
