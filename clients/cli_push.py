"""``difflow push``: stream a JSON-lines or CSV file into a table over HTTP or WebSocket.

Each batch of ``--batch`` updates is one write: one request over HTTP (waiting for its answer),
or one frame with ``--ws`` (pipelined, at most ``WS_WINDOW`` frames unanswered). A progress bar
on standard error counts the rows answered; the summary line on standard output gives rows,
rows/s and the p50/p99 of the answers' ``latency_ms``. A refused write stops the push with
its error, told where it is in the input and what the other writes wrote (``_refused``).
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any

import typer

from clients.cli_records import (
    Batch,
    InputError,
    csv_batches,
    jsonl_batches,
    open_input,
    parse_time,
)
from clients.cli_render import progress_bar, rate_text
from clients.cli_state import client_of
from clients.client import Client
from clients.endpoints import write_body
from clients.errors import ConflictError, ConnectionFailed, DifflowError
from clients.table_writer import TableWriter
from clients.wire import Time

__all__ = ["WS_WINDOW", "InputFormat", "PushStats", "percentile", "push"]

WS_WINDOW = 64
"""Frames a ``--ws`` push keeps unanswered before it waits for acks."""

_INDEX = re.compile(r"^(?:updates|columns\.[^\[]+)\[(\d+)\]")  # an error's row in a write

Answered = Callable[[Mapping[str, Any], int], None]
"""Called with each write's answer and the number of updates it carried."""


class InputFormat(Enum):
    jsonl = "jsonl"
    csv = "csv"


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


@dataclass
class PushStats:
    """What the answers of a push said."""

    writes: int = 0
    rows: int = 0
    pending: list[str] = field(default_factory=list)  # tokens of writes answered pending
    latencies_ms: list[float] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def record(self, answer: Mapping[str, Any], size: int) -> None:
        self.writes += 1
        self.rows += size
        if "latency_ms" in answer:
            self.latencies_ms.append(float(answer["latency_ms"]))
        if answer.get("status") == "pending":
            self.pending.append(str(answer.get("token")))

    def finished(self, completion: Mapping[str, Any]) -> bool:
        """Whether a write answered pending is done now (its latency then counts)."""
        if completion.get("status") == "pending":
            return False
        if "latency_ms" in completion:
            self.latencies_ms.append(float(completion["latency_ms"]))
        return True

    def summary(self, table: str, unit: str) -> str:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        text = (
            f"pushed {self.rows:,} rows to {table} in {self.writes:,} {unit}"
            f" ({rate_text(self.rows / elapsed)} rows/s); "
        )
        if self.latencies_ms:
            p50, p99 = (percentile(self.latencies_ms, p) for p in (50, 99))
            text += f"latency p50 {p50:.2f} ms, p99 {p99:.2f} ms"
        else:
            text += "latency n/a"
        if self.pending:
            text += f"; {len(self.pending):,} writes pending until the frontier moves"
        return text


def push(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="The table to write to.")],
    file: Annotated[str, typer.Option("--file", "-f", help="Input file; - is stdin.")] = "-",
    input_format: Annotated[
        InputFormat | None,
        typer.Option("--format", help="jsonl or csv; a file ending in .csv is read as csv."),
    ] = None,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Updates per write.")] = 1000,
    at: Annotated[
        str | None, typer.Option("--time", help="Default time of the updates: T or T1,T2.")
    ] = None,
    advance_to: Annotated[
        str | None, typer.Option("--advance-to", help="Move the frontier here at the end.")
    ] = None,
    ws: Annotated[bool, typer.Option("--ws", help="Pipeline over one WebSocket.")] = False,
) -> None:
    """Write updates from JSON lines (rows or update objects) or CSV (header row) to TABLE."""
    client = client_of(ctx)
    if input_format is None:
        csv = file.lower().endswith(".csv")
        input_format = InputFormat.csv if csv else InputFormat.jsonl
    default_time = None if at is None else parse_time(at, "--time")
    frontier = None if advance_to is None else parse_time(advance_to, "--advance-to")
    stats = PushStats()
    description = (
        client.table(table)
        if input_format is InputFormat.csv or at is not None or advance_to is not None
        else None
    )
    if description is not None and description.get("timing") == "server" and (at or advance_to):
        raise InputError(
            f"table {table} is server-timed: the server stamps each write's time "
            "(--time and --advance-to are for client-timed tables)"
        )
    if frontier is not None and description is not None:
        _check_advance(table, description.get("frontier"), frontier)
    with open_input(file) as stream, progress_bar() as bar:
        if input_format is InputFormat.csv:
            assert description is not None
            kinds = {c["name"]: c["type"] for c in description["columns"]}
            batches = csv_batches(stream, kinds, batch)
        else:
            batches = jsonl_batches(stream, batch)
        task = bar.add_task(f"push {table}", total=None)

        def answered(answer: Mapping[str, Any], size: int) -> None:
            stats.record(answer, size)
            bar.advance(task, size)

        send = _push_ws if ws else _push_http
        try:
            send(client, table, batches, default_time, frontier, stats, answered)
        except InputError as exc:
            if not stats.writes:
                raise
            writes = f"{stats.writes:,} write{'s' if stats.writes != 1 else ''}"
            written = f"{stats.rows:,} rows in {writes} before it were written"
            raise InputError(f"{exc.message}; {written}") from exc
        if frontier is not None:  # moving the frontier may have finished pending writes
            stats.pending = [t for t in stats.pending if not stats.finished(client.completion(t))]
    typer.echo(stats.summary(table, "frames" if ws else "requests"))


