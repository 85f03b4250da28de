"""From a load spec and a table schema to a Spark DataFrame ready to stream, with push-down.

Invariants of the ``SourceFrame`` returned by ``build_source``:
- ``df`` has exactly the table's columns, named as in the table and in schema order, each cast
  to the table type (``column_types.spark_type``); ``where`` is applied in Spark on the source
  columns before the projection, so Spark prunes unread columns and pushes the predicate into
  the scan.
- Everything is checked by analysis only (Spark reads file footers or samples to learn the
  schema, but no job reads the data): a missing source, a missing column, a column whose type
  cannot become the table type, or a bad ``where`` fail here, before any row moves.
- A SQL source runs as a subquery (``as_subquery``): only a query can; a statement that
  writes fails to parse before anything runs.
- Spark's exceptions are translated here into ``LoadError`` (``source_not_found``,
  ``source_unreadable``, ``column_missing``, ``column_type``) or ``Invalid`` for a bad spec.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from service.errors import Invalid, LoadError, ServiceError
from service.spark.arrow_transport import is_classic
from service.spark.column_types import can_become, spark_type
from service.spark.load_spec import (
    LoadSpec,
    PathSource,
    Source,
    SqlSource,
    TableSchema,
    TableSource,
    parse_load_spec,
)
from service.spark.spark_errors import (
    error_condition,
    error_summary,
    in_sql_text,
    is_spark_error,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["SourceFrame", "as_subquery", "build_source", "query_failure"]

_READER_DEFAULTS: dict[str, dict[str, str]] = {"csv": {"header": "true"}}
_CORRUPT_RECORD = "_corrupt_record"
_TRAILING = re.compile(r"[\s;]+\Z")  # semicolons and blanks ending a query

_T = TypeVar("_T")
_PARTITION_BYTES = 32 * 2**20  # as spark.sql.files.maxPartitionBytes (session.py)
_MAX_PARTITIONS = 4096
_LEAF_PARALLELISM = "spark.sql.leafNodeDefaultParallelism"
_PLANNING = threading.Lock()  # one load at a time plans with a raised leaf parallelism


@dataclass(frozen=True)
class SourceFrame:
    """A DataFrame of the table's columns and types, and where each column came from."""

    df: DataFrame
    schema: tuple[tuple[str, str], ...]
    source_columns: Mapping[str, str]
    query_text: str | None = None  # the SQL text the load gave: its where, its sql query
    read: DataFrame | None = None  # the source's rows passing the where, before the casts

    def unconvertible(self) -> DataFrame | None:
        """A query for the first table column holding a value of the source that does not
        become its type (a one-row DataFrame of ``column``, or none): run once the casts
        failed, to say which column (Spark's message names the value, not the column)."""
        if self.read is None:
            return None
        from pyspark.sql import functions as F

        failing = [
            F.when(
                _column(source).isNotNull() & _column(source).try_cast(spark_type(kind)).isNull(),
                F.lit(name),
            )
            for name, kind in self.schema
            for source in [self.source_columns.get(name, name)]
        ]
        found = self.read.select(F.coalesce(*failing).alias("column"))
        return found.where(F.col("column").isNotNull()).limit(1)

    def describe(self, column: str) -> str:
        """``"'dst' (source column 'to_id')"`` for messages."""
        source = self.source_columns.get(column, column)
        return repr(column) if source == column else f"{column!r} (source column {source!r})"


def build_source(
    spark: SparkSession, spec: LoadSpec | Mapping[str, Any], schema: TableSchema
) -> SourceFrame:
    """Plan the load of ``spec`` into a table of ``schema``; raises before reading any row."""
    load = spec if isinstance(spec, LoadSpec) else parse_load_spec(spec, schema)
    table_schema = tuple((name, kind) for name, kind in schema)
    what = _describe_source(load.source)
    df = _translated(lambda: _read(spark, load.source), load.source, what)
    available = df.schema
    if isinstance(load.source, PathSource) and available.fieldNames() == [_CORRUPT_RECORD]:
        raise LoadError(
            f"{what} holds no readable {load.source.format} records; for JSON write one object "
            'per line, or set options {"multiLine": true} for a file holding one array',
            code="source_unreadable",
            detail={"source": what},
        )
    if isinstance(load.source, PathSource) and load.source.format == "csv":
        binary = [n for n in available.fieldNames() if not n.isprintable()]
        if binary:  # a header of binary bytes: Parquet or ORC read as CSV, say
            raise LoadError(
                f"{what} does not read as CSV text: its first line holds bytes that are not "
                f"text ({binary[0][:24]!r}); if it is another format, give it: "
                '"format": "parquet", "orc" or "json"',
                code="source_unreadable",
                detail={"source": what},
            )
    _check_columns(load, table_schema, available, what)
    if load.where is not None:
        where = load.where
        df = _translated(lambda: _analysed(df.where(where)), load.source, what, where=where)
    projection = [
        _column(source_name).cast(spark_type(kind)).alias(name)
        for (name, kind), (_, source_name) in zip(table_schema, load.columns, strict=True)
    ]
    read = df
    df = _translated(lambda: _analysed(df.select(*projection)), load.source, what)
    texts = [f"where {load.where!r}"] if load.where is not None else []
    if isinstance(load.source, SqlSource):
        texts.append("sql query")
    query_text = " or ".join(texts) or None
    try:
        df = _bounded_partitions(df)
    except Exception as exc:  # Spark folds constants as it plans: `1 DIV 0` fails here
        if not is_spark_error(exc):
            raise
        raise _planning_error(exc, what, query_text) from exc
    return SourceFrame(
        df=df,
        schema=table_schema,
        source_columns=load.source_columns,
        query_text=query_text,
        read=read,
    )


