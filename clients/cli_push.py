"""``difflow push``: stream a JSON-lines or CSV file into a table over HTTP or WebSocket.

Each batch of ``--batch`` updates is one write: one request over HTTP (waiting for its answer),
or one frame with ``--ws`` (pipelined, at most ``WS_WINDOW`` frames unanswered). A progress bar
on standard error counts the rows answered; the summary line on standard output gives rows,
rows/s and the p50/p99 of the answers' ``latency_ms``. A refused write stops the push with
its error, told where it is in the input (its lines) and what the other writes wrote
(``_refused``); so does a write that got no answer, which may still be carried out
(``_unanswered``).
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
from clients.cli_render import counted, progress_bar, rate_text
from clients.cli_state import client_of
from clients.client import Client
from clients.endpoints import write_body
from clients.errors import ConflictError, ConnectionFailed, DifflowError, NotFoundError
from clients.table_writer import TableWriter
from clients.websocket import closed_error
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
    failed_views: dict[str, str] = field(default_factory=dict)  # view -> why, as answered
    started: float = field(default_factory=time.perf_counter)

    def record(self, answer: Mapping[str, Any], size: int) -> None:
        self.writes += 1
        self.rows += size
        self.failed_views.update(answer.get("failed_views") or {})
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
        self.failed_views.update(completion.get("failed_views") or {})
        return True

    def summary(self, table: str, unit: str) -> str:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        text = (
            f"pushed {counted(self.rows, 'row')} to {table} in {counted(self.writes, unit)}"
            f" ({rate_text(self.rows / elapsed)} rows/s); "
        )
        if self.latencies_ms:
            p50, p99 = (percentile(self.latencies_ms, p) for p in (50, 99))
            text += f"latency p50 {p50:.2f} ms, p99 {p99:.2f} ms"
        else:
            text += "latency n/a"
        if self.pending:
            text += f"; {counted(len(self.pending), 'write')} pending until the frontier moves"
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
    if description is not None:
        dims = int(description.get("time_dims", 1))
        _check_arity(table, dims, "--time", at, default_time)
        _check_arity(table, dims, "--advance-to", advance_to, frontier)
    if frontier is not None and description is not None:
        _check_advance(table, description.get("frontier"), frontier)
    with open_input(file) as lines, progress_bar() as bar:
        if input_format is InputFormat.csv:
            assert description is not None
            kinds = {c["name"]: c["type"] for c in description["columns"]}
            batches = csv_batches(lines, kinds, batch)
        else:
            batches = jsonl_batches(lines, batch)
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
            raise InputError(f"{exc.message}; {_before(stats)}") from exc
        if frontier is not None:  # moving the frontier may have finished pending writes
            stats.pending = [t for t in stats.pending if not stats.finished(client.completion(t))]
    typer.echo(stats.summary(table, "frame" if ws else "request"))
    if stats.failed_views:  # the rows were written, but views reading them failed
        for view, why in stats.failed_views.items():
            typer.echo(f"error: view {view} failed: {why}", err=True)
        raise typer.Exit(1)


def _before(stats: PushStats) -> str:
    return _written(stats, "write", " before it")


def _check_arity(table: str, dims: int, option: str, text: str | None, time: Time | None) -> None:
    """Refuse, before anything is written, a ``--time`` or ``--advance-to`` with another
    number of coordinates than the table's times: the server would refuse the frontier
    only after the rows were written, and would read a CSV write's ``"time": [t1, t2]`` as
    one time per row whenever the write has two rows."""
    if time is None:
        return
    coordinates = 1 if isinstance(time, int) else len(time)
    if coordinates != dims:
        raise InputError(
            f"{option} {text} has {coordinates} coordinate{'s' if coordinates != 1 else ''}, "
            f"but the times of table {table} have {dims}; nothing was written"
        )


def _check_advance(table: str, current: Any, target: Time) -> None:
    """Refuse, before anything is written, an ``--advance-to`` that would move the table's
    frontier backwards (the server would refuse it only after the rows were written). Its
    number of coordinates has been checked (``_check_arity``)."""
    if not isinstance(current, list):
        return
    want = (target,) if isinstance(target, int) else tuple(target)
    have = [(t,) if isinstance(t, int) else tuple(t) for t in current]
    if not any(all(a <= b for a, b in zip(t, want, strict=True)) for t in have):
        raise ConflictError(
            f"advance_to {target} would move the frontier of table {table!r} backwards from "
            f"{current}; nothing was written",
            status=409,
            code="frontier_backwards",
            detail={"path": "--advance-to", "frontier": current},
        )


def _advance(send: Callable[[], Any], frontier: Time, stats: PushStats) -> None:
    """Move the frontier after the writes; a refusal, or no answer, says the rows were
    written."""
    try:
        send()
    except DifflowError as exc:
        written = _written(stats, "write")
        outcome = (
            "got no answer (it may still be carried out)"
            if isinstance(exc, ConnectionFailed)
            else "was refused"
        )
        message = f"{written}, then moving the frontier to {frontier} {outcome}: {exc.message}"
        raise exc.reworded(message) from exc


def _place(number: int, lines: Sequence[int]) -> str:
    """``write 2 (lines 4-5)``: write ``number`` (from 0) and the input lines of its rows."""
    span = f"line {lines[0]}" if len(lines) == 1 else f"lines {lines[0]}-{lines[-1]}"
    return f"write {number + 1} ({span})"


def _refused(
    exc: DifflowError,
    number: int,
    lines: Sequence[int],
    stats: PushStats,
    also: Sequence[int] = (),
) -> DifflowError:
    """``exc`` of write ``number`` (of the rows on input ``lines``), saying where in the
    input it is (and the line at fault, where the server names a row), which writes
    ``also`` were refused (pipelined ones, numbered from 0), and what the other writes
    wrote. An unknown table refusing the first write is left as it is: no write of it
    is at fault."""
    if isinstance(exc, NotFoundError) and not stats.writes:
        return exc
    where = _place(number, lines)
    detail = exc.detail if isinstance(exc.detail, Mapping) else {}
    path = detail.get("path")
    index = _INDEX.match(path) if isinstance(path, str) else None
    if index is not None and int(index.group(1)) < len(lines):
        where += f", at line {lines[int(index.group(1))]},"
    hint = ""  # the server names its own flag; push's is --batch
    if exc.code == "batch_too_large" and "limit" in detail:
        hint = f" (push with --batch {detail['limit']} or less)"
    written = _written(stats, "other write") if stats.writes else "nothing was written"
    return exc.reworded(f"{where} was refused: {exc.message}{hint}{_too(also)}; {written}")


def _too(also: Sequence[int]) -> str:
    """``; writes 5 and 9 were refused too``, for the writes ``also`` (numbered from 0);
    past five, the first four and how many more (a window of frames may all be refused)."""
    if not also:
        return ""
    if len(also) == 1:
        return f"; write {also[0] + 1} was refused too"
    numbers = [str(n + 1) for n in also]
    if len(numbers) > 5:
        numbers = [*numbers[:4], f"{len(numbers) - 4} more"]
    *most, last = numbers
    return f"; writes {', '.join(most)} and {last} were refused too"


def _unanswered(
    exc: ConnectionFailed, number: int, lines: Sequence[int], stats: PushStats
) -> ConnectionFailed:
    """``exc`` of write ``number``, which got no answer, saying where in the input it is,
    that it may still be carried out, and what the writes before it wrote; the first
    write's as it is (nothing else was written)."""
    if not stats.writes:
        return exc
    where = _place(number, lines)
    return exc.reworded(
        f"{where} got no answer, and may still be carried out: {exc.message}; {_before(stats)}"
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
    for number, b in enumerate(batches):
        try:
            answer = client.write(table, b.updates, columns=b.columns, time=default_time)
        except ConnectionFailed as exc:
            raise _unanswered(exc, number, b.lines, stats) from exc
        except DifflowError as exc:
            raise _refused(exc, number, b.lines, stats) from exc
        answered(answer, b.size)
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
    stops, so that what was written can be said. A lost connection leaves the frames in
    flight unanswered; what the answered ones wrote is said then too (a frame that could
    not be sent first reads the answers that came before the connection closed)."""
    sent: deque[tuple[int, list[int]]] = deque()  # unanswered: (write number, its lines)
    refused: list[tuple[DifflowError, int, list[int]]] = []

    def receive(writer: TableWriter) -> None:
        number, lines = sent.popleft()
        try:
            answer = writer.recv()
        except ConnectionFailed:
            raise
        except DifflowError as exc:
            refused.append((exc, number, lines))
            return
        answered(answer, len(lines))

    def send_all(writer: TableWriter) -> InputError | None:
        """Send every batch, until one is refused; a line that cannot be read stops it."""
        try:
            for number, b in enumerate(batches):
                writer.send(write_body(b.updates, columns=b.columns, time=default_time), id=number)
                sent.append((number, b.lines))
                while writer.pending >= WS_WINDOW:
                    receive(writer)
                if refused:
                    break
        except InputError as unreadable:  # the frames in flight are answered first, and counted
            return unreadable
        return None

    with client.ws_writer(table) as writer:
        try:
            try:
                bad_input = send_all(writer)
            except ConnectionFailed as failed:
                if not writer.pending:  # lost while receiving: those answers never come
                    raise
                cause = failed.__cause__ or failed
                while writer.pending:  # a frame not sent: the answers that came count first
                    receive(writer)  # (the lost connection, if some never came)
                raise closed_error(writer.url, cause) from cause
            while sent:
                receive(writer)
        except ConnectionFailed as lost:
            raise lost.reworded(f"{lost.message}; {_acknowledged(stats)}") from lost
        if refused:
            exc, number, lines = refused[0]
            also = [n for _, n, _ in refused[1:]]
            raise _refused(exc, number, lines, stats, also) from exc
        if bad_input is not None:
            raise bad_input
        if frontier is not None:
            writer.send(write_body(advance_to=frontier), id="advance_to")
            _advance(writer.recv, frontier, stats)


def _acknowledged(stats: PushStats) -> str:
    if not stats.writes:
        return "no write was acknowledged"
    return _written(stats, "acknowledged write")


def _written(stats: PushStats, noun: str, where: str = "") -> str:
    """``2,480 rows in 124 other writes were written`` (``noun`` names the writes)."""
    verb = "was" if stats.rows == 1 else "were"
    return f"{counted(stats.rows, 'row')} in {counted(stats.writes, noun)}{where} {verb} written"
