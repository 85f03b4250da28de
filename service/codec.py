"""The wire format of values, rows, times and frontiers, and its columnar translation.

Rows arrive as JSON objects with exactly the table's columns; they become one int64 storage
array per column (``engine.schema``), strings interned on the way in. Outputs go back as
``{"column": value}`` objects. Times are ints (one dimension) or lists of ``d`` ints;
frontiers are lists of times. Every check names the offending field in ``detail.path``.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson

from engine import Antichain, ColumnType, Schema, StringInterner
from engine.schema import decode, encode
from service.errors import Invalid

__all__ = [
    "TIME_MAX",
    "TIME_TEXT",
    "ColumnBuilder",
    "check_value",
    "checked_column",
    "count_to_wire",
    "count_total",
    "decode_rows",
    "frontier_from_wire",
    "frontier_to_wire",
    "kept_json",
    "nests_deeper",
    "time_from_text",
    "time_from_wire",
    "time_to_wire",
    "times_to_wire",
]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# orjson's result keeps the buffer it was written in, about 4 KB more than its length
# whatever that is: below this many bytes a result kept for long is copied to its own size
KEPT_COPY_BELOW = 1 << 16


def kept_json(value: Any) -> bytes:
    """``value`` as JSON, for bytes the server keeps long after making them (completions,
    the frames queued for subscribers): orjson's own result, short ones copied to their size.
    50,000 results of 27 bytes held 195 MB as orjson gave them and 3.6 MB copied; a server
    keeping 100,000 completions of 1-row writes sat 440 MB above its data (audit 116)."""
    body = orjson.dumps(value)
    return bytes(memoryview(body)) if len(body) < KEPT_COPY_BELOW else body


# the latest time an update may have: the engine's kernels keep INT64_MAX for "no time" (a
# frontier may name it: advancing there completes every time an update can have)
TIME_MAX = INT64_MAX - 1
# a time in a query string (``as_of``): ``T``, or ``T1,T2`` for several coordinates; ASCII
# digits only (no sign, space, ``_`` or other scripts' digits, which ``int`` would take)
TIME_TEXT = re.compile(r"[0-9]+(,[0-9]+)*")


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether decoded JSON nests more than ``limit`` levels of objects and lists (counted
    without recursion). What the service echoes back must render again as JSON, and orjson
    renders at most 254 levels."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((v, depth + 1) for v in children)
    return False


def check_value(value: Any, ctype: ColumnType, path: str) -> Any:
    """The value if it fits the column type, else Invalid naming ``path``."""
    if ctype is ColumnType.INT:
        if isinstance(value, float) and value.is_integer() and not INT64_MIN < value <= INT64_MAX:
            # the JSON parser reads an integer literal beyond 64 bits as a float (-2**63 - 1
            # as -2.0**63; -2**63 itself it reads as an int)
            raise Invalid(f"{path} does not fit in 64 bits", {"path": path}, "wrong_type")
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(
                f"{path} must be an int, got {_kind(value)}", {"path": path}, "wrong_type"
            )
        if not INT64_MIN <= value <= INT64_MAX:
            raise Invalid(f"{path} does not fit in 64 bits", {"path": path}, "wrong_type")
        return value
    if ctype is ColumnType.FLOAT:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            # JSON has no NaN or infinity: some encoders (orjson, JavaScript's) write null
            hint = " (a NaN or infinity, written so by the encoder?)" if value is None else ""
            raise Invalid(
                f"{path} must be a number, got {_kind(value)}{hint}", {"path": path}, "wrong_type"
            )
        f = float(value)
        if not math.isfinite(f):
            raise Invalid(f"{path} must be a finite number", {"path": path}, "wrong_type")
        return f
    if ctype is ColumnType.BOOL:
        if not isinstance(value, bool):
            raise Invalid(
                f"{path} must be true or false, got {_kind(value)}", {"path": path}, "wrong_type"
            )
        return value
    if not isinstance(value, str):
        raise Invalid(f"{path} must be a string, got {_kind(value)}", {"path": path}, "wrong_type")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a bool",
        int: "an int",
        float: "a float",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


class ColumnBuilder:
    """Collects rows, then yields int64 storage arrays, each column checked whole
    (:func:`whole_column`); a bad value is named as checking the rows one by one, in order,
    would name it (:meth:`check_rows`)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.names = schema.names
        self.types = schema.types
        self._name_set = set(self.names)
        first = self.names[0] if self.names else ""
        # a row's values in column order, as a tuple (one C call for several columns)
        self._values: Callable[[dict[str, Any]], tuple[Any, ...]] = (
            operator.itemgetter(*self.names) if len(self.names) > 1 else lambda row: (row[first],)
        )
        self.rows: list[tuple[Any, ...]] = []
        self.paths: list[str] = []

    def add(self, row: Any, path: str) -> None:
        """Take one row object: its columns are checked now, its values by :meth:`storage`."""
        if not isinstance(row, dict) or row.keys() != self._name_set:
            self.check_rows()  # a bad value in an earlier row comes first
        if not isinstance(row, dict):
            raise Invalid(
                f"{path} must be an object of column values, got {_kind(row)}",
                {"path": path},
                "wrong_type",
            )
        if row.keys() != self._name_set:
            unknown = sorted(set(row) - self._name_set)
            missing = [n for n in self.names if n not in row]
            what = (f"unknown column(s) {unknown}" if unknown else "") + (
                ("; " if unknown else "") + f"missing column(s) {missing}" if missing else ""
            )
            at = f"{path}.{unknown[0] if unknown else missing[0]}"  # the first column at fault
            raise Invalid(
                f"{at}: {what}; the columns are {list(self.names)}", {"path": at}, "wrong_columns"
            )
        self.rows.append(self._values(row))
        self.paths.append(path)

    def check_rows(self) -> None:
        """Check the rows taken so far value by value: Invalid naming the first bad one."""
        for values, path in zip(self.rows, self.paths, strict=True):
            for v, name, t in zip(values, self.names, self.types, strict=True):
                check_value(v, t, f"{path}.{name}")

    def storage(self, interner: StringInterner) -> np.ndarray:
        """The rows as storage; no string is interned unless every value fits."""
        n = len(self.rows)
        columns = []
        by_column = [list(c) for c in zip(*self.rows, strict=True)] or [[] for _ in self.types]
        for values, t in zip(by_column, self.types, strict=True):
            column = whole_column(values, t)
            if column is None:
                self.check_rows()
                column = _converted(values, t)
            columns.append(column)
        data = np.empty((len(self.types), n), dtype=np.int64)
        for j, column in enumerate(columns):
            data[j] = interner.intern_many(column) if isinstance(column, list) else column
        return data


