"""The spine: a trace as a list of immutable batches, merged geometrically (LSM).

Invariants:

* batches are ordered oldest (largest) first, and each is more than twice the size of the
  next, so every record is merged O(log n) times — except that up to ``SMALL_BATCHES``
  batches of fewer than ``SMALL_RECORDS`` records may wait at the end before they are merged
  (tiny inserts are frequent, and a compiled seek into a small batch costs far less than a
  merge);
* batches inserted since the spine was last read (its seek table, :meth:`Spine.seek_table`)
  wait at the end, unmerged, until that read, which merges them in one pass and then
  restores the invariant above; at most ``LAZY_BATCHES`` batches of fewer than
  ``LAZY_RECORDS`` records in all wait so (that merge stays below the amortized ones). A
  loop's arrangement read only where another input changes (a join's side, at a loop's
  first round) takes a batch per round and is read at the next step, after
  :meth:`Spine.settle` has merged it whole: its rounds' batches are merged once, not once
  per level of the staircase they would climb. A spine read every round merges as before;
* a merge of at least ``AMORTIZE_FROM`` records is not done at once: it advances a key
  range at a time, by an amount of work proportional to each later insert (seed 000's
  "fuel"), and both its inputs stay readable until it completes. One insert never pays for
  a cascade of merges of millions of records; while a merge is under way, newer batches
  merge among themselves behind it;
* in a small step (this step's inserts so far, and the last step's, under
  ``BACKGROUND_STEP`` records), a merge of ``BACKGROUND_FROM`` records or more, below those,
  runs whole on the merge thread (``engine.parallel.background``): the step goes on reading
  both inputs, and the first insert after the thread is done puts the result in their
  place. A single update whose inserts tip a cascade of merges of tens of thousands of
  records does not wait for them; the second core, idle in a small step, does them. A big
  step keeps its merges: there both cores are already busy with its split calls, and a
  merge beside them slowed batches of 100 at 1M/2M reachability by about 7%;
* ``since`` is the meet of the frontiers of all live readers: every reader may still ask
  about any time ``>=`` its frontier, so times are advanced only by what all readers allow
  (logical compaction), and merges write advanced, consolidated times (physical compaction);
* at the end of a step (:meth:`Spine.settle`), a spine that received at least half of its
  records in that step and grew by at least half of them is merged into one batch: a bulk
  load, or a loop's batch of many outer times, whose history folds away at the step's end
  (the loop lets its traces compact once those times are done). A bulk step leaves a
  staircase of big batches that later seeks would all visit and later inserts would merge
  piecemeal; one merge now costs at most a constant factor of the step's own inserts.

A reader is a :class:`TraceReader`; readers are how shared arrangements know what they may
forget. A spine with no readers keeps everything.
"""

from __future__ import annotations

import numpy as np

from engine import parallel
from engine.errors import TimeError
from engine.lattice import Antichain
from engine.trace.batch import TraceBatch
from engine.trace.cursor import expand_ranges, match_keys
from engine.trace.layout import Layout
from engine.trace.seek import ROW_WIDTH, gather_spine

__all__ = [
    "AMORTIZE_FROM",
    "BACKGROUND_FROM",
    "BACKGROUND_STEP",
    "LAZY_BATCHES",
    "LAZY_RECORDS",
    "SETTLE_FROM",
    "SMALL_BATCHES",
    "SMALL_RECORDS",
    "Background",
    "History",
    "Merging",
    "Spine",
    "TraceReader",
]

SMALL_RECORDS = 256
SMALL_BATCHES = 8
LAZY_BATCHES = 32  # batches inserted unread before the spine merges them without a read
AMORTIZE_FROM = 1 << 20  # records: merges at least this big advance a key range per insert
LAZY_RECORDS = AMORTIZE_FROM // 2  # ... or records
FUEL_PER_RECORD = 4  # merge work (records) each merge under way does per inserted record
FUEL_MIN = 2048  # ... and at least this much per insert
SETTLE_FROM = 1 << 12  # records inserted in one step before the step's end may merge it all
BACKGROUND_FROM = 1 << 13  # records: merges from here (below AMORTIZE_FROM) go to the thread
BACKGROUND_STEP = 1 << 10  # ... when this step so far and the last one inserted fewer records


