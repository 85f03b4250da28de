"""Reduction kernels: pure numpy functions from accumulated groups to output rows.

A kernel sees, for many groups at once (a group is one key at one candidate time), the
group's rows as ``(group, vals, count)``: sorted by (group, vals), consolidated, no zero
counts. It returns ``(group, out_vals, multiplicity)``. Semantics shared by every built-in
(and by the test oracle): a group consists of its rows with *positive* count; a group with
none is absent and produces nothing.

* ``count`` — sum of counts; ``sum`` — sum of count x value; ``min``/``max`` — least/greatest
  value; ``count_distinct`` — number of distinct values.
* ``presence`` — each present group's key once (semijoins and antijoins);
* ``distinct`` — each present row once; ``threshold(k)`` — each row whose count is >= k, once.
* ``top_k`` — rows ordered by the order columns (each ascending or descending), ties broken
  by the remaining columns ascending; the first ``k`` rows counted with multiplicity (the
  last row taken may be cut short; a group's running count saturates at ``k``, never wraps).

Strings order by their text (via the interner), floats numerically, bools false < true.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.consolidate import group_starts, lex_order, segment_sums
from engine.exact_sum import segment_fsums
from engine.interning import StringInterner
from engine.operators.reduce_agg import (
    COUNT,
    COUNT_DISTINCT,
    MAX,
    MAX_FLOAT,
    MIN,
    MIN_FLOAT,
    SUM,
)
from engine.operators.reduce_times import dominated_sums
from engine.schema import ColumnType, decode, encode
from engine.sort_kernels import consolidate_rows_order

__all__ = [
    "AggregateKernel",
    "AggregateSpec",
    "DistinctKernel",
    "GeneralKernel",
    "KernelContext",
    "PresenceKernel",
    "ReduceKernel",
    "ThresholdKernel",
    "TopKKernel",
    "accumulate_at",
    "first_k_takes",
    "order_keys",
]

Rows = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True, slots=True)
class KernelContext:
    interner: StringInterner
    val_types: tuple[ColumnType, ...]
    group_keys: np.ndarray | None = None  # (kk, groups) key row of each group (general kernel)
    key_types: tuple[ColumnType, ...] = ()


def accumulate_at(
    cand_owner: np.ndarray,
    cand_times: np.ndarray,
    nkeys: int,
    owner: np.ndarray,
    vals: np.ndarray,
    times: np.ndarray,
    diffs: np.ndarray,
) -> Rows:
    """For every candidate, the accumulation of its key's history at its time:
    ``(candidate, vals, sum of diffs at times <= candidate time)``, sorted, no zeros.
    The records are numbered by (key, value) and grouped by (key, time) first, so that a
    candidate visits each distinct time of its key once (``dominated_sums``)."""
    n = owner.shape[0]
    by_value = lex_order([owner, *vals])
    firsts = group_starts([owner[by_value], *(v[by_value] for v in vals)], n)
    value_of = np.empty(n, np.int64)
    value_of[by_value] = np.cumsum(firsts) - 1  # ascending with (key, value)
    holder = by_value[firsts]  # a record holding each value number
    by_time = lex_order([owner, *times])
    t_owner, t_times = owner[by_time], np.take(times, by_time, axis=1)
    starts = np.flatnonzero(group_starts([t_owner, *t_times], n))
    key_groups = np.searchsorted(t_owner[starts], np.arange(nkeys + 1, dtype=np.int64))
    cand, value, sums = dominated_sums(
        cand_owner,
        np.ascontiguousarray(cand_times),
        key_groups,
        np.append(starts, n),
        np.ascontiguousarray(t_times[:, starts]),
        value_of[by_time],
        np.ascontiguousarray(diffs[by_time]),
        holder.shape[0],
    )
    return cand, np.take(vals, holder[value], axis=1), sums


def consolidate_rows(group: np.ndarray, vals: np.ndarray, counts: np.ndarray) -> Rows:
    """Sort by (group, vals), sum equal rows, drop zeros."""
    if group.shape[0] == 0:
        return group, vals, counts
    first, sums = consolidate_rows_order([group, *vals], counts)
    return group[first], np.take(vals, first, axis=1), sums


def order_keys(values: np.ndarray, ctype: ColumnType, interner: StringInterner) -> np.ndarray:
    """int64 keys ordering stored values as their type orders (dense ranks)."""
    if ctype is ColumnType.STRING:
        return interner.ranks(values)
    if ctype is ColumnType.FLOAT:
        _, inv = np.unique(decode(values, ctype), return_inverse=True)
        return inv.reshape(-1).astype(np.int64)
    return values


class ReduceKernel:
    """Maps accumulated groups to output rows; ``out_types`` are the output value columns."""

    out_types: tuple[ColumnType, ...] = ()
    needs_keys = False  # whether apply() reads ctx.group_keys

    def set_threshold(self) -> int | None:
        """For set-like kernels (a row is output once iff its count reaches k): k."""
        return None

    def line_plan(self) -> tuple[np.ndarray, np.ndarray] | None:
        """For aggregates the compiled step computes (``reduce_agg``): their codes and
        value columns (-1 for none)."""
        return None

    def apply(
        self,
        group: np.ndarray,
        vals: np.ndarray,
        counts: np.ndarray,
        ngroups: int,
        ctx: KernelContext,
    ) -> Rows:
        raise NotImplementedError


def _positive(group: np.ndarray, vals: np.ndarray, counts: np.ndarray) -> Rows:
    pos = counts > 0
    if pos.all():
        return group, vals, counts
    return group[pos], vals[:, pos], counts[pos]


class DistinctKernel(ReduceKernel):
    """Each present row once (the key is the whole row)."""

    def set_threshold(self) -> int | None:
        return 1

    def apply(self, group, vals, counts, ngroups, ctx):
        g, v, _ = _positive(group, vals, counts)
        return g, v, np.ones(g.shape[0], dtype=np.int64)


class PresenceKernel(ReduceKernel):
    """The key once if the group is present (has a row with positive count)."""

    def line_plan(self) -> tuple[np.ndarray, np.ndarray] | None:
        none = np.zeros(0, dtype=np.int64)
        return none, none  # no aggregates: a row per present group, as AggregateKernel([])

    def apply(self, group, vals, counts, ngroups, ctx):
        g, _, _ = _positive(group, vals, counts)
        present = g[group_starts([g], g.shape[0])]
        return (
            present,
            np.zeros((0, present.shape[0]), dtype=np.int64),
            np.ones(present.shape[0], dtype=np.int64),
        )


class ThresholdKernel(ReduceKernel):
    def __init__(self, at_least: int) -> None:
        self.at_least = int(at_least)

    def set_threshold(self) -> int | None:
        return max(self.at_least, 1)

    def apply(self, group, vals, counts, ngroups, ctx):
        keep = counts >= max(self.at_least, 1)
        return group[keep], vals[:, keep], np.ones(int(keep.sum()), dtype=np.int64)


@dataclass(frozen=True, slots=True)
class AggregateSpec:
    fn: str  # count | sum | min | max | count_distinct
    column: int | None  # value column index (None for count)
    type: ColumnType  # type of the input column (or int for count)

    @property
    def out_type(self) -> ColumnType:
        if self.fn in ("count", "count_distinct"):
            return ColumnType.INT
        return self.type


class AggregateKernel(ReduceKernel):
    """One output row per present group: the aggregates, in order."""

    def __init__(self, specs: Sequence[AggregateSpec]) -> None:
        self.specs = list(specs)
        self.out_types = tuple(s.out_type for s in self.specs)

    def line_plan(self) -> tuple[np.ndarray, np.ndarray] | None:
        plan: list[tuple[int, int]] = []
        for s in self.specs:
            column = -1 if s.column is None else s.column
            if s.fn == "count":
                plan.append((COUNT, -1))
            elif s.fn == "sum" and s.type is ColumnType.INT:
                plan.append((SUM, column))
            elif s.fn in ("min", "max") and s.type in (ColumnType.INT, ColumnType.BOOL):
                plan.append((MIN if s.fn == "min" else MAX, column))
            elif s.fn in ("min", "max") and s.type is ColumnType.FLOAT:
                plan.append((MIN_FLOAT if s.fn == "min" else MAX_FLOAT, column))
            elif s.fn == "count_distinct" and column == 0:
                plan.append((COUNT_DISTINCT, 0))
            else:  # float sums (their rounding), strings' order by text: the general path
                return None
        return (
            np.array([f for f, _ in plan], dtype=np.int64),
            np.array([c for _, c in plan], dtype=np.int64),
        )

    def apply(self, group, vals, counts, ngroups, ctx):
        g, v, c = _positive(group, vals, counts)
        starts = group_starts([g], g.shape[0])
        present = g[starts]
        out = np.empty((len(self.specs), present.shape[0]), dtype=np.int64)
        if present.shape[0] == 0:
            return present, out, np.zeros(0, dtype=np.int64)
        for i, s in enumerate(self.specs):
            out[i] = self._one(s, g, v, c, starts, ctx)
        return present, out, np.ones(present.shape[0], dtype=np.int64)

    @staticmethod
    def _one(s: AggregateSpec, g, v, c, starts, ctx) -> np.ndarray:
        if s.fn == "count":
            return segment_sums(c, starts)
        assert s.column is not None
        col = v[s.column]
        if s.fn == "sum":
            if s.type is ColumnType.FLOAT:
                sums = segment_fsums(decode(col, s.type), np.ascontiguousarray(c), starts)
                return encode(sums, s.type)
            with np.errstate(over="ignore"):
                return segment_sums(col * c, starts)
        if s.fn in ("min", "max"):
            # a group of one row is its own min and max: only rows that share their group
            # need order keys (for text, a sort of the strings)
            first = np.flatnonzero(starts)
            sizes = np.diff(np.append(first, g.shape[0]))
            shared = np.repeat(sizes > 1, sizes)
            keys = np.zeros(g.shape[0], dtype=np.int64)
            if shared.any():
                keys[shared] = order_keys(col[shared], s.type, ctx.interner)
            order = lex_order([g, keys])
            gs = g[order]
            if s.fn == "min":
                pick = order[group_starts([gs], gs.shape[0])]
            else:
                last = np.append(gs[1:] != gs[:-1], True)
                pick = order[last]
            return col[pick]
        if s.fn == "count_distinct":
            order = lex_order([g, col])
            gs, cs = g[order], col[order]
            new_value = group_starts([gs, cs], gs.shape[0])
            return segment_sums(new_value.astype(np.int64), group_starts([gs], gs.shape[0]))
        raise ValueError(f"unknown aggregate {s.fn!r}")


class TopKKernel(ReduceKernel):
    """The first ``k`` rows of each group (with multiplicity), as the input rows."""

    def __init__(
        self, k: int, order: Sequence[tuple[int, bool]], val_types: Sequence[ColumnType]
    ) -> None:
        self.k = int(k)
        self.order = list(order)  # (value column, descending)
        ordered = {c for c, _ in self.order}
        self.ties = [i for i in range(len(val_types)) if i not in ordered]
        self.out_types = tuple(val_types)

    def apply(self, group, vals, counts, ngroups, ctx):
        g, v, c = _positive(group, vals, counts)
        # a group of one row takes min(count, k) of it in any order: only rows that share
        # their group need order keys (for text, a sort of the strings); the caller
        # consolidates the output, so its row order is free
        shared = np.bincount(g, minlength=ngroups)[g] > 1
        if shared.all():
            return self._first_k(g, v, c, ctx)
        alone = ~shared
        take = np.minimum(c[alone], self.k)
        keep = take > 0
        g1, v1, c1 = self._first_k(g[shared], v[:, shared], c[shared], ctx)
        return (
            np.concatenate([g[alone][keep], g1]),
            np.concatenate([v[:, alone][:, keep], v1], axis=1),
            np.concatenate([take[keep], c1]),
        )

    def _first_k(self, g: np.ndarray, v: np.ndarray, c: np.ndarray, ctx: KernelContext) -> Rows:
        keys = [g]
        for col, desc in self.order:
            k = order_keys(v[col], ctx.val_types[col], ctx.interner)
            keys.append(~k if desc else k)  # reverses every int64's order (-k wraps at -2**63)
        for col in self.ties:
            keys.append(order_keys(v[col], ctx.val_types[col], ctx.interner))
        order = lex_order(keys)
        g, v, c = g[order], v[:, order], c[order]
        take = first_k_takes(group_starts([g], g.shape[0]), c, self.k)
        keep = take > 0
        return g[keep], v[:, keep], take[keep]


def first_k_takes(starts: np.ndarray, counts: np.ndarray, k: int) -> np.ndarray:
    """How many of each row's ``counts`` the first ``k`` places of its group take, for rows
    in order within their groups (``starts`` marks each group's first row; counts positive,
    ``0 <= k < 2**63``).

    A group's running count saturates: once it reaches ``k`` the rest take nothing, however
    far the true sum of the counts goes past 2**63 (an int64 running sum would wrap negative
    there and let later rows back in). Each count is capped at ``k`` and the running sums
    are taken as uint64, mod 2**64: up to and including a group's first row where the sum
    reaches ``k`` every earlier sum is below ``k`` and each capped count at most ``k``, so
    those sums are exact, and that first row is all the later ones need."""
    n = counts.shape[0]
    if n == 0 or k <= 0:
        return np.zeros(n, dtype=np.int64)
    c = np.minimum(counts, k).astype(np.uint64)
    seg_first = np.flatnonzero(starts)
    lengths = np.diff(np.append(seg_first, n))
    cum = np.cumsum(c)
    run = cum - np.repeat(cum[seg_first] - c[seg_first], lengths)  # the group's, through row
    index = np.arange(n)
    full_at = np.minimum.reduceat(np.where(run >= np.uint64(k), index, n), seg_first)
    before = run - c  # exact up to a group's first full row; later rows take nothing
    take = np.minimum(np.uint64(k) - before, c).astype(np.int64)
    take[index > np.repeat(full_at, lengths)] = 0
    return take


class GeneralKernel(ReduceKernel):
    """A Python reducer, called once per present group: the slow path, correct for any
    lattice. ``fn(key, rows)`` gets the key tuple and ``[(values tuple, count), ...]`` of the
    rows with positive count, and returns ``[(output values tuple, multiplicity), ...]``."""

    needs_keys = True

    def __init__(
        self,
        fn: Callable[[tuple, list[tuple[tuple, int]]], list[tuple[tuple, int]]],
        out_types: Sequence[ColumnType],
    ) -> None:
        self.fn = fn
        self.out_types = tuple(out_types)

    def apply(self, group, vals, counts, ngroups, ctx):
        g, v, c = _positive(group, vals, counts)
        starts = np.flatnonzero(group_starts([g], g.shape[0]))
        ends = np.append(starts[1:], g.shape[0]) if g.shape[0] else starts
        out_g, out_rows, out_m = [], [], []
        keys = ctx.group_keys
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            gi = int(g[s])
            key = tuple(int(x) for x in keys[:, gi]) if keys is not None else ()
            rows = [(tuple(int(x) for x in v[:, i]), int(c[i])) for i in range(s, e)]
            for out_vals, mult in self.fn(key, rows):
                out_g.append(gi)
                out_rows.append(tuple(out_vals))
                out_m.append(int(mult))
        if not out_g:
            return (
                np.zeros(0, dtype=np.int64),
                np.zeros((len(self.out_types), 0), dtype=np.int64),
                np.zeros(0, dtype=np.int64),
            )
        data = np.asarray(out_rows, dtype=np.int64).reshape(len(out_rows), len(self.out_types)).T
        return (
            np.asarray(out_g, dtype=np.int64),
            np.ascontiguousarray(data),
            np.asarray(out_m, dtype=np.int64),
        )