_DTYPES = {ColumnType.INT: np.int64, ColumnType.FLOAT: np.float64, ColumnType.BOOL: np.bool_}
# the Python types a column's values may have (an int column's are never bools)
_PYTHON_TYPES: dict[ColumnType, set[type]] = {
    ColumnType.INT: {int},
    ColumnType.FLOAT: {int, float},
    ColumnType.BOOL: {bool},
    ColumnType.STRING: {str},
}


def whole_column(values: list[Any], ctype: ColumnType) -> np.ndarray | list[Any] | None:
    """A column's values checked whole: one pass over their Python types, then one numpy
    conversion (which refuses ints beyond 64 bits) and, for floats, a finiteness test.
    Returns a non-string column's storage, a string column's values as they are (to intern
    once every column has passed), or None when some value does not fit (value-by-value
    checks then name it)."""
    if not set(map(type, values)) <= _PYTHON_TYPES[ctype]:
        return None
    if ctype is ColumnType.STRING:
        return values
    try:
        array: np.ndarray = np.asarray(values, dtype=_DTYPES[ctype])
    except OverflowError:  # an int beyond 64 bits
        return None
    if ctype is ColumnType.FLOAT and not bool(np.isfinite(array).all()):
        return None
    return encode(array, ctype)


def checked_column(values: list[Any], ctype: ColumnType, path: str) -> np.ndarray | list[Any]:
    """:func:`whole_column`, or Invalid naming the first bad value (``path[i]``)."""
    column = whole_column(values, ctype)
    if column is not None:
        return column
    for i, v in enumerate(values):
        check_value(v, ctype, f"{path}[{i}]")
    return _converted(values, ctype)


def _converted(values: list[Any], ctype: ColumnType) -> np.ndarray | list[Any]:
    """Checked values as :func:`whole_column` returns them."""
    return (
        values if ctype is ColumnType.STRING else encode(np.asarray(values, _DTYPES[ctype]), ctype)
    )


def decode_columns(data: np.ndarray, schema: Schema, interner: StringInterner) -> list[list[Any]]:
    """Storage columns back to lists of Python values."""
    out = []
    for j, t in enumerate(schema.types):
        if t is ColumnType.STRING:
            out.append(interner.lookup_many(data[j]))
        else:
            out.append(decode(data[j], t).tolist())
    return out


def decode_rows(data: np.ndarray, schema: Schema, interner: StringInterner) -> list[dict[str, Any]]:
    """Storage columns back to one dict per row (a write's outputs, a read's rows)."""
    cols = decode_columns(data, schema, interner)
    if not cols:
        return [{} for _ in range(data.shape[1])]
    return _row_maker(tuple(schema.names))(cols)


