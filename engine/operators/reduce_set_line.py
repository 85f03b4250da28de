"""A set-like reduce step on a line of candidate times, key by key, in one pass per key.

The same results as ``reduce_line.line_grid`` followed by ``reduce_scalar.scalar_differences``
(which the general driver uses), computed in the order the work falls: each key's records
are read where they lie in every batch of both spines (no gathered copy, grouped again by
owner); those at or below the key's least new time only add to two sums; the first
coordinates of the rest, and of the key's new times, go by insertion into a short list,
distinct and ascending, each with its changes to the sums (each batch's run comes sorted
by first coordinate, so most are appended). Accumulating that list gives the input and
output accumulations at each distinct first coordinate, then the differences and the
pending times. The general pieces sort the gathered records by owner for the grid, and
again for each accumulation.

In a loop round, a key's records at later rounds are kept too: its pending time at the
round element goes to the first later round where its output would change if no more
input came (``_first_change``), not to its next round with records, where most such
visits of a ``distinct`` find nothing to change (a second path to a node reached)."""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.operators.reduce_line import line_complete_below, tail_ceilings, under_tail
from engine.operators.reduce_step import pending_ceilings
from engine.trace.seek import batch_records, prefetch_records, record_ranges
from engine.wrapping import wrapping_add

__all__ = ["line_set_differences", "most_records"]

_INF = np.iinfo(np.int64).max
_AHEAD = 4  # keys ahead whose records are asked for