def query_failure(exc: BaseException, query_text: str | None) -> LoadError | None:
    """The load's own ``where`` or ``sql`` (``query_text``) failing as Spark evaluates it (a
    value it cannot convert, a division by zero), as ``source_unreadable`` naming it; None
    when the failure is elsewhere (the casts to the table's types, built in code)."""
    if query_text is None or not in_sql_text(exc):
        return None
    condition = error_condition(exc)
    return LoadError(
        f"Spark failed evaluating the load's {query_text}: {error_summary(exc)}",
        code="source_unreadable",
        detail={"condition": condition or None, "query": query_text},
    )


def _planning_error(exc: BaseException, what: str, query_text: str | None) -> LoadError:
    """A failure while Spark plans the load: the query's own (:func:`query_failure`), else
    ``source_unreadable`` with Spark's reason. (The source's types were checked against the
    table's before, so no cast to a table type has a constant to fail on here.)"""
    failed = query_failure(exc, query_text)
    if failed is not None:
        return failed
    return LoadError(
        f"Spark failed planning the load of {what}: {error_summary(exc)}",
        code="source_unreadable",
        detail={"condition": error_condition(exc)},
    )


def _read(spark: SparkSession, source: Source) -> DataFrame:
    if isinstance(source, TableSource):
        return _analysed(spark.table(source.table))
    if isinstance(source, SqlSource):
        return _analysed(spark.sql(as_subquery(source.sql)))
    options = {**_READER_DEFAULTS.get(source.format, {}), **source.options}
    reader = spark.read.format(source.format).options(**options)
    return _analysed(reader.load(source.path))


def as_subquery(sql: str) -> str:
    """``sql`` as the subquery of a ``SELECT *``: Spark runs a command the moment it parses
    it, and one that starts like a query (``WITH q AS (...) INSERT ...``, ``FROM t INSERT
    ...``) is no subquery, so it fails to parse and nothing runs. Trailing semicolons go; the
    closing parenthesis is on a line of its own, after any trailing comment."""
    return f"SELECT * FROM (\n{_TRAILING.sub('', sql)}\n) AS difflow_source"


def _analysed(df: DataFrame) -> DataFrame:
    """``df``, once Spark has analysed it: classic DataFrames are analysed when built; Spark
    Connect analyses lazily and may even derive a schema on the client, so ask the server."""
    if not is_classic(df):
        df.semanticHash()
    return df


