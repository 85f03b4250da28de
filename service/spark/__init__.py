"""Spark ingestion: plan a load from a spec, stream it as bounded columnar chunks.

Pure data access: this package knows load specs and table schemas (names and the types int,
float, bool, string) but nothing of the catalog or the engine. Typical use::

    spark = get_spark()                                  # lazily started, process-wide
    frame = build_source(spark, spec, [("src", "int"), ("dst", "int")])   # checks, no rows read
    for chunk in stream_chunks(frame, cancel=event, progress=report, intern=interner):
        ...                                              # {"src": int64 array, "dst": ...}

Errors are ``service.errors.LoadError`` (``code``: ``spark_unavailable``, ``source_not_found``,
``source_unreadable``, ``column_missing``, ``column_type``, ``null_value``, ``not_finite``,
``cancelled``) or ``Invalid`` for a spec that does not fit.
"""

from service.spark.arrow_stream import (
    DEFAULT_CHUNK_ROWS,
    Cancel,
    Chunk,
    Interner,
    Progress,
    intern_strings,
    stream_chunks,
)
from service.spark.load_spec import (
    FORMATS,
    TABLE_TYPES,
    LoadSpec,
    PathSource,
    SqlSource,
    TableSchema,
    TableSource,
    parse_load_spec,
)
from service.spark.session import SparkSettings, get_spark, parse_spark_conf, stop
from service.spark.source import SourceFrame, build_source

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "FORMATS",
    "TABLE_TYPES",
    "Cancel",
    "Chunk",
    "Interner",
    "LoadSpec",
    "PathSource",
    "Progress",
    "SourceFrame",
    "SparkSettings",
    "SqlSource",
    "TableSchema",
    "TableSource",
    "build_source",
    "get_spark",
    "intern_strings",
    "parse_load_spec",
    "parse_spark_conf",
    "stop",
    "stream_chunks",
]
