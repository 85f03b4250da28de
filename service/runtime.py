"""The runtime: one engine thread that owns the graph, and the step loop.

Everything that touches the engine runs on the engine thread, in the order it was
submitted. The loop takes every write queued at the head at once: they are checked and
applied one by one (each keeping its own time), then one ``graph.step()`` processes them all
together — throughput grows with load and resolution never drops. A control command
(create, drop, read, subscribe) runs between steps; while a view registers, reads run
between its iterates' rounds, as of before it and before all else queued, and writes are
accepted there (so that ``wait=false`` is answered at once), to be stepped after it. During
a write's step, the writes queued are accepted (a change of their table queued before them
held back: ``_passing``) and reads of what the step cannot change are answered, between its
operators and its loops' rounds (``_pause``); a DELETE next in line stops its view's loops
(``dropped_next``).

After a step, each view's captured outputs at times its frontier calls complete become
final: they are published to subscribers and answer the writes whose times they are. A write
is done when its times are complete in its table and in every view that reads the table.

``accept_write`` is the one place where a write is accepted (where a write-ahead log goes).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np

from engine import Antichain, Graph, StepError, StringInterner, UpdateBatch, consolidate
from engine.allocator import free_bytes, give_back
from engine.consolidate import group_starts
from engine.lattice import advance_by, time_tuples
from service.catalog import Catalog
from service.codec import count_total, decode_rows, frontier_to_wire, kept_json, time_to_wire
from service.errors import NotFound, ServiceError, Unavailable
from service.gc_pause import collector_paused
from service.ingest import TableShape, dropped_since_opened, parse_write, stage_write
from service.metrics import Metrics
from service.settings import Settings
from service.subscriptions import Frames, SharedFrames, Subscriber, encoded_parts
from service.views import ViewState
from service.writes import CompletionStore, Part, Parts, WriteCommand, WriteState, joined

__all__ = ["Runtime"]

log = logging.getLogger("difflow.runtime")
STOP_WAIT_S = 5.0  # how long a stopping server waits for the engine's step in progress
# after a step, the engine idle this long with this much free memory kept in the C heap
# hands it back (the allocator keeps freed memory for the next step: after a burst of writes
# to subscribers that fell behind, 900 MB of it stayed until a view was dropped, audit 116)
IDLE_TRIM_S = 2.0
IDLE_TRIM_FROM = 256 << 20
T = TypeVar("T")


class _Control:
    __slots__ = (
        "_claimed",
        "drops",
        "fn",
        "future",
        "reads",
        "seen_in",
        "seq",
        "subject",
        "table",
    )

    def __init__(
        self,
        fn: Callable[[], Any],
        reads: bool = False,
        subject: tuple[str, str] | None = None,
        drops: str | None = None,
        table: str | None = None,
    ) -> None:
        self.fn = fn
        self.reads = reads  # it only reads: it may run between a registration's rounds
        # what a read reads alone, ``("table" | "view", name)``: it may run during a write
        # step that does not change it (``Runtime._pause``); ``("subscriber", view)``: it
        # unsubscribes, which it may do during any step
        self.subject = subject
        self.drops = drops  # the view it drops (``Runtime.dropped_next``)
        # the table it creates, drops or loads into: no write to it passes this change
        self.table = table
        self.future: Future = Future()
        self.seq = -1  # its place in the queue (``Runtime._enqueue``)
        # a change: the step during which the queue's scan first saw it (``_passing``)
        self.seen_in = -1
        self._claimed = threading.Lock()

    def claim(self) -> bool:
        """True for the first caller only: the engine about to run it, or a canceller that
        answers it before it has started (the engine then skips it)."""
        return self._claimed.acquire(blocking=False)


def _stopped_before_done(write: WriteCommand | None) -> Unavailable:
    """503 ``shutting_down`` for work the server stopped before finishing; for a write,
    whether it had been applied (its outputs not yet final) or not at all."""
    if write is None:
        message = "the server shut down before this request finished"
    elif write.state in (WriteState.ACCEPTED, WriteState.DONE):
        message = (
            "the server shut down before this write's outputs were final; the write had "
            "been applied (nothing is kept across restarts)"
        )
    else:
        message = "the server shut down before this write was applied; it was not applied"
    return Unavailable(message, code="shutting_down")


def _taken(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.graph = Graph()
        self.catalog = Catalog(self.graph, settings)
        self.completions = CompletionStore(settings.completions_kept, settings.completion_rows_kept)
        self.metrics = Metrics(self)
        self._queue: deque[WriteCommand | _Control] = deque()
        self._cv = threading.Condition()
        self._stopping = False
        self._waits_cancelled = False  # requests awaiting the engine are answered 503 now
        self._thread = threading.Thread(target=self._loop, name="difflow-engine", daemon=True)
        self._stepped = False  # a step ran since the engine was last idle (``_take``)
        self._pending: list[WriteCommand] = []  # accepted, not yet done
        # accepted between a registration's rounds or during a step, to be stepped after it
        self._accepted_early: list[WriteCommand] = []
        self._table_changes: dict[str, int] = {}  # queued changes by their ``table``
        self._queued = 0  # commands queued so far
        self._paused_at = -1  # ``_queued`` when ``_pause`` last looked at the queue
        # during a write step: the tables it writes and the views that read them
        self._changing: set[str] = set()
        self._waits: set[asyncio.Future] = set()  # requests awaiting the engine (event loop)
        # view registrations queued or running, by name: their stop events and commands
        self._registering: dict[str, list[tuple[threading.Event, _Control]]] = {}
        self._registering_lock = threading.Lock()
        self.steps = 0
        # view name -> the step, the view and the first frames of its latest subscriber
        self._snapshots: dict[str, tuple[int, weakref.ref, weakref.ref]] = {}

    @property
    def interner(self) -> StringInterner:
        return self.graph.interner

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def begin_shutdown(self) -> None:
        """Take no more work: the engine refuses what is queued (503 ``shutting_down``;
        none of it is applied) and ends after its step in progress (a registration's
        iterate stops at its next round)."""
        with self._cv:
            self._stopping = True
            self._cv.notify()
        with self._registering_lock:
            for registrations in self._registering.values():
                for stop, _ in registrations:
                    stop.set()

    async def wind_down(self) -> None:
        """(event loop, after :meth:`begin_shutdown`) Give the engine's step in progress up
        to ``STOP_WAIT_S`` to answer its writes, then answer every request still awaiting
        the engine with 503 ``shutting_down``: a long step (a big view's first contents,
        say) need not hold the shutdown, nor have its request cut off without an answer."""
        await asyncio.to_thread(self._thread.join, STOP_WAIT_S)
        self._stop_waiting()

    def _stop_waiting(self) -> None:
        self._waits_cancelled = True
        for waiting in list(self._waits):
            waiting.cancel()

    def stop(self) -> None:
        self.begin_shutdown()
        # what the engine holds is in memory only: a step still running is not waited for
        # long, nor again after :meth:`wind_down` waited for it (audit 100: a stop during a
        # long step took 5 s more so)
        if not self._waits_cancelled:
            self._thread.join(timeout=STOP_WAIT_S)
        self._stop_waiting()
        self.close_subscribers("server shutting down")

    @property
    def stopping(self) -> bool:
        """Shutdown has begun (:meth:`begin_shutdown`)."""
        return self._stopping

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    # -- view registrations in progress (any thread) ----------------------------------------
    def submit_registration(
        self, name: str, fn: Callable[[Callable[[], bool], Callable[[], bool]], T]
    ) -> Future:
        """Queue ``fn(between, stopped)``, the registration of view ``name``. ``between`` is
        the hook ``fn`` gives the view's iterates (``Graph.between_rounds``): it answers the
        reads queued meanwhile and accepts the writes (:meth:`_between_rounds`), and stops
        the iterates once :meth:`cancel_registration` of the name has been called or the
        server is stopping, which is what ``stopped()`` tells. A registration cancelled
        before it starts is answered at once and never runs."""
        stop = threading.Event()

        def between() -> bool:
            if not stop.is_set():
                self._between_rounds(name)
            return stop.is_set()

        cmd = _Control(lambda: fn(between, stop.is_set))
        with self._registering_lock:
            self._registering.setdefault(name, []).append((stop, cmd))
        try:
            self._enqueue(cmd)
        except BaseException:
            self.registered(name, cmd.future)
            raise
        return cmd.future

    def registered(self, name: str, future: Future) -> None:
        with self._registering_lock:
            left = [r for r in self._registering.get(name, []) if r[1].future is not future]
            if left:
                self._registering[name] = left
            else:
                self._registering.pop(name, None)

    def cancel_registration(self, name: str, error: ServiceError) -> list[Future] | None:
        """Stop every registration of view ``name``: one not started yet is answered
        ``error`` at once and never runs; a running one stops at its iterates' next round.
        None if there is none, else the futures of those already running."""
        with self._registering_lock:
            registrations = list(self._registering.get(name, []))
        if not registrations:
            return None
        running = []
        for stop, cmd in registrations:
            stop.set()
            if cmd.claim():
                cmd.future.set_exception(error)
            else:
                running.append(cmd.future)
        return running

    # -- submission (any thread) ------------------------------------------------------------
    def submit(
        self,
        fn: Callable[[], T],
        reads: bool = False,
        subject: tuple[str, str] | None = None,
        drops: str | None = None,
        table: str | None = None,
    ) -> Future:
        cmd = _Control(fn, reads, subject, drops, table)
        self._enqueue(cmd)
        return cmd.future

    async def call(
        self, fn: Callable[[], T], drops: str | None = None, table: str | None = None
    ) -> T:
        """``fn`` on the engine thread, in order; ``drops``: it drops that view (and may
        stop the view's loops in the step before it, :meth:`dropped_next`); ``table``: it
        creates or drops that table (no write to it passes it)."""
        return await self.settled(self.submit(fn, drops=drops, table=table))

    async def read(self, fn: Callable[[], T], subject: tuple[str, str] | None = None) -> T:
        """:meth:`call` for ``fn`` that only reads the catalog and the views' contents (or
        subscribes to a view: that changes who hears of it, not what the engine holds): it
        may also run between the rounds of a view's registration, seeing the view as not
        yet created and nothing queued as begun, so that reads do not wait for a long one.
        A read of one ``subject``, ``("table" | "view", name)``, may also run during a write
        step that cannot change it (:meth:`_pause`)."""
        return await self.settled(self.submit(fn, reads=True, subject=subject))

    async def settled(self, future: Future, write: WriteCommand | None = None) -> Any:
        """(event loop) ``future``'s result, or 503 ``shutting_down`` when the server stops
        waiting for it (the engine's future itself is left alone: it is not cancelled). For
        a ``write``'s future the answer says whether the write had been applied: once the
        server is stopping, the engine applies no write not already applied."""
        if future.done():
            return future.result()
        inner = asyncio.wrap_future(future)
        # a wait given up on (the server stopping) leaves ``inner`` to the engine's answer,
        # awaited by nobody: its exception is taken here, or asyncio logs "Future exception
        # was never retrieved" for each such write at shutdown (audit 92: up to 1,529)
        inner.add_done_callback(_taken)
        waiting = asyncio.shield(inner)
        self._waits.add(waiting)
        try:
            if self._waits_cancelled:  # the server stopped waiting for the engine
                waiting.cancel()
            return await waiting
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            raise _stopped_before_done(write) from None
        finally:
            self._waits.discard(waiting)

    def submit_write(self, cmd: WriteCommand) -> WriteCommand:
        self._enqueue(cmd)
        return cmd

    def _enqueue(self, item: WriteCommand | _Control) -> None:
        with self._cv:
            if self._stopping:
                raise Unavailable(
                    "the server is shutting down; this request was not applied",
                    code="shutting_down",
                )
            item.seq = self._queued
            self._queue.append(item)
            self._queued += 1
            if isinstance(item, _Control) and not item.reads and item.table is not None:
                self._table_changes[item.table] = self._table_changes.get(item.table, 0) + 1
            self._cv.notify()

    def table_changing(self, name: str) -> bool:
        """Whether a change of table ``name`` (its creation or drop, a load into it) waits
        for the engine: a write to it arriving now must not be checked against it as it is."""
        return name in self._table_changes

    def table_shape(self, name: str) -> TableShape:
        t = self.catalog.tables.get(name)
        if t is None:
            raise NotFound(f"no table named {name!r}", {"name": name})
        return t.shape

    # -- the loop (engine thread) -----------------------------------------------------------
    def _take(self) -> list[WriteCommand | _Control] | None:
        """The next control command alone, or the writes at the head of the queue (what
        stays queued while a control runs is left for ``_between_rounds``). Idle for
        ``IDLE_TRIM_S`` after a step, it first hands the C heap's free memory back, if there
        is ``IDLE_TRIM_FROM`` of it."""
        with self._cv:
            while not self._queue and not self._stopping:
                if not self._stepped:
                    self._cv.wait()
                elif not self._cv.wait(IDLE_TRIM_S):
                    self._stepped = False
                    self._trim_unlocked()
            if self._stopping:
                items = list(self._queue)
                self._queue.clear()
                self._table_changes.clear()
            elif isinstance(head := self._queue[0], _Control):
                self._queue.popleft()
                if not head.reads and head.table is not None:
                    left = self._table_changes.pop(head.table) - 1
                    if left:
                        self._table_changes[head.table] = left
                return [head]
            else:
                writes: list[WriteCommand | _Control] = []
                while self._queue and isinstance(self._queue[0], WriteCommand):
                    writes.append(self._queue.popleft())
                return writes
        self._refuse(items)
        return None

    def _trim_unlocked(self) -> None:
        """Hand the C heap's free memory back if there is ``IDLE_TRIM_FROM`` of it; called
        holding ``_cv``, released meanwhile so that work can queue."""
        if (free_bytes() or 0) < IDLE_TRIM_FROM:
            return
        self._cv.release()
        try:
            give_back()
        finally:
            self._cv.acquire()

    def _passing(
        self,
        read_now: Callable[[_Control], bool],
        took: Callable[[WriteCommand], None],
        stepping: bool,
    ) -> list[WriteCommand | _Control]:
        """(engine thread, holding ``_cv``) Take out of the queue, in order, the writes queued
        behind no change of their table (its creation or drop, a load into it: audit 73),
        telling ``took`` of each, and the reads queued before any change (audit 72) that
        ``read_now`` lets pass, asked once the writes before them are taken. ``stepping``
        (during a write step): no write passes a change already queued during an earlier
        step, so that a stream of writes, each step accepting the next ones, holds a change
        (and what is queued behind it) back for one more step at most (audit 77)."""
        taken: list[WriteCommand | _Control] = []
        rest: list[WriteCommand | _Control] = []
        changed = False  # a change seen: no read after it passes it
        closed = False  # a change queued during an earlier step seen: no write passes it
        tables: set[str] = set()  # the tables of the changes seen
        for item in self._queue:
            if isinstance(item, WriteCommand):
                if closed or item.table in tables:
                    rest.append(item)
                else:
                    taken.append(item)
                    took(item)
            elif not item.reads:
                changed = True
                if item.seen_in < 0:
                    item.seen_in = self.steps
                elif stepping and item.seen_in < self.steps:
                    closed = True
                if item.table is not None:
                    tables.add(item.table)
                rest.append(item)
            elif not changed and read_now(item):
                taken.append(item)
            else:
                rest.append(item)
        if taken:
            self._queue.clear()
            self._queue.extend(rest)
        return taken

    def _between_rounds(self, registering: str) -> None:
        """(engine thread, between the rounds of view ``registering``'s registration) Run
        the reads queued, the view hidden from them, and accept the writes (stepped once the
        registration is over: ``_accepted_early``, before any other command), in order, as
        far as they pass what is queued before them (:meth:`_passing`): a write goes before
        a change of another table (a view registered then lists it, ``adopt_view``; audit
        43). A command passed over is not answered yet, so what passes it may come before
        it: a read answers as of before everything still queued and everything accepted
        here."""
        with self._cv:
            if self._stopping:
                return
            taken = self._passing(lambda _: True, lambda _: None, stepping=False)
        for item in taken:
            if isinstance(item, WriteCommand):
                if self._accept_guarded(item):
                    self._accepted_early.append(item)
            else:
                with self.catalog.hiding(registering):
                    self._control(item)

    def _pause(self) -> None:
        """(engine thread, during a write step: ``Graph.step``'s ``pause``) Take the writes
        and reads that pass what is queued before them (:meth:`_passing`), in order: accept
        the writes, so that ``wait=false`` is answered at once (their input waits for its
        operator's next run; they are stepped after this step, ``_accepted_early``, before
        any other command); answer the reads of a table the step does not write, or of a
        view that reads none of the tables it writes, as of before the step: it leaves them
        as they are (a view over a server-timed table, whose clock the step moves, shows its
        frontier of before it). A table written, here too, and the views that read it are
        changing: a read of one waits for the step, as before, so a write answered stays
        seen, and such a read still comes after every write sent before it. So does a read
        queued after a change: it sees the change. The reads left waiting are answered
        after the step, before the writes accepted in it are stepped (``_reads_before``):
        they do not see them."""
        if self._queued == self._paused_at:  # nothing queued since the last look
            return
        changing = self._changing

        def unchanged(read: _Control) -> bool:
            return read.subject is not None and (
                read.subject[0] == "subscriber" or read.subject[1] not in changing
            )

        def took(w: WriteCommand) -> None:
            if w.table not in changing:
                changing.add(w.table)
                changing.update(self.catalog.affected_views(w.table))

        with self._cv:
            if self._stopping:
                return
            self._paused_at = self._queued
            taken = self._passing(unchanged, took, stepping=True)
        for item in taken:
            if isinstance(item, _Control):
                self._control(item)
            elif self._accept_guarded(item):
                self._accepted_early.append(item)

    def dropped_next(self, v: ViewState) -> bool:
        """(engine thread; the hook of view ``v``'s loops once it is registered) Whether
        they stop at their next round: the commands next in line, after the step running,
        are DELETEs, one of which will drop ``v`` (the views reading it dropped by those
        before it, each in the same way), and no write accepted during the step waits on
        ``v`` or a view reading it. Anything else queued before that DELETE (a write, a
        read of ``v``, a view registered that may read it) comes first, so it sees ``v`` as
        it would have."""
        queue = self._queue
        head = queue[0] if queue else None
        if not isinstance(head, _Control) or head.drops is None:  # the common case, unlocked
            return False
        views = self.catalog.views
        dropped: set[str] = set()
        with self._cv:
            for item in queue:
                if not isinstance(item, _Control) or item.drops is None:
                    return False
                d = views.get(item.drops)
                if d is not None and d.readers <= dropped:
                    dropped.add(d.name)
                    if d is v:
                        break
            else:
                return False
        doomed, todo = {v.name}, list(v.readers)  # it fails, and so do its readers
        while todo:
            name = todo.pop()
            if name not in doomed:
                doomed.add(name)
                todo.extend(views[name].readers)
        return not any(n in doomed for w in self._accepted_early for n in w.affected)

    def _refuse(self, items: list[WriteCommand | _Control]) -> None:
        """Answer work the engine will not do, the server stopping: none of it is applied."""
        for item in items:
            error = _stopped_before_done(item if isinstance(item, WriteCommand) else None)
            if isinstance(item, WriteCommand):
                item.reject(error)
            elif not item.future.done():
                item.future.set_exception(error)

    def _loop(self) -> None:
        while True:
            items = self._take()
            if items is None:
                return
            if isinstance(items[0], _Control):
                self._control(items[0])
            else:
                staged: list[WriteCommand] = []
                for i, item in enumerate(items):
                    if self._stopping:  # what was taken but not yet applied is refused
                        self._refuse(items[i:])
                        break
                    assert isinstance(item, WriteCommand)
                    if self._accept_guarded(item):
                        staged.append(item)
                if staged:
                    self._step(staged)
            # accepted during a registration or a step: a server stopping steps them too,
            # so that every write applied is answered with its outputs
            while self._accepted_early:
                early, self._accepted_early = self._accepted_early, []
                self._reads_before(min(w.seq for w in early))
                self._step(early)

    def _reads_before(self, seq: int) -> None:
        """Answer the reads at the head of the queue queued before command ``seq``, a write
        accepted early: they came before it and before every command still queued, so they
        need not wait for its step (audit 73: under a stream of writes each accepted during
        the step before, a read of what they change waited through several steps)."""
        with self._cv:
            reads: list[_Control] = []
            queue = self._queue
            while not self._stopping and queue:
                head = queue[0]
                if not isinstance(head, _Control) or not head.reads or head.seq > seq:
                    break
                reads.append(head)
                queue.popleft()
        for read in reads:
            self._control(read)

    def _accept_guarded(self, cmd: WriteCommand) -> bool:
        """:meth:`accept_write`, where a bug refuses the write (500 ``internal``) instead of
        ending the engine thread, which every later request would wait on for good."""
        try:
            return self.accept_write(cmd)
        except Exception as exc:
            log.exception("write %s failed on the engine thread", cmd.token)
            cmd.reject(ServiceError(f"internal error: {type(exc).__name__}: {exc}"))
            return False

    def _control(self, cmd: _Control) -> None:
        if not cmd.claim():  # answered already: cancelled before it started
            return
        try:
            cmd.future.set_result(cmd.fn())
        except BaseException as exc:
            if not isinstance(exc, ServiceError):
                log.exception("control command failed")
            cmd.future.set_exception(exc)

    def accept_write(self, cmd: WriteCommand) -> bool:
        """Check a write against its table and apply it to the table's input, or reject it."""
        try:
            table = self.catalog.tables.get(cmd.table)
            if table is None:
                raise NotFound(f"no table named {cmd.table!r}", {"name": cmd.table})
            if cmd.shape is not None and table.shape is not cmd.shape:
                raise NotFound(
                    f"table {cmd.table!r} was dropped after this write arrived (the table "
                    "now under its name is another one); send the write again",
                    {"name": cmd.table},
                )
            if cmd.parsed is None:  # a change was queued before it: parsed now
                if cmd.bound is not None and table.shape is not cmd.bound:
                    raise dropped_since_opened(cmd.table)
                cmd.parsed = parse_write(
                    cmd.body, table.shape, self.interner, self.settings.max_batch
                )
                cmd.shape, cmd.body = table.shape, None
            server = table.shape.timing == "server"
            staged = stage_write(
                cmd.parsed,
                table.shape,
                table.frontier,
                table.pk_index,
                self.catalog.clock if server else None,
                table.keyed_upto,
                self.interner,
                cmd.keys_after,
            )
        except ServiceError as exc:
            cmd.reject(exc)
            return False
        if len(staged.batch):
            ahead = cmd.ahead if cmd.ahead is not None and cmd.ahead.fits(staged.batch) else None
            table.handle.send(staged.batch, ahead)
        cmd.ahead = cmd.keys_after = None  # the input holds it until its step
        if staged.advance_to is not None:
            table.handle.advance_to(staged.advance_to)
        if server and staged.times:  # a write of no updates takes no time
            self.catalog.clock += 1
        if staged.pk_index is not None:
            table.pk_index = staged.pk_index
        elif table.pk_index is not None and staged.pk_changes is not None:
            table.pk_index.apply(staged.pk_changes)
        table.keyed_upto = staged.keyed_upto
        table.rows += staged.rows_delta
        cmd.staged = staged
        cmd.affected = self.catalog.affected_views(cmd.table)
        cmd.state = WriteState.ACCEPTED
        self._pending.append(cmd)
        self.completions.add_pending(cmd)
        self.metrics.updates.inc(len(staged.batch))
        cmd.accepted.set_result(None)
        return True

    def step(self, written: str | None = None) -> None:
        """Run one step now (engine thread): after catalog changes, to hydrate views; after
        a write to table ``written`` accepted outside the loop (a load's), with the reads it
        cannot change answered during it."""
        self._step([], () if written is None else (written,))

    def drop_view(self, name: str, rejected: bool = False) -> None:
        """Drop a view (engine thread). Writes still pending no longer wait on it or list it
        (a view made later under its name is another view); a ``rejected`` one, refused at
        registration, is not among their ``failed_views`` either: it never existed."""
        self.catalog.drop_view(name)
        self._snapshots.pop(name, None)
        for w in self._pending:
            if name in w.affected:
                w.affected.remove(name)
            if rejected:
                w.failed_views.pop(name, None)
        self._resolve()
        _give_back()

    def drop_table(self, name: str) -> TableShape:
        """Drop a table (engine thread) and return its shape. Writes still pending on it are
        done at once, with the closed frontier ``[]``: no view reads the table and nothing
        more happens at its times, and a table made later under its name is another table."""
        shape = self.catalog.table(name).shape
        self.catalog.drop_table(name)
        self._resolve()
        _give_back()
        return shape

    def adopt_view(self, view: ViewState) -> None:
        """Writes still pending on tables a new view reads will report its outputs too, where
        the view has their times: a time before the view's start (a 2-D write pending at
        ``[1, 3]`` while the view starts at ``[2, 0]``) reaches the view at a later time, so
        such a write does not list it."""
        start = view.history.frontier
        for w in self._pending:
            if w.table in view.tables and view.name not in w.affected:
                staged = w.staged
                times = np.asarray(staged.times if staged is not None else [], dtype=np.int64)
                if start.beyond(times.reshape(-1, start.dims).T).all():
                    w.affected.append(view.name)

    def _step(self, writes: list[WriteCommand], written: tuple[str, ...] = ()) -> None:
        self._stepped = True
        for t in self.catalog.tables.values():
            if t.shape.timing == "server":
                target = Antichain([(self.catalog.clock,)])
                if t.frontier != target:
                    t.handle.advance_to(target)
        written += tuple(w.table for w in writes if w.state is WriteState.ACCEPTED)
        self._changing = {v for t in set(written) for v in self.catalog.affected_views(t)}
        self._changing.update(written)
        self._paused_at = -1
        started = time.perf_counter()
        try:
            # a registration's step (no writes) answers reads between its own rounds only
            self.graph.step(self._pause if writes or written else None)
        except StepError as exc:
            failed, stopped = self.catalog.fail_operators(exc.failures)
            for name, reason in failed.items():
                if name in stopped:
                    log.info("view %s left the engine, stopped on request: %s", name, reason)
                else:
                    log.error("view %s failed and left the engine: %s", name, reason)
            for w in self._pending:
                for name in failed:
                    if name in w.affected:
                        w.affected.remove(name)
                        # stopped for a DELETE: dropped, as if before the write, which
                        # then lists it nowhere (as any write pending when a view is dropped)
                        if name not in stopped:
                            w.failed_views[name] = failed[name]
        self.steps += 1
        self.metrics.step_seconds.observe(time.perf_counter() - started)
        for v in self.catalog.views.values():
            if v.failure is None:
                self._collect(v)
        self.catalog.advance_histories()
        self._resolve()
        for w in writes:
            if w.state is WriteState.ACCEPTED:
                table = self.catalog.tables.get(w.table)
                w.settle(
                    w.pending_body(frontier_to_wire(table.frontier) if table is not None else [])
                )

    def _collect(self, v: ViewState) -> None:
        for s in v.subscribers:
            s.mark_step()
        new = v.capture.drain()
        frontier = v.capture.frontier
        if v.start is not None:  # a view that started ahead of its frontier (``ViewState``)
            if len(new):
                new = UpdateBatch(new.data, advance_by(new.times, v.start), new.diffs)
            if v.start.precedes(frontier):  # later outputs are all at or beyond it
                v.start = None
        if len(new):
            v.pending_out.append(new)
        final = None
        if v.pending_out:
            allb = UpdateBatch.concat(v.pending_out, len(v.schema), v.domain.dims)
            done = frontier.complete(allb.times)
            final = allb.take(done)
            rest = allb.take(~done)
            v.pending_out = [rest] if len(rest) else []
        moved = frontier != v.frontier
        v.frontier = frontier
        if final is not None and len(final):
            final = consolidate(final)
            v.rows += count_total(final.diffs)
            if any(v.name in w.affected for w in self._pending):
                v.final_history.append(final)
            self._publish(v, final)
        if moved:
            for s in list(v.subscribers):
                if s.progress and not s.push(
                    {"type": "progress", "frontier": frontier_to_wire(frontier)}
                ):
                    v.subscribers.discard(s)

    def _publish(self, v: ViewState, final: UpdateBatch) -> None:
        if not v.subscribers or not len(final):
            return
        for t, updates in _by_time(final, v, self.interner):
            for body in encoded_parts({"time": t}, updates):
                for s in list(v.subscribers):
                    if not s.push_encoded("diff", body):
                        v.subscribers.discard(s)

    def _resolve(self) -> None:
        now = time.perf_counter()
        still: list[WriteCommand] = []
        done: list[WriteCommand] = []
        # a write accepted during a step is done no sooner than after its own: a write
        # done then (an ``advance_to``) has its views' frontiers moved, and so every write
        # that it makes final done with it (audit 74)
        unstepped = {id(w) for w in self._accepted_early}
        for w in self._pending:
            (done if id(w) not in unstepped and self._complete(w) else still).append(w)
        listed: dict[str, set[tuple[int, ...]]] = {}  # the times each view's changes are read at
        for w in done:
            if w.report_outputs and w.staged is not None:
                for name in w.affected:
                    listed.setdefault(name, set()).update(w.staged.times)
        index: dict[str, dict[tuple[int, ...], _Changes]] = {}
        for w in done:
            self._finish(w, now, index, listed)
        self._pending = still
        waiting = {name for w in still for name in w.affected}
        for v in self.catalog.views.values():
            if v.name not in waiting:
                v.final_history.clear()

    def _complete(self, w: WriteCommand) -> bool:
        assert w.staged is not None
        if not w.staged.times:
            return True
        times = np.asarray(w.staged.times, dtype=np.int64).T
        table = self.catalog.tables.get(w.table)
        if table is not None and not table.frontier.complete(times).all():
            return False
        for name in w.affected:
            v = self.catalog.views.get(name)
            if v is not None and not v.frontier.complete(times).all():
                return False
        return True

    def _finish(
        self,
        w: WriteCommand,
        now: float,
        index: dict[str, dict[tuple[int, ...], _Changes]],
        listed: dict[str, set[tuple[int, ...]]],
    ) -> None:
        """Complete ``w``; ``index`` caches each view's final outputs by time for this pass,
        at the times ``listed`` by its writes."""
        assert w.staged is not None
        latency_ms = (now - w.arrival) * 1000.0
        parts: Parts = {}  # each view's, by time
        for name in w.affected:
            v = self.catalog.views.get(name)
            if v is None:
                continue
            if w.report_outputs:
                if name not in index:
                    index[name] = _outputs_by_time(v, self.interner, listed[name])
                by_time = index[name]
                parts[name] = [_encoded(by_time, t) for t in w.staged.times if t in by_time]
            v.latencies.append(latency_ms)
        outputs = {name: joined(of) for name, of in parts.items()}
        table = self.catalog.tables.get(w.table)
        body = {
            "token": w.token,
            "times": [time_to_wire(t) for t in w.staged.times],
            "frontier": frontier_to_wire(table.frontier) if table is not None else [],
            "status": "done",
            "latency_ms": round(latency_ms, 3),
            "outputs": outputs,
        }
        if w.failed_views:
            body["failed_views"] = dict(w.failed_views)
        w.state = WriteState.DONE
        self.completions.finish(w, body, parts, self.steps)
        self.metrics.write_latency.observe(latency_ms / 1000.0)
        w.settle(body)

    # -- subscriptions (engine thread) --------------------------------------------------------
    def subscribe(
        self, view: str, snapshot: bool, progress: bool, loop: asyncio.AbstractEventLoop
    ) -> Subscriber:
        """(engine thread) A subscriber of ``view``, registered now. With ``snapshot``, its
        first frames (the contents at the latest complete time, then the complete times
        since that the snapshot does not cover) are captured here as arrays, and decoded and
        encoded by the socket task on another thread (``Subscriber.prepare``): built here,
        a 270k-row snapshot held every write for 0.7 s, four at once for 3 s (audit 58)."""
        v = self.catalog.view(view)
        self.catalog.check_live(v)
        settings = self.settings
        sub = Subscriber(
            view, progress, settings.subscriber_buffer, loop, settings.subscriber_buffer_mb
        )
        if snapshot:
            sub.hold(self._snapshot(v))
        if progress:
            sub.push({"type": "progress", "frontier": frontier_to_wire(v.frontier)})
        v.subscribers.add(sub)
        return sub

    def _snapshot(self, v: ViewState) -> SharedFrames:
        """``v``'s first frames for a new subscriber: captured once, and built once, for
        every subscriber that comes before the engine's next step."""
        held = self._snapshots.get(v.name)
        if held is not None and held[0] == self.steps and held[1]() is v:
            shared = held[2]()
            if shared is not None:
                return shared
        t = self.catalog.read_time(v, None)
        updates = self.catalog.updates(v)
        contents, late = self.catalog.rows_at(v, t, updates), self._late_final(v, t, updates)
        size, interner = max(self.settings.snapshot_frame_rows, 1), self.interner
        shared = SharedFrames(lambda: _snapshot_frames(v, t, contents, late, size, interner))
        self._snapshots[v.name] = (self.steps, weakref.ref(v), weakref.ref(shared))
        return shared

    def _late_final(
        self, v: ViewState, t: tuple[int, ...] | None, content: UpdateBatch
    ) -> UpdateBatch:
        """Final outputs at complete times not at or before the snapshot time (possible with
        partially ordered times), from the view's ``content`` (``Catalog.updates``)."""
        if not len(content):
            return content
        if v.start is not None:  # changes before it are at it, as ``_collect`` sends them
            content = UpdateBatch(content.data, advance_by(content.times, v.start), content.diffs)
        done = v.frontier.complete(content.times)
        if t is not None:
            done &= ~(content.times <= np.asarray(t, dtype=np.int64).reshape(-1, 1)).all(axis=0)
        return consolidate(content.take(done))

    def close_subscribers(self, reason: str) -> list[Subscriber]:
        """Close every subscription (any thread): each gets a ``closed`` frame. Returns them
        (``Subscriber.until_ended`` tells when it has gone out)."""
        closed = [s for v in list(self.catalog.views.values()) for s in list(v.subscribers)]
        for s in closed:
            s.close(reason)
        return closed

    def unsubscribe(self, sub: Subscriber) -> None:
        v = self.catalog.views.get(sub.view)
        if v is not None:
            v.subscribers.discard(sub)


def _give_back() -> None:
    """After a dataflow is dropped: free it now, and hand the heap's free pages back. Its
    arrangements and their readers refer to each other, so only the collector frees them,
    and their arrays, which it does not count, do not hasten its pass over the oldest
    objects: registering and dropping a reachability view over 400k edges grew the server by
    100-200 MB a cycle (audit 59), 343 MiB of arrays waiting in such cycles after four."""
    gc.collect()
    give_back()


def _snapshot_frames(
    v: ViewState,
    t: tuple[int, ...] | None,
    contents: UpdateBatch,
    late: UpdateBatch,
    size: int,
    interner: Any,
) -> Frames:
    """A new subscriber's first frames: ``contents`` (the view at ``t``) as snapshot frames
    of at most ``size`` rows, then ``late`` (final changes at times the snapshot does not
    cover) as diff frames. Reads no engine state but the interner's strings."""
    with collector_paused():
        rows = decode_rows(contents.data, v.schema, interner)
        updates = [
            {"data": r, "diff": d} for r, d in zip(rows, contents.diffs.tolist(), strict=True)
        ]
    chunks = [updates[i : i + size] for i in range(0, len(updates), size)] or [[]]
    head = {"time": time_to_wire(t) if t is not None else None}
    frames = [("snapshot", body) for chunk in chunks for body in encoded_parts(head, chunk)]
    for tt, changes in _by_time(late, v, interner):
        frames.extend(("diff", body) for body in encoded_parts({"time": tt}, changes))
    return frames


def _time_groups(b: UpdateBatch) -> tuple[UpdateBatch, list[tuple[int, ...]], list[int]]:
    """``b`` sorted by time (lexicographic: a linear extension), its distinct times as
    tuples, and the bounds of their runs (one more than the times)."""
    b = b.take(np.lexsort(b.times[::-1]))
    starts = np.flatnonzero(group_starts(list(b.times), len(b)))
    return b, time_tuples(b.times[:, starts]), [*starts.tolist(), len(b)]


def _by_time(
    batch: UpdateBatch, v: ViewState, interner: Any
) -> list[tuple[Any, list[dict[str, Any]]]]:
    """Updates grouped by time, times in lexicographic order (a linear extension)."""
    if not len(batch):
        return []
    b, keys, bounds = _time_groups(batch)
    diffs = b.diffs.tolist()
    with collector_paused():
        rows = decode_rows(b.data, v.schema, interner)
        return [
            (
                time_to_wire(k),
                [{"data": r, "diff": d} for r, d in zip(rows[lo:hi], diffs[lo:hi], strict=True)],
            )
            for k, lo, hi in zip(keys, bounds[:-1], bounds[1:], strict=True)
        ]


_Changes = list[dict[str, Any]] | Part  # a time's changes, decoded, or encoded (``_encoded``)


def _encoded(by_time: dict[tuple[int, ...], _Changes], t: tuple[int, ...]) -> Part:
    """Time ``t``'s changes as JSON: encoded for the first write that lists them, and kept
    for the others (the times no write lists, a grid's joins say, are never encoded)."""
    changes = by_time[t]
    if isinstance(changes, list):
        changes = by_time[t] = (kept_json(changes), len(changes))
    return changes


def _outputs_by_time(
    v: ViewState, interner: Any, listed: set[tuple[int, ...]]
) -> dict[tuple[int, ...], _Changes]:
    """The view's final outputs not yet handed to writes at the times ``listed``,
    consolidated and grouped by time (decoded once, however many writes ask; the changes at
    one time share its wire time). Those at other times are not decoded: a grid's closing
    write lists 288 of the 603k changes its step makes (audit 63)."""
    if not v.final_history:
        return {}
    b = consolidate(UpdateBatch.concat(v.final_history, len(v.schema), v.domain.dims))
    if not len(b):
        return {}
    b, keys, bounds = _time_groups(b)
    picked = [i for i, key in enumerate(keys) if key in listed]
    if len(picked) < len(keys):
        if not picked:
            return {}
        starts, ends = np.asarray(bounds)[picked], np.asarray(bounds)[np.asarray(picked) + 1]
        b = b.take(np.concatenate([np.arange(lo, hi) for lo, hi in zip(starts, ends, strict=True)]))
        keys = [keys[i] for i in picked]
        bounds = [0, *np.cumsum(ends - starts).tolist()]
    diffs = b.diffs.tolist()
    out: dict[tuple[int, ...], _Changes] = {}
    with collector_paused():
        rows = decode_rows(b.data, v.schema, interner)
        for key, lo, hi in zip(keys, bounds[:-1], bounds[1:], strict=True):
            wire = time_to_wire(key)
            out[key] = [
                {"data": r, "time": wire, "diff": d}
                for r, d in zip(rows[lo:hi], diffs[lo:hi], strict=True)
            ]
    return out