def _check_advance(table: str, current: Any, target: Time) -> None:
    """Refuse, before anything is written, an ``--advance-to`` that would move the table's
    frontier backwards (the server would refuse it only after the rows were written)."""
    if not isinstance(current, list):
        return
    want = (target,) if isinstance(target, int) else tuple(target)
    have = [(t,) if isinstance(t, int) else tuple(t) for t in current]
    if any(len(t) != len(want) for t in have):
        return  # the wrong number of coordinates: the server says what it takes
    if not any(all(a <= b for a, b in zip(t, want, strict=True)) for t in have):
        raise ConflictError(
            f"advance_to {target} would move the frontier of table {table!r} backwards from "
            f"{current}; nothing was written",
            status=409,
            code="frontier_backwards",
            detail={"path": "--advance-to", "frontier": current},
        )


def _advance(send: Callable[[], Any], frontier: Time, stats: PushStats) -> None:
    """Move the frontier after the writes; a refusal says the rows were written."""
    try:
        send()
    except ConnectionFailed:
        raise
    except DifflowError as exc:
        written = f"{stats.rows:,} rows in {stats.writes:,} writes were written"
        raise type(exc)(
            f"{written}, then moving the frontier to {frontier} was refused: {exc.message}",
            status=exc.status,
            code=exc.code,
            detail=exc.detail,
            frame_id=exc.frame_id,
        ) from exc


def _refused(
    exc: DifflowError, number: int, first: int, size: int, stats: PushStats
) -> DifflowError | None:
    """``exc`` of write ``number`` (input rows ``first`` .. ``first + size - 1``), saying
    where in the input it is and what was written before (or around) it; None when there is
    nothing to add."""
    where = f"write {number + 1} (input rows {first:,}-{first + size - 1:,})"
    detail = exc.detail if isinstance(exc.detail, Mapping) else {}
    path = detail.get("path")
    index = _INDEX.match(path) if isinstance(path, str) else None
    if index is not None:
        where += f", at input row {first + int(index.group(1)):,},"
    hint = ""  # the server names its own flag; push's is --batch
    if exc.code == "batch_too_large" and "limit" in detail:
        hint = f" (push with --batch {detail['limit']} or less)"
    if index is None and not stats.writes:
        if not hint:
            return None  # the first write, refused as a whole: nothing to add
        message = exc.message + hint
    else:
        written = (
            f"{stats.rows:,} rows in {stats.writes:,} other writes were written"
            if stats.writes
            else "nothing was written"
        )
        message = f"{where} was refused: {exc.message}{hint}; {written}"
    return type(exc)(
        message, status=exc.status, code=exc.code, detail=exc.detail, frame_id=exc.frame_id
    )


def _push_http(
    client: Client,
    table: str,
    batches: Iterable[Batch],
    default_time: Time | None,
    frontier: Time | None,
    stats: PushStats,
    answered: Answered,
) -> None:
    first = 1
    for number, b in enumerate(batches):
        try:
            answer = client.write(table, b.updates, columns=b.columns, time=default_time)
        except DifflowError as exc:
            wrapped = _refused(exc, number, first, b.size, stats)
            if wrapped is None:
                raise
            raise wrapped from exc
        answered(answer, b.size)
        first += b.size
    if frontier is not None:
        _advance(lambda: client.write(table, advance_to=frontier), frontier, stats)


def _push_ws(
    client: Client,
    table: str,
    batches: Iterable[Batch],
    default_time: Time | None,
    frontier: Time | None,
    stats: PushStats,
    answered: Answered,
) -> None:
    """Frames are pipelined: when one is refused, or a line of the input cannot be read,
    the frames already sent are still answered (and may have been written) before the push
    stops, so that what was written can be said."""
    sent: deque[tuple[int, int, int]] = deque()  # unanswered: (write number, first row, size)
    refused: list[tuple[DifflowError, int, int, int]] = []

    def receive(writer: TableWriter) -> None:
        number, first, size = sent.popleft()
        try:
            answer = writer.recv()
        except ConnectionFailed:
            raise
        except DifflowError as exc:
            refused.append((exc, number, first, size))
            return
        answered(answer, size)

    first = 1
    bad_input: InputError | None = None
    with client.ws_writer(table) as writer:
        try:
            for number, b in enumerate(batches):
                writer.send(write_body(b.updates, columns=b.columns, time=default_time), id=number)
                sent.append((number, first, b.size))
                first += b.size
                while writer.pending >= WS_WINDOW:
                    receive(writer)
                if refused:
                    break
        except InputError as unreadable:  # the frames in flight are answered first, and counted
            bad_input = unreadable
        while sent:
            receive(writer)
        if bad_input is not None and not refused:
            raise bad_input
        if refused:
            exc, number, at, size = refused[0]
            wrapped = _refused(exc, number, at, size, stats)
            if wrapped is None:
                raise exc
            raise wrapped from exc
        if frontier is not None:
            writer.send(write_body(advance_to=frontier), id="advance_to")
            _advance(writer.recv, frontier, stats)
