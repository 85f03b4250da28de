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
from engine.consolidate import consolidate
from engine.errors import SchemaError
from engine.operators.base import Arranged, ArrangementReader, Operator, Scope
from engine.progress import earliest_ready_round
from engine.schema import Schema
from engine.sort_kernels import stable_argsort
from engine.trace import TraceBatch
from engine.trace.cursor import match_keys
from engine.trace.seek import join_spine

__all__ = ["HOLD_FROM", "PAIRS_PER_PART", "SPLIT_FROM", "Join", "join_pairs"]

SPLIT_FROM = 4096  # delta records from which a join runs as two key ranges on two threads
# updates at later iterations from which a loop's join holds them until their round: fewer
# cost more to split and deliver (a Python call each, at 1k/2k single updates about 100 µs
# an update) than a reduce spends carrying them as pending times
HOLD_FROM = 1024
_NO_ROUND = np.iinfo(np.int64).max  # outside a loop: no update is at a later iteration
# record pairs a join makes at once (40 bytes each for two columns and 2-D times): more are
# made in parts, each consolidated before the next (``Join._in_parts``)
PAIRS_PER_PART = 1 << 21
_NO_LIMIT = np.iinfo(np.int64).max


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
        of the updates are at later iterations than the loop's round (none outside one).
        More than ``PAIRS_PER_PART`` record pairs are made in parts (:meth:`_in_parts`)."""
        data, times, diffs, later, pairs = self._join(
            delta, delta.codes[lo:hi], delta.keys[:, lo:hi], delta.offsets[lo : hi + 1],
            delta_side, table, PAIRS_PER_PART,
        )  # fmt: skip
        if later >= 0:
            return UpdateBatch(data, times, diffs), later
        out = self._in_parts(delta, lo, delta_side, table, pairs)
        return out, int(np.count_nonzero(out.times[-1] > self._round()))

    def _round(self) -> int:
        """The loop's round, past which updates are at later iterations (none outside one)."""
        return self.scope.round if self.scope.is_loop else _NO_ROUND

    def _join(
        self,
        delta: TraceBatch,
        codes: np.ndarray,
        keys: np.ndarray,
        offsets: np.ndarray,
        delta_side: int,
        table: np.ndarray,
        most: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
        """``join_spine`` of the delta's records under ``codes``, ``keys`` and ``offsets``."""
        return join_spine(
            codes,
            np.ascontiguousarray(keys),
            offsets,
            delta.vals,
            delta.times,
            delta.diffs,
            table,
            self.exact,
            len(self._layouts[1 - delta_side].val_cols),
            self._specs[delta_side],
            self._round(),
            most,
        )

    def _in_parts(
        self, delta: TraceBatch, lo: int, delta_side: int, table: np.ndarray, pairs: np.ndarray
    ) -> UpdateBatch:
        """The delta's keys from ``lo`` (``pairs[i]`` record pairs for key ``lo + i``)
        joined a few keys at a time, or a key a few of its records at a time, each part
        about ``PAIRS_PER_PART`` pairs and consolidated before the next is made: the pairs
        of histories that change at many times can be many more than their sum (a self-join
        of a count and max over 1,000 2-D times made about 100M pairs, gigabytes, that
        summed to far fewer)."""
        offsets = delta.offsets
        parts: list[UpdateBatch] = []

        def run(k0: int, k1: int, r0: int, r1: int) -> None:
            codes, keys = delta.codes[k0:k1], delta.keys[:, k0:k1]
            data, times, diffs, _, _ = self._join(
                delta, codes, keys, np.array([r0, r1]) if k1 - k0 == 1 else offsets[k0 : k1 + 1],
                delta_side, table, _NO_LIMIT,
            )  # fmt: skip
            part = consolidate(UpdateBatch(data, times, diffs))
            if len(part):
                parts.append(part)

        start, acc = lo, 0
        for i, c in enumerate(pairs.tolist(), lo):
            if c <= PAIRS_PER_PART and acc + c <= PAIRS_PER_PART:
                acc += c
                continue
            if start < i:
                run(start, i, int(offsets[start]), int(offsets[i]))
            start, acc = i, c
            if c > PAIRS_PER_PART:  # its records a few at a time: each pairs as many
                r0, r1 = int(offsets[i]), int(offsets[i + 1])
                step = max(1, PAIRS_PER_PART // (c // (r1 - r0)))
                for r in range(r0, r1, step):
                    run(i, i + 1, r, min(r + step, r1))
                start, acc = i + 1, 0
        if start < lo + pairs.shape[0]:
            end = lo + pairs.shape[0]
            run(start, end, int(offsets[start]), int(offsets[end]))
        return UpdateBatch.concat(parts, self.ncols, self.dims)

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
