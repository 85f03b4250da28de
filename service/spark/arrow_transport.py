"""Arrow record batches out of a Spark DataFrame, one bounded batch at a time.

Why not the public APIs: ``DataFrame.toArrow()`` and ``toPandas()`` collect every batch into
driver memory first (``_collect_as_arrow`` builds a list), ``toLocalIterator()`` yields one
Python ``Row`` per record, and ``mapInArrow`` needs pandas and Python workers on every
executor. So, per client:

- Classic (local or cluster master): the JVM encodes each partition as Arrow IPC record batches
  (``Dataset.toArrowBatchRdd(maxRecordsPerBatch, ...)``, the encoder behind ``toArrow``) and
  ``PythonRDD.toLocalIteratorAndServe`` streams them over pyspark's local socket one partition
  job at a time (next partition prefetched), exactly as ``toLocalIterator`` does for rows. No
  Python runs on the executors; the driver JVM buffers at most two partitions
  (``spark.sql.files.maxPartitionBytes``) and this process holds one batch.
- Spark Connect: the client's ``to_table_as_iterator`` yields the Arrow batches of the gRPC
  result stream as they arrive (the API behind Connect's ``toLocalIterator``).

Invariants: batches come in partition order, have the DataFrame's column names and the Arrow
types of ``column_types.arrow_type``, and are never longer than ``max_records``. Closing the
iterator early (cancel, error) drains at most the partition in flight and tells the JVM to stop.
These are pyspark internals (stable from 3.5 through 4.x); they are used only in this module.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from service.spark.column_types import arrow_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["arrow_batches", "collect_tagged", "interrupt", "is_classic"]


def arrow_batches(
    df: DataFrame, kinds: Sequence[str], *, max_records: int, job_tag: str | None = None
) -> Iterator[pa.RecordBatch]:
    """Stream ``df`` (columns of table types ``kinds``) as Arrow batches of ``<= max_records``.

    The Spark jobs it runs carry ``job_tag``, so that ``interrupt`` can cancel them from another
    thread while this iterator waits for a partition.
    """
    if max_records < 1:
        raise ValueError(f"max_records must be positive, not {max_records}")
    if len(kinds) != len(df.columns):
        raise ValueError(f"{len(kinds)} kinds for {len(df.columns)} columns")
    if is_classic(df):
        return _classic_batches(df, kinds, max_records, job_tag)
    return _connect_batches(df, max_records, job_tag)


def interrupt(df: DataFrame, job_tag: str) -> None:
    """Cancel the running Spark jobs of the ``arrow_batches`` stream tagged ``job_tag``."""
    if is_classic(df):
        df.sparkSession.sparkContext.cancelJobsWithTag(job_tag)
    else:
        df.sparkSession.interruptTag(job_tag)


def collect_tagged(df: DataFrame, job_tag: str) -> list[Any]:
    """``df``'s rows (a small DataFrame: a query's answer), its Spark jobs tagged ``job_tag``
    so that ``interrupt`` cancels them as it does the stream's."""
    if is_classic(df):
        context = df.sparkSession.sparkContext
        context.addJobTag(job_tag)
        try:
            return df.collect()
        finally:
            context.removeJobTag(job_tag)
    df.sparkSession.addTag(job_tag)
    try:
        return df.collect()
    finally:
        df.sparkSession.removeTag(job_tag)


def is_classic(df: DataFrame) -> bool:
    """True for a DataFrame of a classic (py4j) session, False for Spark Connect."""
    try:
        from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
    except ImportError:  # pyspark 3.5: only classic DataFrames have a JVM peer
        return hasattr(df, "_jdf")
    return isinstance(df, ClassicDataFrame)


def _classic_batches(
    df: DataFrame, kinds: Sequence[str], max_records: int, job_tag: str | None
) -> Iterator[pa.RecordBatch]:
    from py4j.protocol import Py4JError, Py4JJavaError
    from pyspark.serializers import NoOpSerializer
    from pyspark.util import _local_iterator_from_socket

    spark = df.sparkSession
    jdf: Any = df._jdf
    context = spark.sparkContext
    jvm: Any = context._jvm
    if job_tag is not None:
        # Job tags are thread-local properties. Planning the RDD runs jobs of its own under
        # adaptive execution (a shuffle's map stage, on this thread: a cancel must reach
        # them too), and the serving thread started by toLocalIteratorAndServe inherits a
        # copy, so the tag can leave this (pinned) thread right after.
        context.addJobTag(job_tag)
    try:
        try:
            timezone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
            jrdd = jdf.toArrowBatchRdd(max_records, timezone, False, False)
            large_strings = False
        except Py4JError as exc:  # pyspark 3.5: only the variant that reads the session conf
            if isinstance(exc, Py4JJavaError):  # the variant ran and failed (or was cancelled)
                raise
            jrdd = jdf.toArrowBatchRdd()
            large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")
            large_strings = (large or "").lower() == "true"
        sock_info = jvm.PythonRDD.toLocalIteratorAndServe(jrdd, True)
    finally:
        if job_tag is not None:
            context.removeJobTag(job_tag)
    schema = pa.schema(
        [
            (name, arrow_type(kind, large_strings=large_strings))
            for name, kind in zip(df.columns, kinds, strict=True)
        ]
    )
    payloads = _local_iterator_from_socket(sock_info, NoOpSerializer())
    try:
        for payload in payloads:
            batch = pa.ipc.read_record_batch(pa.py_buffer(payload), schema)
            for start in range(0, batch.num_rows, max_records):
                yield batch.slice(start, max_records)
    finally:
        # The last reference: its finaliser drains the partition in flight and stops the JVM.
        del payloads


def _connect_batches(
    df: DataFrame, max_records: int, job_tag: str | None
) -> Iterator[pa.RecordBatch]:
    spark = df.sparkSession
    plan: Any = df._plan
    client: Any = spark.client
    if job_tag is not None:
        spark.addTag(job_tag)  # read when the first next() sends the request, on this thread
    try:
        for item in client.to_table_as_iterator(plan.to_proto(client), plan.observations):
            if isinstance(item, pa.Table):
                yield from item.to_batches(max_chunksize=max_records)
    finally:
        if job_tag is not None:
            spark.removeTag(job_tag)
