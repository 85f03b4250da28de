"""Record-at-a-time operators, vectorised over whole batches: select (map), filter,
flat_map, concat, negate, consolidate. They keep no state and output at the times of their
input."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.batch import UpdateBatch
from engine.consolidate import consolidate
from engine.errors import LimitError, SchemaError
from engine.expr import Bound, EvalContext
from engine.operators.base import Operator, Scope
from engine.schema import ColumnType, Schema, encode

__all__ = ["FLAT_MAP_MOST", "Concat", "Consolidate", "Filter", "FlatMap", "Map", "Negate"]

FLAT_MAP_MOST = 100_000_000  # rows one flat_map may make in one step (about 3 GB of columns)


def _context(op: Operator, batch: UpdateBatch) -> EvalContext:
    interner = op.scope.root.interner
    assert interner is not None
    return EvalContext(batch.data, op.inputs[0].schema, interner)


class Map(Operator):
    """Computes each output column from an expression over the input row."""

    name = "select"

    def __init__(
        self, scope: Scope, input: Operator, exprs: Sequence[Bound], schema: Schema
    ) -> None:
        if len(exprs) != len(schema):
            raise SchemaError("select needs one expression per output column")
        super().__init__(scope, [input], schema)
        self.exprs = list(exprs)
        # a projection (every output a plain input column) is one take
        plain = all(e.column is not None for e in self.exprs)
        self.columns = np.array([e.column for e in self.exprs], dtype=np.int64) if plain else None

    def run(self) -> None:
        batch = self.inputs[0].output
        self.frontier = self.input_frontier()
        if batch is None:
            self.output = None
            return
        if self.columns is not None:
            self.output = UpdateBatch(batch.data[self.columns], batch.times, batch.diffs)
            return
        ctx = _context(self, batch)
        data = np.empty((len(self.exprs), len(batch)), dtype=np.int64)
        for j, (e, c) in enumerate(zip(self.exprs, self.schema.columns, strict=True)):
            if e.column is not None:
                data[j] = batch.data[e.column]
            else:
                data[j] = encode(e.evaluate(ctx), c.type)
        self.output = batch.with_data(data)


class Filter(Operator):
    name = "filter"

    def __init__(self, scope: Scope, input: Operator, predicate: Bound) -> None:
        if predicate.type is not ColumnType.BOOL:
            raise SchemaError(f"filter needs a bool expression, got {predicate.type.value}")
        super().__init__(scope, [input], input.schema)
        self.predicate = predicate

    def run(self) -> None:
        batch = self.inputs[0].output
        self.frontier = self.input_frontier()
        if batch is None:
            self.output = None
            return
        mask = np.asarray(self.predicate.evaluate(_context(self, batch)), dtype=bool)
        self.output = batch.take(mask) if not mask.all() else batch


class FlatMap(Operator):
    """One output row per integer in ``[start, stop)``, appended as a new column."""

    name = "flat_map"

    def __init__(
        self, scope: Scope, input: Operator, start: Bound, stop: Bound, as_name: str
    ) -> None:
        if as_name in input.schema.names:
            raise SchemaError(f"flat_map column {as_name!r} already exists")
        for b in (start, stop):
            if b.type is not ColumnType.INT:
                raise SchemaError(f"flat_map bounds must be int, got {b.type.value}")
        schema = Schema.of([*((c.name, c.type) for c in input.schema.columns), (as_name, "int")])
        super().__init__(scope, [input], schema)
        self.start, self.stop = start, stop

    def run(self) -> None:
        batch = self.inputs[0].output
        self.frontier = self.input_frontier()
        if batch is None:
            self.output = None
            return
        ctx = _context(self, batch)
        lo = np.asarray(self.start.evaluate(ctx), dtype=np.int64)
        hi = np.asarray(self.stop.evaluate(ctx), dtype=np.int64)
        # each range's length exactly (``hi - lo`` in int64 wraps past 2**63); their sum in
        # uint64 cannot wrap once every length is at most the bound
        wide = np.where(hi > lo, hi.astype(np.uint64) - lo.astype(np.uint64), np.uint64(0))
        if wide.shape[0] and (int(wide.max()) > FLAT_MAP_MOST or int(wide.sum()) > FLAT_MAP_MOST):
            i = int(wide.argmax())
            raise LimitError(
                f"flat_map would make {sum(wide.tolist()):,} rows in one step (at most "
                f"{FLAT_MAP_MOST:,}); the longest range is [{int(lo[i])}, {int(hi[i])})"
            )
        counts = wide.astype(np.int64)
        rows = np.repeat(np.arange(len(batch), dtype=np.int64), counts)
        first = np.cumsum(counts) - counts
        values = np.arange(rows.shape[0], dtype=np.int64) - np.repeat(first - lo, counts)
        out = batch.take(rows)
        self.output = UpdateBatch(np.concatenate([out.data, values[None, :]]), out.times, out.diffs)


class Concat(Operator):
    """Multiset union of inputs with the same column types."""

    name = "concat"

    def __init__(self, scope: Scope, inputs: Sequence[Operator]) -> None:
        if not inputs:
            raise SchemaError("concat needs at least one input")
        first = inputs[0].schema
        for i in inputs[1:]:
            if i.schema.types != first.types:
                raise SchemaError(
                    f"concat inputs differ: {[t.value for t in first.types]} vs "
                    f"{[t.value for t in i.schema.types]}"
                )
        super().__init__(scope, inputs, first)

    def run(self) -> None:
        self.frontier = self.input_frontier()
        parts = [i.output for i in self.inputs if i.output is not None]
        self.output = UpdateBatch.concat(parts, self.ncols, self.dims) if parts else None


class Negate(Operator):
    name = "negate"

    def __init__(self, scope: Scope, input: Operator) -> None:
        super().__init__(scope, [input], input.schema)

    def run(self) -> None:
        batch = self.inputs[0].output
        self.frontier = self.input_frontier()
        self.output = batch.negate() if batch is not None else None


class Consolidate(Operator):
    """Each run's updates with equal (row, time) summed and zeros dropped."""

    name = "consolidate"

    def __init__(self, scope: Scope, input: Operator) -> None:
        super().__init__(scope, [input], input.schema)

    def run(self) -> None:
        batch = self.inputs[0].output
        self.frontier = self.input_frontier()
        out = consolidate(batch) if batch is not None else None
        self.output = out if out is not None and len(out) else None
