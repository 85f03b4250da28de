"""One compiled call for a whole reduce step of the common aggregates: ``count``, ``sum``
of ints, ``min`` and ``max`` of ints, bools or floats, ``count_distinct`` of the first value
column, and none (the presence test of semijoins and antijoins).

The general driver (``engine.operators.reduce``) runs a step as a few dozen numpy calls:
gathering histories, the candidate grid, accumulating every candidate's group by a sort,
the kernel, the output's accumulation by another sort, and the Möbius inversion. For
candidate times on a line (one-dimensional times, or a loop round: ``reduce_line``)
:func:`agg_step` does it all in one call: the walk that finds new times and the next
pending set are the set-like step's (``reduce_step``), and then each key is one pass
(:func:`line_agg_differences`, the same candidates and pending times as
``reduce_line.line_candidates``). A key's records are read where they lie in every batch of
both spines, and its per-batch runs (each sorted by value row) are merged value row by
value row into running counts at its candidates; at each candidate the rows with a positive
count feed the aggregates, so a group is the same multiset the general kernels see
(``reduce_kernels``). The output's differences follow from the line's Möbius inversion: at
candidate ``j`` they are the error there less the error at the candidate before, and the
output history's share of that is minus what it gains between the two.
Otherwise the step reports that it does not apply, before changing anything, and the
driver takes its general path; tests compare the two.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.operators.reduce_line import (
    line_complete_below,
    step_tail,
    tail_ceilings,
    under_tail,
)
from engine.operators.reduce_set_line import most_records
from engine.operators.reduce_step import (
    StepResult,
    merge_pending,
    pending_ceilings,
    step_output,
    walk_new_times,
)
from engine.sort_kernels import finish_run
from engine.trace.seek import batch_arrays, prefetch, prefetch_records, record_ranges
from engine.wrapping import wrapping_add

__all__ = [
    "COUNT",
    "COUNT_DISTINCT",
    "MAX",
    "MAX_FLOAT",
    "MIN",
    "MIN_FLOAT",
    "SUM",
    "agg_step",
    "line_agg_differences",
]

# aggregate codes, as ``agg_step`` takes them (``AggregateKernel.line_plan``)
COUNT, SUM, MIN, MAX, COUNT_DISTINCT, MIN_FLOAT, MAX_FLOAT = 0, 1, 2, 3, 4, 5, 6
_SIGN = -(2**63)  # a float64's sign bit, as int64
_MAGNITUDE = 2**63 - 1  # the rest
_EXPONENT = 0x7FF0000000000000
_INF = np.iinfo(np.int64).max
_AHEAD = 4  # keys ahead whose records are asked for


@njit(cache=True, nogil=True, inline="always")
def _float_key(bits: int) -> int:
    """An int64 ordering float64 values (stored as their bits) as numpy orders them:
    -0.0 and 0.0 tie, every NaN is above infinity."""
    if bits == _SIGN:
        return 0
    if (bits & _EXPONENT) == _EXPONENT and (bits & (_MAGNITUDE ^ _EXPONENT)) != 0:
        return _MAGNITUDE  # NaN
    return bits if bits >= 0 else bits ^ _MAGNITUDE


@njit(cache=True, nogil=True)
def _copy_key(
    table: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    k: int,
    nv: int,
    d: int,
    tail: np.ndarray,
    vals: np.ndarray,
    t0: np.ndarray,
    t1: np.ndarray,
    x: np.ndarray,
    runs: np.ndarray,
) -> int:
    """Key ``k``'s records in every batch of a seek table (``record_ranges``: ``lo``, ``hi``)
    copied into the scratch (``nv`` value rows, first and second time coordinate, diff),
    batch after batch; ``runs[i]`` starts batch run ``i``. Returns the number of runs. With
    three or more time coordinates, ``t1`` is 0 for a record at or below ``tail`` in the
    trailing ones (it counts on the line there), else 1."""
    n = nr = 0
    for b in range(lo.shape[0]):
        if lo[b, k] < 0:
            continue
        _, _, _, bv, bt, bd = batch_arrays(table, b, 0, nv, d)
        runs[nr] = n
        nr += 1
        for rec in range(lo[b, k], hi[b, k]):
            for c in range(nv):
                vals[c, n] = bv[c, rec]
            t0[n] = bt[0, rec]
            if d == 2:
                t1[n] = bt[1, rec]
            else:
                t1[n] = 0 if d == 1 or under_tail(bt, rec, tail) else 1
            x[n] = bd[rec]
            n += 1
    runs[nr] = n
    return nr


@njit(cache=True, nogil=True)
def _prefetch_key(table: np.ndarray, lo: np.ndarray, k: int, nv: int, d: int) -> None:
    """Ask for the memory of key ``k``'s first record in every batch (values, times, diff):
    a key's records in a batch are few, so that is most of them."""
    for b in range(lo.shape[0]):
        rec = lo[b, k]
        if rec >= 0:
            prefetch_records(table, b, rec, d)
            for c in range(nv):
                prefetch(table[b, 3] + 8 * (c * table[b, 7] + rec))


