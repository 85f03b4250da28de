"""The spine: a trace as a list of immutable batches, merged geometrically (LSM).

Invariants:

* batches are ordered oldest (largest) first, and each is more than twice the size of the
  next, so every record is merged O(log n) times;
* ``since`` is the meet of the frontiers of all live readers: every reader may still ask
  about any time ``>=`` its frontier, so times are advanced only by what all readers allow
  (logical compaction), and merges write advanced, consolidated times (physical compaction).

A reader is a :class:`TraceReader`; readers are how shared arrangements know what they may
forget. A spine with no readers keeps everything.
"""

from __future__ import annotations

import numpy as np

from engine.errors import TimeError
from engine.lattice import Antichain
from engine.trace.batch import TraceBatch
from engine.trace.cursor import expand_ranges, match_keys
from engine.trace.layout import Layout

__all__ = ["History", "Spine", "TraceReader"]


class TraceReader:
    """A handle on a spine that holds back compaction to its frontier until released."""

    __slots__ = ("frontier", "name", "spine")

    def __init__(self, spine: Spine, frontier: Antichain, name: str) -> None:
        self.spine: Spine | None = spine
        self.frontier = frontier
        self.name = name

    def advance(self, frontier: Antichain) -> None:
        """Allow compaction up to ``frontier`` (never backwards)."""
        if not self.frontier.precedes(frontier):
            raise TimeError(
                f"reader {self.name!r} cannot move its frontier back from "
                f"{self.frontier.to_list()} to {frontier.to_list()}"
            )
        self.frontier = frontier

    def release(self) -> None:
        if self.spine is not None:
            self.spine.readers.discard(self)
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
        self.readers: set[TraceReader] = set()

    # -- readers and compaction ---------------------------------------------------------
    def reader(self, frontier: Antichain | None = None, name: str = "") -> TraceReader:
        f = frontier if frontier is not None else self.since() or Antichain.minimum(self.dims)
        r = TraceReader(self, f, name)
        self.readers.add(r)
        return r

    def since(self) -> Antichain | None:
        """The frontier every reader allows, or None while nobody reads."""
        frontier: Antichain | None = None
        for r in self.readers:
            frontier = r.frontier if frontier is None else frontier.meet(r.frontier)
        return frontier

    # -- writing ------------------------------------------------------------------------
    def insert(self, batch: TraceBatch) -> None:
        """Add a batch, then merge while the geometric invariant is broken."""
        if len(batch) == 0:
            return
        self.batches.append(batch)
        while len(self.batches) >= 2 and len(self.batches[-2]) <= 2 * len(self.batches[-1]):
            b = self.batches.pop()
            a = self.batches.pop()
            merged = TraceBatch.merge(self.layout, [a, b], self.since())
            if len(merged):
                self.batches.append(merged)

    def compact(self) -> None:
        """Merge everything into one batch, advanced to ``since`` (physical compaction)."""
        merged = TraceBatch.merge(
            self.layout, self.batches or [TraceBatch.empty(self.layout, self.dims)], self.since()
        )
        self.batches = [merged] if len(merged) else []

    # -- reading ------------------------------------------------------------------------
    def content(self) -> TraceBatch:
        """Every record, merged into one batch (times advanced to ``since``)."""
        if not self.batches:
            return TraceBatch.empty(self.layout, self.dims)
        if len(self.batches) == 1:
            return self.batches[0]
        return TraceBatch.merge(self.layout, list(self.batches), self.since())

    def gather(self, q_codes: np.ndarray, q_keys: np.ndarray) -> History:
        """All records of the query keys (``owner`` indexes the queries), batch by batch."""
        owners, vals, times, diffs = [], [], [], []
        exact = self.layout.exact_codes
        for b in self.batches:
            qi, kb = match_keys(q_codes, q_keys, b.codes, b.keys, exact)
            if qi.shape[0] == 0:
                continue
            owner, pos = expand_ranges(b.offsets[kb], b.offsets[kb + 1])
            owners.append(qi[owner])
            vals.append(np.take(b.vals, pos, axis=1))
            times.append(np.take(b.times, pos, axis=1))
            diffs.append(np.take(b.diffs, pos))
        if not owners:
            z = np.zeros(0, dtype=np.int64)
            return History(
                z,
                np.zeros((len(self.layout.val_cols), 0), dtype=np.int64),
                np.zeros((self.dims, 0), dtype=np.int64),
                z,
            )
        if len(owners) == 1:
            return History(owners[0], vals[0], times[0], diffs[0])
        return History(
            np.concatenate(owners),
            np.concatenate(vals, axis=1),
            np.concatenate(times, axis=1),
            np.concatenate(diffs),
        )

    # -- sizes --------------------------------------------------------------------------
    def records(self) -> int:
        return sum(len(b) for b in self.batches)

    def nbytes(self) -> int:
        return sum(b.nbytes() for b in self.batches)
