"""The ingest path: a write body becomes a columnar batch, checked whole.

``parse_write`` runs where the request arrives and needs only the table's description:
JSON shape, columns, types, time shapes, sizes. ``stage_write`` runs on the engine thread
against the table's state: times at or beyond the frontier, frontier moves, primary keys
(insert of a present key, delete of an absent row, upsert retracting the stored row). It
returns a :class:`StagedWrite` and changes nothing; ``commit`` applies it. A write that fails
either step leaves no trace.

Encoding: each update's operation becomes a weight (insert +1, delete -1, weight w, upsert
+1 plus a retraction of the stored row).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from engine import Antichain, Schema, StringInterner, UpdateBatch
from engine.hashing import key_codes
from engine.lattice import time_tuples
from service.codec import (
    TIME_MAX,
    ColumnBuilder,
    checked_column,
    count_total,
    decode_rows,
    frontier_from_wire,
    time_from_wire,
    time_to_wire,
)
from service.errors import Conflict, Invalid, NotFound, TooLarge, member_path
from service.key_index import KeyChanges, KeyIndex

__all__ = ["ParsedWrite", "StagedWrite", "TableShape", "dropped_since_opened", "parse_write"]

INSERT, DELETE, UPSERT, WEIGHT = 0, 1, 2, 3
OPS = {"insert": INSERT, "delete": DELETE, "upsert": UPSERT}
_WEIGHTS = "above -2**62 and below 2**62"  # a weight (a diff) must fit, with room to sum


@dataclass(frozen=True, slots=True)
class TableShape:
    """What parsing needs to know about a table."""

    name: str
    schema: Schema
    primary_key: tuple[int, ...]
    timing: str
    dims: int


@dataclass
class ParsedWrite:
    ops: np.ndarray  # (n,) INSERT / DELETE / UPSERT / WEIGHT
    data: np.ndarray  # (k, n) storage
    weights: np.ndarray  # (n,) int64
    times: np.ndarray | None  # (d, n), None for server-timed tables
    advance_to: Antichain | None
    time_path: str = "updates[{}].time"  # where update i's time was given, for errors
    row_path: str = "updates[{}]"  # where update i's row (its key) was given
    weight_path: str = "updates[{}].weight"  # where update i's weight was given
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = int(self.weights.shape[0])


@dataclass
class StagedWrite:
    batch: UpdateBatch  # what enters the engine
    times: list[tuple[int, ...]]  # distinct times of the write
    advance_to: Antichain | None
    pk_changes: KeyChanges | None  # what the write leaves under each key it touched
    rows_delta: int
    # client-timed tables with a primary key: the join of every time written so far
    keyed_upto: np.ndarray | None = None
    # the index that replaces the table's (empty) one, instead of applying ``pk_changes``
    pk_index: KeyIndex | None = None


def dropped_since_opened(table: str) -> NotFound:
    """The 404 for a socket's write to a table made since it opened under the same name."""
    return NotFound(
        f"table {table!r} was dropped after this socket opened (the table now under its "
        "name is another one); open a new socket to write to that",
        {"name": table},
    )


_UPDATE_FIELDS = {"insert", "delete", "upsert", "weight", "data", "time"}


def _invalid(path: str, message: str, code: str = "invalid_update") -> Invalid:
    return Invalid(f"{path}: {message}", {"path": path}, code)


def parse_write(
    body: Any, shape: TableShape, interner: StringInterner, max_batch: int
) -> ParsedWrite:
    if not isinstance(body, dict):
        raise _invalid("body", "a write is a JSON object")
    allowed = {"updates", "columns", "diff", "time", "advance_to"}
    extra = sorted(set(body) - allowed)
    if extra:
        raise _invalid(extra[0], f"unknown field; a write has {sorted(allowed)}")
    if "updates" in body and "columns" in body:
        raise _invalid("columns", "give either 'updates' or 'columns', not both")
    if "diff" in body and "columns" not in body:
        raise _invalid("diff", "'diff' belongs to the columnar form: give it with 'columns'")
    if shape.timing == "server" and "advance_to" in body:
        raise _invalid(
            "advance_to", f"table {shape.name!r} is server-timed: the server moves its frontier"
        )
    default_time = None
    if "time" in body and "columns" not in body:  # the row form's default time, checked even
        default_time = _time(body["time"], shape, "time")  # when there are no rows
    if not {"updates", "columns", "advance_to"} & set(body):
        raise _invalid(
            "updates", "a write gives 'updates' (or 'columns'), or 'advance_to', or both"
        )
    if "columns" in body:
        parsed = _parse_columnar(body, shape, interner, max_batch)
    else:
        updates = body.get("updates", [])
        if not isinstance(updates, list):
            raise _invalid("updates", "must be a list of updates")
        if len(updates) > max_batch:
            raise TooLarge(
                f"{len(updates)} updates in one write; the limit is {max_batch} (--max-batch)",
                {"limit": max_batch},
                "batch_too_large",
            )
        parsed = _parse_rows(updates, shape, interner, default_time)
    if "advance_to" in body:
        parsed.advance_to = frontier_from_wire(body["advance_to"], shape.dims, "advance_to")
    return parsed


