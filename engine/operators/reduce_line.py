"""Compiled candidate times for the common shape (one free coordinate), for many keys.

The same computation as ``reduce_times.candidate_line`` (its numpy reference), in one
compiled pass: per key, the candidate first coordinates are the distinct first coordinates
of its history and new times at or above its least new one whose point is complete; each
candidate's predecessor is the key's candidate before it; pending times are the grid
ceilings of ``join(n, f)`` for new times ``n`` and frontier elements ``f``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.operators.reduce_scalar import group_by_owner
from engine.sort_kernels import finish_run
from engine.trace.seek import batch_records

__all__ = [
    "line_candidates",
    "line_complete_below",
    "line_grid",
    "pinned_round",
    "pinned_tail",
    "point_complete",
    "step_tail",
    "tail_ceilings",
]

_INF = np.iinfo(np.int64).max


@njit(cache=True, nogil=True, inline="always")
def point_complete(felems: np.ndarray, p0: int, tail: np.ndarray) -> bool:
    """Whether no frontier element is ``<=`` the point ``(p0, *tail)``."""
    for e in range(felems.shape[0]):
        if felems[e, 0] <= p0:
            below = True
            for j in range(tail.shape[0]):
                if felems[e, j + 1] > tail[j]:
                    below = False
                    break
            if below:
                return False
    return True


@njit(cache=True, nogil=True)
def _owner_order(owner: np.ndarray, rows: np.ndarray, nkeys: int) -> np.ndarray:
    """The order of (owner, then the columns of ``rows``), owners below ``nkeys``: a counting
    sort by owner, then each owner's (short) run by its rows (``finish_run``: by insertion,
    or a stable sort per row when long). Cheaper than one sort of everything when keys are
    many."""
    order, lo = group_by_owner(owner, nkeys)
    for k in range(nkeys):
        if lo[k + 1] - lo[k] > 1:
            finish_run(rows, order, lo[k], lo[k + 1])
    return order


@njit(cache=True, nogil=True)
def _key_ceilings(best: np.ndarray, q: int, coords: np.ndarray, owner: np.ndarray) -> None:
    """``best[k]``: key ``k``'s least coordinate in ``coords`` at or above ``q`` (``_INF``
    when it has none)."""
    best[:] = _INF
    for i in range(coords.shape[0]):
        x = coords[i]
        if x >= q and x < best[owner[i]]:
            best[owner[i]] = x


@njit(cache=True, nogil=True)
def line_candidates(
    nkeys: int,
    new_owner: np.ndarray,
    new_t0: np.ndarray,
    hist_owner: np.ndarray,
    hist_t0: np.ndarray,
    hist_tail: np.ndarray,
    tail: np.ndarray,
    felems: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(candidate owner, candidate first coordinate, predecessor, pending owner, pending
    first coordinate, pending trailing coordinates ``(d - 1, P)``). Every new time and
    every candidate has the trailing coordinates ``tail``; ``hist_tail`` holds the
    history's (``(d - 1, nh)``)."""
    nn = new_owner.shape[0]
    nh = hist_owner.shape[0]
    mins = np.full(nkeys, _INF, np.int64)
    for i in range(nn):
        if new_t0[i] < mins[new_owner[i]]:
            mins[new_owner[i]] = new_t0[i]
    lo_o = np.empty(nh + nn, np.int64)
    lo_v = np.empty(nh + nn, np.int64)
    m = 0
    for i in range(nh):
        if hist_t0[i] >= mins[hist_owner[i]]:
            lo_o[m] = hist_owner[i]
            lo_v[m] = hist_t0[i]
            m += 1
    for i in range(nn):
        lo_o[m] = new_owner[i]
        lo_v[m] = new_t0[i]
        m += 1
    lo_o, lo_v = lo_o[:m], lo_v[:m]
    order = _owner_order(lo_o, lo_v.reshape(1, m), nkeys)
    o = np.empty(m, np.int64)
    v = np.empty(m, np.int64)
    L = 0
    for i in range(m):
        a, b = lo_o[order[i]], lo_v[order[i]]
        if L == 0 or o[L - 1] != a or v[L - 1] != b:
            o[L] = a
            v[L] = b
            L += 1
    o, v = o[:L], v[:L]
    seg_lo = np.full(nkeys, L, np.int64)
    seg_hi = np.zeros(nkeys, np.int64)
    for i in range(L - 1, -1, -1):
        seg_lo[o[i]] = i
    for i in range(L):
        seg_hi[o[i]] = i + 1
    is_cand = np.zeros(L, np.bool_)
    nc = 0
    for i in range(L):
        if point_complete(felems, v[i], tail):
            is_cand[i] = True
            nc += 1
    c_owner = np.empty(nc, np.int64)
    c_t0 = np.empty(nc, np.int64)
    c_pos = np.empty(nc, np.int64)
    j = 0
    for i in range(L):
        if is_cand[i]:
            c_owner[j] = o[i]
            c_t0[j] = v[i]
            c_pos[j] = i
            j += 1
    pred = np.full(nc, -1, np.int64)
    for j in range(nc - 1):
        if c_owner[j + 1] == c_owner[j] and c_pos[j + 1] == c_pos[j] + 1:
            pred[j + 1] = j
    # pending: ceil_grid(join(n, f)); in a trailing dimension every new time has the
    # coordinate tail[j], so the ceiling there is the key's least coordinate at or above
    # max(tail[j], f[j]), the same for all its new times
    dt = tail.shape[0]
    ne = felems.shape[0]
    p_o = np.empty(nn * ne, np.int64)
    p_times = np.empty((dt + 1, nn * ne), np.int64)
    np_ = 0
    best = np.empty((dt, nkeys), np.int64)
    # per dimension, the ceilings of tail[j] itself (every new time's): computed once, for
    # the elements at or below it there (most of them)
    at_tail = np.empty((dt, nkeys), np.int64)
    for j in range(dt):
        _key_ceilings(at_tail[j], tail[j], hist_tail[j], hist_owner)
        for i in range(nn):
            at_tail[j, new_owner[i]] = tail[j]
    for e in range(ne):
        for j in range(dt):
            if felems[e, j + 1] <= tail[j]:
                best[j] = at_tail[j]
            else:
                _key_ceilings(best[j], felems[e, j + 1], hist_tail[j], hist_owner)
        for i in range(nn):
            k = new_owner[i]
            q0 = max(new_t0[i], felems[e, 0])
            lo, hi = seg_lo[k], seg_hi[k]
            pos = lo + np.searchsorted(v[lo:hi], q0)
            if pos >= hi:
                continue
            inside = True
            for j in range(dt):
                if best[j, k] == _INF:
                    inside = False
                    break
            if not inside:
                continue
            p_o[np_] = k
            p_times[0, np_] = v[pos]
            for j in range(dt):
                p_times[j + 1, np_] = best[j, k]
            np_ += 1
    p_o, p_times = p_o[:np_], p_times[:, :np_]
    order = _owner_order(p_o, p_times, nkeys)
    keep = np.zeros(np_, np.bool_)
    for i in range(np_):
        a = order[i]
        if i == 0:
            keep[a] = True
        else:
            b = order[i - 1]
            keep[a] = p_o[a] != p_o[b]
            for j in range(dt + 1):
                keep[a] = keep[a] or p_times[j, a] != p_times[j, b]
    sel = order[keep[order]]
    return c_owner, c_t0, pred, p_o[sel], p_times[0, sel], p_times[1:, sel]


