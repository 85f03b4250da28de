"""Streaming a planned load to the caller as columnar chunks keyed by table column.

Invariants:
- Memory is bounded by the chunk size, not by the data set: chunks are built one Arrow batch at
  a time (``arrow_transport``), each holds at most ``chunk_rows`` rows, and nothing is kept
  after a chunk is handed over.
- A chunk maps every table column to ``int64`` / ``float64`` / ``bool`` numpy arrays (owned
  and writable) for int / float / bool columns, and string columns to a pyarrow string array,
  or to ``int64`` ids when an ``intern`` callback is given (each distinct string of a chunk is
  passed to it once).
- difflow has no nulls: a null in any column stops the stream with ``LoadError("null_value")``;
  nor non-finite floats (JSON has none): a NaN or infinity, with ``LoadError("not_finite")``.
- Cancellation is cooperative: ``cancel`` is checked before the first Spark job and between
  chunks; once set, the stream stops with ``LoadError("cancelled")`` and releases Spark. When
  ``cancel`` is a ``threading.Event``, a watchdog thread also cancels the stream's Spark jobs
  (by job tag) as soon as it is set, and again every 0.1 s until the stream has stopped (a
  job submitted after a cancel is not touched by it), so a long job does not delay it.
- Spark failures while reading become ``LoadError`` (``column_type`` for values that do not
  parse or fit the table's types, ``spark_unavailable`` for a lost driver,
  ``source_unreadable`` otherwise, a value the load's own ``where`` or ``sql`` cannot
  convert included); the caller sees no pyspark exception.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from service.errors import LoadError, ServiceError
from service.spark.arrow_transport import arrow_batches, collect_tagged, interrupt
from service.spark.session import DEFAULT_BATCH_ROWS
from service.spark.source import SourceFrame, query_failure
from service.spark.spark_errors import (
    error_condition,
    error_summary,
    is_spark_error,
    without_spark_advice,
)

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "Cancel",
    "Chunk",
    "Interner",
    "Progress",
    "intern_strings",
    "stream_chunks",
]

DEFAULT_CHUNK_ROWS = DEFAULT_BATCH_ROWS

#: One chunk: table column -> values (numpy for numbers and bools; strings see module doc).
Chunk = dict[str, Any]
#: Takes the distinct strings of a chunk, returns their ids in the same order.
Interner = Callable[[list[str]], Sequence[int] | np.ndarray]
#: Called with the number of rows streamed so far, after each chunk is built.
Progress = Callable[[int], None]
#: A ``threading.Event`` or a callable answering "should the load stop?".
Cancel = threading.Event | Callable[[], bool]

_log = logging.getLogger(__name__)
_WATCH_INTERVAL_S = 0.1
_VALUE_CONDITIONS = (
    "CAST_INVALID_INPUT",
    "CAST_OVERFLOW",
    "NUMERIC_VALUE_OUT_OF_RANGE",
    "ARITHMETIC_OVERFLOW",
)


def stream_chunks(
    frame: SourceFrame,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    cancel: Cancel | None = None,
    progress: Progress | None = None,
    intern: Interner | None = None,
) -> Iterator[Chunk]:
    """Yield the rows of ``frame`` as chunks of at most ``chunk_rows`` rows."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, not {chunk_rows}")
    cancelled = _cancel_check(cancel)
    if cancelled():
        raise _cancelled(0)
    kinds = [kind for _, kind in frame.schema]
    job_tag = f"difflow-load-{uuid.uuid4().hex}"
    batches = arrow_batches(frame.df, kinds, max_records=chunk_rows, job_tag=job_tag)
    watchdog = _Watchdog(cancel, lambda: interrupt(frame.df, job_tag))
    rows = 0
    try:
        while True:
            if cancelled():
                raise _cancelled(rows)
            batch = _next_batch(batches, cancelled, rows, frame, job_tag)
            if batch is None:
                return
            if batch.num_rows == 0:
                continue
            chunk = _to_chunk(batch, frame, rows, intern)
            rows += batch.num_rows
            if progress is not None:
                progress(rows)
            yield chunk
    finally:
        watchdog.stop()
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def intern_strings(values: pa.Array | Sequence[str], intern: Interner) -> np.ndarray:
    """Ids for ``values`` from ``intern``, called once with the distinct strings."""
    array = values if isinstance(values, pa.Array) else pa.array(values, type=pa.string())
    if array.null_count:
        raise ValueError("cannot intern nulls")
    encoded = array.dictionary_encode()
    uniques = encoded.dictionary.to_pylist()
    ids = np.asarray(intern(uniques), dtype=np.int64)
    if ids.shape != (len(uniques),):
        raise ValueError(f"intern returned {ids.shape} ids for {len(uniques)} strings")
    return ids[encoded.indices.to_numpy(zero_copy_only=False)]


