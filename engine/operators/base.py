"""The operator contract and scopes.

An :class:`Operator` lives in one :class:`Scope`, reads the outputs of operators created
before it in the same scope (so creation order is a topological order), and on ``run()``
sets ``output`` (this run's updates, or None) and ``frontier`` (its output frontier). See
``engine.progress`` for the frontier rules.

Operators that keep an arrangement implement :class:`Arranged`: a ``spine`` plus ``delta``,
the keyed batch this run added to it. Readers of an arrangement created after it already
holds data start from its whole content (that is how a dataflow built later hydrates).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Protocol

import numpy as np

from engine.batch import UpdateBatch
from engine.errors import GraphError
from engine.interning import StringInterner
from engine.lattice import Antichain
from engine.progress import earliest_ready_round, meet_all
from engine.schema import Schema
from engine.trace import Layout, Spine, TraceBatch, TraceReader

__all__ = ["Arranged", "ArrangementReader", "BuiltKey", "Operator", "Scope", "undo_on_error"]


BuiltKey = tuple[str, int, tuple[int, ...]]  # see Scope.once


class Scope:
    """A set of operators sharing a time domain; loop scopes add one coordinate."""

    def __init__(self, parent: Scope | None, dims: int | None, name: str = "root") -> None:
        self.parent = parent
        self.dims = dims  # None in the root scope: each input chooses its own
        self.name = name
        self.operators: list[Operator] = []
        self.frontier: Antichain | None = None  # loop scopes: the current round frontier
        self.rest: Antichain | None = None  # loop scopes: the frontier traces compact to
        self.is_loop = parent is not None  # an attribute: read by every operator every round
        self.round = 0  # loop scopes: the iteration being delivered
        self.interner: StringInterner | None = parent.interner if parent is not None else None
        # operators built once and read by many (see ``once``): always in a loop scope (its
        # operators all belong to one dataflow, and go with it); in the root scope only while
        # one dataflow is built (``Graph.building``), for root operators may be shared by
        # dataflows that come and go (a service's views), which must not hand each other
        # what they built
        self.built: dict[BuiltKey, Operator] | None = None
        # the root scope inside ``Graph.building``: what to read in place of building an
        # operator, where something outside the dataflow already keeps it (a service's
        # shared arrangement of a table the view reads), or None
        self.provide: Callable[[BuiltKey], Operator | None] | None = None
        # the root scope during ``Graph.step(pause)``: called between operators and at the
        # start of every loop round
        self.pause: Callable[[], None] | None = None
        # the root scope during ``undo_on_error``: how to undo what the build call has
        # added so far, in every scope (operators, ``once`` entries)
        self.journal: list[Callable[[], object]] | None = None

    @property
    def root(self) -> Scope:
        s = self
        while s.parent is not None:
            s = s.parent
        return s

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()

    def once(self, key: BuiltKey, make: Callable[[], Operator]) -> Operator:
        """The operator built for ``key`` (``("enter" | "arrange" | "present", id of its
        input, key columns)``): the first time, the one ``provide`` offers, else one made by
        ``make``; a new one every time where the scope keeps none."""
        built = self.built
        if built is None:
            return make()
        op = built.get(key)
        if op is None:
            offered = self.provide(key) if self.provide is not None else None
            op = built[key] = offered if offered is not None else make()
            self._journal(partial(built.pop, key, None))
        return op

    def add(self, op: Operator) -> None:
        self.operators.append(op)
        self._journal(lambda: self._undo_add(op))

    def _undo_add(self, op: Operator) -> None:
        if not op.dropped:  # a loop's release has released its inner operators
            op.release()
        self.operators = [o for o in self.operators if o is not op]

    def _journal(self, undo: Callable[[], object]) -> None:
        journal = self.root.journal
        if journal is not None:
            journal.append(undo)

    def remove(self, ops: Sequence[Operator]) -> None:
        drop = {id(o) for o in ops}
        self.operators = [o for o in self.operators if id(o) not in drop]


@contextmanager
def undo_on_error(scope: Scope) -> Iterator[None]:
    """A build call is all or nothing: where it raises, the operators it added (in any
    scope) are released and removed, and what it kept for sharing is forgotten, so the
    graph steps as before. A nested call undoes its own part (a caller that catches its
    error, in a loop body say, goes on with the graph as it was before that call)."""
    root = scope.root
    outermost = root.journal is None
    journal = root.journal if root.journal is not None else []
    root.journal = journal
    mark = len(journal)
    try:
        yield
    except BaseException:
        undo = journal[mark:]
        del journal[mark:]
        for step in reversed(undo):
            step()
        raise
    finally:
        if outermost:
            root.journal = None


class Operator:
    """Base class: wiring, frontiers and the run contract."""

    name = "operator"
    scope: Scope
    dropped: bool
    inputs: tuple[Operator, ...]
    schema: Schema
    ncols: int
    dims: int

    def __init__(
        self, scope: Scope, inputs: Sequence[Operator], schema: Schema, dims: int | None = None
    ) -> None:
        for i in inputs:
            if i.dropped:
                raise GraphError(
                    f"{self.name}: input {i.name!r} was dropped from the graph; it runs no more"
                )
            if i.scope is not scope:
                raise GraphError(
                    f"{self.name}: input {i.name!r} lives in scope {i.scope.name!r}, not "
                    f"{scope.name!r}; enter it into the loop first"
                )
        if dims is None:
            dims = scope.dims if scope.dims is not None else inputs[0].dims
        for i in inputs:
            if i.dims != dims:
                raise GraphError(
                    f"{self.name}: inputs have {i.dims} and {dims} time coordinates; "
                    "a dataflow reads collections of one time domain"
                )
        self.scope = scope
        self.inputs = tuple(inputs)
        self.schema = schema
        self.ncols = len(schema)
        self.dims = dims
        self.output: UpdateBatch | None = None
        self.frontier = Antichain.minimum(dims)
        self.dropped = False
        scope.add(self)

    def input_frontier(self) -> Antichain:
        """Times at or beyond this frontier may still arrive at this operator."""
        if self.scope.is_loop:
            assert self.scope.frontier is not None
            return self.scope.frontier
        return meet_all((i.frontier for i in self.inputs), self.dims)

    def compaction_frontier(self) -> Antichain:
        """What this operator's traces may compact to."""
        if self.scope.is_loop:
            assert self.scope.rest is not None
            return self.scope.rest
        return self.input_frontier()

    def run(self) -> None:
        raise NotImplementedError

    def arranged_for(self, reader: Operator) -> TraceBatch | None:
        """This run's output arranged already for ``reader`` (an ``Arrange`` of it), or None:
        an input's batch arranged ahead of its step (``InputHandle.arrange_ahead``). Taken
        once: the reader keeps it."""
        return None

    def compact(self) -> None:
        """Let the traces this operator reads or keeps compact to its compaction frontier.
        Whoever runs the operator calls this after it: ``Graph.step`` after each run in the
        root scope; a loop once its rounds are done (``LoopRegion.compact``), as its scope's
        compaction frontier (the rest frontier) stays put through them."""

    def pending_times(self) -> np.ndarray:
        """Times (``(dims, m)``) at which this operator still owes work."""
        return np.zeros((self.dims, 0), dtype=np.int64)

    def pending_time_parts(self) -> list[np.ndarray]:
        """:meth:`pending_times` in the parts the operator keeps them in (no copy)."""
        return [self.pending_times()]

    def next_round(self, felems: np.ndarray, after: int) -> int:
        """In a loop scope: the least iteration ``> after`` at which this operator owes work
        whose outer part is complete at the parent frontier ``felems``; -1 when none."""
        best = -1
        for p in self.pending_time_parts():
            if p.shape[1]:
                r = earliest_ready_round(np.ascontiguousarray(p), felems, after)
                if r >= 0 and (best < 0 or r < best):
                    best = r
        return best

    def release(self) -> None:
        """Give up trace readers (the operator is being dropped)."""
        self.dropped = True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class Arranged(Protocol):
    """An operator that maintains an arrangement others may read and share."""

    spine: Spine
    layout: Layout
    delta: TraceBatch | None
    schema: Schema
    scope: Scope
    dims: int
    frontier: Antichain
    name: str


