"""Spark loads: jobs that read a source through Spark and apply it to a table as one write.

A :class:`LoadJob` moves through :class:`LoadState`: ``queued -> running -> done | failed |
cancelled``, or ``queued -> failed | cancelled`` (its table dropped, or cancelled); a final
state never changes. :class:`LoadManager` makes every move under one lock.

Invariants:
- All or nothing, at one time. A job first reads the whole source into compact int64 storage
  columns (ints, canonical float bits, bools as 0/1, strings as ids of the runtime's interner;
  no Python row objects), then applies it as ONE write, so its rows become visible at one
  time: the next server tick, or the body's ``time`` on a client-timed table. A job that fails
  or is cancelled before that write leaves the table exactly as it was. Once the write is
  handed to the engine the job is ``committing`` and can no longer be cancelled.
- The write is built, accepted (``Runtime.accept_write``, the one place writes are accepted)
  and stepped in one engine-thread command, after every earlier write was stepped, and only if
  the table is still the one the rows were read for (not dropped, nor made again). Its
  completion body carries no per-row ``outputs`` (``report_outputs=False``); subscribers get
  every change.
- ``replace`` writes only the difference between the table's contents at the load's time and
  the source, computed in that same command, so no other write slips in between. Retractions
  come before insertions, so a table with a primary key can swap the row stored under a key.
- Sizes: a load is not bound by ``--max-batch`` (that limits request bodies); it holds the
  source as 8 bytes per value until the write is handed over.
- Loads into one table run one at a time, in creation order; loads into different tables run
  side by side on ``Settings.load_workers`` threads.
- A job's ``error`` is the wire form ``{code, message, detail}`` of the ``ServiceError`` that
  ended it: Spark's (``LoadError``), the source's, or the write's (e.g. ``key_present``,
  ``time_before_frontier``).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import numpy as np

from engine import ColumnType, Schema, UpdateBatch, consolidate, leq
from engine.operators import ArrangedAhead
from engine.schema import encode
from service.codec import decode_rows, time_from_wire, time_to_wire
from service.errors import Conflict, Invalid, LoadError, NotFound, ServiceError, Unavailable
from service.ingest import WEIGHT, ParsedWrite, TableShape
from service.key_index import KeyIndex
from service.runtime import Runtime
from service.spark import (
    LoadSpec,
    SparkSettings,
    build_source,
    get_spark,
    parse_load_spec,
    stream_chunks,
)
from service.spark import stop as stop_spark
from service.tables import TableState
from service.writes import WriteCommand

__all__ = ["MODES", "LoadJob", "LoadManager", "LoadRequest", "LoadState", "parse_load_request"]

log = logging.getLogger("difflow.loads")

MODES = ("append", "replace")
_BODY_KEYS = ("source", "columns", "where", "mode", "time")
_JOBS_KEPT = 10_000  # finished jobs remembered for GET /v1/loads/{id}
_JOIN_S = 20.0  # how long shutdown waits for the workers
# a load's write, built on the engine thread, and the table's primary-key index after it
# where the load built that (``stage_write``'s ``keys_after``)
Written = tuple[ParsedWrite, KeyIndex | None]


class LoadState(Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self in (LoadState.DONE, LoadState.FAILED, LoadState.CANCELLED)


_MOVES = {
    LoadState.QUEUED: {LoadState.RUNNING, LoadState.FAILED, LoadState.CANCELLED},
    LoadState.RUNNING: {LoadState.DONE, LoadState.FAILED, LoadState.CANCELLED},
}


@dataclass(frozen=True)
class LoadRequest:
    """A checked load body: the Spark spec, the mode and (client-timed tables) the time."""

    spec: LoadSpec
    mode: str
    time: tuple[int, ...] | None


def parse_load_request(body: Mapping[str, Any], shape: TableShape, clock: int) -> LoadRequest:
    """Check a load body against the table, the server's clock at ``clock``; ``Invalid``
    (422) names the offending field. On a server-timed table the server stamps the load's
    time, as it does a write's; a ``time`` given there (API.md's example has ``"time": 0``)
    is a lower bound it meets when the clock has reached it, and a later one is refused."""
    extra = sorted(set(body) - set(_BODY_KEYS))
    if extra:
        raise Invalid(
            f"{extra[0]}: unknown field; a load has {list(_BODY_KEYS)}",
            {"path": extra[0]},
            "invalid",
        )
    schema = [(c.name, c.type.value) for c in shape.schema.columns]
    spec = parse_load_spec(body, schema)
    mode = body.get("mode", "append")
    if mode not in MODES:
        raise Invalid(f"mode must be one of {list(MODES)}", {"path": "mode"}, "invalid")
    if shape.timing == "server":
        if "time" in body:  # null too: an optional field is given or left out
            (at,) = time_from_wire(body["time"], shape.dims, "time")
            if at > clock:
                raise Invalid(
                    f"time: table {shape.name!r} is server-timed: the server stamps the "
                    f"load's time, and its clock is at {clock}, before {at} (leave out time)",
                    {"path": "time"},
                    "bad_time",
                )
        return LoadRequest(spec, mode, None)
    if "time" not in body:
        raise Invalid(
            f"time: table {shape.name!r} is client-timed: a load needs the 'time' of its rows",
            {"path": "time"},
            "bad_time",
        )
    return LoadRequest(spec, mode, time_from_wire(body["time"], shape.dims, "time"))


@dataclass(eq=False)
class LoadJob:
    id: str
    table: str
    shape: TableShape
    request: LoadRequest
    state: LoadState = LoadState.QUEUED
    rows: int = 0  # source rows read so far
    updates: int | None = None  # updates written (replace: the size of the difference)
    write: str | None = None  # the token of the load's write
    error: dict[str, Any] | None = None
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    committing: bool = False  # the write was handed to the engine: too late to cancel
    cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def rows_per_s(self) -> float | None:
        if self.started is None:
            return None
        elapsed = (self.finished if self.finished is not None else time.time()) - self.started
        return round(self.rows / elapsed, 3) if elapsed > 0 else 0.0

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "table": self.table,
            "state": self.state.value,
            "mode": self.request.mode,
            "rows": self.rows,
            "rows_per_s": self.rows_per_s,
            "created": _iso(self.created),
            "started": _iso(self.started),
            "finished": _iso(self.finished),
        }
        if self.error is not None:  # failed or cancelled
            out["error"] = self.error
        if self.request.time is not None:
            out["time"] = time_to_wire(self.request.time)
        if self.updates is not None:
            out["updates"] = self.updates
        if self.write is not None:
            out["write"] = self.write
        return out


class LoadManager:
    """Load jobs by id and the worker threads that run them (see the module docstring)."""

    def __init__(self, runtime: Runtime, spark_settings: SparkSettings | None = None) -> None:
        settings = runtime.settings
        self._runtime = runtime
        self._spark_settings = spark_settings or dataclasses.replace(
            SparkSettings.from_env(), data_dir=settings.data_dir
        )
        self._chunk_rows = max(1, settings.load_chunk_rows)
        self._lock = threading.Lock()
        self._intern_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._jobs: OrderedDict[str, LoadJob] = OrderedDict()
        self._busy: set[str] = set()  # tables with a job in a worker or in ``_ready``
        self._waiting: dict[str, deque[LoadJob]] = {}
        self._ready: queue.SimpleQueue[LoadJob | None] = queue.SimpleQueue()
        self._closing = False
        self._workers = [
            threading.Thread(target=self._work, name=f"difflow-load-{i}", daemon=True)
            for i in range(max(1, settings.load_workers))
        ]
        for worker in self._workers:
            worker.start()

    # -- requests (create: engine thread; the rest: any thread) ------------------------------------
    def create(self, table: str, body: Mapping[str, Any]) -> LoadJob:
        """Check ``body`` and queue a job. Runs on the engine thread (``runtime.call``), where
        the catalog and the table's frontier can be read."""
        catalog = self._runtime.catalog
        state = catalog.table(table)
        request = parse_load_request(body, state.shape, catalog.clock)
        if request.time is not None:
            _check_time(state, request.time)
        with self._lock:
            if self._closing:
                raise Unavailable("the server is shutting down", code="shutting_down")
            job = LoadJob(f"l-{next(self._ids)}", table, state.shape, request)
            self._jobs[job.id] = job
            self._forget_old()
            if table in self._busy:
                self._waiting.setdefault(table, deque()).append(job)
            else:
                self._busy.add(table)
                self._ready.put(job)
        return job

    def get(self, load_id: str) -> dict[str, Any]:
        with self._lock:
            return self._job(load_id).describe()

    def describe_all(self) -> list[dict[str, Any]]:
        with self._lock:
            return [job.describe() for job in self._jobs.values()]

    def cancel(self, load_id: str) -> dict[str, Any]:
        """Cancel a queued or running job (not one whose write is in the engine already);
        a finished job stays as it is. Returns the job's description."""
        with self._lock:
            job = self._job(load_id)
            self._cancel(job, f"the load was cancelled by DELETE /v1/loads/{job.id}")
            return job.describe()

    def table_dropped(self, table: str, shape: TableShape) -> None:
        """Fail the unfinished jobs into a dropped table (``shape``: the table dropped, not one
        made since under its name) at once, not_found, and stop their Spark jobs: a running
        one read on until its end before (audit 105). One whose write is in the engine
        already is left to it (the write finds the table gone)."""
        with self._lock:
            for job in self._jobs.values():
                if job.table != table or job.shape is not shape:
                    continue
                if job.state.final or job.committing:
                    continue
                job.cancel.set()
                if job.state is LoadState.RUNNING:
                    when = f"while the load ran (after {job.rows} rows)"
                else:
                    when = "before the load began"
                self._move(
                    job,
                    LoadState.FAILED,
                    NotFound(
                        f"table {table!r} was dropped {when}; nothing was written (a table "
                        "made since under that name is another table)",
                        {"table": table},
                    ),
                )

    def shutdown(self) -> None:
        """Cancel every unfinished job, wait for the workers, stop Spark."""
        with self._lock:
            self._closing = True
            for job in self._jobs.values():
                self._cancel(job, "the server shut down before the load finished")
        for _ in self._workers:
            self._ready.put(None)
        deadline = time.monotonic() + _JOIN_S
        for worker in self._workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        try:
            stop_spark()
        except Exception:
            log.warning("could not stop Spark cleanly", exc_info=True)

    # -- state moves (lock held) -------------------------------------------------------------------
    def _job(self, load_id: str) -> LoadJob:
        job = self._jobs.get(load_id)
        if job is None:
            raise NotFound(
                f"no load with id {load_id!r} (finished loads are kept for a while)",
                {"id": load_id},
            )
        return job

    def _move(self, job: LoadJob, to: LoadState, error: ServiceError | None = None) -> None:
        if to not in _MOVES.get(job.state, set()):
            raise AssertionError(f"load {job.id}: no move from {job.state.value} to {to.value}")
        job.state = to
        now = time.time()
        if to is LoadState.RUNNING:
            job.started = now
        if to.final:
            job.finished = now
        if error is not None:
            job.error = error.to_wire()["error"]

    def _cancel(self, job: LoadJob, why: str) -> None:
        if job.state.final or job.committing:
            return
        job.cancel.set()
        self._move(
            job,
            LoadState.CANCELLED,
            LoadError(
                f"{why} after {job.rows} rows; nothing was written",
                code="cancelled",
                detail={"rows": job.rows},
            ),
        )

    def _forget_old(self) -> None:
        excess = len(self._jobs) - _JOBS_KEPT
        if excess <= 0:
            return
        for load_id in [i for i, j in self._jobs.items() if j.state.final][:excess]:
            del self._jobs[load_id]

    # -- workers -----------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._ready.get()
            if job is None:
                return
            try:
                self._run(job)
            finally:
                self._release(job.table)

    def _release(self, table: str) -> None:
        with self._lock:
            waiting = self._waiting.get(table)
            while waiting:
                job = waiting.popleft()
                if job.state is LoadState.QUEUED:
                    self._ready.put(job)
                    return
            self._waiting.pop(table, None)
            self._busy.discard(table)

    def _run(self, job: LoadJob) -> None:
        with self._lock:
            if job.state is not LoadState.QUEUED:
                return  # cancelled while queued
            self._move(job, LoadState.RUNNING)
        try:
            self._commit(job, self._read(job))  # no name keeps the rows alive past the write
        except ServiceError as exc:
            self._end(job, exc)
        except Exception as exc:
            log.exception("load %s failed", job.id)
            self._end(job, ServiceError(f"the load failed unexpectedly: {exc!r}"))
        else:
            self._end(job, None)

    def _end(self, job: LoadJob, error: ServiceError | None) -> None:
        with self._lock:
            if job.state is not LoadState.RUNNING:
                return  # already cancelled
            if error is None:
                self._move(job, LoadState.DONE)
            elif error.code == "cancelled" and job.cancel.is_set():
                self._move(job, LoadState.CANCELLED, error)
            else:
                self._move(job, LoadState.FAILED, error)

    def _read(self, job: LoadJob) -> np.ndarray:
        """The whole source as ``(k, n)`` int64 storage; ``rows`` grows as chunks arrive."""
        self._check_table(job)
        spark = get_spark(self._spark_settings)  # tens of seconds when Spark starts
        if job.cancel.is_set():
            raise _cancelled(job)
        self._check_table(job)
        schema = [(c.name, c.type.value) for c in job.shape.schema.columns]
        frame = build_source(spark, job.request.spec, schema)
        columns = StorageColumns(job.shape.schema)

        def progress(rows: int) -> None:
            with self._lock:  # a final state never changes: a cancelled job stops counting
                if job.state is LoadState.RUNNING:
                    job.rows = rows

        for chunk in stream_chunks(
            frame,
            chunk_rows=self._chunk_rows,
            cancel=job.cancel,
            progress=progress,
            intern=self._intern,
        ):
            columns.add(chunk)
        return columns.finish()

    def _check_table(self, job: LoadJob) -> None:
        """Fail a job whose table was dropped (or made again) before its Spark job began,
        rather than read the whole source first. Any thread: one lookup in the catalog's
        dict; ``_apply`` checks again on the engine thread, for a drop while it reads."""
        table = self._runtime.catalog.tables.get(job.table)
        if table is None or table.shape is not job.shape:
            raise NotFound(
                f"table {job.table!r} was dropped before the load began reading (a table made "
                "since under that name is another table); nothing was read or written",
                {"table": job.table},
            )

    def _intern(self, strings: list[str]) -> np.ndarray:
        with self._intern_lock:
            return self._runtime.interner.intern_many(strings)

    def _enter_commit(self, job: LoadJob) -> None:
        with self._lock:
            if job.state is not LoadState.RUNNING or job.cancel.is_set():
                raise _cancelled(job)
            job.committing = True

    # -- the write ---------------------------------------------------------------------------------
    def _commit(self, job: LoadJob, data: np.ndarray) -> None:
        """Checks off the engine thread, then the one write (see ``_apply``)."""
        shape, at = job.shape, job.request.time
        interner = self._runtime.interner
        if job.request.mode == "append":
            if shape.primary_key:
                _check_keys(data, None, shape, interner)
            parsed = _parsed(data, np.ones(data.shape[1], dtype=np.int64), at)
            del data
            ahead = self._arranged_ahead(job, parsed)
            indexed = self._indexed_ahead(job, parsed)

            def append(table: TableState) -> Written:
                # the rows alone are the table's keys after the write if it has none now
                empty = table.pk_index is not None and not len(table.pk_index)
                return parsed, indexed if empty else None

            self._enter_commit(job)
            cmd = _outcome(
                self._runtime.submit(lambda: self._apply(job, append, ahead), table=job.table)
            )
        else:
            flat = np.zeros((1, data.shape[1]), dtype=np.int64)
            new = consolidate(UpdateBatch(data, flat, np.ones(data.shape[1], dtype=np.int64)))
            del data, flat
            keys = None
            if shape.primary_key:
                _check_keys(new.data, new.diffs, shape, interner)
                # the table's keys after the write: the source's rows, each key once (a
                # write of their difference checked key by key took 20 s for 2M rows)
                keys = KeyIndex.of_distinct(shape.primary_key, new.data)

            def difference(table: TableState) -> Written:
                now = at if at is not None else (self._runtime.catalog.clock,)
                diff = table_difference(table, np.asarray(now, dtype=np.int64).reshape(-1, 1), new)
                return _parsed(diff.data, diff.diffs, at), keys

            self._enter_commit(job)
            cmd = _outcome(
                self._runtime.submit(lambda: self._apply(job, difference), table=job.table)
            )
        _outcome(cmd.accepted)

    def _arranged_ahead(self, job: LoadJob, parsed: ParsedWrite) -> ArrangedAhead | None:
        """An append's rows arranged for the table's arrangement here, off the engine thread
        (most of a big write's step: the engine is held only to insert them)."""
        table = self._runtime.catalog.tables.get(job.table)
        if table is None or table.shape is not job.shape:
            return None  # dropped: ``_apply`` says so
        if not parsed.size:
            return None
        return table.handle.arrange_ahead(table.arrangement.op, parsed.data, parsed.weights)

    def _indexed_ahead(self, job: LoadJob, parsed: ParsedWrite) -> KeyIndex | None:
        """An append's rows (each key once: ``_check_keys``) indexed by primary key here,
        when the table has no rows: filling the index of a big load held the engine for
        seconds (the write swaps it in if the table still has none)."""
        table = self._runtime.catalog.tables.get(job.table)
        if table is None or table.shape is not job.shape or table.pk_index is None:
            return None
        if not parsed.size or len(table.pk_index):
            return None
        return KeyIndex.of_distinct(job.shape.primary_key, parsed.data)

    def _apply(
        self,
        job: LoadJob,
        write: Callable[[TableState], Written],
        ahead: ArrangedAhead | None = None,
    ) -> WriteCommand:
        """Engine thread, after every earlier write was stepped: build the write against the
        table as it is now (and, on a table with a primary key, perhaps the table's index
        after it), accept it and step, so nothing can come in between (with the rows
        arranged ``ahead``, if any)."""
        runtime = self._runtime
        table = runtime.catalog.table(job.table)
        if table.shape is not job.shape:  # a table made since under the name is another
            raise NotFound(
                f"table {job.table!r} was dropped while the load ran (a table made since "
                "under that name is another table); nothing was written",
                {"table": job.table},
            )
        parsed, keys_after = write(table)
        cmd = WriteCommand(
            job.table, parsed, report_outputs=False, ahead=ahead, keys_after=keys_after
        )
        if runtime.accept_write(cmd):
            assert cmd.staged is not None
            # shown while it is stepped: a minute and more for millions of rows into a
            # chain of views, which looked like reading the source until done (audit 65)
            job.write, job.updates = cmd.token, len(cmd.staged.batch)
            runtime.step(job.table)
        return cmd


