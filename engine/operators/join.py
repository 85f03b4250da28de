"""Equi-join of two arrangements, bilinear in their changes.

With ``L``/``R`` the arrangements after this run and ``dL``/``dR`` this run's deltas, the
output change is ``dL x R + L x dR - dL x dR`` (equal to ``dL x R_old + L_old x dR + dL x dR``),
so each pair of updates is joined exactly once. A pair of updates at times ``s`` and ``t``
produces an output at ``join(s, t)`` with the product of their diffs. Only the keys present in
a delta are looked up (a compiled seek into every batch of the other spine, in one call). A
delta of ``SPLIT_FROM`` records or more is joined as two key ranges at once, on two threads
(``engine.parallel``): each key's pairs are independent of every other key's.

In a loop, a delta at round ``r`` meets trace records of later iterations (a change of the
edges at round 0 meets every iteration at which reachability reached their source): those
outputs are at later iterations and are held, by iteration, until their round. What a join
sends on is at the round's iteration; operators downstream would only have kept them
pending until then (a reduce carried each such time through every round before it: at 1k/2k
reachability in batches of 1,000, 195k of the 277k pending triples its walks read a batch).
No time at an earlier iteration is at or beyond an update at a later one, so holding them
changes no result; the held times are this operator's pending work
(:meth:`pending_times`), which keeps the loop running to their rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from engine import parallel
from engine.batch import UpdateBatch
from engine.errors import SchemaError
from engine.operators.base import Arranged, ArrangementReader, Operator, Scope
from engine.progress import earliest_ready_round
from engine.schema import Schema
from engine.sort_kernels import stable_argsort
from engine.trace import TraceBatch
from engine.trace.cursor import match_keys
from engine.trace.seek import join_spine

__all__ = ["HOLD_FROM", "SPLIT_FROM", "Join", "join_pairs"]

SPLIT_FROM = 4096  # delta records from which a join runs as two key ranges on two threads
# updates at later iterations from which a loop's join holds them until their round: fewer
# cost more to split and deliver (a Python call each, at 1k/2k single updates about 100 µs
# an update) than a reduce spends carrying them as pending times
HOLD_FROM = 1024
_NO_ROUND = np.iinfo(np.int64).max  # outside a loop: no update is at a later iteration


def join_pairs(
    a: TraceBatch, b: TraceBatch, exact: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Record pairs with equal keys: (a record, a key, b record, b key) index arrays. The
    numpy reference the compiled ``join_spine`` is tested against."""
    qi, kb = match_keys(a.codes, a.keys, b.codes, b.keys, exact)
    if qi.shape[0] == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    a_lo = a.offsets[qi]
    b_lo = b.offsets[kb]
    na = a.offsets[qi + 1] - a_lo
    nb = b.offsets[kb + 1] - b_lo
    counts = na * nb
    total = int(counts.sum())
    owner = np.repeat(np.arange(qi.shape[0], dtype=np.int64), counts)
    local = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    nb_o = nb[owner]
    ai = a_lo[owner] + local // nb_o
    bi = b_lo[owner] + local % nb_o
    return ai, qi[owner], bi, kb[owner]