class Merging:
    """A merge of two neighbouring batches ``a`` (older) and ``b`` under way: the key
    ranges merged so far (records of ``a`` and ``b`` with codes below a cut, compacted to
    the ``since`` of when it began)."""

    __slots__ = ("a", "b", "done", "ka", "kb", "since")

    def __init__(self, a: TraceBatch, b: TraceBatch, since: Antichain | None) -> None:
        self.a, self.b, self.since = a, b, since
        self.ka = self.kb = 0  # keys of a and of b merged so far
        self.done: list[TraceBatch] = []

    def step(self, layout: Layout, fuel: int) -> TraceBatch | None:
        """Merge about ``fuel`` more records; the whole merged batch once none are left."""
        a, b = self.a, self.b
        while fuel > 0 and (self.ka < a.nkeys or self.kb < b.nkeys):
            ka, kb = self._cut(fuel)
            lo = np.array([self.ka, self.kb], dtype=np.int64)
            hi = np.array([ka, kb], dtype=np.int64)
            self.done.append(TraceBatch.merge_keys(layout, [a, b], lo, hi, self.since))
            fuel -= int(a.offsets[ka] - a.offsets[self.ka] + b.offsets[kb] - b.offsets[self.kb])
            self.ka, self.kb = ka, kb
        if self.ka < a.nkeys or self.kb < b.nkeys:
            return None
        return TraceBatch.concat_keys(layout, self.done, a.dims)

    def _cut(self, fuel: int) -> tuple[int, int]:
        """Where the next key range ends in ``a`` and in ``b``: at a code (so that keys
        sharing a code stay together) past about ``fuel / 2`` records of either."""
        ends = []
        for batch, k in ((self.a, self.ka), (self.b, self.kb)):
            j = int(np.searchsorted(batch.offsets, batch.offsets[k] + fuel // 2 + 1))
            if j < batch.nkeys:
                ends.append(int(batch.codes[j]))
        if not ends:
            return self.a.nkeys, self.b.nkeys
        code = min(ends)
        ka = int(np.searchsorted(self.a.codes, code, "left"))
        kb = int(np.searchsorted(self.b.codes, code, "left"))
        if ka <= self.ka and kb <= self.kb:  # one code holds all of it: take that code
            ka = int(np.searchsorted(self.a.codes, code, "right"))
            kb = int(np.searchsorted(self.b.codes, code, "right"))
        return max(ka, self.ka), max(kb, self.kb)


class Background:
    """A merge of two neighbouring batches ``a`` (older) and ``b`` running whole on the merge
    thread; both stay readable until its result takes their place."""

    __slots__ = ("a", "b", "future")

    def __init__(self, layout: Layout, a: TraceBatch, b: TraceBatch, since: Antichain | None):
        self.a, self.b = a, b
        table = np.array([a.addresses(), b.addresses()])  # built here: the thread only reads
        self.future = parallel.background(  # not split: the helper stays free for the step
            TraceBatch.merge_rows, layout, table, since, [a, b], False
        )

    def step(self, layout: Layout, fuel: int) -> TraceBatch | None:
        """The merged batch once the thread is done (its error, if it raised), else None;
        ``fuel`` is not needed (the thread does the work)."""
        return self.future.result() if self.future.done() else None


class TraceReader:
    """A handle on a spine that holds back compaction to its frontier until released."""

    __slots__ = ("frontier", "name", "spine")

    def __init__(self, spine: Spine, frontier: Antichain, name: str) -> None:
        self.spine: Spine | None = spine
        self.frontier = frontier
        self.name = name

    def advance(self, frontier: Antichain) -> None:
        """Allow compaction up to ``frontier`` (never backwards)."""
        if frontier is self.frontier:
            return
        if not self.frontier.precedes(frontier):
            raise TimeError(
                f"reader {self.name!r} cannot move its frontier back from "
                f"{self.frontier.to_list()} to {frontier.to_list()}"
            )
        self.frontier = frontier
        if self.spine is not None:
            self.spine._since = False

    def release(self) -> None:
        if self.spine is not None:
            self.spine.readers.discard(self)
            self.spine._since = False
            self.spine = None

    @property
    def released(self) -> bool:
        return self.spine is None


class History:
    """Records of many keys gathered from a spine: ``owner`` says which query key each
    record belongs to. Not consolidated across batches."""

    __slots__ = ("diffs", "owner", "times", "vals")

    def __init__(
        self, owner: np.ndarray, vals: np.ndarray, times: np.ndarray, diffs: np.ndarray
    ) -> None:
        self.owner = owner
        self.vals = vals
        self.times = times
        self.diffs = diffs

    def __len__(self) -> int:
        return int(self.diffs.shape[0])


class Spine:
    """A shared, compacting trace of one collection arranged by key."""

    def __init__(self, layout: Layout, dims: int, name: str = "") -> None:
        self.layout = layout
        self.dims = dims
        self.name = name
        self.batches: list[TraceBatch] = []
        self.merging: list[Merging | Background] = []  # merges under way, each of two neighbours
        self.readers: set[TraceReader] = set()
        self._since: Antichain | bool | None = False  # False: recompute on next use
        self._table = np.zeros((8, ROW_WIDTH), np.int64)
        self._stale = 0  # seek-table rows from here on may not match the batches
        self._waiting = 0  # small batches at the end, waiting to be merged
        self._unread = 0  # batches inserted since the last read, waiting after those
        self._unread_records = 0
        self._inserted = 0  # records inserted since the last settle
        self._last_step = 0  # records inserted in the step the last settle ended
        self._settled = 0  # records held after the last step of SETTLE_FROM inserts or more

    # -- readers and compaction ---------------------------------------------------------
    def reader(self, frontier: Antichain | None = None, name: str = "") -> TraceReader:
        f = frontier if frontier is not None else self.since() or Antichain.minimum(self.dims)
        r = TraceReader(self, f, name)
        self.readers.add(r)
        self._since = False
        return r

    def since(self) -> Antichain | None:
        """The frontier every reader allows, or None while nobody reads (cached until a
        reader moves, joins or leaves)."""
        if self._since is False:
            frontier: Antichain | None = None
            for r in self.readers:
                if frontier is None or frontier == r.frontier:
                    frontier = r.frontier if frontier is None else frontier
                elif frontier.precedes(r.frontier):
                    continue
                elif r.frontier.precedes(frontier):
                    frontier = r.frontier
                else:
                    frontier = frontier.meet(r.frontier)
            self._since = frontier
        return self._since  # type: ignore[return-value]

    # -- writing ------------------------------------------------------------------------
    def insert(self, batch: TraceBatch) -> None:
        """Add a batch. It waits unmerged until the spine is read (:meth:`_balance`), or
        until ``LAZY_BATCHES`` or ``LAZY_RECORDS`` wait; while a big merge is under way it
        is placed at once, and the merge advances by work proportional to the batch."""
        if len(batch) == 0:
            return
        self._inserted += len(batch)
        self.batches.append(batch)
        self._stale = min(self._stale, len(self.batches) - 1)
        self._unread += 1
        self._unread_records += len(batch)
        if self.merging or self._unread >= LAZY_BATCHES or self._unread_records >= LAZY_RECORDS:
            self._balance()
        if self.merging:
            self._fuel(max(FUEL_MIN, FUEL_PER_RECORD * len(batch)))

    def _balance(self) -> None:
        """Place the batches inserted since the last read. Small ones may wait behind the
        small batches already waiting (up to ``SMALL_BATCHES`` in all); otherwise the
        waiting small batches and the new ones merge into one (one pass over all of them),
        then batches merge while the geometric invariant is broken."""
        k, records = self._unread, self._unread_records
        self._unread = self._unread_records = 0
        if k == 0:
            return
        n, waiting = len(self.batches), self._waiting
        if (
            waiting + k <= SMALL_BATCHES
            and (
                records < SMALL_RECORDS  # all of them small, without looking (one, usually)
                or all(b.diffs.shape[0] < SMALL_RECORDS for b in self.batches[n - k :])
            )
        ):
            self._waiting += k
            return
        if waiting + k > 1:
            merged = self._merge(n - waiting - k, n)
            del self.batches[-(waiting + k) :]
            self._stale = min(self._stale, len(self.batches))
            if len(merged):
                self.batches.append(merged)
        self._rebalance(len(self.batches) - 1)
        self._count_waiting()

    def _count_waiting(self) -> None:
        """Recount the small batches at the end (after merges changed them); a batch in a
        merge under way ends the count, as it must not be merged again."""
        waiting = 0
        merging = self.merging
        for b in reversed(self.batches):
            if b.diffs.shape[0] >= SMALL_RECORDS or (merging and self._busy(b)):
                break
            waiting += 1
        self._waiting = waiting

    def _busy(self, batch: TraceBatch) -> bool:
        for m in self.merging:  # noqa: SIM110 - no generator for the common empty list
            if m.a is batch or m.b is batch:
                return True
        return False

    def _rebalance(self, i: int) -> None:
        """Merge batch ``i`` with the one before it while that one is at most twice its
        size, walking towards older batches; a big merge starts here and goes on in
        steps, a small step's merge of ``BACKGROUND_FROM`` records on the merge thread
        (both placed by :meth:`_fuel`), and batches in a merge under way wait for it."""
        while 1 <= i < len(self.batches):
            x, y = self.batches[i - 1], self.batches[i]
            if len(x) > 2 * len(y) or (self.merging and (self._busy(x) or self._busy(y))):
                return
            if len(x) + len(y) >= AMORTIZE_FROM:
                self.merging.append(Merging(x, y, self.since()))
                return
            if (  # a small step's big merge: on the merge thread
                len(x) + len(y) >= BACKGROUND_FROM
                and max(self._inserted, self._last_step) < BACKGROUND_STEP
                and parallel.threads() > 1
            ):
                self.merging.append(Background(self.layout, x, y, self.since()))
                return
            merged = self._merge(i - 1, i + 1)
            self.batches[i - 1 : i + 1] = [merged] if len(merged) else []
            self._stale = min(self._stale, i - 1)
            i -= 1

    def _merge(self, lo: int, hi: int) -> TraceBatch:
        """Batches ``lo:hi`` merged into one, compacted to ``since``, straight from their
        seek-table rows (the batches stay in place until the caller replaces them)."""
        return TraceBatch.merge_rows(
            self.layout, self.seek_table()[lo:hi], self.since(), self.batches[lo:hi]
        )

    def _fuel(self, fuel: int) -> None:
        """Advance every merge under way by ``fuel`` records; put each finished one in
        place of its inputs."""
        for m in list(self.merging):
            merged = m.step(self.layout, fuel)
            if merged is None:
                continue
            self.merging.remove(m)
            i = next(j for j, b in enumerate(self.batches) if b is m.a)
            self.batches[i : i + 2] = [merged] if len(merged) else []
            self._stale = min(self._stale, i)
            for j in range(len(self.batches) - 1, 0, -1):  # anywhere may be unbalanced now
                self._rebalance(j)
            self._count_waiting()

    def settle(self) -> None:
        """The end of a step: merge everything into one batch when the step inserted at least
        ``SETTLE_FROM`` records and at least half of what the spine now holds, and the spine
        grew by at least half of what was inserted, and index it for seeks (its radix index)
        before anyone reads it. A step whose inserts replaced about as many records as they
        added (their times compacted into the past as it went) has merged as it went."""
        inserted, self._inserted = self._inserted, 0
        self._last_step = inserted
        if inserted < SETTLE_FROM:  # most steps: no need to count the records
            return
        records, before = self.records(), self._settled
        self._settled = records
        if 2 * inserted >= records and 2 * (records - before) >= inserted and len(self.batches) > 1:
            self.compact()
            self.seek_table()  # its radix index: built now, not by the first read
            self._settled = self.records()

    def compact(self) -> None:
        """Merge everything into one batch, advanced to ``since`` (physical compaction)."""
        self.merging.clear()
        self._unread = self._unread_records = 0
        merged = TraceBatch.merge(
            self.layout, self.batches or [TraceBatch.empty(self.layout, self.dims)], self.since()
        )
        self.batches = [merged] if len(merged) else []
        self._stale = 0
        self._count_waiting()

    # -- reading ------------------------------------------------------------------------
    def content(self) -> TraceBatch:
        """Every record, merged into one batch (times advanced to ``since``)."""
        if not self.batches:
            return TraceBatch.empty(self.layout, self.dims)
        if len(self.batches) == 1:
            return self.batches[0]
        return TraceBatch.merge(self.layout, list(self.batches), self.since())

    def seek_table(self) -> np.ndarray:
        """One row per batch for the compiled seeks (``TraceBatch.addresses``); the batches
        it points into live in ``batches``. Rows are rewritten only from the first batch
        that changed since the last call (usually only the newest). This is the spine's
        read: batches inserted since the last one are placed first (:meth:`_balance`)."""
        self._balance()
        batches, table, n = self.batches, self._table, len(self.batches)
        if self._stale < n:
            if table.shape[0] < n:
                grown = np.zeros((2 * n, ROW_WIDTH), dtype=np.int64)
                grown[: self._stale] = table[: self._stale]
                self._table = table = grown
            for i in range(self._stale, n):
                table[i] = batches[i].addresses()
        self._stale = n
        return table[:n]

    def gather(self, q_codes: np.ndarray, q_keys: np.ndarray) -> History:
        """All records of the query keys (``owner`` indexes the queries), batch by batch,
        in one compiled call."""
        owner, vals, times, diffs = gather_spine(
            np.ascontiguousarray(q_codes),
            np.ascontiguousarray(q_keys),
            self.seek_table(),
            self.layout.exact_codes,
            len(self.layout.val_cols),
            self.dims,
        )
        return History(owner, vals, times, diffs)

    def gather_reference(self, q_codes: np.ndarray, q_keys: np.ndarray) -> History:
        """:meth:`gather` in plain numpy (the reference the compiled path is tested against)."""
        parts = []
        for b in self.batches:
            qi, kb = match_keys(q_codes, q_keys, b.codes, b.keys, self.layout.exact_codes)
            owner, pos = expand_ranges(b.offsets[kb], b.offsets[kb + 1])
            parts.append(
                (
                    qi[owner],
                    np.take(b.vals, pos, axis=1),
                    np.take(b.times, pos, axis=1),
                    np.take(b.diffs, pos),
                )
            )
        if not parts:
            return self.gather(q_codes, q_keys)
        return History(
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts], axis=1),
            np.concatenate([p[2] for p in parts], axis=1),
            np.concatenate([p[3] for p in parts]),
        )

    # -- sizes --------------------------------------------------------------------------
    def records(self) -> int:
        return sum(len(b) for b in self.batches)

    def nbytes(self) -> int:
        return sum(b.nbytes() for b in self.batches)
