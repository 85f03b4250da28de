"""Inputs: where updates enter a dataflow, and the handle that feeds them.

Invariant: every buffered update's time is at or beyond the input's frontier, and the
frontier never moves backwards. ``run()`` releases everything buffered since the last run.

A big batch at one time can come with its records already arranged for the input's own
``Arrange`` (:meth:`InputHandle.arrange_ahead`, on any thread, before the batch is sent):
the step that takes it then only inserts them, so the sort happens outside the step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.batch import UpdateBatch
from engine.errors import GraphError, SchemaError, TimeError
from engine.lattice import NO_TIME, Antichain, as_times, is_int, time_tuples
from engine.operators.arrange import Arrange
from engine.operators.base import Operator, Scope
from engine.schema import Column, ColumnType, Schema, encode
from engine.trace import TraceBatch

__all__ = ["ArrangedAhead", "InputHandle", "InputOp"]


class ArrangedAhead:
    """The records of ``data`` with ``diffs`` arranged for ``op`` (an ``Arrange`` of an
    input) at time zero, by :meth:`InputHandle.arrange_ahead`. At one time, a batch's
    arrangement differs from this only in the times."""

    __slots__ = ("data", "diffs", "op", "records")

    def __init__(self, op: Operator, data: np.ndarray, diffs: np.ndarray, records: TraceBatch):
        self.op, self.data, self.diffs, self.records = op, data, diffs, records

    def fits(self, batch: UpdateBatch) -> bool:
        """Whether ``batch`` holds the very arrays this was arranged from."""
        return batch.data is self.data and batch.diffs is self.diffs

    def at(self, times: np.ndarray) -> TraceBatch:
        """The records at the one time of ``times`` (a ``(d, n)`` array of one column
        repeated), once: their own times are overwritten, as the thread that arranged them
        touched those pages already (a new array of 10M times, on fresh pages, held a
        load's write for 0.2 s). A new batch all the same: the seek row of the records' own
        (``TraceBatch.addresses``) holds the addresses of their arrays."""
        r = self.records
        r.times[:] = times[:, :1]
        return TraceBatch(r.codes, r.keys, r.offsets, r.vals, r.times, r.diffs)


class InputOp(Operator):
    name = "input"

    def __init__(self, scope: Scope, schema: Schema, dims: int, name: str = "input") -> None:
        super().__init__(scope, [], schema, dims)
        self.name = name
        self.buffer: list[UpdateBatch] = []
        self.ahead: ArrangedAhead | None = None  # the first buffered batch's records
        # what this run released arranged already, by the ``Arrange`` it is for: taken by
        # that operator's run in the same step (a lone batch's alone: concatenated batches
        # are arranged in the step)
        self.released: dict[int, TraceBatch] = {}
        self.handle_frontier = Antichain.minimum(dims)

    def run(self) -> None:
        self.output = None
        self.released = {}
        if self.buffer:
            self.output = UpdateBatch.concat(self.buffer, self.ncols, self.dims)
            if self.ahead is not None and len(self.buffer) == 1:
                self.released[id(self.ahead.op)] = self.ahead.at(self.output.times)
            self.buffer, self.ahead = [], None
        self.frontier = self.handle_frontier

    def arranged_for(self, reader: Operator) -> TraceBatch | None:
        return self.released.pop(id(reader), None)  # the spine holds it from now

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

    def send(self, batch: UpdateBatch, ahead: ArrangedAhead | None = None) -> None:
        """Buffer a columnar batch (released into the dataflow by the next step), with its
        records arranged already if ``ahead`` (from :meth:`arrange_ahead` for this batch's
        arrays; its times must then be one time)."""
        self.check(batch)
        if ahead is not None:
            if ahead.op.inputs[0] is not self.op or not ahead.fits(batch):
                raise GraphError("records arranged ahead for another input or other arrays")
            if len(batch) and not (batch.times == batch.times[:, :1]).all():
                raise TimeError("records arranged ahead must be at one time")
        if len(batch):
            if not self.op.buffer:
                self.op.ahead = ahead
            self.op.buffer.append(batch)

    def arrange_ahead(
        self, arranged: Operator, data: np.ndarray, diffs: np.ndarray
    ) -> ArrangedAhead:
        """The records of a batch of ``data`` and ``diffs`` (C-contiguous ``(k, n)`` and
        ``(n,)`` int64) arranged for ``arranged``, an ``Arrange`` that reads this input, to
        be sent with them at one time (:meth:`send`). It reads no state of the graph: any
        thread may build it, while steps run."""
        if not isinstance(arranged, Arrange) or arranged.inputs[0] is not self.op:
            raise GraphError("arrange_ahead is for an arrangement of this input")
        zero = np.zeros((self.dims, diffs.shape[0]), dtype=np.int64)
        records = TraceBatch.from_updates(arranged.layout, UpdateBatch(data, zero, diffs))
        return ArrangedAhead(arranged, data, diffs, records)

    def send_columns(
        self,
        columns: Sequence[np.ndarray],
        times: object,
        diffs: object = 1,
    ) -> None:
        """Typed columns (int64 / float64 / bool / string ids), times (one for all rows or
        one per row), diffs (a scalar or one per row). Values of another kind (floats for an
        int column, ids the graph's interner never gave) are a :class:`SchemaError`, times
        that are no integers a :class:`TimeError`; nothing is sent then."""
        if len(columns) != self.op.ncols:
            raise SchemaError(f"expected {self.op.ncols} column(s), got {len(columns)}")
        arrays = [_values(c, col) for c, col in zip(columns, self.op.schema.columns, strict=True)]
        d = _values(diffs, None)
        n = len(arrays[0]) if arrays else d.size
        for a, c in zip(arrays, self.op.schema.columns, strict=True):
            if a.shape != (n,):
                raise SchemaError(f"column {c.name!r} has {a.size} value(s), not {n}")
        data = np.empty((self.op.ncols, n), dtype=np.int64)
        for j, (a, t) in enumerate(zip(arrays, self.op.schema.types, strict=True)):
            if t is ColumnType.STRING:
                self._check_ids(a, self.op.schema.columns[j].name)
            data[j] = encode(a, t)
        t_arr = as_times(times, self.dims)
        if t_arr.shape[1] == 1 and n != 1:
            t_arr = np.repeat(t_arr, n, axis=1)
        if t_arr.shape[1] != n:
            raise TimeError(f"{t_arr.shape[1]} times for {n} row(s): give one, or one per row")
        if d.ndim == 0:
            d = np.full(n, d, dtype=np.int64)
        elif d.shape != (n,):
            raise SchemaError(f"{d.size} diffs for {n} row(s): give one, or one per row")
        self.send(UpdateBatch.build(data, t_arr, d.astype(np.int64)))

    def _check_ids(self, ids: np.ndarray, name: str) -> None:
        interner = self.op.scope.root.interner
        known = len(interner) if interner is not None else 0
        if ids.size and not (int(ids.min()) >= 0 and int(ids.max()) < known):
            raise SchemaError(
                f"column {name!r} holds string ids the graph's interner never gave "
                f"(it has {known}); send_rows interns strings"
            )

    def send_rows(self, rows: Sequence[tuple], time: object, diff: int = 1) -> None:
        """Rows of Python values (strings are interned here) at one time."""
        ncols = self.op.ncols
        for i, r in enumerate(rows):
            if not isinstance(r, (tuple, list)) or len(r) != ncols:
                raise SchemaError(f"row {i} must be a tuple of {ncols} value(s), not {r!r}")
        cols: list[np.ndarray] = []
        interner = self.op.scope.root.interner
        for j, c in enumerate(self.op.schema.columns):
            values = [r[j] for r in rows]
            if c.type is ColumnType.STRING:
                for i, v in enumerate(values):
                    if not isinstance(v, str):
                        raise SchemaError(f"row {i}: column {c.name!r} is a string, not {v!r}")
                assert interner is not None
                cols.append(interner.intern_many(values))
            else:
                cols.append(_values(values, c))
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


# what each column type takes, by numpy dtype kind (string columns: interned ids)
_KINDS = {
    ColumnType.INT: "iu",
    ColumnType.FLOAT: "iuf",
    ColumnType.BOOL: "b",
    ColumnType.STRING: "iu",
}


# what a Python value must be, by column type (strings: interned ids), for a list's items
_FITS = {
    ColumnType.INT: is_int,
    ColumnType.FLOAT: lambda v: is_int(v) or isinstance(v, (float, np.floating)),
    ColumnType.BOOL: lambda v: isinstance(v, (bool, np.bool_)),
    ColumnType.STRING: is_int,
}


def _values(values: object, column: Column | None) -> np.ndarray:
    """``values`` as a 1-D array of the kind ``column`` takes (None: diffs, integers), or a
    scalar for diffs. A list's items are checked one by one (numpy would turn a bool beside
    ints into an int), an array's by its dtype."""
    what = f"column {column.name!r}" if column is not None else "diffs"
    want = column.type if column is not None else ColumnType.INT
    verb = "takes" if column is not None else "take"
    if isinstance(values, (list, tuple)):
        fits = _FITS[want]
        for v in values:
            if not fits(v):
                raise SchemaError(f"{what} {verb} {want.value} values, not {v!r}")
    try:
        arr = np.asarray(values)
    except ValueError as exc:  # ragged lists
        raise SchemaError(f"{what}: {exc}") from exc
    if arr.dtype == object and want is ColumnType.FLOAT:  # Python ints beyond 64 bits
        arr = arr.astype(np.float64)
    elif arr.dtype == object:
        raise SchemaError(f"{what}: values must fit in 64-bit signed integers")
    if arr.size and arr.dtype.kind not in _KINDS[want]:
        raise SchemaError(f"{what} {verb} {want.value} values, not {arr.dtype} values")
    if arr.ndim > 1 or (arr.ndim == 0 and column is not None):
        raise SchemaError(f"{what}: values must be one list or 1-D array, not of shape {arr.shape}")
    unsigned = want is not ColumnType.FLOAT and arr.dtype.kind == "u" and arr.size
    if unsigned and int(arr.max()) > NO_TIME:
        raise SchemaError(f"{what}: values must fit in 64-bit signed integers")
    return arr


def _frontier(value: object, dims: int) -> Antichain:
    """A frontier given as a time, a list of times, or (``dims`` > 1) one time's list."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if dims > 1 and items and not isinstance(items[0], (list, tuple)):
        items = [tuple(items)]
    times = []
    for i in items:
        t = tuple(i) if isinstance(i, (list, tuple)) else (i,)
        if len(t) != dims or not all(is_int(x) and 0 <= x <= NO_TIME for x in t):
            raise TimeError(
                f"a frontier's times are {dims} integer(s) from 0 to 2**63 - 1, not {i!r}"
            )
        times.append(tuple(int(x) for x in t))
    return Antichain(times, dims)