class StorageColumns:
    """Chunks of typed columns collected as int64 storage, one list of arrays per column."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.parts: list[list[np.ndarray]] = [[] for _ in schema.columns]
        self.rows = 0

    def add(self, chunk: Mapping[str, Any]) -> None:
        for parts, column in zip(self.parts, self.schema.columns, strict=True):
            values = chunk[column.name]
            if column.type is ColumnType.FLOAT:
                parts.append(encode(values, ColumnType.FLOAT))
            else:  # ints and string ids are int64 already; bools become 0/1
                parts.append(np.asarray(values, dtype=np.int64))
        self.rows += len(chunk[self.schema.columns[0].name]) if self.schema.columns else 0

    def finish(self) -> np.ndarray:
        """One ``(k, n)`` array; each column's chunks are freed once copied."""
        data = np.empty((len(self.parts), self.rows), dtype=np.int64)
        for j, parts in enumerate(self.parts):
            if parts:
                np.concatenate(parts, out=data[j])
            parts.clear()
        return data


def table_difference(table: TableState, at: np.ndarray, new: UpdateBatch) -> UpdateBatch:
    """``new`` minus the table's contents at time ``at`` (``(d, 1)``), consolidated, at one
    flat time, retractions first. Engine thread: it reads the table's arrangement."""
    op = table.arrangement.op
    content = op.spine.content().to_updates(op.layout)
    old = content.take(leq(content.times, at))
    both = UpdateBatch(
        np.concatenate([old.data, new.data], axis=1),
        np.zeros((1, len(old) + len(new)), dtype=np.int64),
        np.concatenate([-old.diffs, new.diffs]),
    )
    diff = consolidate(both)
    return diff.take(np.argsort(diff.diffs > 0, kind="stable"))


