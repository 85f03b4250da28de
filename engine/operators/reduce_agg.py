"""One compiled call for a whole reduce step of the common aggregates: ``count``, ``sum``
of ints, ``min`` and ``max`` of ints or bools, ``count_distinct`` of the first value column.

The general driver (``engine.operators.reduce``) runs a step as a few dozen numpy calls:
gathering histories, the candidate grid, accumulating every candidate's group by a sort,
the kernel, the output's accumulation by another sort, and the Möbius inversion. For
candidate times on a line (one-dimensional times, or a loop round: ``reduce_line``)
:func:`agg_step` does it all in one call: the walk that finds new times and the next
pending set are the set-like step's (``reduce_step``), the histories come from
``gather_spine`` and the candidate line from ``line_candidates``, and then each key is one
sweep (:func:`line_agg_differences`). A key's records, ordered by value row, are summed
value row by value row into running counts at its candidates; at each candidate the rows
with a positive count feed the aggregates, so a group is the same multiset the general
kernels see (``reduce_kernels``). The output's differences follow from the line's Möbius
inversion: at candidate ``j`` they are the error there less the error at the candidate
before, and the output history's share of that is minus what it holds between the two.
Otherwise the step reports that it does not apply, before changing anything, and the
driver takes its general path; tests compare the two.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.operators.reduce_line import line_candidates, owner_order, pinned_round
from engine.operators.reduce_step import StepResult, merge_pending, walk_new_times
from engine.sort_kernels import finish_run
from engine.trace.seek import gather_spine

__all__ = ["COUNT", "COUNT_DISTINCT", "MAX", "MIN", "SUM", "agg_step", "line_agg_differences"]

# aggregate codes, as ``agg_step`` takes them (``AggregateKernel.line_plan``)
COUNT, SUM, MIN, MAX, COUNT_DISTINCT = 0, 1, 2, 3, 4


@njit(cache=True, nogil=True)
def _key_starts(owner: np.ndarray, order: np.ndarray, nkeys: int) -> np.ndarray:
    """Where each key's run starts in ``order`` (sorted by owner), length ``nkeys + 1``."""
    lo = np.zeros(nkeys + 1, np.int64)
    for i in range(order.shape[0]):
        lo[owner[order[i]] + 1] += 1
    for k in range(nkeys):
        lo[k + 1] += lo[k]
    return lo


