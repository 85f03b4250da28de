"""What the one-call reduce steps share: the walk that finds new times, the new pending set,
and the split of a big step into two key ranges on two threads.

A one-call step (``reduce_set.set_step`` for set-like kernels, ``reduce_agg.agg_step`` for
aggregates) takes the input delta (a trace batch) and the pending (code, key, time)
triples, both sorted in trace order. :func:`walk_new_times` walks them together, splitting
their times into new (complete at the frontier) and waiting, so the keys with new times
come out distinct and sorted without a sort; :func:`merge_pending` merges what waits with
the step's new pending times into the next pending set, again without a sort.
:func:`run_step` runs a step, split by key range into two calls on two threads when it is
big: keys are independent, and the halves' results joined in key order are the whole
step's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from engine import parallel
from engine.sort_kernels import key_order
from engine.trace import TraceBatch

__all__ = [
    "SPLIT_FROM",
    "Pending",
    "RunResult",
    "StepResult",
    "joined",
    "merge_pending",
    "pending_ceilings",
    "run_step",
    "step_output",
    "walk_new_times",
]

SPLIT_FROM = 4096  # delta records plus pending triples from which a step splits in two
_INF = np.iinfo(np.int64).max

# (applies, pending codes, keys and times, output codes, keys, offsets, vals, times, diffs
# and rows): the output is a trace batch in trace order and its rows, the batch's records as
# the operator's output rows
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
    np.ndarray,
]

Pending = tuple[np.ndarray, np.ndarray, np.ndarray]  # codes, keys (kk, n), times (d, n)

# ``run_step``'s answer: whether the step applies, the pending parts, and the rest of
# ``StepResult`` (the output)
RunResult = tuple[
    bool,
    list[Pending],
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
# pays atomic reference counts per call, and per record that doubled the step's time.
# ``key_order`` runs only where two keys' codes tie.


@njit(cache=True, nogil=True)
def walk_new_times(
    d_codes: np.ndarray,
    d_keys: np.ndarray,
    d_offsets: np.ndarray,
    d_times: np.ndarray,
    p_codes: np.ndarray,
    p_keys: np.ndarray,
    p_times: np.ndarray,
    felems: np.ndarray,
    exact: bool,
    early: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The delta's keys (codes, keys, offsets and record times) and the pending triples,
    walked together in trace order at frontier ``felems``: (owner, new times, key codes, key
    keys, waiting codes, keys and times, number waiting). The keys with new times come out
    distinct and sorted, each new time knowing its key (``owner``, ascending); the waiting
    triples come in trace order, in arrays longer than their number. With ``early = r >=
    0`` (two-dimensional times at a loop round ``r``, whose frontier holds ``(0, r + 1)``),
    a delta record that waits for that element alone, a later round's input, is a new time
    at round ``r`` instead (``reduce_set_line`` then checks its key's later rounds ahead);
    pending triples wait as ever."""
    kk, d = d_keys.shape[0], d_times.shape[0]
    nd, n_pend = d_codes.shape[0], p_codes.shape[0]
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
                waits = bump = False  # frontier_reaches, in place
                for e in range(ne):
                    le = True
                    for c in range(d):
                        if felems[e, c] > d_times[c, rec]:
                            le = False
                            break
                    if le:
                        if early >= 0 and felems[e, 0] == 0 and felems[e, 1] == early + 1:
                            bump = True
                        else:
                            waits = True
                            break
                if bump and not waits:
                    owner[nn] = nkeys
                    n_times[0, nn] = d_times[0, rec]
                    n_times[1, nn] = early
                    nn += 1
                elif waits:
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
                        if felems[e, c] > p_times[c, i]:
                            le = False
                            break
                    if le:
                        waits = True
                        break
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
    return (
        owner[:nn],
        n_times[:, :nn].copy(),
        k_codes[:nkeys],
        k_keys[:, :nkeys].copy(),
        w_codes,
        w_keys,
        w_times,
        nw,
    )