def _parsed(data: np.ndarray, weights: np.ndarray, at: tuple[int, ...] | None) -> ParsedWrite:
    n = data.shape[1]
    times = None
    if at is not None:
        times = np.repeat(np.asarray(at, dtype=np.int64).reshape(-1, 1), n, axis=1)
    ops = np.broadcast_to(np.int64(WEIGHT), (n,))  # read-only, no memory per row
    # errors name a row by its place in the source as Spark read it (an append's rows are
    # in that order; a replace writes a difference, which holds each key once)
    return ParsedWrite(ops, data, weights, times, None, "time", "source row {}", "source row {}")


def _check_time(table: TableState, at: tuple[int, ...]) -> None:
    if not table.frontier.beyond(np.asarray(at, dtype=np.int64).reshape(-1, 1))[0]:
        raise Conflict(
            f"time {time_to_wire(at)} is not at or beyond the frontier "
            f"{table.frontier.to_list()} of table {table.name!r}",
            {"path": "time", "frontier": table.frontier.to_list()},
            "time_before_frontier",
        )


def _check_keys(
    data: np.ndarray, counts: np.ndarray | None, shape: TableShape, interner: Any
) -> None:
    """A source for a table with a primary key holds each key at most once."""
    if data.shape[1] == 0:
        return
    keys = data[list(shape.primary_key)]
    order = np.lexsort(keys[::-1])
    ordered = keys[:, order]
    repeated = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).all(axis=0))
    if counts is not None and (counts > 1).any():
        at = int(np.flatnonzero(counts > 1)[0])
    elif repeated.size:
        at = int(order[repeated[0] + 1])
    else:
        return
    key_schema = shape.schema.select(shape.primary_key)
    key = decode_rows(keys[:, at : at + 1], key_schema, interner)[0]
    text = ", ".join(f"{name}={value!r}" for name, value in key.items())
    raise LoadError(
        f"the source holds the key ({text}) of table {shape.name!r} more than once; a table "
        "with a primary key holds each key once: deduplicate the source (e.g. a sql source "
        "with GROUP BY or a where)",
        code="duplicate_key",
        detail={"key": key},
    )


def _outcome(future: Future) -> Any:
    """The result of a runtime future; a rejected write's error (same class and code) says
    that nothing was applied."""
    try:
        return future.result()
    except ServiceError as exc:
        if isinstance(exc, LoadError):
            raise
        hint = (
            "; mode replace makes the table equal to the source instead"
            if exc.code == "key_present"
            else ""
        )
        raise type(exc)(
            f"the load was not applied (the table is unchanged): {exc.message}{hint}",
            exc.detail,
            exc.code,
        ) from exc


def _cancelled(job: LoadJob) -> LoadError:
    return LoadError(
        f"the load was cancelled after {job.rows} rows; nothing was written",
        code="cancelled",
        detail={"rows": job.rows},
    )


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")