@njit(cache=True, nogil=True)
def line_agg_differences(
    nkeys: int,
    owner: np.ndarray,
    n_times: np.ndarray,
    inp: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    felems: np.ndarray,
    r: int,
    fns: np.ndarray,
    cols: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For keys with new times (``owner`` ascending, times ``(d, n)`` all at round ``r``
    when ``d == 2``), their gathered input and output histories (``gather_spine``: owner,
    vals, times, diffs) at frontier ``felems``, and aggregates ``fns`` over value columns
    ``cols``: (output owner, output values ``(len(fns), m)``, output first coordinates,
    output differences, pending owner, pending times ``(d, P)``), the output by key, then
    values, then time, the pending times by key, then time. Output times are at round
    ``r``."""
    d = n_times.shape[0]
    na = fns.shape[0]
    i_owner, i_vals, i_times, i_diffs = inp
    o_owner, o_vals, o_times, o_diffs = out
    no = o_owner.shape[0]
    hist_owner = np.concatenate((i_owner, o_owner))
    hist_t0 = np.concatenate((i_times[0], o_times[0]))
    z1 = np.zeros(0, np.int64)
    hist_t1 = np.concatenate((i_times[1], o_times[1])) if d == 2 else z1
    new_t1 = n_times[1].copy() if d == 2 else z1
    c_owner, c_t0, nb, p_o, p_0, p_1 = line_candidates(
        nkeys, owner, n_times[0].copy(), hist_owner, hist_t0, hist_t1, new_t1, d, r, felems
    )
    nc = c_owner.shape[0]
    c_lo = np.zeros(nkeys + 1, np.int64)
    for i in range(nc):
        c_lo[c_owner[i] + 1] += 1
    for k in range(nkeys):
        c_lo[k + 1] += c_lo[k]
    i_order = owner_order(i_owner, i_vals, nkeys)  # by key, then value row
    o_order = owner_order(o_owner, o_vals, nkeys)
    i_lo = _key_starts(i_owner, i_order, nkeys)
    o_lo = _key_starts(o_owner, o_order, nkeys)
    most = 1
    for k in range(nkeys):
        most = max(most, c_lo[k + 1] - c_lo[k])
    acc = np.empty(most, np.int64)
    present = np.empty(most, np.bool_)
    agg = np.empty((na, most), np.int64)
    last = np.empty((na, most), np.int64)  # the last distinct value counted
    # entries (values, candidate, difference) of the output differences, a key's sorted
    # and summed before they are kept: the output history's share is at most two a record,
    # the desired rows' two a candidate
    cap = 2 * no + 2 * nc
    ent = np.empty((na + 1, cap), np.int64)
    ent_d = np.empty(cap, np.int64)
    ent_order = np.empty(cap, np.int64)
    r_owner = np.empty(cap, np.int64)
    r_vals = np.empty((na, cap), np.int64)
    r_t0 = np.empty(cap, np.int64)
    r_diff = np.empty(cap, np.int64)
    nr = 0
    for k in range(nkeys):
        cs, ce = c_lo[k], c_lo[k + 1]
        nck = ce - cs
        if nck == 0:
            continue
        for j in range(nck):
            present[j] = False
            for a in range(na):
                agg[a, j] = 0
        # the input, value row by value row: running counts at the candidates, and the
        # rows with a positive count there into the aggregates
        x = i_lo[k]
        while x < i_lo[k + 1]:
            y = x + 1
            while y < i_lo[k + 1]:
                same = True
                for c in range(i_vals.shape[0]):
                    same = same and i_vals[c, i_order[y]] == i_vals[c, i_order[x]]
                if not same:
                    break
                y += 1
            for j in range(nck):
                acc[j] = 0
            for z in range(x, y):
                rec = i_order[z]
                if d == 2 and i_times[1, rec] > r:
                    continue
                t0 = i_times[0, rec]
                at, upto = cs, ce  # the first candidate at or after t0
                while at < upto:
                    mid = (at + upto) >> 1
                    if c_t0[mid] < t0:
                        at = mid + 1
                    else:
                        upto = mid
                if at < ce:
                    acc[at - cs] += i_diffs[rec]
            row = i_order[x]
            s = 0
            for j in range(nck):
                s += acc[j]
                if s <= 0:
                    continue
                for a in range(na):
                    f = fns[a]
                    v = i_vals[cols[a], row] if cols[a] >= 0 else 0
                    if f == COUNT:
                        agg[a, j] += s
                    elif f == SUM:
                        agg[a, j] += s * v
                    elif f == MIN:
                        if not present[j] or v < agg[a, j]:
                            agg[a, j] = v
                    elif f == MAX:
                        if not present[j] or v > agg[a, j]:
                            agg[a, j] = v
                    elif not present[j] or v != last[a, j]:
                        # COUNT_DISTINCT of value column 0: equal values are adjacent rows
                        agg[a, j] += 1
                        last[a, j] = v
                present[j] = True
            x = y
        # the output history's share of the differences, output row by output row
        ne = 0
        x = o_lo[k]
        while x < o_lo[k + 1]:
            y = x + 1
            while y < o_lo[k + 1]:
                same = True
                for c in range(na):
                    same = same and o_vals[c, o_order[y]] == o_vals[c, o_order[x]]
                if not same:
                    break
                y += 1
            for j in range(nck):
                acc[j] = 0
            for z in range(x, y):
                rec = o_order[z]
                if d == 2 and o_times[1, rec] > r:
                    continue
                t0 = o_times[0, rec]
                at, upto = cs, ce
                while at < upto:
                    mid = (at + upto) >> 1
                    if c_t0[mid] < t0:
                        at = mid + 1
                    else:
                        upto = mid
                if at < ce:
                    acc[at - cs] += o_diffs[rec]
            row = o_order[x]
            s = 0
            for j in range(nck):
                s += acc[j]
                linked = j > 0 and nb[cs + j - 1] == cs + j
                share = -acc[j] if linked else -s
                if share != 0:
                    for c in range(na):
                        ent[c, ne] = o_vals[c, row]
                    ent[na, ne], ent_d[ne] = j, share
                    ne += 1
            x = y
        # the desired rows: +1 at each candidate with a group, -1 at the next linked one
        for j in range(nck):
            if present[j]:
                for c in range(na):
                    ent[c, ne] = agg[c, j]
                ent[na, ne], ent_d[ne] = j, 1
                ne += 1
                if j + 1 < nck and nb[cs + j] == cs + j + 1:
                    for c in range(na):
                        ent[c, ne] = agg[c, j]
                    ent[na, ne], ent_d[ne] = j + 1, -1
                    ne += 1
        # the key's differences: by values, then candidate, equal ones summed
        for i in range(ne):
            ent_order[i] = i
        finish_run(ent, ent_order, 0, ne)
        i = 0
        while i < ne:
            first = ent_order[i]
            total = ent_d[first]
            i += 1
            while i < ne:
                same = True
                for c in range(na + 1):
                    same = same and ent[c, ent_order[i]] == ent[c, first]
                if not same:
                    break
                total += ent_d[ent_order[i]]
                i += 1
            if total != 0:
                r_owner[nr] = k
                for c in range(na):
                    r_vals[c, nr] = ent[c, first]
                r_t0[nr] = c_t0[cs + ent[na, first]]
                r_diff[nr] = total
                nr += 1
    np_ = p_o.shape[0]
    p_times = np.empty((d, np_), np.int64)
    p_times[0] = p_0
    if d == 2:
        p_times[1] = p_1
    return r_owner[:nr], r_vals[:, :nr].copy(), r_t0[:nr], r_diff[:nr], p_o, p_times


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
        d_codes, d_keys, d_offsets, d_times, p_codes, p_keys, p_times, felems, exact
    )
    nn, nkeys = owner.shape[0], k_codes.shape[0]
    r = pinned_round(n_times, felems) if nn else 0
    if r < 0:
        return False, z1, zk, zt, z1, zk, z1, np.zeros((na, 0), np.int64), zt, z1, zk
    if nn == 0:
        ko, o_vals, o_t0, diffs, g_owner, g_times = z1, np.zeros((na, 0), np.int64), z1, z1, z1, zt
    else:
        ko, o_vals, o_t0, diffs, g_owner, g_times = line_agg_differences(
            nkeys,
            owner,
            n_times,
            gather_spine(k_codes, k_keys, in_table, exact, kv, d),
            gather_spine(k_codes, k_keys, out_table, exact, na, d),
            felems,
            r,
            fns,
            cols,
        )
    # the output batch: by key, then values, then time, so in trace order
    m = diffs.shape[0]
    u = 0
    for i in range(m):
        if i == 0 or ko[i] != ko[i - 1]:
            u += 1
    out_codes = np.empty(u, np.int64)
    out_keys = np.empty((kk, u), np.int64)
    out_offsets = np.empty(u + 1, np.int64)
    out_times = np.empty((d, m), np.int64)
    out_rows = np.empty((ncols, m), np.int64)
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
            out_rows[key_index[j], i] = k_keys[j, ko[i]]
        for a in range(na):
            out_rows[val_index[a], i] = o_vals[a, i]
    out_offsets[u] = m
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