def _time(value: Any, shape: TableShape, path: str) -> tuple[int, ...]:
    if shape.timing == "server":
        raise _invalid(path, f"table {shape.name!r} is server-timed: the server stamps times")
    return time_from_wire(value, shape.dims, path)


def _parse_rows(
    updates: list, shape: TableShape, interner: StringInterner, default_time: tuple | None
) -> ParsedWrite:
    builder = ColumnBuilder(shape.schema)
    ops, weights, times = [], [], []
    client, keyed = shape.timing == "client", bool(shape.primary_key)
    try:
        for i, u in enumerate(updates):
            if not isinstance(u, dict):
                raise _invalid(f"updates[{i}]", 'an update is an object such as {"insert": row}')
            timed = "time" in u
            kind = None  # the update's one field besides its time, if it has one
            if len(u) == 1 + timed:
                for kind in u:
                    if kind != "time":
                        break
            op = OPS.get(kind) if kind is not None else None
            if op is not None:
                if op == UPSERT and not keyed:
                    raise _invalid(
                        f"updates[{i}].upsert",
                        f"table {shape.name!r} has no primary key; upsert needs one",
                    )
                builder.add(u[kind], f"updates[{i}].{kind}")
                weights.append(-1 if op == DELETE else 1)
            elif len(u) == 2 + timed and "weight" in u and "data" in u:
                _check_weight(u["weight"], f"updates[{i}].weight")
                op = WEIGHT
                builder.add(u["data"], f"updates[{i}].data")
                weights.append(u["weight"])
            else:
                raise _invalid(
                    member_path(u, set(), _UPDATE_FIELDS, f"updates[{i}]"),
                    "an update has exactly one of insert, delete, upsert, or weight with data "
                    "(and an optional time)",
                )
            ops.append(op)
            if timed:
                times.append(_time(u["time"], shape, f"updates[{i}].time"))
            elif client:
                if default_time is None:
                    raise _invalid(
                        f"updates[{i}].time",
                        "client-timed tables need a time on each update or a default 'time'",
                    )
                times.append(default_time)
    except Invalid:
        builder.check_rows()  # values are checked by column, after: an earlier bad one first
        raise
    t_arr = None
    if shape.timing == "client":
        t_arr = np.asarray(times, dtype=np.int64).reshape(len(times), shape.dims).T.copy()
    return ParsedWrite(
        np.asarray(ops, dtype=np.int64),
        builder.storage(interner),
        np.asarray(weights, dtype=np.int64),
        t_arr,
        None,
    )


