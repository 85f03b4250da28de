"""Reduce: per key, output at time ``t`` is ``kernel(input accumulated at t)``.

The driver keeps the output arrangement and the pending (key, time) pairs; the numpy kernels
do the rest, for all touched keys and all their times in one sweep (seed 000, "Problem 2"):

1. new (key, time) pairs: the complete times of this run's input updates, plus pending pairs
   whose time became complete; an incomplete input time waits as a pending time itself (no
   complete time is at or beyond it, and every grid point it would make pending is);
2. gather the touched keys' input and output histories (seek, not scan);
3. ``candidate_grid``: the complete times that may need a correction, and new pending times;
4. ``accumulate_at``: input and output accumulations at every candidate;
5. desired = kernel(input accumulation); ``E = desired - output accumulation``;
6. Möbius inversion over each key's grid turns ``E`` into output differences: after them the
   output accumulated at every candidate equals the desired one.

Where the step has one new time and every record of its keys is at or below it (a load, a
loop round's step during one, single updates of a totally ordered time), that time is each
key's only candidate: steps 3 and 6 fall away, and step 4 is a consolidation of each key's
records (``Reduce._update_at``).

Invariant: at every complete time not at or beyond a pending time, the output accumulation
equals ``kernel(input accumulation)``; pending times are never complete when stored.

Set-like kernels and the common aggregates take this path only where their one-call steps
(``reduce_set``, ``reduce_agg``) do not apply: times off a line.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from engine.batch import UpdateBatch
from engine.consolidate import group_starts, lex_order
from engine.errors import SchemaError
from engine.lattice import Antichain
from engine.operators.base import Arranged, ArrangementReader, Operator, Scope
from engine.operators.reduce_agg import agg_step
from engine.operators.reduce_kernels import (
    KernelContext,
    ReduceKernel,
    accumulate_at,
    consolidate_rows,
)
from engine.operators.reduce_scalar import scalar_differences
from engine.operators.reduce_set import set_step
from engine.operators.reduce_step import Pending, StepResult, joined, run_step
from engine.operators.reduce_times import Grid, candidates, predecessor_sums
from engine.schema import Schema
from engine.trace import History, Layout, Spine, TraceBatch

__all__ = ["PAIRS_PER_PART", "Reduce"]

# Accumulating the histories at the candidates pairs each candidate with every record of its
# key (step 4): with times of several free coordinates both can be in the thousands per key.
# A step whose pairs pass this many is run a few keys at a time (each part pairs no more,
# unless one key alone does), so its memory stays bounded; keys are independent.
PAIRS_PER_PART = 1 << 22


def mobius(
    grid: Grid, cand: np.ndarray, vals: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Differences whose accumulation over each key's grid equals ``e`` at every candidate
    (rows sorted by candidate, as ``consolidate_rows`` leaves them); the result is sorted
    by (candidate, values), without zeros.

    The difference at ``c`` is the inclusion-exclusion of the corrections at ``c - e_S``
    over every set ``S`` of dimensions; the correction there is the one at its floor (the
    join of the key's times at or below it), which is the candidate ``grid.preds`` names,
    or none. The rows' values are numbered, and a compiled pass sums, per candidate, its
    rows and its predecessors' by sign into slots by value (``predecessor_sums``)."""
    n = cand.shape[0]
    if n == 0:
        return cand, vals, e
    if vals.shape[0]:
        by_value = lex_order(list(vals))
        firsts = group_starts([v[by_value] for v in vals], n)
        value = np.empty(n, np.int64)
        value[by_value] = np.cumsum(firsts) - 1
        holder = by_value[firsts]  # a row holding each value number
    else:
        value, holder = np.zeros(n, np.int64), np.zeros(1, np.int64)
    keys = np.arange(len(grid), dtype=np.int64)
    lo = np.searchsorted(cand, keys, "left")
    c, v, sums = predecessor_sums(
        lo,
        np.searchsorted(cand, keys, "right") - lo,
        value,
        e,
        grid.preds,
        grid.signs,
        holder.shape[0],
    )
    return c, np.take(vals, holder[v], axis=1), sums


def _line_tail(c_times: np.ndarray) -> np.ndarray | None:
    """The trailing coordinates every candidate shares (a line path's grid), or None."""
    if c_times.shape[0] < 2 or c_times.shape[1] == 0:
        return None
    tail = c_times[1:, :1]
    return tail if (c_times[1:] == tail).all() else None


def _on_line(h: History, tail: np.ndarray) -> History:
    """The records of ``h`` that count at points whose trailing coordinates are ``tail``
    (``(d - 1, 1)``): those at or below it there, by their first coordinate alone (a
    record is at or below ``(t, *tail)`` exactly when it is one of them and its first
    coordinate is at most ``t``)."""
    keep = (h.times[1:] <= tail).all(axis=0)
    if keep.all():
        return History(h.owner, h.vals, h.times[:1], h.diffs)
    return History(h.owner[keep], h.vals[:, keep], h.times[:1, keep], h.diffs[keep])