@njit(cache=True, nogil=True)
def merge_pending(
    w_codes: np.ndarray,
    w_keys: np.ndarray,
    w_times: np.ndarray,
    nw: int,
    g_owner: np.ndarray,
    g_times: np.ndarray,
    k_codes: np.ndarray,
    k_keys: np.ndarray,
    exact: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The next pending set: the ``nw`` waiting triples plus the step's new pending times
    (``g_owner`` into the keys ``k_codes``/``k_keys``, times ``g_times``), distinct and in
    trace order. Both come in trace order (the waiting triples sorted by the walk, the new
    ones by key, then time): one merge, a triple equal to the last one kept written over."""
    kk, d = w_keys.shape[0], w_times.shape[0]
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
        if np_ == 0 or new_codes[np_ - 1] != code:
            np_ += 1
            continue
        repeat = True  # the same key and time as the last one kept?
        for c in range(kk):
            if new_keys[c, np_ - 1] != new_keys[c, np_]:
                repeat = False
                break
        if repeat:
            for c in range(d):
                if new_times[c, np_ - 1] != new_times[c, np_]:
                    repeat = False
                    break
        if not repeat:
            np_ += 1
    if np_ == total:  # nothing repeated: the arrays as they are
        return new_codes, new_keys, new_times
    return new_codes[:np_].copy(), new_keys[:, :np_].copy(), new_times[:, :np_].copy()


@njit(cache=True, nogil=True)
def pending_ceilings(
    k: int,
    lo: int,
    hi: int,
    n_times: np.ndarray,
    felems: np.ndarray,
    best: np.ndarray,
    v: np.ndarray,
    L: int,
    pend0: np.ndarray,
    pend1: np.ndarray,
    g_owner: np.ndarray,
    g_times: np.ndarray,
    ng: int,
    ceil: np.ndarray,
    rep: np.ndarray,
) -> int:
    """Key ``k``'s new pending times, written to ``g_owner``/``g_times`` from ``ng`` on
    (returns the new count), for the line kernels (``reduce_set_line``, ``reduce_agg``): per
    frontier element ``e``, each of the key's new times ``n_times[:, lo:hi]`` joined with it
    goes to the least of the key's distinct first coordinates ``v[:L]`` at or above it, at
    the least round ``best[e]`` at or above the element's (grid ceilings), distinct and
    sorted through the scratch ``pend0``/``pend1``. With three or more dimensions,
    ``best[e]`` is instead the rank of the element's trailing coordinates, ``ceil[:, e]``,
    and ``rep[q]`` an element of rank ``q`` (``reduce_line.tail_ceilings``). One call per
    key: passing the arrays costs no more than the section written inline in each kernel
    did (replayed)."""
    d = n_times.shape[0]
    np_ = 0
    for e in range(felems.shape[0]):
        if d >= 2 and best[e] == _INF:
            continue
        q1_ = best[e] if d >= 2 else 0
        for i in range(lo, hi):
            q0 = max(n_times[0, i], felems[e, 0])
            if q0 == n_times[0, i]:  # a new time's own coordinate: one of the distinct
                a = q0
            elif v[L - 1] < q0:  # (L >= 1: the new time's own is there) none above
                continue
            else:
                at, upto = 0, L  # the first distinct coordinate >= q0 (in place)
                while at < upto:
                    mid = (at + upto) >> 1
                    if v[mid] < q0:
                        at = mid + 1
                    else:
                        upto = mid
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
        elif d > 2:
            e = rep[pend1[i]]
            for j in range(d - 1):
                g_times[j + 1, ng] = ceil[j, e]
        ng += 1
    return ng


@njit(cache=True, nogil=True)
def step_output(
    ko: np.ndarray,
    o_t0: np.ndarray,
    vals: np.ndarray,
    tail: np.ndarray,
    d: int,
    k_codes: np.ndarray,
    k_keys: np.ndarray,
    key_index: np.ndarray,
    val_index: np.ndarray,
    ncols: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A step's output differences as a trace batch (they come by key, then values, then
    time: in trace order): owner ``ko`` into the keys ``k_codes``/``k_keys``, values
    ``vals``, first coordinates ``o_t0``, trailing coordinates ``tail``. Returns the batch's
    codes, keys, offsets and times, and its ``ncols`` rows: key column ``j`` as row
    ``key_index[j]``, value ``a`` as row ``val_index[a]``."""
    kk, m = k_keys.shape[0], ko.shape[0]
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
        for j in range(d - 1):
            out_times[j + 1, i] = tail[j]
        for j in range(kk):
            out_rows[key_index[j], i] = k_keys[j, ko[i]]
        for a in range(vals.shape[0]):
            out_rows[val_index[a], i] = vals[a, i]
    out_offsets[u] = m
    return out_codes, out_keys, out_offsets, out_times, out_rows


def joined(parts: list[Pending]) -> Pending:
    """Pending parts in key order as one."""
    if len(parts) == 1:
        return parts[0]
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts], axis=1),
        np.concatenate([p[2] for p in parts], axis=1),
    )