def _parse_columnar(
    body: dict, shape: TableShape, interner: StringInterner, max_batch: int
) -> ParsedWrite:
    cols = body["columns"]
    if not isinstance(cols, dict):
        raise _invalid("columns", "must be an object of column -> list of values")
    names = shape.schema.names
    unknown = sorted(set(cols) - set(names))
    missing = [n for n in names if n not in cols]
    if unknown or missing:
        raise Invalid(
            f"columns: unknown {unknown}, missing {missing}; the columns are {list(names)}",
            # the first missing column (in the table's order), else the first unknown one
            {"path": f"columns.{(missing or unknown)[0]}"},
            "wrong_columns",
        )
    n = None
    data = np.empty((len(names), 0), dtype=np.int64)
    arrays = []
    for name, t in zip(names, shape.schema.types, strict=True):
        values = cols[name]
        if not isinstance(values, list):
            raise _invalid(f"columns.{name}", "must be a list of values")
        if n is None:
            n = len(values)
            if n > max_batch:
                raise TooLarge(
                    f"{n} updates in one write; the limit is {max_batch} (--max-batch)",
                    {"limit": max_batch},
                    "batch_too_large",
                )
        elif len(values) != n:
            raise _invalid(
                f"columns.{name}", f"has {len(values)} values but the first column has {n}"
            )
        arrays.append(checked_column(values, t, f"columns.{name}"))
    n = n or 0
    if "diff" not in body:
        weights = np.ones(n, dtype=np.int64)
    else:
        diff = body["diff"]
        if not isinstance(diff, list) or len(diff) != n:
            raise _invalid("diff", f"must be a list of {n} integers")
        checked = _ints(diff, -(2**62) + 1, 2**62 - 1)
        if checked is None:
            for i, d in enumerate(diff):
                _check_weight(d, f"diff[{i}]")
            checked = np.asarray(diff, dtype=np.int64)
        weights = checked
    t_arr, time_path = None, "time"
    if "time" in body:
        value = body["time"]
        per_row = (
            isinstance(value, list)
            and len(value) == n
            and n > 0
            and (shape.dims == 1 or all(isinstance(v, list) for v in value))
            and not (
                shape.dims > 1
                and len(value) == shape.dims
                and all(isinstance(v, int) for v in value)
            )
        )
        if per_row:
            t_arr, time_path = _row_times(value, shape), "time[{}]"
        elif n == 0 and value == []:
            t_arr = np.zeros((shape.dims, 0), dtype=np.int64)  # one time per row, for no rows
        elif isinstance(value, list) and (
            shape.dims == 1 or any(isinstance(v, list) for v in value)
        ):
            raise _invalid(
                "time", f"must be one time, or a list of {n} times (one per row)", "bad_time"
            )
        else:
            t_arr = np.repeat(np.array([_time(value, shape, "time")], np.int64).T, n, axis=1)
    elif shape.timing == "client":
        raise _invalid("time", "client-timed tables need 'time' (one time, or one per row)")
    if arrays:  # strings are interned once everything else has passed
        data = np.stack([interner.intern_many(a) if isinstance(a, list) else a for a in arrays])
    ops = np.full(n, WEIGHT, dtype=np.int64)
    # a row's key errors name its first key column
    key_column = names[shape.primary_key[0]] if shape.primary_key else names[0]
    return ParsedWrite(
        ops, data, weights, t_arr, None, time_path, f"columns.{key_column}[{{}}]", "diff[{}]"
    )


def _check_weight(w: Any, path: str) -> None:
    if isinstance(w, bool) or not isinstance(w, int) or not -(2**62) < w < 2**62:
        raise _invalid(path, f"must be an integer {_WEIGHTS}")


def _ints(values: list, least: int, most: int) -> np.ndarray | None:
    """``values`` as an int64 array when all are ints in ``[least, most]`` (checked whole:
    their types, one conversion, two comparisons), else None."""
    if not set(map(type, values)) <= {int}:
        return None
    try:
        array = np.asarray(values, dtype=np.int64)
    except OverflowError:
        return None
    if array.size and not (array.min() >= least and array.max() <= most):
        return None
    return array


def _row_times(value: list, shape: TableShape) -> np.ndarray:
    """A columnar write's time per row, ``(dims, n)``: checked whole where each is a
    non-negative int (one dimension) or a list of ``dims`` of them, else time by time,
    which names the first bad one."""
    if shape.timing == "client":
        flat: list | None = value
        if shape.dims > 1:
            flat = None
            if set(map(type, value)) == {list} and set(map(len, value)) == {shape.dims}:
                flat = list(itertools.chain.from_iterable(value))
        array = _ints(flat, 0, TIME_MAX) if flat is not None else None
        if array is not None:
            return np.ascontiguousarray(array.reshape(len(value), shape.dims).T)
    ts = [_time(v, shape, f"time[{i}]") for i, v in enumerate(value)]
    return np.asarray(ts, dtype=np.int64).reshape(len(value), shape.dims).T.copy()


