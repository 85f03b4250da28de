"""Arrangements: a collection indexed by key in a shared, compacting spine.

``Arrange`` turns a stream of updates into a spine plus a per-run keyed ``delta``;
``AsCollection`` turns an arrangement back into a stream, starting from the arrangement's
whole current content when it is created after data arrived (hydration). With
``hydrate_since`` that content arrives advanced to a frontier: the new reader starts from the
contents at that frontier and computes no history before it.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.lattice import Antichain
from engine.operators.base import Arranged, ArrangementReader, Operator, Scope
from engine.trace import Layout, Spine, TraceBatch

__all__ = ["Arrange", "AsCollection"]


class Arrange(Operator):
    """Maintains ``spine``: the input collection arranged by ``key_cols``."""

    name = "arrange"

    def __init__(
        self, scope: Scope, input: Operator, key_cols: Sequence[int], name: str = ""
    ) -> None:
        super().__init__(scope, [input], input.schema)
        self.layout = Layout.by_key(input.ncols, key_cols)
        self.spine = Spine(self.layout, self.dims, name or f"arrange({input.name})")
        self.own = self.spine.reader(name="arrange")
        self.delta: TraceBatch | None = None
        if name:
            self.name = name

    def run(self) -> None:
        batch = self.inputs[0].output
        self.frontier = self.input_frontier()
        self.delta = None
        self.output = batch  # the same updates, for readers created together with it
        if batch is not None and len(batch):
            ahead = self.inputs[0].arranged_for(self)
            delta = ahead if ahead is not None else TraceBatch.from_updates(self.layout, batch)
            if len(delta):
                self.spine.insert(delta)
                self.delta = delta

    def compact(self) -> None:
        self.own.advance(self.compaction_frontier())

    def release(self) -> None:
        super().release()
        self.own.release()


class AsCollection(Operator):
    """The updates of an arrangement as a plain stream (hydrating on its first run)."""

    name = "as_collection"

    def __init__(
        self, scope: Scope, arranged: Arranged, hydrate_since: Antichain | None = None
    ) -> None:
        super().__init__(scope, [arranged], arranged.schema)  # type: ignore[list-item]
        self.source = ArrangementReader(arranged, "as_collection", hydrate_since)

    def run(self) -> None:
        self.frontier = self.input_frontier()
        delta = self.source.delta()
        self.output = delta.to_updates(self.source.arranged.layout) if delta is not None else None

    def compact(self) -> None:
        self.source.advance(self.compaction_frontier())

    def release(self) -> None:
        super().release()
        self.source.release()
