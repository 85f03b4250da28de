"""Writes in flight and finished: commands for the engine thread, tokens, completions.

A :class:`WriteCommand` moves through ``WriteState`` (received -> accepted -> done, or
rejected). Two futures follow it: ``accepted`` resolves once the write is checked and
applied to its input (or rejected with an error); ``stepped`` once the step that processed it
is over, with the done body or, if its times still wait on a frontier, the pending body
(the done body, once its times are final, is kept by :class:`CompletionStore`).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson

from engine.operators import ArrangedAhead
from service.codec import kept_json
from service.ingest import ParsedWrite, StagedWrite, TableShape
from service.key_index import KeyIndex

__all__ = ["CompletionStore", "Part", "Parts", "WriteCommand", "WriteState", "joined"]

_tokens = itertools.count(1)

Part = tuple[bytes, int]  # a view's changes at one time: their JSON array, and how many
Parts = dict[str, list[Part]]  # a write's outputs: per view, the parts of its times


Kept = tuple[tuple[str, tuple[Part, ...]], ...]  # ``Parts`` as a finished write keeps them


def joined(parts: list[Part] | tuple[Part, ...]) -> orjson.Fragment:
    """The changes of ``parts`` as one JSON array, for an ``outputs`` entry (one part is
    used as it is)."""
    if len(parts) == 1:
        return orjson.Fragment(parts[0][0])
    return orjson.Fragment(b"[" + b",".join(p[1:-1] for p, _ in parts) + b"]")


class WriteState(Enum):
    RECEIVED = "received"
    ACCEPTED = "accepted"  # applied; waiting for its outputs to become final
    DONE = "done"
    REJECTED = "rejected"


@dataclass(eq=False)
class WriteCommand:
    table: str
    # None: parsed on the engine thread, from ``body``, against the table as it is then (a
    # change was queued when it arrived: a table created or dropped may be its table)
    parsed: ParsedWrite | None
    arrival: float = field(default_factory=time.perf_counter)
    token: str = field(default_factory=lambda: f"w-{next(_tokens)}")
    state: WriteState = WriteState.RECEIVED
    accepted: Future = field(default_factory=Future)
    stepped: Future = field(default_factory=Future)
    staged: StagedWrite | None = None
    affected: list[str] = field(default_factory=list)
    failed_views: dict[str, str] = field(default_factory=dict)  # affected views that failed
    # False for bulk writes (Spark loads): the done body's ``outputs`` stays empty instead of
    # holding one JSON row per output change; subscribers still get every change.
    report_outputs: bool = True
    # the shape of the table the write was parsed for (None: parsed on the engine thread,
    # against the table as it is): a table dropped and made again under its name since then
    # is another table, and the write is refused rather than applied to it
    shape: TableShape | None = None
    body: Any = None  # the write body, when ``parsed`` is None
    # the table a socket's write must be (not one made since under its name), when
    # ``parsed`` is None
    bound: TableShape | None = None
    seq: int = -1  # its place in the runtime's queue (``Runtime._enqueue``)
    # its rows arranged for the table's arrangement off the engine thread (a Spark load's
    # append): the step only inserts them, if the write still holds the very same arrays
    ahead: ArrangedAhead | None = None
    # the table's primary-key index once the write is applied, built off the engine thread
    # by a Spark load, which vouches for the write's keys (``stage_write``'s ``keys_after``)
    keys_after: KeyIndex | None = None

    def reject(self, error: BaseException) -> None:
        self.state = WriteState.REJECTED
        for f in (self.accepted, self.stepped):
            if not f.done():
                f.set_exception(error)

    def settle(self, body: dict[str, Any]) -> None:
        if not self.stepped.done():
            self.stepped.set_result(body)

    def pending_body(self, frontier: list[Any]) -> dict[str, Any]:
        """The answer while pending; ``failed_views`` once a view it waits on has failed
        (the views a client-timed write makes fail fail in its own step, long before the
        frontier lets it finish)."""
        times = self.staged.times if self.staged is not None else []
        body: dict[str, Any] = {
            "token": self.token,
            "times": [t[0] if len(t) == 1 else list(t) for t in times],
            "frontier": frontier,
            "status": "pending",
        }
        failed = dict(self.failed_views)
        if failed:
            body["failed_views"] = failed
        return body


class CompletionStore:
    """Finished write bodies by token and pending ones. Finished ones are bounded by count
    (``keep``) and by their output rows in all (``keep_rows``), oldest forgotten first; those
    finished in the latest engine step are always kept, however many rows they have (their
    writers, ``wait=false`` or answered ``pending``, ask for them next: a big write made final
    by a small one in the same step would otherwise be forgotten at once).

    A body's outputs are kept as the JSON of a view's changes at each of its times, which
    every write at that time shares: they count once towards ``keep_rows``, however many
    writes list them (600 client-timed writes at one time, each listing its 8,000 changes,
    had filled the budget 48 times over and were forgotten a step later: audit 57), and a
    body is assembled when asked for. What is kept is bytes and tuples of them, which the
    collector stops tracking: kept as dicts, 60,000 one-row writes made every full pass of
    it (a drop's among them) 0.4-1.1 s longer, a pause of every thread."""

    def __init__(self, keep: int, keep_rows: int) -> None:
        self.keep = keep
        self.keep_rows = keep_rows
        # token -> (the JSON of the body but its outputs, the outputs' parts by view, in order)
        self._done: OrderedDict[str, tuple[bytes, Kept]] = OrderedDict()
        self._shared: dict[int, tuple[bytes, int]] = {}  # id -> (part, bodies holding it)
        self._rows = 0  # output rows in the kept parts, each part once
        self._pending: dict[str, WriteCommand] = {}
        self._lock = threading.Lock()
        self._step = -1  # the engine step of the newest finished writes, and how many
        self._of_step = 0

    def add_pending(self, cmd: WriteCommand) -> None:
        with self._lock:
            self._pending[cmd.token] = cmd

    def finish(self, cmd: WriteCommand, body: dict[str, Any], parts: Parts, step: int) -> None:
        """Keep a write's final body, whose ``outputs`` are the concatenated ``parts``;
        ``step`` counts the engine's steps."""
        with self._lock:
            self._pending.pop(cmd.token, None)
            head = kept_json({k: v for k, v in body.items() if k != "outputs"})
            self._done[cmd.token] = (head, tuple((name, tuple(of)) for name, of in parts.items()))
            for of in parts.values():
                for part, n in of:
                    held = self._shared.get(id(part))
                    self._shared[id(part)] = (part, held[1] + 1 if held else 1)
                    self._rows += 0 if held else n
            if step != self._step:
                self._step, self._of_step = step, 0
            self._of_step += 1
            # the step's own writes are the newest, at the end: forgetting from the front
            # stops before them
            while len(self._done) > self._of_step and (
                len(self._done) > self.keep or self._rows > self.keep_rows
            ):
                self._release(self._done.popitem(last=False)[1][1])

    def _release(self, parts: Kept) -> None:
        for _, of in parts:
            for part, n in of:
                held = self._shared[id(part)]
                if held[1] == 1:
                    del self._shared[id(part)]
                    self._rows -= n
                else:
                    self._shared[id(part)] = (part, held[1] - 1)

    def forgotten(self) -> str:
        """What is kept, for the answer to a token not (or no longer) known."""
        return (
            f"the server remembers the last {self.keep:,} finished writes, up to "
            f"{self.keep_rows:,} output rows in all (those of the latest step whatever their "
            "size)"
        )

    def lookup(self, token: str) -> tuple[str, dict[str, Any] | WriteCommand] | None:
        with self._lock:
            if token in self._done:
                head, parts = self._done[token]
                body = {**orjson.loads(head), "outputs": {name: joined(of) for name, of in parts}}
                if "failed_views" in body:  # after the outputs, as it was made
                    body["failed_views"] = body.pop("failed_views")
                return "done", body
            if token in self._pending:
                return "pending", self._pending[token]
        return None

    def pending(self) -> list[WriteCommand]:
        with self._lock:
            return list(self._pending.values())