@functools.lru_cache(maxsize=1024)
def _row_maker(names: tuple[str, ...]) -> Callable[[list[list[Any]]], list[dict[str, Any]]]:
    """A comprehension that makes one dict per row of ``names`` from column lists, its
    names written into it as constants: a dict display builds a row about 3x faster than
    ``dict(zip(names, row))`` (a million rows of three ints: 0.31 s against 1.07 s), and a
    big write's outputs are all decoded on the engine thread (audit 96: 80k updates at
    1,000 times, 8 views, spent most of their answer's time here). The names are string
    literals (``repr``) in the source, whatever they hold."""
    values = [f"v{i}" for i in range(len(names))]
    display = ", ".join(f"{name!r}: {v}" for name, v in zip(names, values, strict=True))
    source = f"lambda cols: [{{{display}}} for ({', '.join(values)},) in zip(*cols, strict=True)]"
    return eval(source)


def time_from_wire(value: Any, dims: int, path: str, top: int = TIME_MAX) -> tuple[int, ...]:
    """A wire time as a tuple of ``dims`` non-negative ints, each at most ``top``."""
    below = "2**63 - 1" if top == TIME_MAX else "2**63"
    if dims == 1:  # an integer: API.md keeps lists for times of several dimensions
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
            arity = (
                " (times here have one coordinate: an integer, not a list)"
                if isinstance(value, list)
                else ""
            )
            raise Invalid(
                f"{path} must be a non-negative integer time below {below}{arity}",
                {"path": path},
                "bad_time",
            )
        return (value,)
    if (
        not isinstance(value, list)
        or len(value) != dims
        or any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= top for v in value)
    ):
        arity = (
            f" (times here have {dims} coordinates, not {len(value)})"
            if isinstance(value, list) and len(value) != dims
            else ""
        )
        raise Invalid(
            f"{path} must be a list of {dims} non-negative integers below {below}{arity}",
            {"path": path},
            "bad_time",
        )
    return tuple(value)


def time_from_text(text: str, dims: int, path: str) -> tuple[int, ...]:
    """A time written in a query string (:data:`TIME_TEXT`) as a tuple of ``dims`` ints."""
    if not TIME_TEXT.fullmatch(text):
        raise Invalid(
            f"{path} must be a time: an integer, or integers separated by commas (digits 0-9 "
            f"only), not {text!r}",
            {"path": path},
            "bad_time",
        )
    # digits beyond int64's 19 are out of range (int() refuses more than 4,300 of them)
    digits = [part.lstrip("0") or "0" for part in text.split(",")]
    values = [int(d) if len(d) <= 19 else INT64_MAX + 1 for d in digits]
    value = values[0] if len(values) == 1 and dims == 1 else values
    return time_from_wire(value, dims, path, INT64_MAX)  # a time read at, not written


def time_to_wire(t: Sequence[int]) -> int | list[int]:
    return int(t[0]) if len(t) == 1 else [int(x) for x in t]


def times_to_wire(times: np.ndarray) -> list[Any]:
    """A ``(d, n)`` time array as wire times."""
    if times.shape[0] == 1:
        return times[0].tolist()
    return times.T.tolist()


def frontier_from_wire(value: Any, dims: int, path: str) -> Antichain:
    """``advance_to``: a time or a list of times (an antichain); ``[]`` closes."""
    if dims == 1:
        items = value if isinstance(value, list) else [value]
    elif (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        items = [value]
    elif isinstance(value, list):
        items = value
    else:
        raise Invalid(f"{path} must be a time or a list of times", {"path": path}, "bad_time")
    times = [time_from_wire(v, dims, f"{path}[{i}]", INT64_MAX) for i, v in enumerate(items)]
    return Antichain(times, dims) if times else Antichain.closed(dims)


def frontier_to_wire(f: Antichain) -> list[Any]:
    return f.to_list()


def count_total(diffs: np.ndarray) -> int:
    """The exact sum of int64 counts or diffs, as a Python int (their int64 sum could wrap).
    Summed as they are where the largest magnitude times their number fits in int64 (no
    array is made: a load's ten million weights took a quarter of a second in temporaries
    on fresh pages); else the high and low 32 bits apart, neither of which can wrap below
    2**31 entries."""
    n = diffs.shape[0]
    if n == 0:
        return 0
    if max(int(diffs.max()), -int(diffs.min())) * n < 1 << 63:
        return int(diffs.sum())
    return (int((diffs >> 32).sum()) << 32) + int((diffs & 0xFFFFFFFF).sum())


def count_to_wire(total: int) -> int:
    """A total multiplicity (a table's or view's ``rows``) as the wire shows it: a signed
    64-bit value, saturated at int64's ends rather than wrapped (JSON readers and orjson
    take no more)."""
    return min(max(total, INT64_MIN), INT64_MAX)