@njit(cache=True, nogil=True)
def pinned_round(new_times: np.ndarray, felems: np.ndarray) -> int:
    """The shape :func:`line_grid` applies to: 0 for one dimensional times; for two, the
    iteration ``r`` when every new time has it and the frontier holds ``(0, r + 1)`` (a
    loop round); -1 otherwise (or with no new times)."""
    d = new_times.shape[0]
    if d == 1:
        return 0
    if d != 2 or new_times.shape[1] == 0:
        return -1
    r = new_times[1, 0]
    for i in range(new_times.shape[1]):
        if new_times[1, i] != r:
            return -1
    for e in range(felems.shape[0]):
        if felems[e, 0] == 0 and felems[e, 1] == r + 1:
            return r
    return -1


@njit(cache=True, nogil=True)
def pinned_tail(new_times: np.ndarray, felems: np.ndarray) -> bool:
    """The shape :func:`line_grid` applies to: one dimensional times, or every new time
    with the same trailing coordinates ``c`` and, for each trailing dimension ``j``, a
    frontier element with first coordinate 0 at most ``c_j + 1`` in ``j`` and at most
    ``c`` in the others (a loop round, as ``reduce_times._pinned_tail``); never with no
    new times."""
    d, n = new_times.shape
    if n == 0:
        return False
    for j in range(1, d):
        for i in range(n):
            if new_times[j, i] != new_times[j, 0]:
                return False
    for j in range(1, d):
        found = False
        for e in range(felems.shape[0]):
            if felems[e, 0] != 0:
                continue
            found = True
            for x in range(1, d):
                if felems[e, x] > new_times[x, 0] + (1 if x == j else 0):
                    found = False
                    break
            if found:
                break
        if not found:
            return False
    return True