def _one_point(times: np.ndarray, inp: History, out: History) -> np.ndarray | None:
    """The step's one new time ``(d, 1)`` when every new time is that time and every record
    of its keys, input and output, is at or below it (a load, or single updates of a totally
    ordered time): then it is every key's only candidate. Else None."""
    if times.shape[1] == 0:
        return None
    t = times[:, :1]
    if not (times == t).all():
        return None
    if not ((inp.times <= t).all() and (out.times <= t).all()):
        return None
    return t


class Reduce(Operator):
    """Groups an arrangement by its key and applies a kernel; keeps its own arrangement of
    the output (key columns first, then the kernel's value columns)."""

    name = "reduce"

    def __init__(
        self,
        scope: Scope,
        input: Arranged,
        kernel: ReduceKernel,
        schema: Schema,
        layout: Layout,
        name: str = "reduce",
    ) -> None:
        if len(layout.val_cols) != len(kernel.out_types):
            raise SchemaError("reduce output layout does not match its kernel")
        super().__init__(scope, [input], schema)  # type: ignore[list-item]
        self.name = name
        self.kernel = kernel
        self.source = ArrangementReader(input, name)
        self.in_layout = input.layout
        self.layout = layout
        self.spine = Spine(layout, self.dims, name)
        self.own = self.spine.reader(name=name)
        self.delta: TraceBatch | None = None
        # set-like kernels over keys alone, and the common aggregates, step in one compiled
        # call where their times allow (``reduce_set``, ``reduce_agg``): which, and the rest
        # of its arguments
        exact = self.in_layout.exact_codes
        at_least = kernel.set_threshold()
        plan = kernel.line_plan()
        self.one_call: Callable[..., StepResult] | None = None
        self.one_call_args: tuple = ()
        if at_least is not None and not self.in_layout.val_cols and not layout.val_cols:
            self.one_call = set_step
            self.one_call_args = (exact, at_least, layout.key_index, scope.is_loop)
        elif plan is not None:
            self.one_call = agg_step
            self.one_call_args = (
                exact,
                len(self.in_layout.val_cols),
                *plan,
                layout.key_index,
                layout.val_index,
                layout.ncols,
            )
        self._no_delta = TraceBatch.empty(self.in_layout, self.dims)
        kk = len(layout.key_cols)
        # the pending (code, key, time) triples, sorted in trace order: in one part, or in
        # the two non-empty key ranges of the last split step (``run_step``), kept apart for
        # the next
        self.pending: list[Pending] = [
            (
                np.zeros(0, dtype=np.int64),
                np.zeros((kk, 0), dtype=np.int64),
                np.zeros((self.dims, 0), dtype=np.int64),
            )
        ]
        interner = scope.root.interner
        assert interner is not None
        in_schema = input.schema
        self.ctx = KernelContext(
            interner,
            tuple(in_schema.columns[i].type for i in self.in_layout.val_cols),
            None,
            tuple(in_schema.columns[i].type for i in self.in_layout.key_cols),
        )

    def pending_times(self) -> np.ndarray:
        if len(self.pending) == 1:
            return self.pending[0][2]
        return np.concatenate([p[2] for p in self.pending], axis=1)

    def pending_time_parts(self) -> list[np.ndarray]:
        return [p[2] for p in self.pending]

    def _one_pending(self) -> Pending:
        """The pending triples in one part."""
        if len(self.pending) > 1:
            self.pending = [joined(self.pending)]
        return self.pending[0]

    def run(self) -> None:
        frontier = self.input_frontier()
        self.frontier = frontier
        self.delta = None
        self.output = None
        delta = self.source.delta()
        if not (self.one_call is not None and self._one_call_step(delta, frontier)):
            self._step(delta, frontier)

    def compact(self) -> None:
        f = self.compaction_frontier()
        self.source.advance(f)
        self.own.advance(f)

    def _one_call_step(self, delta: TraceBatch | None, frontier: Antichain) -> bool:
        """The whole step in one compiled call (``reduce_set``, ``reduce_agg``), when it
        applies."""
        assert self.one_call is not None
        if delta is None:
            delta = self._no_delta
        applies, pending, codes, keys, offsets, vals, times, diffs, rows = run_step(
            self.one_call,
            delta,
            self.pending,
            (
                self.source.spine.seek_table(),
                self.spine.seek_table(),
                frontier.elements,
                *self.one_call_args,
            ),
        )
        if not applies:
            return False
        self.pending = pending
        if diffs.shape[0]:
            batch = TraceBatch(codes, keys, offsets, vals, times, diffs)
            self.spine.insert(batch)
            self.delta = batch
            self.output = UpdateBatch(rows, times, diffs, consolidated=True)
        return True

    def _step(self, delta: TraceBatch | None, frontier: Antichain) -> None:
        codes, keys, times = [], [], []
        if delta is not None:
            rk = delta.record_keys()
            d_codes, d_keys, d_times = delta.codes[rk], np.take(delta.keys, rk, axis=1), delta.times
            later = frontier.beyond(d_times)
            if later.any():  # no complete time is >= these: they wait, as themselves
                self._add_pending(d_codes[later], d_keys[:, later], d_times[:, later])
                now = ~later
                d_codes, d_keys, d_times = d_codes[now], d_keys[:, now], d_times[:, now]
            codes.append(d_codes)
            keys.append(d_keys)
            times.append(d_times)
        p_codes, p_keys, p_times = self._one_pending()
        ready = frontier.complete(p_times) if p_times.shape[1] else np.zeros(0, bool)
        if ready.any():
            codes.append(p_codes[ready])
            keys.append(p_keys[:, ready])
            times.append(p_times[:, ready])
            self.pending = [(p_codes[~ready], p_keys[:, ~ready], p_times[:, ~ready])]
        if codes and sum(c.shape[0] for c in codes):
            self._update(
                np.concatenate(codes), np.concatenate(keys, axis=1), np.concatenate(times, axis=1)
            )

    def _update(self, codes: np.ndarray, keys: np.ndarray, times: np.ndarray) -> None:
        exact = self.in_layout.exact_codes
        sort_keys = [codes] if exact else [codes, *keys]
        order = lex_order(sort_keys)
        starts = group_starts([k[order] for k in sort_keys], codes.shape[0])
        owner = np.empty(codes.shape[0], dtype=np.int64)
        owner[order] = np.cumsum(starts) - 1
        first = order[starts]
        k_codes, k_keys = codes[first], np.take(keys, first, axis=1)
        nkeys = k_codes.shape[0]

        inp = self.source.spine.gather(k_codes, k_keys)
        out = self.spine.gather(k_codes, k_keys)
        t = _one_point(times, inp, out)
        if t is not None:
            self._update_at(k_codes, k_keys, t, inp, out)
            return
        grid = candidates(
            nkeys,
            owner,
            times,
            np.concatenate([inp.owner, out.owner]),
            np.concatenate([inp.times, out.times], axis=1),
            self.input_frontier(),
        )
        at_least = self.kernel.set_threshold()
        scalar = at_least is not None and not inp.vals.shape[0]  # a sweep: no pairs in memory
        if nkeys > 1 and not scalar:
            records = np.bincount(inp.owner, minlength=nkeys) + np.bincount(
                out.owner, minlength=nkeys
            )
            pairs = np.bincount(grid.owner, minlength=nkeys) * records
            if int(pairs.sum()) > PAIRS_PER_PART:
                self._update_in_parts(codes, keys, times, owner, pairs)
                return
        self._add_pending(
            k_codes[grid.pending_owner],
            np.take(k_keys, grid.pending_owner, axis=1),
            grid.pending_times,
        )
        if len(grid) == 0:
            return
        if scalar:
            assert at_least is not None
            c, diffs = scalar_differences(
                nkeys,
                grid.owner,
                np.ascontiguousarray(grid.times),  # C order: one signature
                grid.preds,
                grid.signs,
                inp.owner,
                inp.times,
                inp.diffs,
                out.owner,
                out.times,
                out.diffs,
                at_least,
            )
            self._emit_sorted(k_codes, k_keys, grid, c, diffs)
            return
        ctx = self.ctx
        if self.kernel.needs_keys:
            ctx = KernelContext(
                ctx.interner, ctx.val_types, np.take(k_keys, grid.owner, axis=1), ctx.key_types
            )
        c_times = grid.times
        tail = _line_tail(c_times)
        if tail is not None:  # the records that count there, by their first coordinate
            c_times, inp, out = c_times[:1], _on_line(inp, tail), _on_line(out, tail)
        g_in, v_in, c_in = accumulate_at(
            grid.owner, c_times, nkeys, inp.owner, inp.vals, inp.times, inp.diffs
        )
        d_g, d_v, d_c = self.kernel.apply(g_in, v_in, c_in, len(grid), ctx)
        o_g, o_v, o_c = accumulate_at(
            grid.owner, c_times, nkeys, out.owner, out.vals, out.times, out.diffs
        )
        e_g, e_v, e_c = consolidate_rows(
            np.concatenate([d_g, o_g]),
            np.concatenate([d_v, o_v], axis=1),
            np.concatenate([d_c, -o_c]),
        )
        if e_g.shape[0] == 0:
            return
        c, v, diffs = mobius(grid, e_g, e_v, e_c)
        ko = grid.owner[c]
        self._emit(
            k_codes[ko], np.take(k_keys, ko, axis=1), v, np.take(grid.times, c, axis=1), diffs
        )

    def _update_at(
        self, k_codes: np.ndarray, k_keys: np.ndarray, t: np.ndarray, inp: History, out: History
    ) -> None:
        """:meth:`_update` where every key's one candidate is ``t`` (``_one_point``): its
        accumulations there are all its records, no Möbius inversion is needed (a key's
        correction at its only point is its difference), and nothing becomes pending."""
        nkeys = k_codes.shape[0]
        g_in, v_in, c_in = consolidate_rows(inp.owner, inp.vals, inp.diffs)
        ctx = self.ctx
        if self.kernel.needs_keys:
            ctx = KernelContext(ctx.interner, ctx.val_types, k_keys, ctx.key_types)
        d_g, d_v, d_c = self.kernel.apply(g_in, v_in, c_in, nkeys, ctx)
        e_g, e_v, e_c = consolidate_rows(
            np.concatenate([d_g, out.owner]),
            np.concatenate([d_v, out.vals], axis=1),
            np.concatenate([d_c, -out.diffs]),
        )
        self._emit(
            k_codes[e_g], np.take(k_keys, e_g, axis=1), e_v, np.repeat(t, e_g.shape[0], axis=1), e_c
        )

    def _update_in_parts(
        self,
        codes: np.ndarray,
        keys: np.ndarray,
        times: np.ndarray,
        owner: np.ndarray,
        pairs: np.ndarray,
    ) -> None:
        """:meth:`_update` a few keys at a time: consecutive keys while their pairs stay
        within ``PAIRS_PER_PART`` (a key alone may pass it)."""
        part = np.zeros(pairs.shape[0], dtype=np.int64)
        total = 0
        for k, p in enumerate(pairs.tolist()):  # per key, not per record
            if total and total + p > PAIRS_PER_PART:
                part[k:] += 1
                total = 0
            total += p
        by_time = part[owner]
        deltas: list[TraceBatch] = []
        for i in range(int(part[-1]) + 1):
            sel = by_time == i
            self.delta = None
            self._update(codes[sel], keys[:, sel], times[:, sel])
            if self.delta is not None:
                deltas.append(self.delta)
        # the parts' keys follow each other in trace order: their outputs, one after another
        self.delta = TraceBatch.concat_keys(self.layout, deltas, self.dims) if deltas else None
        self.output = self.delta.to_updates(self.layout) if self.delta is not None else None

    def _emit(
        self,
        codes: np.ndarray,
        keys: np.ndarray,
        vals: np.ndarray,
        times: np.ndarray,
        diffs: np.ndarray,
    ) -> None:
        """Output differences (one record per column, in any order): into the spine and out."""
        if diffs.shape[0] == 0:
            return
        batch = TraceBatch.from_records(self.layout, codes, keys, vals, times, diffs)
        if len(batch):
            self.spine.insert(batch)
            self.delta = batch
            self.output = batch.to_updates(self.layout)

    def _emit_sorted(
        self, k_codes: np.ndarray, k_keys: np.ndarray, grid: Grid, c: np.ndarray, diffs: np.ndarray
    ) -> None:
        """:meth:`_emit` for differences without value columns at ascending candidates:
        they are already in trace order (keys by code, times sorted within a key; see
        ``Grid``) and distinct, so the batch is indexed without sorting."""
        m = c.shape[0]
        if m == 0:
            return
        ko = grid.owner[c]
        starts = np.flatnonzero(np.concatenate([[True], ko[1:] != ko[:-1]]))
        keys_at = ko[starts]
        batch = TraceBatch(
            k_codes[keys_at],
            np.take(k_keys, keys_at, axis=1),
            np.append(starts, m),
            np.zeros((0, m), dtype=np.int64),
            np.take(grid.times, c, axis=1),
            diffs,
        )
        self.spine.insert(batch)
        self.delta = batch
        self.output = batch.to_updates(self.layout)

    def _add_pending(self, codes: np.ndarray, keys: np.ndarray, times: np.ndarray) -> None:
        if codes.shape[0] == 0:
            return
        p_codes, p_keys, p_times = self._one_pending()
        codes = np.concatenate([p_codes, codes])
        keys = np.concatenate([p_keys, keys], axis=1)
        times = np.concatenate([p_times, times], axis=1)
        sort_keys = [codes, *keys, *times]
        order = lex_order(sort_keys)
        first = order[group_starts([k[order] for k in sort_keys], codes.shape[0])]
        self.pending = [(codes[first], np.take(keys, first, axis=1), np.take(times, first, axis=1))]

    def release(self) -> None:
        super().release()
        self.source.release()
        self.own.release()
