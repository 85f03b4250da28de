"""Inputs: where updates enter a dataflow, and the handle that feeds them.

Invariant: every buffered update's time is at or beyond the input's frontier, and the
frontier never moves backwards. ``run()`` releases everything buffered since the last run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.batch import UpdateBatch
from engine.errors import SchemaError, TimeError
from engine.lattice import NO_TIME, Antichain, as_times, time_tuples
from engine.operators.base import Operator, Scope
from engine.schema import ColumnType, Schema, encode

__all__ = ["InputHandle", "InputOp"]


class InputOp(Operator):
    name = "input"

    def __init__(self, scope: Scope, schema: Schema, dims: int, name: str = "input") -> None:
        super().__init__(scope, [], schema, dims)
        self.name = name
        self.buffer: list[UpdateBatch] = []
        self.handle_frontier = Antichain.minimum(dims)

    def run(self) -> None:
        self.output = None
        if self.buffer:
            self.output = UpdateBatch.concat(self.buffer, self.ncols, self.dims)
            self.buffer = []
        self.frontier = self.handle_frontier

    def pending_times(self) -> np.ndarray:
        if not self.buffer:
            return np.zeros((self.dims, 0), dtype=np.int64)
        return np.concatenate([b.times for b in self.buffer], axis=1)


class InputHandle:
    """Feeds one input: send updates at times at or beyond the frontier, then advance it."""

    def __init__(self, op: InputOp) -> None:
        self.op = op

    @property
    def schema(self) -> Schema:
        return self.op.schema

    @property
    def dims(self) -> int:
        return self.op.dims

    @property
    def frontier(self) -> Antichain:
        return self.op.handle_frontier

    def check(self, batch: UpdateBatch) -> None:
        """Raise unless ``batch`` fits this input and lies at or beyond its frontier."""
        if batch.ncols != self.op.ncols:
            raise SchemaError(f"expected {self.op.ncols} column(s), got {batch.ncols}")
        if batch.dims != self.op.dims:
            raise TimeError(f"expected times with {self.op.dims} coordinate(s), got {batch.dims}")
        if len(batch):
            if batch.times.max() == NO_TIME:
                raise TimeError(
                    f"times must be below 2**63 - 1 (the engine keeps {NO_TIME} for no time)"
                )
            beyond = self.frontier.beyond(batch.times)
            if not beyond.all():
                t = time_tuples(batch.times[:, ~beyond][:, :1])[0]
                raise TimeError(
                    f"time {t if self.dims > 1 else t[0]} is before the input frontier "
                    f"{self.frontier.to_list()}"
                )

    def send(self, batch: UpdateBatch) -> None:
        """Buffer a columnar batch (released into the dataflow by the next step)."""
        self.check(batch)
        if len(batch):
            self.op.buffer.append(batch)

    def send_columns(
        self,
        columns: Sequence[np.ndarray],
        times: object,
        diffs: object = 1,
    ) -> None:
        """Typed columns (int64 / float64 / bool / string ids), times, diffs (scalar or array)."""
        if len(columns) != self.op.ncols:
            raise SchemaError(f"expected {self.op.ncols} column(s), got {len(columns)}")
        n = len(columns[0]) if columns else np.asarray(diffs).size
        data = np.empty((self.op.ncols, n), dtype=np.int64)
        for j, (c, t) in enumerate(zip(columns, self.op.schema.types, strict=True)):
            data[j] = encode(np.asarray(c), t)
        t_arr = as_times(times, self.dims)
        if t_arr.shape[1] == 1 and n != 1:
            t_arr = np.repeat(t_arr, n, axis=1)
        d = np.asarray(diffs, dtype=np.int64)
        d = np.full(n, d, dtype=np.int64) if d.ndim == 0 else np.broadcast_to(d, (n,)).copy()
        self.send(UpdateBatch.build(data, t_arr, d))

    def send_rows(self, rows: Sequence[tuple], time: object, diff: int = 1) -> None:
        """Rows of Python values (strings are interned here) at one time."""
        cols: list[np.ndarray] = []
        interner = self.op.scope.root.interner
        for j, t in enumerate(self.op.schema.types):
            values = [r[j] for r in rows]
            if t is ColumnType.STRING:
                assert interner is not None
                cols.append(interner.intern_many(values))
            else:
                cols.append(np.asarray(values))
        self.send_columns(cols, time, diff)

    def advance_to(self, frontier: Antichain | object) -> None:
        """Promise that no more updates come at times not at or beyond ``frontier``."""
        f = frontier if isinstance(frontier, Antichain) else _frontier(frontier, self.dims)
        if not self.frontier.precedes(f):
            raise TimeError(
                f"frontier cannot move backwards from {self.frontier.to_list()} to {f.to_list()}"
            )
        self.op.handle_frontier = f

    def close(self) -> None:
        self.op.handle_frontier = Antichain.closed(self.dims)


def _frontier(value: object, dims: int) -> Antichain:
    if isinstance(value, int):
        return Antichain([(value,)], dims)
    items = list(value)  # type: ignore[call-overload]
    if dims > 1 and items and isinstance(items[0], int):
        items = [tuple(items)]
    return Antichain([(i,) if isinstance(i, int) else tuple(i) for i in items], dims)
