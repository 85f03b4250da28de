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
tests compare the two. The walk that finds new times and the new pending set are shared
with the aggregates' step (``reduce_step``), which also splits a big step in two.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.operators.reduce_line import step_tail
from engine.operators.reduce_set_line import line_set_differences
from engine.operators.reduce_step import StepResult, merge_pending, step_output, walk_new_times

__all__ = ["AHEAD_UP_TO", "set_step"]

# A step of at most this many delta records checks its keys' later rounds ahead: a loop
# round it saves costs more than the check (single updates: about 15 records a step; 1k/2k
# reachability, alternated: batches of 10 +10%, of 100 and 1,000 -5 to -8% with every step
# checking ahead)
AHEAD_UP_TO = 256


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
    in_loop: bool,
) -> StepResult:
    """One reduce step: the input delta (a trace batch's codes, keys, offsets and times)
    and the pending (code, key, time) triples in, against the input and output spines
    (their seek tables, ``Spine.seek_table``) at frontier ``felems``. Returns
    (``reduce_step.StepResult``) whether it applies, the pending codes, keys and times, and
    the output batch's codes, keys, offsets, vals (none), times and diffs and its rows; the
    output is differences at distinct times, already in trace order, and its rows are its
    keys expanded per record, key column ``j`` as row ``columns[j]``. When it does not
    apply, everything after the flag is empty and nothing has been decided. ``in_loop``:
    the operator is in a loop, where a frontier element ``(0, r + 1)`` is a round's (outside
    one, a two-dimensional frontier holding ``(0, 1)`` says that row 0 is final, and its
    traces forget it)."""
    kk, d = d_keys.shape[0], d_times.shape[0]
    z1 = np.zeros(0, np.int64)
    zk = np.zeros((kk, 0), np.int64)
    zt = np.zeros((d, 0), np.int64)
    # a small step at a loop round r (an element (0, r + 1)) takes a later round's input
    # now, and checks its keys' later rounds ahead (``reduce_set_line``)
    ahead = in_loop and d == 2 and d_times.shape[1] <= AHEAD_UP_TO
    early = -1
    for e in range(felems.shape[0]):
        if ahead and felems[e, 0] == 0 and felems[e, 1] >= 1:
            early = felems[e, 1] - 1
    owner, n_times, k_codes, k_keys, w_codes, w_keys, w_times, nw = walk_new_times(
        d_codes, d_keys, d_offsets, d_times, p_codes, p_keys, p_times, felems, exact, early
    )
    nn, nkeys = owner.shape[0], k_codes.shape[0]
    applies, tail = step_tail(n_times, felems) if nn else (True, np.zeros(max(d - 1, 0), np.int64))
    if not applies:
        return False, z1, zk, zt, z1, zk, z1, zk, zt, z1, zk
    # histories, candidate line, differences, pending times
    if nn == 0:
        ko, o_t0, diffs, g_owner, g_times = z1, z1, z1, z1, zt
    else:
        ko, o_t0, diffs, g_owner, g_times = line_set_differences(
            nkeys, k_codes, k_keys, owner, n_times, in_table, out_table, felems, exact, at_least,
            tail, ahead,
        )  # fmt: skip
    vals = np.zeros((0, diffs.shape[0]), np.int64)
    out_codes, out_keys, out_offsets, out_times, out_rows = step_output(
        ko, o_t0, vals, tail, d, k_codes, k_keys, columns, z1, kk
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
        vals,
        out_times,
        diffs,
        out_rows,
    )
