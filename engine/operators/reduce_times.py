"""Which times a reduce must (re)compute, for many keys at once: numpy for each key's
coordinates, and one compiled pass over their grids.

For one key, let ``N`` be its new times (times of new input updates, plus pending times that
became ready) and ``H`` every time in its input and output history. The output can need a
correction only at times ``>= some n in N`` that are joins of times in ``H ∪ N`` (seed 003:
"interesting times"). For product-order times every such join lies on the *grid* whose
coordinates in dimension ``j`` are the distinct ``j``-th coordinates of ``H ∪ N``. At any
grid point the input and output accumulations equal those at its *floor*, the join of the
key's times at or below it, so the general path computes only at points that are their own
floor (150 updates at scattered 3-D times: 120k of the grid's 2.9M points); the line paths
compute at every point of their line, a superset, which is harmless because at every point
the output is set to ``f(input)``, which is what it must be anyway.

Of those points, the ones that are *complete* (not ``>=`` the frontier) are computed now:
:class:`Grid` lists them with, for each, its predecessors along every non-empty set ``S``
of dimensions: the candidate that is the floor of the grid point one position back along
each dimension of ``S`` (for the Möbius inversion that turns "desired accumulation" into
differences). The incomplete ones are represented by *pending* times
``ceil_grid(join(n, f))`` for ``n`` in ``N`` and ``f`` in the frontier: every incomplete
grid point ``>= n`` is ``>=`` one of them, so they are the only new work a later frontier
can release.

Invariant relied on (and kept by the reduce driver): at every complete time that is not
``>=`` any new or pending time, the output already equals ``f(input)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from numba import njit

from engine.consolidate import group_starts, lex_order
from engine.lattice import Antichain
from engine.operators.reduce_line import line_grid
from engine.sort_kernels import COMPILED_BELOW
from engine.trace.seek import bisect_at_least

__all__ = [
    "LINE_RECORDS_PER_KEY",
    "Grid",
    "candidate_grid",
    "candidate_line",
    "candidates",
    "compiled_line",
    "dominated_sums",
    "predecessor_sums",
    "segment_bounds",
]


@dataclass(frozen=True, slots=True)
class Grid:
    owner: np.ndarray  # (C,) key index of each candidate
    times: np.ndarray  # (d, C) candidate times, sorted by (owner, time)
    preds: np.ndarray  # (2**d - 1, C) the candidate holding c - e_S's accumulation, or -1
    signs: np.ndarray  # (2**d - 1,) (-1)**|S|
    pending_owner: np.ndarray  # (P,)
    pending_times: np.ndarray  # (d, P)

    def __len__(self) -> int:
        return int(self.owner.shape[0])


@cache
def _signs_of(d: int) -> np.ndarray:
    """``(-1)**|S|`` for every non-empty set ``S`` of ``d`` dimensions, by bit mask (read
    only: one array for every grid)."""
    signs = np.array([-1 if bin(s).count("1") % 2 else 1 for s in range(1, 1 << d)], np.int64)
    signs.setflags(write=False)
    return signs


def segment_bounds(owner: np.ndarray, nkeys: int) -> tuple[np.ndarray, np.ndarray]:
    """For ``owner`` sorted ascending: start and end of each key's segment."""
    keys = np.arange(nkeys, dtype=np.int64)
    return np.searchsorted(owner, keys, "left"), np.searchsorted(owner, keys, "right")


@njit(cache=True, nogil=True)
def _flush_slots(
    c: int,
    nt: int,
    touched: np.ndarray,
    sums: np.ndarray,
    seen: np.ndarray,
    out: np.ndarray,
    n: int,
) -> tuple[np.ndarray, int]:
    """Candidate ``c``'s ``nt`` touched value slots, ascending, appended to ``out`` (rows:
    candidate, value number, sum; from column ``n``, grown when full) where their sum is not
    zero, and the slots cleared. Returns ``out`` and its new length."""
    if n + nt > out.shape[1]:
        cap = out.shape[1]
        while n + nt > cap:
            cap *= 2
        grown = np.empty((3, cap), np.int64)
        grown[:, :n] = out[:, :n]
        out = grown
    ws = np.sort(touched[:nt])
    for i in range(nt):
        w = ws[i]
        if sums[w] != 0:
            out[0, n] = c
            out[1, n] = w
            out[2, n] = sums[w]
            n += 1
        sums[w] = 0
        seen[w] = False
    return out, n