def _part(p: Pending, lo: int, hi: int) -> Pending:
    return (
        p[0][lo:hi],
        np.ascontiguousarray(p[1][:, lo:hi]),
        np.ascontiguousarray(p[2][:, lo:hi]),
    )


def _halves(d_codes: np.ndarray, parts: list[Pending]) -> tuple[int, Pending, Pending] | None:
    """Where a split step cuts: the delta's first record of the second half, and the pending
    triples of each half. Two pending parts (the last split's halves) are kept as they are,
    the delta cut where the second begins, while the two halves stay within 3:1 of each other;
    else the cut is made afresh at the middle code. None when one half would be empty."""
    nd = d_codes.shape[0]
    if len(parts) == 2:
        a, b = parts
        i = int(np.searchsorted(d_codes, b[0][0], "left"))
        na, nb = i + a[0].shape[0], nd - i + b[0].shape[0]
        if 3 * min(na, nb) >= max(na, nb):
            return i, a, b
    p = joined(parts)
    cut = parallel.middle_cut([d_codes, p[0]])
    if cut is None:
        return None
    i, j = int(cut[0]), int(cut[1])
    return i, _part(p, 0, j), _part(p, j, p[0].shape[0])


def run_step(
    step: Callable[..., StepResult],
    delta: TraceBatch,
    pending: list[Pending],
    rest: tuple,
) -> RunResult:
    """``step`` of the input ``delta`` and the ``pending`` (codes, keys, times) parts (in key
    order: one, or two non-empty ones), with the ``rest`` of its arguments, split by key
    range into two calls on two threads when the step is big (``SPLIT_FROM``). Keys sharing
    a code stay in one half. Every half's new times pin the same round when each applies
    (the frontier holds ``(0, r + 1)`` for one ``r``), so the halves apply together exactly
    when the whole does. In nested loops each half checks its own trailing coordinates;
    a key's step depends on its own times alone, so halves that both apply are right even
    where the whole would not have (it then takes the general path). Returns whether it
    applies, the next pending parts (a split step's two halves kept apart: the next step
    splits there again without joining and cutting them), and the output (``StepResult``
    after its pending triples)."""
    d_codes, d_keys, d_offsets, d_times = delta.codes, delta.keys, delta.offsets, delta.times
    cut = None
    if parallel.threads() > 1:
        size = d_times.shape[1] + pending[0][0].shape[0]
        if len(pending) == 2:
            size += pending[1][0].shape[0]
        if size >= SPLIT_FROM:
            cut = _halves(d_codes, pending)
    if cut is None:
        p_codes, p_keys, p_times = pending[0] if len(pending) == 1 else joined(pending)
        w = step(
            d_codes,
            d_keys,
            d_offsets,
            d_times,
            p_codes,
            # C order whatever made them (the general path's masks leave F order)
            np.ascontiguousarray(p_keys),
            np.ascontiguousarray(p_times),
            *rest,
        )
        return w[0], [(w[1], w[2], w[3])], w[4], w[5], w[6], w[7], w[8], w[9], w[10]
    i, pa, pb = cut
    nd = d_codes.shape[0]

    def half(d0: int, d1: int, p: Pending) -> StepResult:
        return step(
            d_codes[d0:d1],
            np.ascontiguousarray(d_keys[:, d0:d1]),
            d_offsets[d0 : d1 + 1],
            d_times,
            *p,
            *rest,
        )

    a, b = parallel.both(lambda: half(0, i, pa), lambda: half(i, nd, pb))
    if not (a[0] and b[0]):
        x = a if not a[0] else b
        return False, [], x[4], x[5], x[6], x[7], x[8], x[9], x[10]
    offsets = np.concatenate([a[6][:-1], b[6] + a[6][-1]])
    parts = [(x[1], x[2], x[3]) for x in (a, b) if x[1].shape[0]]
    return (
        True,
        parts or [(a[1], a[2], a[3])],
        np.concatenate([a[4], b[4]]),
        np.concatenate([a[5], b[5]], axis=1),
        offsets,
        np.concatenate([a[7], b[7]], axis=1),
        np.concatenate([a[8], b[8]], axis=1),
        np.concatenate([a[9], b[9]]),
        np.concatenate([a[10], b[10]], axis=1),
    )
