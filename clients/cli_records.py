"""Reading the CLI's input: JSON lines or CSV into write batches, times and ``k=v`` pairs.

Input is UTF-8 text (a byte order mark at its start skipped), read line by line; errors name
the physical line of the input, and so does each batch, for the messages about its writes.
JSON lines: one object per line, blank lines skipped. An object is an update as API.md writes
it when one of ``insert`` / ``delete`` / ``upsert`` / ``data`` holds an object (row values are
never objects, so this cannot misread a row); any other object is a row, and is inserted.
CSV: a header row naming exactly the table's columns, values converted by the column types
(blank lines skipped; a record's line is the one it starts on, as quoted values may span lines).
Batches hold at most ``size`` updates; CSV batches use the columnar write form.
"""

from __future__ import annotations

import csv
import io
import math
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import typer

from clients.cli_render import counted
from clients.wire import Time

__all__ = [
    "Batch",
    "InputError",
    "csv_batches",
    "jsonl_batches",
    "open_input",
    "parse_pairs",
    "parse_time",
]

_UPDATE_KEYS = ("insert", "delete", "upsert", "data")
_BOOLS = {"true": True, "false": False, "1": True, "0": False}
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_UNDECODED = re.compile("[\udc80-\udcff]")  # a byte that was not UTF-8 (surrogateescape)
_CSV_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)  # csv's own is 131,072 characters


class InputError(Exception):
    """Input that cannot become a write: names the line and what is wrong with it."""

    code = "bad_input"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


@dataclass(frozen=True, slots=True)
class Batch:
    """Updates read from the input lines ``lines`` (one per update, in order): update
    objects in ``updates``, or columnar in ``columns``."""

    lines: list[int]
    updates: list[dict[str, Any]] | None = None
    columns: dict[str, list[Any]] | None = None

    @property
    def size(self) -> int:
        return len(self.lines)


@contextmanager
def open_input(path: str, option: str = "--file") -> Iterator[Iterator[str]]:
    """The lines of ``path`` (``-``: standard input, left open) as UTF-8 text, a byte order
    mark at the start skipped (Excel and some editors write one).

    A line that is not UTF-8 raises ``InputError`` naming it only when it is reached, so
    that a push can say what the writes before it wrote: the bytes are decoded with
    ``surrogateescape`` and each line is checked, as a strict decoder fails a whole chunk
    of lines at once, before any of them is read, and names none."""
    if path == "-":
        stdin = io.TextIOWrapper(
            typer.get_binary_stream("stdin"), encoding="utf-8-sig", errors="surrogateescape"
        )
        try:
            yield _utf8_lines(stdin)
        finally:
            stdin.detach()  # standard input stays open
        return
    try:
        stream = open(path, encoding="utf-8-sig", errors="surrogateescape")  # noqa: SIM115
    except OSError as exc:
        message = f"cannot read {path}: {exc.strerror}"
        raise typer.BadParameter(message, param_hint=option) from exc
    with stream:
        yield _utf8_lines(stream)


def _utf8_lines(stream: io.TextIOWrapper) -> Iterator[str]:
    for number, line in enumerate(stream, start=1):
        undecoded = _UNDECODED.search(line)
        if undecoded is not None:
            byte = ord(undecoded.group()) - 0xDC00
            raise InputError(
                f"line {number}: not UTF-8 text (byte 0x{byte:02x} at character "
                f"{undecoded.start() + 1})"
            )
        yield line


def parse_time(text: str, option: str) -> Time:
    """The time ``text`` given for ``option``: ``"7"`` -> 7, ``"1,2"`` -> [1, 2]."""
    try:
        coordinates = [int(part) for part in text.split(",")]
    except ValueError:
        message = f"a time is an int, or ints joined by commas: not {text!r}"
        raise typer.BadParameter(message, param_hint=option) from None
    if any(c < 0 for c in coordinates):
        raise typer.BadParameter(f"times are non-negative: not {text!r}", param_hint=option)
    return coordinates[0] if len(coordinates) == 1 else coordinates