@njit(cache=True, nogil=True)
def step_tail(new_times: np.ndarray, felems: np.ndarray) -> tuple[bool, np.ndarray]:
    """The shape the one-call steps apply to, and the trailing coordinates ``(d - 1,)`` every
    new time has there: for two dimensional times :func:`pinned_round` (a loop round), for
    more :func:`pinned_tail` (a round of nested loops); one dimensional times always."""
    d = new_times.shape[0]
    tail = np.zeros(max(d - 1, 0), np.int64)
    if d == 1:
        return True, tail
    if d == 2:
        r = pinned_round(new_times, felems)
        tail[0] = r
        return r >= 0, tail
    if not pinned_tail(new_times, felems):
        return False, tail
    for j in range(d - 1):
        tail[j] = new_times[j + 1, 0]
    return True, tail


@njit(cache=True, nogil=True)
def line_complete_below(felems: np.ndarray, tail: np.ndarray) -> int:
    """The one-call steps' points on a line, ``(p, *tail)`` (``(p,)`` with one dimension),
    are complete (:func:`point_complete`) iff ``p`` is below this."""
    below = _INF
    for e in range(felems.shape[0]):
        under = True
        for j in range(tail.shape[0]):
            under = under and felems[e, j + 1] <= tail[j]
        if under:
            below = min(below, felems[e, 0])
    return below


@njit(cache=True, nogil=True, inline="always")
def under_tail(times: np.ndarray, rec: int, tail: np.ndarray) -> bool:
    """Whether record ``rec`` of ``times`` is at or below ``tail`` in every trailing
    coordinate (it counts at the points of a line there)."""
    for j in range(tail.shape[0]):  # noqa: SIM110 - compiled: no generators
        if times[j + 1, rec] > tail[j]:
            return False
    return True