@njit(cache=True, nogil=True)
def most_records(
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
def _first_change(
    v: np.ndarray,
    L: int,
    acc_in: np.ndarray,
    acc_out: np.ndarray,
    diff: np.ndarray,
    lt0: np.ndarray,
    lt1: np.ndarray,
    lx: np.ndarray,
    lside: np.ndarray,
    nl: int,
    d_in: np.ndarray,
    d_out: np.ndarray,
    complete_below: int,
    at_least: int,
) -> int:
    """The first later round at which a key's output would change if no more input came:
    its ``nl`` records at rounds after this one (first coordinates ``lt0``, rounds ``lt1``,
    diffs ``lx``, ``lside`` 0 for the input, 1 for the output) are added round by round to
    the accumulations at its points ``v[:L]`` (after this round's differences ``diff``),
    and the round where a complete point's output no longer matches its input is the
    answer (``_INF``: none). Its pending time goes there, not to its next round with
    records: a visit at a round where nothing changes emits nothing, and any input that
    arrives for the key before that round makes a visit of its own, which checks ahead
    again from there. Uses ``acc_out`` and the zeroed scratch ``d_in``/``d_out`` (left
    zeroed)."""
    run = 0
    for j in range(L):
        run = wrapping_add(run, diff[j])
        acc_out[j] = wrapping_add(acc_out[j], run)
    for i in range(1, nl):  # by round (few records: insertion)
        a0, a1, ax, a_s = lt0[i], lt1[i], lx[i], lside[i]
        j = i
        while j > 0 and lt1[j - 1] > a1:
            lt0[j], lt1[j], lx[j], lside[j] = lt0[j - 1], lt1[j - 1], lx[j - 1], lside[j - 1]
            j -= 1
        lt0[j], lt1[j], lx[j], lside[j] = a0, a1, ax, a_s
    points = v[:L]
    i = 0
    while i < nl:
        rnd = lt1[i]
        first = L
        while i < nl and lt1[i] == rnd:
            at = np.searchsorted(points, lt0[i])  # the first point at or above the record's
            if at < L:
                if lside[i] == 0:
                    d_in[at] += lx[i]
                else:
                    d_out[at] += lx[i]
                first = min(first, at)
            i += 1
        s_in = s_out = 0
        changed = False
        for j in range(first, L):
            s_in = wrapping_add(s_in, d_in[j])
            s_out = wrapping_add(s_out, d_out[j])
            d_in[j] = d_out[j] = 0
            acc_in[j] = wrapping_add(acc_in[j], s_in)
            acc_out[j] = wrapping_add(acc_out[j], s_out)
            if v[j] < complete_below and (1 if acc_in[j] >= at_least else 0) != acc_out[j]:
                changed = True
        if changed:
            return rnd
    return _INF


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
    tail: np.ndarray,
    ahead: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For keys with new times (``owner`` ascending, times ``(d, n)`` all at trailing
    coordinates ``tail``: at round ``r = tail[0]`` when ``d == 2``) against the input and
    output spines at frontier ``felems``: (output owner, output first coordinates, output
    differences, pending owner, pending times ``(d, P)``), both by key, then time,
    ascending. The output's times are at trailing coordinates ``tail``.
    With ``ahead``, a pending time at the round element goes to the key's first later round
    where its output would change (``_first_change``)."""
    d = n_times.shape[0]
    r = tail[0] if d == 2 else 0
    ne = felems.shape[0]
    i_lo, i_hi, _ = record_ranges(k_codes, k_keys, in_table, exact)
    o_lo, o_hi, _ = record_ranges(k_codes, k_keys, out_table, exact)
    n_lo = np.zeros(nkeys + 1, np.int64)
    for i in range(owner.shape[0]):
        n_lo[owner[i] + 1] += 1
    for k in range(nkeys):
        n_lo[k + 1] += n_lo[k]
    count = most_records(n_lo, i_lo, i_hi, o_lo, o_hi)
    most = count.max() if nkeys else 0
    # scratch for one key: its distinct first coordinates, with the accumulations there
    v = np.empty(most, np.int64)
    acc_in = np.empty(most, np.int64)
    acc_out = np.empty(most, np.int64)
    diff = np.empty(most, np.int64)
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
    # the round element (0, r + 1): a key's pending time there is checked ahead instead
    # (``_first_change``), from its records at later rounds, kept here per key
    bump = -1
    for e in range(ne):
        if ahead and d == 2 and not far and felems[e, 1] == r + 1:
            bump = e
    lt0 = np.empty(most if bump >= 0 else 0, np.int64)
    lt1 = np.empty_like(lt0)
    lx = np.empty_like(lt0)
    lside = np.empty_like(lt0)
    d_in = np.zeros(most if bump >= 0 else 0, np.int64)
    d_out = np.zeros_like(d_in)
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
        later = _INF  # the least round after r among the key's records
        # the key's records: those at or below its least new time only add to the sums;
        # the first coordinates of the rest, and of its new times, go into ``v`` (distinct,
        # ascending, by insertion: each batch's run comes sorted) with the changes to the
        # sums there, accumulated after
        base_in = base_out = 0
        L = nl = 0
        for side in range(2):
            table = in_table if side == 0 else out_table
            lo = i_lo if side == 0 else o_lo
            hi = i_hi if side == 0 else o_hi
            for b in range(lo.shape[0]):
                if lo[b, k] < 0:
                    continue
                times, diffs = batch_records(table, b, d)
                for rec in range(lo[b, k], hi[b, k]):
                    if d == 2:
                        t1 = times[1, rec]
                    else:  # three or more: 0 for a record that counts on the line, else 1
                        t1 = 0 if d == 1 or under_tail(times, rec, tail) else 1
                    if t1 > r:
                        later = min(later, t1)
                        if bump >= 0:
                            lt0[nl], lt1[nl], lx[nl], lside[nl] = (
                                times[0, rec],
                                t1,
                                diffs[rec],
                                side,
                            )
                            nl += 1
                        if far:
                            for e in range(ne):
                                if t1 >= q1[e] and t1 < best[e]:
                                    best[e] = t1
                    t0 = times[0, rec]
                    x = diffs[rec] if t1 <= r else 0
                    if t0 <= least:
                        if side == 0:
                            base_in = wrapping_add(base_in, x)
                        else:
                            base_out = wrapping_add(base_out, x)
                        continue
                    j = L
                    while j > 0 and v[j - 1] > t0:
                        j -= 1
                    if j == 0 or v[j - 1] != t0:
                        for y in range(L, j, -1):
                            v[y], acc_in[y], acc_out[y] = v[y - 1], acc_in[y - 1], acc_out[y - 1]
                        v[j], acc_in[j], acc_out[j] = t0, 0, 0
                        L += 1
                        j += 1
                    if side == 0:
                        acc_in[j - 1] += x
                    else:
                        acc_out[j - 1] += x
        for e in range(ne):
            if d == 2 and q1[e] == r + 1:
                best[e] = min(best[e], later)
        if d > 2:
            tail_ceilings(
                (in_table, out_table), (i_lo, o_lo), (i_hi, o_hi), k, felems, tail, ceil, best, rep
            )
        for i in range(n_lo[k], n_lo[k + 1]):
            t0 = n_times[0, i]
            j = L
            while j > 0 and v[j - 1] > t0:
                j -= 1
            if j == 0 or v[j - 1] != t0:
                for y in range(L, j, -1):
                    v[y], acc_in[y], acc_out[y] = v[y - 1], acc_in[y - 1], acc_out[y - 1]
                v[j], acc_in[j], acc_out[j] = t0, 0, 0
                L += 1
        s_in, s_out = base_in, base_out
        for j in range(L):
            s_in = wrapping_add(s_in, acc_in[j])
            s_out = wrapping_add(s_out, acc_out[j])
            acc_in[j], acc_out[j] = s_in, s_out
            diff[j] = 0
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
        if bump >= 0 and nl:
            best[bump] = _first_change(
                v,
                L,
                acc_in,
                acc_out,
                diff,
                lt0,
                lt1,
                lx,
                lside,
                nl,
                d_in,
                d_out,
                complete_below,
                at_least,
            )
        ng = pending_ceilings(
            k, n_lo[k], n_lo[k + 1], n_times, felems, best, v, L, pend0, pend1, g_owner, g_times,
            ng, ceil, rep,
        )  # fmt: skip
    return r_owner[:nr], r_t0[:nr], r_diff[:nr], g_owner[:ng], g_times[:, :ng].copy()