def stage_write(
    parsed: ParsedWrite,
    shape: TableShape,
    frontier: Antichain,
    pk_index: KeyIndex | None,
    server_time: int | None,
    keyed_upto: np.ndarray | None,
    interner: StringInterner,
    keys_after: KeyIndex | None = None,
) -> StagedWrite:
    """Check a parsed write against the table's state; nothing is changed. ``keyed_upto``:
    on a client-timed table with a primary key, the join of the times written so far (None
    before the first write), which every update's time must be at or beyond. ``keys_after``:
    on a table with a primary key, the index the table has once the write is applied, built
    by the write's maker (a load's, off the engine thread), which vouches for its keys: none
    is checked, and the index stands in for ``pk_index``."""
    n = parsed.size
    if parsed.times is None:
        times = np.full((1, n), server_time if server_time is not None else 0, dtype=np.int64)
    else:
        times = parsed.times
    if n and parsed.times is not None:
        early = ~frontier.beyond(times)
        if early.any():
            i = int(np.flatnonzero(early)[0])
            t = time_tuples(times[:, i : i + 1])[0]
            what = f"updates[{i}]" if parsed.time_path.startswith("updates") else f"row {i}"
            raise Conflict(
                f"{what} is at time {t[0] if len(t) == 1 else list(t)}, not at or beyond "
                f"the frontier {frontier.to_list()} of table {shape.name!r}",
                {"path": parsed.time_path.format(i), "frontier": frontier.to_list()},
                "time_before_frontier",
            )
    if parsed.advance_to is not None and not frontier.precedes(parsed.advance_to):
        raise Conflict(
            f"advance_to {parsed.advance_to.to_list()} would move the frontier of table "
            f"{shape.name!r} backwards from {frontier.to_list()}",
            {"path": "advance_to", "frontier": frontier.to_list()},
            "frontier_backwards",
        )
    data, weights = parsed.data, parsed.weights
    changes = None
    upto = keyed_upto
    vouched = pk_index is not None and n > 0 and keys_after is not None
    if pk_index is not None and n and parsed.times is not None:
        upto = _check_key_order(parsed, shape, times, keyed_upto, vouched)
    if pk_index is not None and n and not vouched:
        keyed = _apply_distinct_keys(parsed, shape, pk_index, times)
        if keyed is None:  # a key written twice, or an update refused: in order, one by one
            keyed = _apply_keys(parsed, shape, pk_index, times, interner)
        data, weights, times, changes = keyed
    elif n and not weights.all():  # an update of weight 0 changes nothing: no time either
        kept = weights != 0
        data, weights, times = data[:, kept], weights[kept], times[:, kept]
    batch = UpdateBatch(
        np.ascontiguousarray(data), np.ascontiguousarray(times), np.ascontiguousarray(weights)
    )
    distinct = _distinct_times(times) if weights.shape[0] else []
    return StagedWrite(
        batch,
        distinct,
        parsed.advance_to,
        changes,
        count_total(weights),
        upto,
        keys_after if vouched else None,
    )


def _check_key_order(
    parsed: ParsedWrite,
    shape: TableShape,
    times: np.ndarray,
    upto: np.ndarray | None,
    vouched: bool = False,
) -> np.ndarray | None:
    """The join of ``upto`` and the write's times, once each update's time is at or beyond
    every time written by earlier writes (``upto``) and every time of its key earlier in
    the write. A primary key holds one row at every time only if its updates come in time
    order: the key index is the table's state after every update so far, so an update at
    an earlier time would be checked against rows stored at later times. Within a write,
    updates of different keys do not touch each other's checks, so only each key's own
    come in order (a write of many keys at shuffled times is taken as it is). An update of
    weight 0 changes nothing and writes no time. ``vouched``: the write's maker checked its
    keys (a load's: each key's updates at one time), so only ``upto`` is checked."""
    live = np.flatnonzero((parsed.ops != WEIGHT) | (parsed.weights != 0))  # weight 0: no time
    if live.shape[0] == 0:
        return upto
    times = times[:, live]
    early = np.zeros(live.shape[0], dtype=bool)
    if upto is not None:
        early |= (times < upto.reshape(-1, 1)).any(axis=0)
    same = np.zeros(0, dtype=np.int64)  # each update's key, where a key comes again
    if live.shape[0] > 1 and not vouched:
        keys = parsed.data[list(shape.primary_key)][:, live]
        if not _distinct_keys(keys):
            same = np.unique(keys, axis=1, return_inverse=True)[1].reshape(-1)
            order = np.argsort(same, kind="stable")  # by key, each key's in the write's order
            after = np.flatnonzero(same[order][1:] == same[order][:-1]) + 1
            # product order is transitive: each time at or beyond the one before it of its
            # key is at or beyond all of them
            behind = (times[:, order[after]] < times[:, order[after - 1]]).any(axis=0)
            early[order[after[behind]]] = True
    if early.any():
        j = int(np.flatnonzero(early)[0])
        i = int(live[j])
        before = upto if upto is not None else np.full(times.shape[0], -1, np.int64)
        if same.shape[0]:
            mine = np.flatnonzero(same[:j] == same[j])
            if mine.shape[0]:
                before = np.maximum(before, times[:, mine].max(axis=1))
        t = time_to_wire(time_tuples(times[:, j : j + 1])[0])
        b = time_to_wire(time_tuples(before.reshape(-1, 1))[0])
        what = f"updates[{i}]" if parsed.time_path.startswith("updates") else f"row {i}"
        raise Conflict(
            f"{what} is at time {t}, not at or beyond time {b} already written to its key "
            f"or by an earlier write to table {shape.name!r}: a table with a primary key "
            "takes each key's updates in time order, as its keys are checked in that order",
            {"path": parsed.time_path.format(i), "written": b},
            "time_out_of_order",
        )
    written = times.max(axis=1)
    return written if upto is None else np.maximum(upto, written)


