"""One compiled call for a whole reduce step of a set-like kernel (distinct, threshold).

A single update moves a loop through a dozen rounds of a handful of records each, and the
reduce driver (``engine.operators.reduce``) spends most of such a round between its kernels:
splitting new times into ready and pending, finding the distinct keys, gathering their
histories from both spines, the candidate grid, the differences, keeping the pending set
and building the output batch are each a few numpy calls. :func:`set_step` does all of it
in one call, with the same compiled pieces the driver uses (``gather_spine``,
``line_grid``, ``scalar_differences``), for the shape those apply to: keys without value
columns in and out, and candidate times on a line (``reduce_line``). Otherwise it reports
that it does not apply, before changing anything, and the driver takes its general path;
tests compare the two.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.operators.reduce_line import line_grid, pinned_round
from engine.operators.reduce_scalar import scalar_differences
from engine.sort_kernels import consolidate_order
from engine.trace.seek import gather_spine

__all__ = ["set_step"]


@njit(cache=True, nogil=True)
def _beyond(felems: np.ndarray, times: np.ndarray, i: int) -> bool:
    """Whether some frontier element is ``<=`` time ``i`` (the time may still change)."""
    for e in range(felems.shape[0]):
        le = True
        for c in range(times.shape[0]):
            if felems[e, c] > times[c, i]:
                le = False
                break
        if le:
            return True
    return False


@njit(cache=True, nogil=True)
def _put(
    codes: np.ndarray,
    keys: np.ndarray,
    times: np.ndarray,
    at: int,
    code: int,
    src_keys: np.ndarray,
    key: int,
    src_times: np.ndarray,
    time: int,
) -> None:
    """Write (code, key column ``key`` of ``src_keys``, time column ``time`` of
    ``src_times``) at position ``at``."""
    codes[at] = code
    keys[:, at] = src_keys[:, key]
    times[:, at] = src_times[:, time]


@njit(cache=True, nogil=True)
def _distinct(rows: np.ndarray) -> np.ndarray:
    """Index of the first of each distinct column of ``rows``, in sorted order."""
    first, _ = consolidate_order(rows, np.ones(rows.shape[1], np.int64))
    return first


@njit(cache=True, nogil=True)
def _differences(
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
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For keys with new times (on a line): (candidate owner, candidate times, pending
    owner, pending times, index of each candidate with a difference, the difference)."""
    d = n_times.shape[0]
    i_owner, _, i_times, i_diffs = gather_spine(k_codes, k_keys, in_table, exact, 0, d)
    o_owner, _, o_times, o_diffs = gather_spine(k_codes, k_keys, out_table, exact, 0, d)
    h_owner = np.concatenate((i_owner, o_owner))
    h_times = np.empty((d, h_owner.shape[0]), np.int64)
    h_times[:, : i_owner.shape[0]] = i_times
    h_times[:, i_owner.shape[0] :] = o_times
    _, c_owner, c_times, neighbours, g_owner, g_times = line_grid(
        nkeys, owner, n_times, h_owner, h_times, felems
    )
    signs = np.array([-1], np.int64) if d == 1 else np.array([-1, -1, 1], np.int64)
    c, diffs = scalar_differences(
        nkeys,
        c_owner,
        c_times,
        neighbours,
        signs,
        i_owner,
        i_times,
        i_diffs,
        o_owner,
        o_times,
        o_diffs,
        at_least,
    )
    return c_owner, c_times, g_owner, g_times, c, diffs


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
) -> tuple[
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
]:
    """One reduce step: the input delta (a trace batch's codes, keys, offsets and times)
    and the pending (code, key, time) triples in, against the input and output spines
    (``gather_spine`` tables) at frontier ``felems``. Returns (applies, pending codes, keys
    and times, output codes, keys, offsets, times and diffs, output rows); the output is a
    trace batch of differences at distinct times, already in trace order, and its rows are
    its keys expanded per record, key column ``j`` as row ``columns[j]``. When it does not apply,
    everything after the flag is empty and nothing has been decided."""
    kk, d = d_keys.shape[0], d_times.shape[0]
    n_delta, n_pend = d_times.shape[1], p_codes.shape[0]
    z1 = np.zeros(0, np.int64)
    zk = np.zeros((kk, 0), np.int64)
    zt = np.zeros((d, 0), np.int64)
    # split the delta's and the pending times into new (complete now) and waiting
    cap = n_delta + n_pend
    n_codes = np.empty(cap, np.int64)
    n_keys = np.empty((kk, cap), np.int64)
    n_times = np.empty((d, cap), np.int64)
    w_codes = np.empty(cap, np.int64)
    w_keys = np.empty((kk, cap), np.int64)
    w_times = np.empty((d, cap), np.int64)
    nn = 0
    nw = 0
    for j in range(d_codes.shape[0]):
        for rec in range(d_offsets[j], d_offsets[j + 1]):
            if _beyond(felems, d_times, rec):
                _put(w_codes, w_keys, w_times, nw, d_codes[j], d_keys, j, d_times, rec)
                nw += 1
            else:
                _put(n_codes, n_keys, n_times, nn, d_codes[j], d_keys, j, d_times, rec)
                nn += 1
    for i in range(n_pend):
        if _beyond(felems, p_times, i):
            _put(w_codes, w_keys, w_times, nw, p_codes[i], p_keys, i, p_times, i)
            nw += 1
        else:
            _put(n_codes, n_keys, n_times, nn, p_codes[i], p_keys, i, p_times, i)
            nn += 1
    n_times = n_times[:, :nn].copy()
    if nn and pinned_round(n_times, felems) < 0:
        return False, z1, zk, zt, z1, zk, z1, zt, z1, zk
    # the distinct keys, in trace order; owner: each new time's key
    kr = 0 if exact else kk
    rows = np.empty((1 + kr, nn), np.int64)
    rows[0] = n_codes[:nn]
    for j in range(kr):
        rows[1 + j] = n_keys[j, :nn]
    first = _distinct(rows)
    nkeys = first.shape[0]
    k_codes = np.empty(nkeys, np.int64)
    k_keys = np.empty((kk, nkeys), np.int64)
    for g in range(nkeys):
        k_codes[g] = n_codes[first[g]]
        k_keys[:, g] = n_keys[:, first[g]]
    owner = np.empty(nn, np.int64)
    for i in range(nn):  # binary search of each new time's key among the distinct keys
        lo, hi = 0, nkeys
        while lo < hi:
            mid = (lo + hi) // 2
            less = k_codes[mid] < n_codes[i]
            if not less and k_codes[mid] == n_codes[i] and not exact:
                for j in range(kk):
                    if k_keys[j, mid] != n_keys[j, i]:
                        less = k_keys[j, mid] < n_keys[j, i]
                        break
            if less:
                lo = mid + 1
            else:
                hi = mid
        owner[i] = lo
    # histories, candidate grid, differences
    if nn == 0:
        c_owner, c_times, g_owner, g_times = z1, zt, z1, zt
        c, diffs = z1, z1
    else:
        c_owner, c_times, g_owner, g_times, c, diffs = _differences(
            nkeys, k_codes, k_keys, owner, n_times, in_table, out_table, felems, exact, at_least
        )
    # the output batch: candidates ascend by (key, time), so it is in trace order
    m = c.shape[0]
    ko = np.empty(m, np.int64)
    u = 0
    for i in range(m):
        ko[i] = c_owner[c[i]]
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
        out_times[:, i] = c_times[:, c[i]]
        for j in range(kk):
            out_rows[columns[j], i] = k_keys[j, ko[i]]
    out_offsets[u] = m
    # pending: what waits, plus the grid's new pending times; distinct and sorted
    ng = g_owner.shape[0]
    total = nw + ng
    prow = np.empty((1 + kk + d, total), np.int64)
    prow[0, :nw] = w_codes[:nw]
    prow[1 : 1 + kk, :nw] = w_keys[:, :nw]
    prow[1 + kk :, :nw] = w_times[:, :nw]
    for i in range(ng):
        prow[0, nw + i] = k_codes[g_owner[i]]
        prow[1 : 1 + kk, nw + i] = k_keys[:, g_owner[i]]
        prow[1 + kk :, nw + i] = g_times[:, i]
    keep = _distinct(prow)
    np_ = keep.shape[0]
    new_p = np.empty((1 + kk + d, np_), np.int64)
    for i in range(np_):
        new_p[:, i] = prow[:, keep[i]]
    return (
        True,
        new_p[0].copy(),
        new_p[1 : 1 + kk].copy(),
        new_p[1 + kk :].copy(),
        out_codes,
        out_keys,
        out_offsets,
        out_times,
        diffs,
        out_rows,
    )