class Join(Operator):
    """Inner equi-join; ``outputs`` lists ``(side, column)`` with side 0 = left, 1 = right."""

    name = "join"

    def __init__(
        self,
        scope: Scope,
        left: Arranged,
        right: Arranged,
        outputs: Sequence[tuple[int, int]],
        schema: Schema,
    ) -> None:
        lk, rk = left.layout.key_cols, right.layout.key_cols
        if len(lk) != len(rk):
            raise SchemaError(f"join keys differ in arity: {len(lk)} vs {len(rk)}")
        for a, b in zip(lk, rk, strict=True):
            ta, tb = left.schema.columns[a], right.schema.columns[b]
            if ta.type != tb.type:
                raise SchemaError(
                    f"join key {ta.name!r} is {ta.type.value} but {tb.name!r} is {tb.type.value}"
                )
        super().__init__(scope, [left, right], schema)  # type: ignore[list-item]
        self.left = ArrangementReader(left, "join.left")
        self.right = ArrangementReader(right, "join.right")
        self.outputs = list(outputs)
        self.exact = left.layout.exact_codes
        self._layouts = (left.layout, right.layout)
        self._specs = (self._spec(0), self._spec(1))
        # in a loop: output updates at later iterations than the round, by iteration, held
        # until their round (``_by_round``)
        self.held: dict[int, list[UpdateBatch]] = {}
        self._no_times = np.zeros((self.dims, 0), dtype=np.int64)

    def _spec(self, delta_side: int) -> np.ndarray:
        """Where each output column comes from, for ``join_spine``: (from the delta?, from
        the key?, index among that side's key or value columns)."""
        spec = np.empty((len(self.outputs), 3), dtype=np.int64)
        for j, (side, col) in enumerate(self.outputs):
            layout = self._layouts[side]
            is_key = col in layout.key_cols
            idx = layout.key_cols.index(col) if is_key else layout.val_cols.index(col)
            spec[j] = (int(side == delta_side), int(is_key), idx)
        return spec

    def _against(
        self, delta: TraceBatch, delta_side: int, table: np.ndarray
    ) -> list[tuple[UpdateBatch, int]]:
        """``delta`` joined with the batches of the other side in ``table``: one part, or
        two (the delta's two halves of keys, on two threads) from ``SPLIT_FROM`` records."""
        n = delta.nkeys
        if parallel.threads() < 2 or len(delta) < SPLIT_FROM or n < 2:
            return [self._keys(delta, 0, n, delta_side, table)]
        h = n // 2
        a, b = parallel.both(
            lambda: self._keys(delta, 0, h, delta_side, table),
            lambda: self._keys(delta, h, n, delta_side, table),
        )
        return [a, b]

    def _keys(
        self, delta: TraceBatch, lo: int, hi: int, delta_side: int, table: np.ndarray
    ) -> tuple[UpdateBatch, int]:
        """The delta's keys ``lo:hi`` joined with the batches in ``table`` (their records
        are found through the offsets, which index the delta's whole arrays), and how many
        of the updates are at later iterations than the loop's round (none outside one)."""
        data, times, diffs, later = join_spine(
            delta.codes[lo:hi],
            np.ascontiguousarray(delta.keys[:, lo:hi]),
            delta.offsets[lo : hi + 1],
            delta.vals,
            delta.times,
            delta.diffs,
            table,
            self.exact,
            len(self._layouts[1 - delta_side].val_cols),
            self._specs[delta_side],
            self.scope.round if self.scope.is_loop else _NO_ROUND,
        )
        return UpdateBatch(data, times, diffs), later

    def run(self) -> None:
        self.frontier = self.input_frontier()
        dl, dr = self.left.delta(), self.right.delta()
        joined: list[tuple[UpdateBatch, int]] = []
        if dl is not None:
            joined += self._against(dl, 0, self.right.spine.seek_table())
        if dr is not None:
            joined += self._against(dr, 1, self.left.spine.seek_table())
        if dl is not None and dr is not None:
            joined += [(p.negate(), n) for p, n in self._against(dl, 0, dr.addresses()[None, :])]
        if self.scope.is_loop and sum(n for _, n in joined) >= HOLD_FROM:
            parts = self._by_round(joined)
        else:
            parts = [p for p, _ in joined if len(p)]
        if self.scope.is_loop:
            parts += self.held.pop(self.scope.round, [])
        self.output = UpdateBatch.concat(parts, self.ncols, self.dims) if parts else None

    def _by_round(self, joined: list[tuple[UpdateBatch, int]]) -> list[UpdateBatch]:
        """In a loop, this round's output parts (each with its count of updates at later
        iterations) without those updates: they are held, by iteration, until their round."""
        r = self.scope.round
        out = []
        for p, later in joined:
            if later == 0:
                if len(p):
                    out.append(p)
                continue
            p = p.take(stable_argsort(p.times[-1]))  # by iteration: each one's a slice
            its = p.times[-1]
            starts = np.flatnonzero(its[1:] != its[:-1]) + 1
            bounds = [0, *starts.tolist(), len(p)]
            for a, b in pairwise(bounds):
                it = int(its[a])
                part = UpdateBatch(p.data[:, a:b], p.times[:, a:b], p.diffs[a:b])
                if it <= r:
                    out.append(part)
                else:
                    self.held.setdefault(it, []).append(part)
        return out

    def pending_times(self) -> np.ndarray:
        parts = self.pending_time_parts()
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    def pending_time_parts(self) -> list[np.ndarray]:
        """The times of the updates held for later rounds (``_by_round``)."""
        if not self.held:
            return [self._no_times]
        return [b.times for bs in self.held.values() for b in bs]

    def next_round(self, felems: np.ndarray, after: int) -> int:
        """The first held iteration after ``after`` with an update whose outer part is
        complete (each held part's updates share their iteration: one call per part, in
        iteration order, until one is ready)."""
        if not self.held:
            return -1
        for it in sorted(self.held):
            if it > after:
                for b in self.held[it]:
                    if earliest_ready_round(np.ascontiguousarray(b.times), felems, after) >= 0:
                        return it
        return -1

    def compact(self) -> None:
        f = self.compaction_frontier()
        self.left.advance(f)
        self.right.advance(f)

    def release(self) -> None:
        super().release()
        self.left.release()
        self.right.release()