@njit(cache=True, nogil=True)
def _next_row(vals: np.ndarray, runs: np.ndarray, heads: np.ndarray, nr: int) -> int:
    """The run whose head has the least value row (-1 when every run is consumed)."""
    best = -1
    for i in range(nr):
        if heads[i] == runs[i + 1]:
            continue
        if best < 0:
            best = i
            continue
        a, b = heads[i], heads[best]
        for c in range(vals.shape[0]):
            if vals[c, a] != vals[c, b]:
                if vals[c, a] < vals[c, b]:
                    best = i
                break
    return best


@njit(cache=True, nogil=True)
def _take_row(
    vals: np.ndarray,
    t0: np.ndarray,
    t1: np.ndarray,
    x: np.ndarray,
    runs: np.ndarray,
    heads: np.ndarray,
    nr: int,
    row: int,
    v: np.ndarray,
    nv_: int,
    nc: int,
    r: int,
    acc: np.ndarray,
) -> None:
    """Every record of value row ``vals[:, row]`` at the heads of the runs consumed, their
    diffs added into ``acc`` at the first of the ``nc`` candidates ``v`` at or after their
    first coordinate (``nv_`` distinct first coordinates in ``v``), those after round ``r``
    counting nothing."""
    for j in range(nc):
        acc[j] = 0
    for i in range(nr):
        while heads[i] < runs[i + 1]:
            h = heads[i]
            same = True
            for c in range(vals.shape[0]):
                same = same and vals[c, h] == vals[c, row]
            if not same:
                break
            heads[i] += 1
            if t1[h] > r:
                continue
            at, upto = 0, nv_  # the first distinct first coordinate at or after t0
            while at < upto:
                mid = (at + upto) >> 1
                if v[mid] < t0[h]:
                    at = mid + 1
                else:
                    upto = mid
            if at < nc:
                acc[at] += x[h]