def _distinct_times(times: np.ndarray) -> list[tuple[int, ...]]:
    """The sorted distinct times of a ``(d, n)`` array, without a Python tuple per update."""
    if (times == times[:, :1]).all():
        return time_tuples(times[:, :1])
    return time_tuples(np.unique(times, axis=1))


Keyed = tuple[np.ndarray, np.ndarray, np.ndarray, KeyChanges]


def _distinct_keys(keys: np.ndarray) -> bool:
    """Whether the key columns ``(kk, n)`` hold each key once (codes first: equal keys have
    equal codes, so distinct codes settle it without comparing columns)."""
    codes = np.sort(key_codes(keys))
    if not (codes[1:] == codes[:-1]).any():
        return True
    return bool(np.unique(keys, axis=1).shape[1] == keys.shape[1])


def _apply_distinct_keys(
    parsed: ParsedWrite, shape: TableShape, index: KeyIndex, times: np.ndarray
) -> Keyed | None:
    """:func:`_apply_keys` for a write whose keys are all distinct, where no update depends
    on another: one index lookup for all keys, every decision taken on whole arrays. None
    when a key repeats or some update would be refused (``_apply_keys`` then names the
    first)."""
    data, ops, given = parsed.data, parsed.ops, parsed.weights
    keys = data[list(shape.primary_key)]
    if not _distinct_keys(keys):
        return None
    # each update's weight: upserts and inserts add, deletes retract, weights as given
    weights = np.where(ops == DELETE, -1, np.where(ops == WEIGHT, given, 1))
    if not np.isin(weights, (-1, 0, 1)).all():
        return None
    found = index.lookup(keys)
    present = found >= 0
    upsert = ops == UPSERT
    if (present & (weights == 1) & ~upsert).any():
        return None  # an insert of a present key
    deletes = np.flatnonzero(weights == -1)
    if not present[deletes].all():
        return None  # a delete of an absent row
    if (index.rows(found[deletes]) != data[:, deletes]).any():
        return None  # a delete of a row other than the one stored
    kept = np.flatnonzero(weights != 0)
    retracted = np.flatnonzero(upsert & present)
    if len(retracted) == 0 and len(kept) == len(weights) and (weights == given).all():
        # every update as given (a bulk load, usually): the write's own arrays, which a
        # load's rows arranged ahead are for (``InputHandle.arrange_ahead``)
        return data, given, times, KeyChanges(data, weights != -1)
    changes = KeyChanges(data[:, kept], weights[kept] != -1)
    if len(retracted) == 0:  # inserts and deletes only
        return changes.rows, weights[kept].astype(np.int64), np.take(times, kept, axis=1), changes
    # the stored rows upserts retract, each just before the row replacing it
    order = np.argsort(np.concatenate([2 * kept + 1, 2 * retracted]), kind="stable")
    old = index.rows(found[retracted])
    out_data = np.concatenate([data[:, kept], old], axis=1)[:, order]
    out_w = np.concatenate([weights[kept], np.full(len(retracted), -1, np.int64)])[order]
    out_t = np.concatenate([kept, retracted])[order]
    return out_data, out_w.astype(np.int64), np.take(times, out_t, axis=1), changes