@njit(cache=True, nogil=True)
def tail_ceilings(
    tables: tuple[np.ndarray, np.ndarray],
    los: tuple[np.ndarray, np.ndarray],
    his: tuple[np.ndarray, np.ndarray],
    k: int,
    felems: np.ndarray,
    tail: np.ndarray,
    ceil: np.ndarray,
    rank: np.ndarray,
    rep: np.ndarray,
) -> None:
    """For times of three or more dimensions on a line at ``tail``: key ``k``'s pending
    trailing coordinates per frontier element ``e`` (:func:`line_candidates`' grid
    ceilings): in each trailing dimension ``j``, ``tail[j]`` where the element is at or
    below it, else the key's least record coordinate (in both seek tables) at or above
    the element's, into ``ceil[:, e]``. ``rank[e]``: the element's place among the distinct
    ceilings in lexicographic order (``_INF`` where a dimension has none: no pending time),
    ``rep[q]`` an element of rank ``q``."""
    ne, dt = felems.shape[0], tail.shape[0]
    d = dt + 1
    for e in range(ne):
        for j in range(dt):
            ceil[j, e] = tail[j] if felems[e, j + 1] <= tail[j] else _INF
    for side in range(2):
        table, lo, hi = tables[side], los[side], his[side]
        for b in range(lo.shape[0]):
            if lo[b, k] < 0:
                continue
            times = batch_records(table, b, d)[0]
            for rec in range(lo[b, k], hi[b, k]):
                for e in range(ne):
                    for j in range(dt):
                        f, x = felems[e, j + 1], times[j + 1, rec]
                        if f > tail[j] and f <= x < ceil[j, e]:
                            ceil[j, e] = x
    nq = 0  # the distinct ceilings, in lexicographic order: by insertion (few elements)
    for e in range(ne):
        rank[e] = _INF
        if _missing(ceil, e):
            continue
        at = nq
        for q in range(nq):
            c = _compare(ceil, e, rep[q])
            if c <= 0:
                at = q if c < 0 else -1
                break
        if at < 0:
            continue
        for q in range(nq, at, -1):
            rep[q] = rep[q - 1]
        rep[at] = e
        nq += 1
    for e in range(ne):
        if not _missing(ceil, e):
            for q in range(nq):
                if _compare(ceil, e, rep[q]) == 0:
                    rank[e] = q
                    break


@njit(cache=True, nogil=True, inline="always")
def _missing(ceil: np.ndarray, e: int) -> bool:
    for j in range(ceil.shape[0]):  # noqa: SIM110 - compiled: no generators
        if ceil[j, e] == _INF:
            return True
    return False


@njit(cache=True, nogil=True, inline="always")
def _compare(ceil: np.ndarray, a: int, b: int) -> int:
    """Columns ``a`` and ``b`` of ``ceil`` in lexicographic order: -1, 0 or 1."""
    for j in range(ceil.shape[0]):
        if ceil[j, a] != ceil[j, b]:
            return -1 if ceil[j, a] < ceil[j, b] else 1
    return 0


@njit(cache=True, nogil=True)
def line_grid(
    nkeys: int,
    new_owner: np.ndarray,
    new_times: np.ndarray,
    hist_owner: np.ndarray,
    hist_times: np.ndarray,
    felems: np.ndarray,
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`line_candidates` for ``(d, n)`` times, with the shape check
    (:func:`pinned_tail`) and the grid's arrays assembled: (applies, candidate owner,
    candidate times ``(d, C)``, predecessors ``(2**d - 1, C)``, pending owner, pending
    times ``(d, P)``)."""
    d = new_times.shape[0]
    z1 = np.zeros(0, np.int64)
    z2 = np.zeros((d, 0), np.int64)
    if not pinned_tail(new_times, felems):
        return False, z1, z2, z2, z1, z2
    tail = new_times[1:, 0].copy()
    c_owner, c_t0, pred, p_o, p_0, p_tail = line_candidates(
        nkeys,
        new_owner,
        new_times[0].copy(),
        hist_owner,
        hist_times[0].copy(),
        np.ascontiguousarray(hist_times[1:]),
        tail,
        felems,
    )
    nc, npend = c_owner.shape[0], p_o.shape[0]
    times = np.empty((d, nc), np.int64)
    times[0] = c_t0
    for j in range(d - 1):
        times[j + 1] = tail[j]
    preds = np.full(((1 << d) - 1, nc), -1, np.int64)
    preds[0] = pred
    p_times = np.empty((d, npend), np.int64)
    p_times[0] = p_0
    p_times[1:] = p_tail
    return True, c_owner, times, preds, p_o, p_times