class ArrangementReader:
    """A consumer's view of an arrangement: its first read is the whole content (hydration),
    later reads are the batches added since; its trace reader holds back compaction."""

    __slots__ = ("arranged", "hydrate_since", "reader", "started")

    def __init__(
        self, arranged: Arranged, owner: str, hydrate_since: Antichain | None = None
    ) -> None:
        self.arranged = arranged
        self.reader: TraceReader = arranged.spine.reader(name=owner)
        self.started = False
        self.hydrate_since = hydrate_since  # first read: content advanced to this frontier

    def delta(self) -> TraceBatch | None:
        if not self.started:
            self.started = True
            content = self.arranged.spine.content()
            if self.hydrate_since is not None and len(content):
                content = TraceBatch.merge(self.arranged.layout, [content], self.hydrate_since)
            return content if len(content) else None
        d = self.arranged.delta
        return d if d is not None and len(d) else None

    @property
    def spine(self) -> Spine:
        return self.arranged.spine

    def advance(self, frontier: Antichain) -> None:
        """Allow compaction to ``frontier`` (ignored unless it moves forward)."""
        current = self.reader.frontier
        if frontier is current or self.reader.released:
            return
        if current.precedes(frontier):
            self.reader.advance(frontier)

    def release(self) -> None:
        self.reader.release()