def _apply_keys(
    parsed: ParsedWrite,
    shape: TableShape,
    index: KeyIndex,
    times: np.ndarray,
    interner: StringInterner,
) -> Keyed:
    """Primary-key semantics, update by update; returns the rows to send and the index
    changes (the rows stored before the write are looked up at once)."""
    pk = list(shape.primary_key)
    found = index.lookup(parsed.data[pk])
    stored: list[tuple | None] = [None] * len(found)
    at = np.flatnonzero(found >= 0)
    for i, row_l in zip(at.tolist(), index.rows(found[at]).T.tolist(), strict=True):
        stored[i] = tuple(row_l)
    rows = parsed.data.T.tolist()
    ops = parsed.ops.tolist()
    weights = parsed.weights.tolist()
    overlay: dict[tuple, tuple] = {}  # key -> the row it holds after the updates so far
    placed: dict[tuple, int] = {}  # key -> the update of this write that put its row there
    dead: set[tuple] = set()  # keys the updates so far removed
    out_rows, out_w, out_t = [], [], []
    for i, (row_l, op, w) in enumerate(zip(rows, ops, weights, strict=True)):
        row = tuple(row_l)
        key = tuple(row[j] for j in pk)
        current = overlay.get(key) if key in overlay or key in dead else stored[i]
        path = parsed.row_path.format(i)
        if op == UPSERT:
            if current is not None:
                out_rows.append(current)
                out_w.append(-1)
                out_t.append(i)
            w = 1
        else:
            if op == INSERT:
                w = 1
            elif op == DELETE:
                w = -1
            if w == 0:
                continue
            if w == 1:
                if current is not None:
                    where = (
                        f"in table {shape.name!r}"
                        if key not in placed
                        else f"(this write's {parsed.row_path.format(placed[key])} put it there)"
                    )
                    raise Invalid(
                        f"{path}: key {_key_text(shape, key, interner)} is already present "
                        f"{where}; use upsert to replace it",
                        {"path": path},
                        "key_present",
                    )
            elif w == -1:
                if current != row:
                    raise Invalid(
                        f"{path}: the row is not present in table {shape.name!r}",
                        {"path": path},
                        "row_absent",
                    )
            else:
                raise Invalid(
                    f"{parsed.weight_path.format(i)}: a table with a primary key holds each key "
                    "at most once; weight must be 1, -1 or 0",
                    {"path": parsed.weight_path.format(i)},
                    "bad_weight",
                )
        if w == 1:
            overlay[key] = row
            placed[key] = i
            dead.discard(key)
        else:
            overlay.pop(key, None)
            placed.pop(key, None)
            dead.add(key)
        out_rows.append(row)
        out_w.append(w)
        out_t.append(i)
    t_idx = np.asarray(out_t, dtype=np.int64)
    ncols = parsed.data.shape[0]
    data = np.asarray(out_rows, dtype=np.int64).reshape(len(out_rows), ncols).T
    # each touched key once: its row where it is stored after the write, its key alone
    # (other columns 0) where it is not
    gone = np.zeros((ncols, len(dead)), dtype=np.int64)
    if dead:
        gone[pk] = np.asarray(list(dead), dtype=np.int64).reshape(len(dead), len(pk)).T
    held = np.asarray(list(overlay.values()), dtype=np.int64).reshape(len(overlay), ncols).T
    changes = KeyChanges(
        np.concatenate([held, gone], axis=1),
        np.concatenate([np.ones(len(overlay), bool), np.zeros(len(dead), bool)]),
    )
    return data, np.asarray(out_w, dtype=np.int64), np.take(times, t_idx, axis=1), changes


def _key_text(shape: TableShape, key: tuple, interner: StringInterner) -> str:
    """The key's values as JSON writes them (``s="a", f=1.5, b=true``)."""
    stored = np.asarray(key, dtype=np.int64).reshape(-1, 1)
    decoded = decode_rows(stored, shape.schema.select(shape.primary_key), interner)[0]
    return "(" + ", ".join(f"{n}={orjson.dumps(v).decode()}" for n, v in decoded.items()) + ")"
