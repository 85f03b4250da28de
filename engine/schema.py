"""Column types and their int64 storage.

The engine stores every column as int64 so that one sort, one comparison and one gather
serve all types. A :class:`Schema` names the columns and gives each its logical type:

* ``int``    — the value itself;
* ``float``  — the IEEE-754 bits of the value, canonicalised (``-0.0`` -> ``0.0``, one NaN),
  so that equal floats have equal bits;
* ``bool``   — 0 or 1;
* ``string`` — an id from a :class:`~engine.interning.StringInterner`.

``encode`` turns typed numpy arrays into storage and ``decode`` turns storage back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from engine.errors import SchemaError

__all__ = ["Column", "ColumnType", "Schema", "decode", "encode"]


class ColumnType(StrEnum):
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STRING = "string"

    @property
    def numeric(self) -> bool:
        return self in (ColumnType.INT, ColumnType.FLOAT)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: ColumnType


@dataclass(frozen=True, slots=True)
class Schema:
    columns: tuple[Column, ...]

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, ColumnType | str]]) -> Schema:
        cols = tuple(Column(name, _column_type(t)) for name, t in pairs)
        names = [c.name for c in cols]
        if len(set(names)) != len(names):
            raise SchemaError(f"duplicate column names in {names}")
        return cls(cols)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def types(self) -> tuple[ColumnType, ...]:
        return tuple(c.type for c in self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def index(self, name: str) -> int:
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        raise SchemaError(f"unknown column {name!r}; columns are {list(self.names)}")

    def indices(self, names: Sequence[str]) -> list[int]:
        return [self.index(n) for n in names]

    def type_of(self, name: str) -> ColumnType:
        return self.columns[self.index(name)].type

    def select(self, indices: Sequence[int]) -> Schema:
        return Schema(tuple(self.columns[i] for i in indices))

    def concat(self, other: Schema) -> Schema:
        return Schema.of([(c.name, c.type) for c in (*self.columns, *other.columns)])


def _column_type(t: ColumnType | str) -> ColumnType:
    try:
        return ColumnType(t)
    except ValueError:
        raise SchemaError(
            f"unknown column type {t!r}; types are {[c.value for c in ColumnType]}"
        ) from None


def encode(values: np.ndarray, ctype: ColumnType) -> np.ndarray:
    """Typed values (int64, float64, bool or string ids) to int64 storage."""
    if ctype is ColumnType.FLOAT:
        f = np.asarray(values, dtype=np.float64) + 0.0  # -0.0 + 0.0 == +0.0
        f = np.where(np.isnan(f), np.nan, f)
        return f.view(np.int64)
    return np.asarray(values, dtype=np.int64)


def decode(stored: np.ndarray, ctype: ColumnType) -> np.ndarray:
    """int64 storage back to typed values (float64 for floats, bool for bools)."""
    if ctype is ColumnType.FLOAT:
        return np.ascontiguousarray(stored).view(np.float64)
    if ctype is ColumnType.BOOL:
        return stored != 0
    return stored