def _bounded_partitions(df: DataFrame) -> DataFrame:
    """``df``, planned so that a ``range()`` in it makes no partition much over
    ``_PARTITION_BYTES`` by Spark's own size estimate.

    The driver holds a whole partition while Python reads it. Files are split to that size
    (``spark.sql.files.maxPartitionBytes``), but a ``range()`` has as many partitions as
    cores however many rows it makes (audit 112: 20M rows in 2 ran the driver out of heap).
    A ``range()`` that leaves its partitions to Spark is planned with more of them, at no
    cost; one that names its partitions is shuffled into more (about 3x slower to read, but
    read). Spark Connect plans are left as they are (no plan statistics on the client)."""
    if not is_classic(df):
        return df
    execution = df._jdf.queryExecution()
    plan = execution.optimizedPlan()
    row_bytes = 8 + int(plan.schema().defaultSize())  # Spark's own estimate of a row
    leaves = plan.collectLeaves()
    ranges = [
        leaf
        for leaf in (leaves.apply(i) for i in range(leaves.size()))
        if leaf.getClass().getSimpleName() == "Range"
    ]
    if not ranges:
        return df
    slices = [leaf.numSlices().get() if leaf.numSlices().isDefined() else None for leaf in ranges]
    rows = max(int(leaf.numElements()) for leaf in ranges)
    wanted = min(math.ceil(rows * row_bytes / _PARTITION_BYTES), _MAX_PARTITIONS)
    if any(n is not None and n < wanted for n in slices):
        return df.repartition(wanted)
    spark = df.sparkSession
    with _PLANNING:
        previous = spark.conf.get(_LEAF_PARALLELISM, None)
        if wanted <= int(previous or spark.sparkContext.defaultParallelism):
            return df
        # The physical plan, made now, keeps the slice count (read from the session's
        # conf when the plan is made) for the load's own run.
        spark.conf.set(_LEAF_PARALLELISM, str(wanted))
        try:
            execution.executedPlan()
        finally:
            if previous is None:
                spark.conf.unset(_LEAF_PARALLELISM)
            else:
                spark.conf.set(_LEAF_PARALLELISM, previous)
    return df


def _column(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _check_columns(load: LoadSpec, schema: TableSchema, available: StructType, what: str) -> None:
    fields = {field.name: field for field in available.fields}
    listing = ", ".join(f"{f.name} ({f.dataType.simpleString()})" for f in available.fields)
    text_source = isinstance(load.source, PathSource) and load.source.format == "csv"
    json_source = isinstance(load.source, PathSource) and load.source.format == "json"
    for (name, kind), (_, source_name) in zip(schema, load.columns, strict=True):
        field = fields.get(source_name)
        if field is None:
            hint = [n for n in fields if n.lower() == source_name.lower()]
            raise LoadError(
                f"source column {source_name!r} (for table column {name!r}) is not in {what}"
                + (f"; did you mean {hint[0]!r}?" if hint else "")
                + f'; available columns: {listing}. Map it with "columns": '
                f'{{"{name}": "<source column>"}}',
                code="column_missing",
                detail={"column": name, "source_column": source_name, "available": list(fields)},
            )
        if not can_become(field.dataType, kind, text_source=text_source):
            source_type = field.dataType.simpleString()
            # Spark infers a JSON field that is null on every line as a string
            nulls = json_source and source_type == "string"
            raise LoadError(
                f"source column {source_name!r} has type {source_type}, which cannot load into "
                f"table column {name!r} of type {kind}; "
                + (
                    "if it is null on every line (Spark reads such a field as a string), it "
                    "cannot load at all: a table holds no nulls; else "
                    if nulls
                    else ""
                )
                + f"convert it in a sql source, e.g. "
                f"SELECT CAST({source_name} AS ...) or change the table type",
                code="column_type",
                detail={
                    "column": name,
                    "source_column": source_name,
                    "source_type": source_type,
                    "table_type": kind,
                },
            )


def _translated(
    plan: Callable[[], _T], source: Source, what: str, *, where: str | None = None
) -> _T:
    try:
        return plan()
    except ServiceError:
        raise
    except Exception as exc:
        if not is_spark_error(exc):
            raise
        raise _load_error(exc, source, what, where) from exc


def _load_error(exc: Exception, source: Source, what: str, where: str | None) -> ServiceError:
    condition = error_condition(exc) or ""
    summary = error_summary(exc)
    if where is not None:
        if condition.startswith("UNRESOLVED_COLUMN"):
            return LoadError(
                f"where {where!r} names a column that is not in {what}: {summary}",
                code="column_missing",
                detail={"where": where},
            )
        return Invalid(
            f"where {where!r} is not a valid predicate: {summary}",
            detail={"path": "where"},
            code="invalid_where",
        )
    if condition in ("PATH_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND") or condition.startswith(
        ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND")
    ):
        return LoadError(
            f"{what} does not exist ({summary}); check the name, and for paths that the Spark "
            "driver and executors can see it",
            code="source_not_found",
            detail={"source": what},
        )
    if isinstance(source, PathSource):
        return LoadError(
            f"{what} cannot be read: {summary}", code="source_unreadable", detail={"source": what}
        )
    field = "source.sql" if isinstance(source, SqlSource) else "source.table"
    return Invalid(f"{what} is not valid: {summary}", detail={"path": field}, code="invalid_source")


def _describe_source(source: Source) -> str:
    if isinstance(source, PathSource):
        return f"{source.format} source {source.path!r}"
    if isinstance(source, TableSource):
        return f"table {source.table!r}"
    return "the sql source"
