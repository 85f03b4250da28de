"""The load spec of API.md ("Spark loads"), parsed and checked without touching Spark.

Invariants of a parsed ``LoadSpec``:
- ``source`` is exactly one of a path (with a supported format and string options), a catalog
  table, or a single SQL query (it starts with SELECT, WITH, FROM, VALUES or TABLE; Spark
  then runs it as a subquery, ``source.as_subquery``, so a load never runs DDL or DML).
- ``columns`` holds one ``(table column, source column)`` pair per table column, in the
  table's schema order; unmapped table columns read the source column of the same name.
- Every problem is an ``Invalid`` whose ``detail["path"]`` names the offending field. An
  optional field is given or left out: ``null`` is no value for any of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.errors import Invalid

__all__ = [
    "FORMATS",
    "TABLE_TYPES",
    "LoadSpec",
    "PathSource",
    "Source",
    "SqlSource",
    "TableSchema",
    "TableSource",
    "parse_load_spec",
]

FORMATS = ("parquet", "csv", "json", "orc")
TABLE_TYPES = ("int", "float", "bool", "string")

#: A table's columns in order, as ``(name, type)`` with type one of ``TABLE_TYPES``.
TableSchema = Sequence[tuple[str, str]]

_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".orc": "orc",
}
_PATH_KEYS = {"path", "format", "options"}
_QUERY_START = re.compile(r"^\s*(\(\s*)*(select|with|from|values|table)\b", re.IGNORECASE)
_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)


@dataclass(frozen=True)
class PathSource:
    path: str
    format: str
    options: Mapping[str, str]


@dataclass(frozen=True)
class TableSource:
    table: str


@dataclass(frozen=True)
class SqlSource:
    sql: str


Source = PathSource | TableSource | SqlSource


@dataclass(frozen=True)
class LoadSpec:
    source: Source
    columns: tuple[tuple[str, str], ...]
    where: str | None = None

    @property
    def source_columns(self) -> dict[str, str]:
        """Table column -> source column."""
        return dict(self.columns)


def parse_load_spec(spec: Mapping[str, Any], schema: TableSchema) -> LoadSpec:
    """Check ``spec["source"]``, ``spec["columns"]`` and ``spec["where"]`` against ``schema``.

    Other keys (``mode``, ``time``) belong to the caller and are ignored here.
    """
    if not isinstance(spec, Mapping):
        raise Invalid("a load spec must be a JSON object", detail={"path": ""})
    _check_schema(schema)
    where = spec.get("where")
    if "where" in spec and (not isinstance(where, str) or not where.strip()):
        raise Invalid(
            'where must be a non-empty Spark SQL predicate, e.g. "weight > 0"',
            detail={"path": "where"},
        )
    return LoadSpec(
        source=_parse_source(spec.get("source")),
        columns=_parse_columns(spec.get("columns", {}), schema),
        where=where,
    )


def _check_schema(schema: TableSchema) -> None:
    for name, kind in schema:
        if kind not in TABLE_TYPES:
            raise Invalid(
                f"table column {name!r} has type {kind!r}; expected one of {list(TABLE_TYPES)}",
                detail={"path": f"schema.{name}"},
            )


def _parse_source(source: Any) -> Source:
    if not isinstance(source, Mapping):
        raise Invalid(
            'source must be an object: {"path", "format", "options"}, {"table"} or {"sql"}',
            detail={"path": "source"},
        )
    for key, value in source.items():
        if value is None:
            raise Invalid(
                f"source.{key} is null: leave it out, or give it a value",
                detail={"path": f"source.{key}"},
            )
    kinds = [key for key in ("path", "table", "sql") if key in source]
    if len(kinds) != 1:
        found = f"both {kinds[0]!r} and {kinds[1]!r}" if len(kinds) > 1 else "none of them"
        raise Invalid(
            f"source needs exactly one of 'path', 'table' or 'sql' (found {found})",
            detail={"path": "source"},
        )
    kind = kinds[0]
    allowed = _PATH_KEYS if kind == "path" else {kind}
    extra = sorted(set(source) - allowed)
    if extra:
        raise Invalid(
            f"source with {kind!r} does not take {extra}; allowed keys: {sorted(allowed)}",
            detail={"path": f"source.{extra[0]}"},
        )
    value = source[kind]
    if not isinstance(value, str) or not value.strip():
        raise Invalid(
            f"source.{kind} must be a non-empty string", detail={"path": f"source.{kind}"}
        )
    if kind == "table":
        return TableSource(value.strip())
    if kind == "sql":
        return SqlSource(_check_query(value))
    return PathSource(
        path=value,
        format=_parse_format(source.get("format"), value),
        options=_parse_options(source.get("options")),
    )


def _check_query(sql: str) -> str:
    if not _QUERY_START.match(_COMMENTS.sub(" ", sql)):
        raise Invalid(
            "source.sql must be one query (SELECT, WITH, FROM, VALUES or TABLE ...); "
            "a load does not run DDL or DML",
            detail={"path": "source.sql"},
        )
    return sql


def _parse_format(fmt: Any, path: str) -> str:
    if fmt is None:
        suffix = "." + path.rstrip("/").rsplit(".", 1)[-1].lower() if "." in path else ""
        return _EXTENSIONS.get(suffix, "parquet")
    if not isinstance(fmt, str) or fmt.lower() not in FORMATS:
        raise Invalid(
            f"source.format {fmt!r} is not supported; use one of {list(FORMATS)}",
            detail={"path": "source.format"},
        )
    return fmt.lower()


def _parse_options(options: Any) -> dict[str, str]:
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise Invalid(
            'source.options must be an object of reader options, e.g. {"header": true}',
            detail={"path": "source.options"},
        )
    parsed: dict[str, str] = {}
    for key, value in options.items():
        if isinstance(value, bool):
            parsed[str(key)] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            parsed[str(key)] = str(value)
        else:
            raise Invalid(
                f"source.options.{key} must be a string, number or boolean",
                detail={"path": f"source.options.{key}"},
            )
    return parsed


def _parse_columns(columns: Any, schema: TableSchema) -> tuple[tuple[str, str], ...]:
    if not isinstance(columns, Mapping):
        raise Invalid(
            'columns must map table columns to source columns, e.g. {"src": "from_id"}',
            detail={"path": "columns"},
        )
    names = [name for name, _ in schema]
    unknown = sorted(set(columns) - set(names))
    if unknown:
        raise Invalid(
            f"columns names {unknown}, which the table does not have; table columns: {names}",
            detail={"path": f"columns.{unknown[0]}"},
        )
    for name, source_name in columns.items():
        if not isinstance(source_name, str) or not source_name:
            raise Invalid(
                f"columns.{name} must be the name of a source column",
                detail={"path": f"columns.{name}"},
            )
    return tuple((name, columns.get(name, name)) for name in names)