@njit(cache=True, nogil=True)
def line_agg_differences(
    nkeys: int,
    k_codes: np.ndarray,
    k_keys: np.ndarray,
    owner: np.ndarray,
    n_times: np.ndarray,
    in_table: np.ndarray,
    out_table: np.ndarray,
    felems: np.ndarray,
    exact: bool,
    tail: np.ndarray,
    kv: int,
    fns: np.ndarray,
    cols: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For keys with new times (``owner`` ascending, times ``(d, n)`` all at trailing
    coordinates ``tail``: at round ``r = tail[0]`` when ``d == 2``) against the input
    (``kv`` value columns) and output spines at frontier ``felems``, aggregates ``fns`` over
    value columns ``cols``: (output owner, output values ``(len(fns), m)``, output first
    coordinates, output differences, pending owner, pending times ``(d, P)``), the output by
    key, then values, then time, the pending times by key, then time. Output times are at
    trailing coordinates ``tail``.

    Per key, its records are copied out of every batch of both spines (each batch's run
    sorted by value row, then time); the first coordinates above its least new time, and
    its new times', go by insertion into ``v``, distinct and ascending: its candidates are
    those of them whose point is complete (a prefix). The runs are then merged by value row:
    each row's diffs, summed at the candidates, give its running count there."""
    d = n_times.shape[0]
    r = tail[0] if d == 2 else 0
    na = fns.shape[0]
    ne = felems.shape[0]
    i_lo, i_hi, n_in = record_ranges(k_codes, k_keys, in_table, exact)
    o_lo, o_hi, n_out = record_ranges(k_codes, k_keys, out_table, exact)
    n_lo = np.zeros(nkeys + 1, np.int64)
    for i in range(owner.shape[0]):
        n_lo[owner[i] + 1] += 1
    for k in range(nkeys):
        n_lo[k + 1] += n_lo[k]
    # a key's records on either side, and its distinct first coordinates, are at most this
    most = max(1, most_records(n_lo, i_lo, i_hi, o_lo, o_hi).max()) if nkeys else 1
    # scratch for one key: its records on each side, its first coordinates, and per
    # candidate a running count, whether its group has a row, the aggregates
    in_vals = np.empty((kv, most), np.int64)
    in_t0, in_t1, in_x = (
        np.empty(most, np.int64),
        np.empty(most, np.int64),
        np.empty(most, np.int64),
    )
    out_vals = np.empty((na, most), np.int64)
    out_t0, out_t1, out_x = (
        np.empty(most, np.int64),
        np.empty(most, np.int64),
        np.empty(most, np.int64),
    )
    in_runs = np.empty(i_lo.shape[0] + 1, np.int64)
    out_runs = np.empty(o_lo.shape[0] + 1, np.int64)
    heads = np.empty(max(i_lo.shape[0], o_lo.shape[0]) + 1, np.int64)
    v = np.empty(most, np.int64)
    acc = np.empty(most, np.int64)
    present = np.empty(most, np.bool_)
    agg = np.empty((na, most), np.int64)
    last = np.empty((na, most), np.int64)  # the last distinct value counted
    pend0 = np.empty(ne * owner.shape[0] + 1, np.int64)
    pend1 = np.empty(ne * owner.shape[0] + 1, np.int64)
    q1 = np.zeros(ne, np.int64)
    for e in range(ne):
        q1[e] = max(r, felems[e, 1]) if d == 2 else 0
    complete_below = line_complete_below(felems, tail)
    # three or more dimensions: per frontier element, a key's pending trailing coordinates
    # and their ranks (``tail_ceilings``)
    ceil = np.empty((max(d - 1, 1), ne), np.int64)
    rep = np.empty(ne, np.int64)
    best = np.empty(ne, np.int64)
    # a frontier element two or more rounds ahead needs each record's round compared with
    # it; otherwise ``best`` follows from the least later round among a key's records
    far = False
    for e in range(ne):
        far = far or (d == 2 and q1[e] > r + 1)
    # entries (values, candidate, difference) of a key's output differences, sorted and
    # summed before they are kept: the output history's share is at most two a record,
    # the desired rows' two a candidate
    cap = 4 * most
    ent = np.empty((na + 1, cap), np.int64)
    ent_d = np.empty(cap, np.int64)
    ent_order = np.empty(cap, np.int64)
    total = 2 * n_out + 2 * (n_in + n_out + owner.shape[0])
    r_owner = np.empty(total, np.int64)
    r_vals = np.empty((na, total), np.int64)
    r_t0 = np.empty(total, np.int64)
    r_diff = np.empty(total, np.int64)
    g_owner = np.empty(ne * owner.shape[0], np.int64)
    g_times = np.empty((d, ne * owner.shape[0]), np.int64)
    nr = ng = 0
    for k in range(nkeys):
        if k + _AHEAD < nkeys:
            _prefetch_key(in_table, i_lo, k + _AHEAD, kv, d)
            _prefetch_key(out_table, o_lo, k + _AHEAD, na, d)
        least = _INF
        for i in range(n_lo[k], n_lo[k + 1]):
            least = min(least, n_times[0, i])
        for e in range(ne):
            best[e] = r if (d == 2 and r >= q1[e]) else _INF
        later = _INF  # the least round after r among the key's records
        nri = _copy_key(in_table, i_lo, i_hi, k, kv, d, tail, in_vals, in_t0, in_t1, in_x, in_runs)
        nro = _copy_key(
            out_table, o_lo, o_hi, k, na, d, tail, out_vals, out_t0, out_t1, out_x, out_runs
        )
        # the distinct first coordinates above the least new time, and the new times'
        L = 0
        for side in range(3):
            n = (
                in_runs[nri]
                if side == 0
                else (out_runs[nro] if side == 1 else n_lo[k + 1] - n_lo[k])
            )
            for i in range(n):
                if side == 2:
                    t = n_times[0, n_lo[k] + i]
                else:
                    t = in_t0[i] if side == 0 else out_t0[i]
                    s1 = in_t1[i] if side == 0 else out_t1[i]
                    if s1 > r:
                        later = min(later, s1)
                        if far:
                            for e in range(ne):
                                if s1 >= q1[e] and s1 < best[e]:
                                    best[e] = s1
                    if t <= least:
                        continue
                j = L
                while j > 0 and v[j - 1] > t:
                    j -= 1
                if j == 0 or v[j - 1] != t:
                    for y in range(L, j, -1):
                        v[y] = v[y - 1]
                    v[j] = t
                    L += 1
        for e in range(ne):
            if d == 2 and q1[e] == r + 1:
                best[e] = min(best[e], later)
        if d > 2:
            tail_ceilings(
                (in_table, out_table), (i_lo, o_lo), (i_hi, o_hi), k, felems, tail, ceil, best, rep
            )
        nc = 0  # the candidates: the complete ones, a prefix
        while nc < L and v[nc] < complete_below:
            nc += 1
        for j in range(nc):
            present[j] = False
            for a in range(na):
                agg[a, j] = 0
        # the input, value row by value row: running counts at the candidates, and the
        # rows with a positive count there into the aggregates
        for i in range(nri):
            heads[i] = in_runs[i]
        while nc:
            at = _next_row(in_vals, in_runs, heads, nri)
            if at < 0:
                break
            row = heads[at]
            _take_row(in_vals, in_t0, in_t1, in_x, in_runs, heads, nri, row, v, L, nc, r, acc)
            s = 0
            for j in range(nc):
                s = wrapping_add(s, acc[j])
                if s <= 0:
                    continue
                for a in range(na):
                    f = fns[a]
                    val = in_vals[cols[a], row] if cols[a] >= 0 else 0
                    if f == COUNT:
                        agg[a, j] += s
                    elif f == SUM:
                        agg[a, j] += s * val
                    elif f == MIN:
                        if not present[j] or val < agg[a, j]:
                            agg[a, j] = val
                    elif f == MAX:
                        if not present[j] or val > agg[a, j]:
                            agg[a, j] = val
                    elif f == MIN_FLOAT:  # ties keep the first row, as the general path
                        if not present[j] or _float_key(val) < _float_key(agg[a, j]):
                            agg[a, j] = val
                    elif f == MAX_FLOAT:  # ties keep the last row, as the general path
                        if not present[j] or _float_key(val) >= _float_key(agg[a, j]):
                            agg[a, j] = val
                    elif not present[j] or val != last[a, j]:
                        # COUNT_DISTINCT of value column 0: equal values are adjacent rows
                        agg[a, j] += 1
                        last[a, j] = val
                present[j] = True
        # the output history's share of the differences (the error at a candidate less the
        # error at the one before: minus what the row holds at the first, and minus what it
        # gains between the two at the others), output row by output row
        ne_ = 0
        for i in range(nro):
            heads[i] = out_runs[i]
        while nc:
            at = _next_row(out_vals, out_runs, heads, nro)
            if at < 0:
                break
            row = heads[at]
            _take_row(out_vals, out_t0, out_t1, out_x, out_runs, heads, nro, row, v, L, nc, r, acc)
            for j in range(nc):
                if acc[j] != 0:
                    for c in range(na):
                        ent[c, ne_] = out_vals[c, row]
                    ent[na, ne_], ent_d[ne_] = j, -acc[j]
                    ne_ += 1
        # the desired rows: +1 at each candidate with a group, -1 at the next one
        for j in range(nc):
            if present[j]:
                for c in range(na):
                    ent[c, ne_] = agg[c, j]
                ent[na, ne_], ent_d[ne_] = j, 1
                ne_ += 1
                if j + 1 < nc:
                    for c in range(na):
                        ent[c, ne_] = agg[c, j]
                    ent[na, ne_], ent_d[ne_] = j + 1, -1
                    ne_ += 1
        # the key's differences: by values, then candidate, equal ones summed
        for i in range(ne_):
            ent_order[i] = i
        finish_run(ent, ent_order, 0, ne_)
        i = 0
        while i < ne_:
            first = ent_order[i]
            diff = ent_d[first]
            i += 1
            while i < ne_:
                same = True
                for c in range(na + 1):
                    same = same and ent[c, ent_order[i]] == ent[c, first]
                if not same:
                    break
                diff += ent_d[ent_order[i]]
                i += 1
            if diff != 0:
                r_owner[nr] = k
                for c in range(na):
                    r_vals[c, nr] = ent[c, first]
                r_t0[nr] = v[ent[na, first]]
                r_diff[nr] = diff
                nr += 1
        ng = pending_ceilings(
            k, n_lo[k], n_lo[k + 1], n_times, felems, best, v, L, pend0, pend1, g_owner, g_times,
            ng, ceil, rep,
        )  # fmt: skip
    return (
        r_owner[:nr],
        r_vals[:, :nr].copy(),
        r_t0[:nr],
        r_diff[:nr],
        g_owner[:ng],
        g_times[:, :ng].copy(),
    )


@njit(cache=True, nogil=True)
def agg_step(
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
    kv: int,
    fns: np.ndarray,
    cols: np.ndarray,
    key_index: np.ndarray,
    val_index: np.ndarray,
    ncols: int,
) -> StepResult:
    """One reduce step of aggregates ``fns`` over input value columns ``cols`` (``kv`` of
    them): the input delta (a trace batch's codes, keys, offsets and times) and the pending
    (code, key, time) triples in, against the input and output spines (their seek tables)
    at frontier ``felems``. Returns (``reduce_step.StepResult``) whether it applies, the
    pending codes, keys and times, and the output batch's codes, keys, offsets, vals (one
    row per aggregate), times and diffs, in trace order, and its ``ncols`` rows (key column
    ``j`` as row ``key_index[j]``, aggregate ``a`` as row ``val_index[a]``). When it does
    not apply, everything after the flag is empty and nothing has been decided."""
    kk, d, na = d_keys.shape[0], d_times.shape[0], fns.shape[0]
    z1 = np.zeros(0, np.int64)
    zk = np.zeros((kk, 0), np.int64)
    zt = np.zeros((d, 0), np.int64)
    owner, n_times, k_codes, k_keys, w_codes, w_keys, w_times, nw = walk_new_times(
        d_codes, d_keys, d_offsets, d_times, p_codes, p_keys, p_times, felems, exact, -1
    )
    nn, nkeys = owner.shape[0], k_codes.shape[0]
    applies, tail = step_tail(n_times, felems) if nn else (True, np.zeros(max(d - 1, 0), np.int64))
    if not applies:
        return False, z1, zk, zt, z1, zk, z1, np.zeros((na, 0), np.int64), zt, z1, zk
    if nn == 0:
        ko, o_vals, o_t0, diffs, g_owner, g_times = z1, np.zeros((na, 0), np.int64), z1, z1, z1, zt
    else:
        ko, o_vals, o_t0, diffs, g_owner, g_times = line_agg_differences(
            nkeys,
            k_codes,
            k_keys,
            owner,
            n_times,
            in_table,
            out_table,
            felems,
            exact,
            tail,
            kv,
            fns,
            cols,
        )
    out_codes, out_keys, out_offsets, out_times, out_rows = step_output(
        ko, o_t0, o_vals, tail, d, k_codes, k_keys, key_index, val_index, ncols
    )
    new_codes, new_keys, new_times = merge_pending(
        w_codes, w_keys, w_times, nw, g_owner, g_times, k_codes, k_keys, exact
    )
    return (
        True,
        new_codes,
        new_keys,
        new_times,
        out_codes,
        out_keys,
        out_offsets,
        o_vals,
        out_times,
        diffs,
        out_rows,
    )