@njit(cache=True, nogil=True)
def dominated_sums(
    cand_owner: np.ndarray,
    cand_times: np.ndarray,
    key_groups: np.ndarray,
    time_starts: np.ndarray,
    group_times: np.ndarray,
    rec_value: np.ndarray,
    rec_diff: np.ndarray,
    nvalues: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every candidate and every distinct value of its key's records, the sum of the
    diffs of those records whose time is ``<=`` the candidate's; zero sums left out.

    The records come grouped by key and, within a key, by distinct time in lexicographic
    order: key ``k``'s time groups are ``key_groups[k]:key_groups[k + 1]``, group ``g``
    holds records ``time_starts[g]:time_starts[g + 1]`` at time ``group_times[:, g]``,
    and a record has a value number (``rec_value``, ascending with the value within a key)
    and a diff. Returns the candidates (ascending), the value numbers and the sums, each
    candidate's values ascending.

    Nothing per (candidate, record) pair is written or sorted (65.8M pairs for 35k
    candidates in one write of a four-dimensional loop, which took most of its time): a
    candidate tests each distinct time of its key once, stops at the first whose first
    coordinate passes its own, sums the records of the times at or below it into slots by
    value number, and writes the touched slots out in order."""
    d, nc = cand_times.shape[0], cand_owner.shape[0]
    sums = np.zeros(nvalues, np.int64)
    seen = np.zeros(nvalues, np.bool_)
    touched = np.empty(nvalues, np.int64)
    out = np.empty((3, 1024), np.int64)  # rows: candidate, value number, sum
    n = 0
    for c in range(nc):
        k = cand_owner[c]
        nt = 0
        for g in range(key_groups[k], key_groups[k + 1]):
            if group_times[0, g] > cand_times[0, c]:
                break
            below = True
            for x in range(1, d):
                if group_times[x, g] > cand_times[x, c]:
                    below = False
                    break
            if not below:
                continue
            for r in range(time_starts[g], time_starts[g + 1]):
                w = rec_value[r]
                sums[w] += rec_diff[r]
                if not seen[w]:
                    seen[w] = True
                    touched[nt] = w
                    nt += 1
        if nt:
            out, n = _flush_slots(c, nt, touched, sums, seen, out, n)
    return out[0, :n].copy(), out[1, :n].copy(), out[2, :n].copy()


def _distinct_coords(owner: np.ndarray, coords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (owner, coordinate) pairs, sorted."""
    order = lex_order([owner, coords])
    o, c = owner[order], coords[order]
    starts = group_starts([o, c], o.shape[0])
    return o[starts], c[starts]


def _ceil_positions(
    seg_owner: np.ndarray, seg_vals: np.ndarray, q_owner: np.ndarray, q_vals: np.ndarray
) -> np.ndarray:
    """Position in the sorted (owner, value) list of the first entry of ``q_owner``'s
    segment with value ``>= q_vals`` (may point past the segment)."""
    n = seg_owner.shape[0]
    all_owner = np.concatenate([seg_owner, q_owner])
    all_vals = np.concatenate([seg_vals, q_vals])
    tag = np.concatenate([np.ones(n, dtype=np.int64), np.zeros(q_owner.shape[0], dtype=np.int64)])
    order = lex_order([all_owner, all_vals, tag])
    is_list = tag[order]
    before = np.cumsum(is_list) - is_list  # list entries strictly before each position
    pos = np.empty(q_owner.shape[0], dtype=np.int64)
    q_at = order >= n
    pos[order[q_at] - n] = before[q_at]
    return pos


def _distinct_pending(
    owners: list[np.ndarray], times: list[np.ndarray], d: int
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (owner, time) pairs among the parts, sorted."""
    if not owners:
        return np.zeros(0, dtype=np.int64), np.zeros((d, 0), dtype=np.int64)
    po = np.concatenate(owners)
    pt = np.concatenate(times, axis=1)
    order = lex_order([po, *pt])
    po, pt = po[order], pt[:, order]
    starts = group_starts([po, *pt], po.shape[0])
    return po[starts], pt[:, starts]


@njit(cache=True, nogil=True)
def predecessor_sums(
    lo: np.ndarray,
    count: np.ndarray,
    rec_value: np.ndarray,
    rec_diff: np.ndarray,
    preds: np.ndarray,
    signs: np.ndarray,
    nvalues: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every candidate ``c`` and value: its rows' diffs plus, for each set ``S``, the
    rows of ``preds[S, c]`` times ``signs[S]``; zero sums left out. Candidate ``c``'s rows
    are ``lo[c]:lo[c] + count[c]``, each with a value number (``rec_value``, ascending with
    the value) and a diff. Returns the candidates (ascending), the value numbers (ascending
    within a candidate) and the sums: no sort of all the rows, each summed into a slot."""
    nc = lo.shape[0]
    sums = np.zeros(nvalues, np.int64)
    seen = np.zeros(nvalues, np.bool_)
    touched = np.empty(nvalues, np.int64)
    out = np.empty((3, 1024), np.int64)  # rows: candidate, value number, sum
    n = 0
    for c in range(nc):
        nt = 0
        for s in range(-1, preds.shape[0]):
            src = c if s < 0 else preds[s, c]
            if src < 0:
                continue
            sign = 1 if s < 0 else signs[s]
            for r in range(lo[src], lo[src] + count[src]):
                w = rec_value[r]
                sums[w] += sign * rec_diff[r]
                if not seen[w]:
                    seen[w] = True
                    touched[nt] = w
                    nt += 1
        if nt:
            out, n = _flush_slots(c, nt, touched, sums, seen, out, n)
    return out[0, :n].copy(), out[1, :n].copy(), out[2, :n].copy()


@njit(cache=True, nogil=True)
def _grid_points(
    g_first: np.ndarray,
    sizes: np.ndarray,
    tl: np.ndarray,
    ln: np.ndarray,
    strides: np.ndarray,
    values: np.ndarray,
    v_off: np.ndarray,
    lo: np.ndarray,
    mins: np.ndarray,
    felems: np.ndarray,
    new_owner: np.ndarray,
    new_times: np.ndarray,
    all_owner: np.ndarray,
    all_times: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The candidates of the keys' boxes, ascending by (key, time): (owner, times
    ``(d, C)``, predecessors ``(2**d - 1, C)``).

    A point is a candidate when it is complete (at or beyond no element of ``felems``), at
    or beyond a new time of its key, and its own *floor*: the join of its key's times at
    or below it. Each new time marks its own point, and a running OR along each dimension
    of each box carries the marks to every point above. Each time (history or new) marks
    the point of its coordinates raised to the key's least new ones (on the grid: the
    lists hold every coordinate at or above those), and a running maximum of the marks'
    positions along each dimension makes every point's positions the greatest of the
    marks below it in each dimension: its floor. Raising the coordinates changes no floor
    at or beyond a new time, the only ones read as such (a raised floor is still at or
    below its point). Predecessor ``S`` of a candidate is the candidate that is the floor
    of the point one position back along every dimension of ``S``, or -1."""
    d, nkeys = all_times.shape[0], g_first.shape[0]
    total = g_first[-1] + sizes[-1] if nkeys else 0
    ge = np.zeros(total, np.bool_)
    f = np.full((d, total), -1, np.int32)  # per point, per dimension: its floor's position
    pos = np.empty(d, np.int64)
    for i in range(all_owner.shape[0]):
        k = all_owner[i]
        flat = g_first[k]
        inside = True
        for j in range(d):
            start = v_off[j] + lo[j, k]  # the key's coordinates in dimension j
            x = max(all_times[j, i], mins[j, k])
            pos[j] = bisect_at_least(values, x, start, start + ln[j, k]) - start
            if pos[j] >= tl[j, k]:
                inside = False  # beyond the complete box: below no point of it
                break
            flat += pos[j] * strides[j, k]
        if inside:
            for j in range(d):
                f[j, flat] = max(f[j, flat], pos[j])
    for i in range(new_owner.shape[0]):
        k = new_owner[i]
        flat = g_first[k]
        inside = True
        for j in range(d):
            start = v_off[j] + lo[j, k]
            p = bisect_at_least(values, new_times[j, i], start, start + tl[j, k]) - start
            if p >= tl[j, k]:
                inside = False  # not complete: nothing complete is above it
                break
            flat += p * strides[j, k]
        if inside:
            ge[flat] = True
    for k in range(nkeys):
        base, size = g_first[k], sizes[k]
        for j in range(d):
            st, n = strides[j, k], tl[j, k]
            if n <= 1:
                continue
            for c in range(st, size):  # points with a predecessor along j
                if (c // st) % n == 0:
                    continue
                a, b = base + c, base + c - st
                ge[a] |= ge[b]
                if f[0, b] >= 0:  # a point's positions are all -1 or none is
                    for x in range(d):
                        f[x, a] = max(f[x, a], f[x, b])
    index_of = np.full(total, -1, np.int64)  # marked 0 first, numbered after the count
    nc = 0
    for k in range(nkeys):
        base = g_first[k]
        for c in range(sizes[k]):
            a = base + c
            if not ge[a]:
                continue
            own = True
            for j in range(d):
                if f[j, a] != (c // strides[j, k]) % tl[j, k]:
                    own = False
                    break
            if not own:
                continue
            beyond = False
            for e in range(felems.shape[0]):
                above = True
                for j in range(d):
                    p = (c // strides[j, k]) % tl[j, k]
                    if values[v_off[j] + lo[j, k] + p] < felems[e, j]:
                        above = False
                        break
                if above:
                    beyond = True
                    break
            if beyond:
                continue
            index_of[a] = 0
            nc += 1
    cand = np.empty(nc, np.int64)
    c_owner = np.empty(nc, np.int64)
    i = 0
    for k in range(nkeys):
        for a in range(g_first[k], g_first[k] + sizes[k]):
            if index_of[a] == 0:
                index_of[a] = i
                cand[i] = a
                c_owner[i] = k
                i += 1
    times = np.empty((d, nc), np.int64)
    nsub = (1 << d) - 1
    preds = np.full((nsub, nc), -1, np.int64)
    for i in range(nc):
        a, k = cand[i], c_owner[i]
        c = a - g_first[k]
        for j in range(d):
            times[j, i] = values[v_off[j] + lo[j, k] + (c // strides[j, k]) % tl[j, k]]
        for s in range(1, nsub + 1):
            q = a
            ok = True
            for j in range(d):
                if s >> j & 1:
                    if (c // strides[j, k]) % tl[j, k] == 0:
                        ok = False
                        break
                    q -= strides[j, k]
            if not ok or f[0, q] < 0:
                continue
            below = g_first[k]
            for j in range(d):
                below += f[j, q] * strides[j, k]
            preds[s - 1, i] = index_of[below]
    return c_owner, times, preds


def candidate_grid(
    nkeys: int,
    new_owner: np.ndarray,
    new_times: np.ndarray,
    hist_owner: np.ndarray,
    hist_times: np.ndarray,
    frontier: Antichain,
) -> Grid:
    """Candidate and pending times for ``nkeys`` keys (see the module docstring).

    ``new_owner``/``new_times`` are the keys' new times (every key has at least one);
    ``hist_owner``/``hist_times`` their history times (input and output).
    """
    d = new_times.shape[0]
    order = np.argsort(new_owner, kind="stable")
    new_owner, new_times = new_owner[order], new_times[:, order]
    first_new, _ = segment_bounds(new_owner, nkeys)
    # per key, coordinate-wise min over its new times
    mins = np.stack([np.minimum.reduceat(new_times[j], first_new) for j in range(d)])

    all_owner = np.concatenate([hist_owner, new_owner])
    lists = []  # per dim: (owner, values, seg_lo, seg_len, trimmed_len)
    for j in range(d):
        coords = np.concatenate([hist_times[j], new_times[j]])
        keep = coords >= mins[j][all_owner]
        o, v = _distinct_coords(all_owner[keep], coords[keep])
        lo, hi = segment_bounds(o, nkeys)
        # trim: values v whose point (mins with coordinate j = v) is complete; a prefix
        probe = mins[:, o].copy()
        probe[j] = v
        ok = frontier.complete(probe) if not frontier.is_empty else np.ones(v.shape[0], bool)
        trimmed = np.bincount(o[ok], minlength=nkeys).astype(np.int64)
        lists.append((o, v, lo, hi - lo, trimmed))

    tl = np.stack([t for _, _, _, _, t in lists])
    sizes = np.prod(tl, axis=0) if nkeys else np.zeros(0, dtype=np.int64)
    strides = np.ones((d, nkeys), dtype=np.int64)
    for j in range(d - 2, -1, -1):
        strides[j] = strides[j + 1] * tl[j + 1]
    values = np.concatenate([v for _, v, _, _, _ in lists])
    v_off = np.cumsum([0] + [v.shape[0] for _, v, _, _, _ in lists[:-1]]).astype(np.int64)
    c_owner, c_times, preds = _grid_points(
        np.cumsum(sizes) - sizes,
        sizes,
        tl,
        np.stack([ln for _, _, _, ln, _ in lists]),
        strides,
        values,
        v_off,
        np.stack([lo for _, _, lo, _, _ in lists]),
        np.ascontiguousarray(mins),
        frontier.elements,
        new_owner,
        np.ascontiguousarray(new_times),
        all_owner,
        np.ascontiguousarray(np.concatenate([hist_times, new_times], axis=1)),
    )
    signs = _signs_of(d)

    # pending: ceil_grid(join(n, f)) for every new time n and frontier element f
    p_owner_parts, p_times_parts = [], []
    for f in frontier.elements:
        q = np.maximum(new_times, f[:, None])
        ok = np.ones(new_owner.shape[0], dtype=bool)
        ceil = np.empty_like(q)
        for j in range(d):
            o, v, lo, ln, _ = lists[j]
            pos = _ceil_positions(o, v, new_owner, q[j])
            inside = pos < (lo + ln)[new_owner]
            ok &= inside
            ceil[j] = np.where(
                inside, v[np.minimum(pos, max(v.shape[0] - 1, 0))] if v.shape[0] else 0, 0
            )
        if ok.any():
            p_owner_parts.append(new_owner[ok])
            p_times_parts.append(ceil[:, ok])
    po, pt = _distinct_pending(p_owner_parts, p_times_parts, d)

    return Grid(c_owner, c_times, preds, signs, po, pt)


def _pinned_tail(new_times: np.ndarray, frontier: Antichain) -> np.ndarray | None:
    """For times of two or more coordinates: the trailing coordinates ``c`` if every new
    time has them and every point at or beyond a new time with a trailing coordinate above
    ``c`` is at or beyond the frontier (a loop round: the frontier holds, for each trailing
    dimension ``j``, an element with first coordinate 0 that is at most ``c_j + 1`` in
    ``j`` and at most ``c`` in the others: ``(0, r + 1)`` for a loop's round ``r``,
    ``(0, k, r + 1)`` and ``(0, k + 1, 0)`` for an inner loop's round ``r`` in the outer
    one's round ``k``), else None."""
    tail = new_times[1:, :1]
    if not (new_times[1:] == tail).all():
        return None
    el = frontier.elements
    for j in range(tail.shape[0]):
        bound = tail[:, 0].copy()
        bound[j] += 1
        if not ((el[:, 0] == 0) & (el[:, 1:] <= bound).all(axis=1)).any():
            return None
    return tail[:, 0]


def candidate_line(
    nkeys: int,
    new_owner: np.ndarray,
    new_times: np.ndarray,
    hist_owner: np.ndarray,
    hist_times: np.ndarray,
    frontier: Antichain,
) -> Grid | None:
    """The fast path of :func:`candidate_grid` when only the first coordinate is free: one
    dimensional times, or a loop round (every new time has the same trailing coordinates,
    and every point beyond those is at or beyond the frontier, :func:`_pinned_tail`),
    where every candidate has the new times' trailing coordinates. Returns the same
    :class:`Grid` as the general path, or None when the shape does not apply."""
    d = new_times.shape[0]
    tail = np.zeros(0, dtype=np.int64)
    if d > 1:
        pinned = _pinned_tail(new_times, frontier)
        if pinned is None:
            return None
        tail = pinned
    order = np.argsort(new_owner, kind="stable")
    new_owner, new_times = new_owner[order], new_times[:, order]
    n_lo, _ = segment_bounds(new_owner, nkeys)
    mins = np.minimum.reduceat(new_times[0], n_lo)
    all_owner = np.concatenate([hist_owner, new_owner])
    coords = np.concatenate([hist_times[0], new_times[0]])
    keep = coords >= mins[all_owner]
    o, v = _distinct_coords(all_owner[keep], coords[keep])
    points = np.concatenate([v[None, :], np.repeat(tail[:, None], v.shape[0], axis=1)])
    cand = np.flatnonzero(frontier.complete(points))
    c_owner = o[cand]
    # along the first coordinate, the key's candidate before; along any other, a point
    # beyond no new time, whose correction is nothing (the invariant in the docstring)
    preds = np.full(((1 << d) - 1, cand.shape[0]), -1, dtype=np.int64)
    if cand.shape[0] > 1:
        nxt = (c_owner[1:] == c_owner[:-1]) & (cand[1:] == cand[:-1] + 1)
        preds[0, 1:][nxt] = np.flatnonzero(nxt)
    signs = _signs_of(d)
    # each trailing coordinate's distinct values per key, for the pending times' ceilings
    trailing: list[tuple[np.ndarray, np.ndarray]] = []
    p_owner, p_times = [], []
    _, hi = segment_bounds(o, nkeys)
    for f in frontier.elements:
        q = np.maximum(new_times, f[:, None])
        pos = _ceil_positions(o, v, new_owner, q[0])
        ok = pos < hi[new_owner]
        ceil = [v[np.minimum(pos, max(v.shape[0] - 1, 0))]]
        for j in range(1, d):
            if not ok.any():
                break
            if len(trailing) < j:
                h = np.concatenate([hist_times[j], new_times[j]])
                trailing.append(_distinct_coords(all_owner, h))
            it_o, it_v = trailing[j - 1]
            it_pos = _ceil_positions(it_o, it_v, new_owner, q[j])
            ok &= it_pos < segment_bounds(it_o, nkeys)[1][new_owner]
            ceil.append(it_v[np.minimum(it_pos, max(it_v.shape[0] - 1, 0))])
        if ok.any():
            p_owner.append(new_owner[ok])
            p_times.append(np.stack([c[ok] for c in ceil]))
    po, pt = _distinct_pending(p_owner, p_times, d)
    return Grid(c_owner, points[:, cand], preds, signs, po, pt)


# Keys averaging more records than this: numpy's global sorts beat the compiled line's
# per-key ones (10 keys of 100k records: 40 against 54 ms; 1,000 of 1,000: 27 against 30).
# With fewer, the compiled line is 3-15x faster (a million keys of one record: 22 against
# 329 ms).
LINE_RECORDS_PER_KEY = 256


def compiled_line(
    nkeys: int,
    new_owner: np.ndarray,
    new_times: np.ndarray,
    hist_owner: np.ndarray,
    hist_times: np.ndarray,
    frontier: Antichain,
) -> Grid | None:
    """:func:`candidate_line` through the compiled kernel (same result, one call)."""
    d = new_times.shape[0]
    ok, c_owner, times, preds, p_o, p_times = line_grid(
        nkeys,
        new_owner,
        np.ascontiguousarray(new_times),
        hist_owner,
        np.ascontiguousarray(hist_times),
        frontier.elements,
    )
    if not ok:
        return None
    return Grid(c_owner, times, preds, _signs_of(d), p_o, p_times)


def candidates(
    nkeys: int,
    new_owner: np.ndarray,
    new_times: np.ndarray,
    hist_owner: np.ndarray,
    hist_times: np.ndarray,
    frontier: Antichain,
) -> Grid:
    """The candidate grid: the line path when it applies (compiled, or numpy's sorts where
    keys average many records), the general path otherwise."""
    if frontier.is_empty:
        return candidate_grid(nkeys, new_owner, new_times, hist_owner, hist_times, frontier)
    records = hist_owner.shape[0] + new_owner.shape[0]
    compiled = records < COMPILED_BELOW or records <= LINE_RECORDS_PER_KEY * nkeys
    line = (compiled_line if compiled else candidate_line)(
        nkeys, new_owner, new_times, hist_owner, hist_times, frontier
    )
    if line is not None:
        return line
    return candidate_grid(nkeys, new_owner, new_times, hist_owner, hist_times, frontier)