def _next_batch(
    batches: Iterator[pa.RecordBatch],
    cancelled: Callable[[], bool],
    rows: int,
    frame: SourceFrame,
    job_tag: str,
) -> pa.RecordBatch | None:
    try:
        return next(batches)
    except StopIteration:
        return None
    except ServiceError:
        raise
    except (OSError, EOFError) as exc:  # the local socket to the driver JVM broke
        raise LoadError(
            f"lost the connection to Spark while streaming ({exc!r}); the Spark driver may "
            "have stopped or run out of memory: see its log, then retry the load",
            code="spark_unavailable",
        ) from exc
    except Exception as exc:
        if not is_spark_error(exc):
            raise
        if cancelled():  # the watchdog cancelled the job this call was waiting for
            raise _cancelled(rows) from exc
        failed = query_failure(exc, frame.query_text)
        if failed is not None:
            raise failed from exc
        condition = error_condition(exc) or ""
        summary = error_summary(exc)
        if not condition.startswith(_VALUE_CONDITIONS):
            raise LoadError(
                f"Spark failed while reading the source: {summary}",
                code="source_unreadable",
                detail={"condition": condition or None},
            ) from exc
        column = _unconvertible_column(frame, job_tag, cancelled)
        if cancelled():
            raise _cancelled(rows) from exc
        raise LoadError(
            "Spark failed while reading the source"
            + (f": table column {frame.describe(column)}" if column else "")
            + f": {without_spark_advice(summary)}",
            code="column_type",
            detail={"condition": condition, "column": column}
            if column
            else {"condition": condition},
        ) from exc


def _unconvertible_column(
    frame: SourceFrame, job_tag: str, cancelled: Callable[[], bool]
) -> str | None:
    """The first table column whose source holds a value its cast refused, found by one
    more Spark job (the casts' failure names the value only); None when that job finds none
    or fails."""
    query = frame.unconvertible()
    if query is None or cancelled():
        return None
    try:
        found = collect_tagged(query, job_tag)
    except Exception as exc:  # a diagnosis only: the load fails with Spark's own reason
        if not is_spark_error(exc):
            raise
        return None
    return str(found[0]["column"]) if found else None


class _Watchdog:
    """Waits on a cancel ``Event`` beside the stream and interrupts its Spark jobs once set."""

    def __init__(self, cancel: Cancel | None, on_cancel: Callable[[], None]) -> None:
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        if isinstance(cancel, threading.Event):
            self._thread = threading.Thread(
                target=self._watch,
                args=(cancel, on_cancel),
                name="difflow-load-cancel",
                daemon=True,
            )
            self._thread.start()

    def _watch(self, cancel: threading.Event, on_cancel: Callable[[], None]) -> None:
        while not cancel.wait(_WATCH_INTERVAL_S):
            if self._stopped.is_set():
                return
        # Until the stream stops: a cancel reaches only the jobs running when it is made, and
        # the stream may submit one later (still planning when cancelled, or its next
        # partition's); audit 51: a job submitted just after the one cancel ran on for good,
        # holding Spark's cores and the table's loads.
        warned = False
        while not self._stopped.is_set():
            try:
                on_cancel()
            except Exception:  # the stream still stops at its next check
                if not warned:
                    _log.warning("could not interrupt the Spark jobs of a load", exc_info=True)
                    warned = True
            self._stopped.wait(_WATCH_INTERVAL_S)

    def stop(self) -> None:
        """Ends the watch within one poll interval; not joined, so a stream ends at once."""
        self._stopped.set()


def _to_chunk(
    batch: pa.RecordBatch, frame: SourceFrame, rows_before: int, intern: Interner | None
) -> Chunk:
    chunk: Chunk = {}
    for (name, kind), column in zip(frame.schema, batch.columns, strict=True):
        if column.null_count:
            raise _null_error(frame, name, column, rows_before)
        if kind == "string":
            chunk[name] = intern_strings(column, intern) if intern is not None else column
        elif kind == "bool":
            chunk[name] = column.to_numpy(zero_copy_only=False)
        else:
            values = column.to_numpy(zero_copy_only=False, writable=True)
            if kind == "float" and not bool(np.isfinite(values).all()):
                raise _not_finite_error(frame, name, values, rows_before)
            chunk[name] = values
    return chunk


def _null_error(frame: SourceFrame, name: str, column: pa.Array, rows_before: int) -> LoadError:
    source = frame.source_columns.get(name, name)
    first = rows_before + int(column.is_null().to_numpy(zero_copy_only=False).argmax())
    return LoadError(
        f"column {frame.describe(name)} has a null value (row {first} of the source, after "
        f'where); difflow tables hold no nulls: add a where such as "{source} IS NOT NULL" '
        "or fill them in a sql source (COALESCE); a CSV or JSON line Spark cannot parse "
        'reads as nulls too: "options": {"mode": "FAILFAST"} fails the load naming it',
        code="null_value",
        detail={"column": name, "source_column": source, "row": first},
    )


def _not_finite_error(
    frame: SourceFrame, name: str, values: np.ndarray, rows_before: int
) -> LoadError:
    source = frame.source_columns.get(name, name)
    first = rows_before + int(np.argmin(np.isfinite(values)))
    return LoadError(
        f"column {frame.describe(name)} has the value {values[first - rows_before]} (row "
        f"{first} of the source, after where); difflow floats are finite, as in JSON writes: "
        f'add a where such as "{source} BETWEEN -1.7976931348623157E308 AND '
        '1.7976931348623157E308"',
        code="not_finite",
        detail={"column": name, "source_column": source, "row": first},
    )


def _cancel_check(cancel: Cancel | None) -> Callable[[], bool]:
    if cancel is None:
        return lambda: False
    if isinstance(cancel, threading.Event):
        return cancel.is_set
    return cancel


def _cancelled(rows: int) -> LoadError:
    return LoadError(
        f"the load was cancelled after {rows} rows",
        code="cancelled",
        detail={"rows": rows},
    )
