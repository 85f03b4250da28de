"""Reading the CLI's input: JSON lines or CSV into write batches, times and ``k=v`` pairs.

JSON lines: one object per line, blank lines skipped. An object is an update as API.md writes
it when one of ``insert`` / ``delete`` / ``upsert`` / ``data`` holds an object (row values are
never objects, so this cannot misread a row); any other object is a row, and is inserted.
CSV: a header row naming exactly the table's columns, values converted by the column types.
Batches hold at most ``size`` updates; CSV batches use the columnar write form.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import orjson
import typer

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
    """``size`` updates: update objects in ``updates``, or columnar in ``columns``."""

    size: int
    updates: list[dict[str, Any]] | None = None
    columns: dict[str, list[Any]] | None = None


@contextmanager
def open_input(path: str, option: str = "--file") -> Iterator[TextIO]:
    """The text stream of ``path`` (``-``: standard input, left open)."""
    if path == "-":
        yield typer.get_text_stream("stdin")
        return
    try:
        stream = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        message = f"cannot read {path}: {exc.strerror}"
        raise typer.BadParameter(message, param_hint=option) from exc
    with stream:
        yield stream


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
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"line {number}: not JSON ({exc})") from exc
        updates.append(_update(value, number))
        if len(updates) == size:
            yield Batch(len(updates), updates=updates)
            updates = []
    if updates:
        yield Batch(len(updates), updates=updates)


def csv_batches(stream: TextIO, column_types: Mapping[str, str], size: int) -> Iterator[Batch]:
    """Columnar batches of the CSV rows on ``stream``, typed by ``column_types``."""
    reader = csv.reader(stream)
    header = next(reader, None)
    if header is None:
        return
    if header and header[0].startswith("\ufeff"):  # a byte order mark (Excel writes one)
        header[0] = header[0][1:]
    kinds = _column_kinds(header, column_types)
    columns: dict[str, list[Any]] = {name: [] for name in header}
    count = 0
    for row in reader:
        if not row:
            continue
        if len(row) != len(header):
            line = reader.line_num
            raise InputError(f"line {line}: {len(row)} values for {len(header)} columns")
        for name, text in zip(header, row, strict=True):
            columns[name].append(_convert(kinds[name], text, reader.line_num, name))
        count += 1
        if count == size:
            yield Batch(count, columns=columns)
            columns, count = {name: [] for name in header}, 0
    if count:
        yield Batch(count, columns=columns)


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


def _parse_int(text: str) -> int:
    value = int(text)
    if not _INT_MIN <= value <= _INT_MAX:
        raise _Unfit("does not fit in 64 bits")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
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