def parse_pairs(items: Iterable[str], option: str) -> dict[str, str]:
    """``["a=b", ...]`` -> ``{"a": "b", ...}``."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, not {item!r}", param_hint=option)
        pairs[key] = value
    return pairs


def jsonl_batches(lines: Iterable[str], size: int) -> Iterator[Batch]:
    """Batches of the updates on ``lines``."""
    updates: list[dict[str, Any]] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:  # its own "line 2 column 1" counts in the line
            message = f"line {number}: not JSON ({exc.msg} at character {exc.pos + 1})"
            raise InputError(message) from exc
        updates.append(_update(value, number))
        numbers.append(number)
        if len(updates) == size:
            yield Batch(numbers, updates=updates)
            updates, numbers = [], []
    if updates:
        yield Batch(numbers, updates=updates)


def csv_batches(
    lines: Iterable[str], column_types: Mapping[str, str], size: int
) -> Iterator[Batch]:
    """Columnar batches of the CSV records on ``lines``, typed by ``column_types``."""
    records = _csv_records(lines)
    first = next(records, None)
    if first is None:
        return
    header = first[1]
    kinds = _column_kinds(header, column_types)
    columns: dict[str, list[Any]] = {name: [] for name in header}
    numbers: list[int] = []
    for line, row in records:
        if len(row) != len(header):
            found, wanted = counted(len(row), "value"), counted(len(header), "column")
            raise InputError(f"line {line}: {found} for {wanted}")
        for name, text in zip(header, row, strict=True):
            columns[name].append(_convert(kinds[name], text, line, name))
        numbers.append(line)
        if len(numbers) == size:
            yield Batch(numbers, columns=columns)
            columns, numbers = {name: [] for name in header}, []
    if numbers:
        yield Batch(numbers, columns=columns)


def _csv_records(lines: Iterable[str]) -> Iterator[tuple[int, list[str]]]:
    """``(line it starts on, values)`` of each record on ``lines``, blank lines skipped. A
    value may be as long as the server takes (not just csv's default 131,072 characters);
    a record csv cannot read is an ``InputError`` naming its line."""
    csv.field_size_limit(_CSV_FIELD_LIMIT)
    reader = csv.reader(lines)
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"line {reader.line_num}: not CSV ({exc})") from None
        if row:
            yield start, row


def _update(value: Any, number: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"line {number}: expected a JSON object, got {type(value).__name__}")
    if any(isinstance(value.get(key), dict) for key in _UPDATE_KEYS):
        return value
    return {"insert": value}


def _parse_bool(text: str) -> bool:
    try:
        return _BOOLS[text.strip().lower()]
    except KeyError:
        raise ValueError(text) from None


def _no_underscores(text: str) -> str:
    """``text`` unless it has an underscore, which int() and float() take (``1_000``) and
    JSON, the server's notation, does not."""
    if "_" in text:
        raise ValueError(text)
    return text


def _parse_int(text: str) -> int:
    value = int(_no_underscores(text))
    if not _INT_MIN <= value <= _INT_MAX:
        raise _Unfit("does not fit in 64 bits")
    return value


def _parse_float(text: str) -> float:
    value = float(_no_underscores(text))
    if not math.isfinite(value):  # JSON has no NaN or infinity: the server would get null
        raise _Unfit("is not a finite float")
    return value


class _Unfit(ValueError):
    """A value of the column's type that the column cannot hold; says why."""


_PARSERS: dict[str, Callable[[str], Any]] = {
    "int": _parse_int,
    "float": _parse_float,
    "bool": _parse_bool,
    "string": str,
}


def _column_kinds(header: list[str], column_types: Mapping[str, str]) -> dict[str, str]:
    unknown = [name for name in header if name not in column_types]
    missing = [name for name in column_types if name not in header]
    if unknown or missing or len(set(header)) != len(header):
        raise InputError(
            f"the CSV header {header} must name each column of the table once: "
            f"{list(column_types)} (unknown: {unknown}, missing: {missing})"
        )
    for name in header:
        if column_types[name] not in _PARSERS:
            kind = column_types[name]
            raise InputError(f"column {name} has type {kind}, which CSV input cannot convert")
    return {name: column_types[name] for name in header}


def _convert(kind: str, text: str, line: int, name: str) -> Any:
    try:
        return _PARSERS[kind](text)
    except _Unfit as exc:
        raise InputError(f"line {line}, column {name}: {text!r} {exc}") from None
    except ValueError:
        raise InputError(f"line {line}, column {name}: {text!r} is not of type {kind}") from None
