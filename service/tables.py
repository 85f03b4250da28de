"""A table's runtime state: its input, its arrangement, its frontier and primary keys.

Invariant: ``pk_index`` (tables with a primary key) holds each present key's stored row, in
storage form (``service.key_index``), and agrees with the table's accumulated contents at
the latest time written (client-timed keyed writes come in time order: ``stage_write``);
``rows`` is the table's total multiplicity, exact (the sum of every diff written, a Python
int); its description saturates it to int64 (``count_to_wire``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine import Antichain, Arrangement, Graph, InputHandle, Schema, TraceReader
from engine.operators import Operator
from service.codec import count_to_wire, frontier_to_wire
from service.ingest import TableShape
from service.key_index import KeyIndex
from service.plan import Domain

__all__ = ["TableState"]


class TableState:
    def __init__(
        self, graph: Graph, shape: TableShape, primary_key: list[str], start: Antichain
    ) -> None:
        self.shape = shape
        self.primary_key = primary_key
        self.handle: InputHandle
        self.handle, coll = graph.new_input(shape.schema, shape.dims, shape.name)
        self.handle.advance_to(start)
        self.arrangement: Arrangement = coll.arrange_by_self(name=shape.name)
        self.history: TraceReader = self.arrangement.op.spine.reader(name="history")
        self.ops: list[Operator] = [coll.op, self.arrangement.op]
        self.pk_index = (
            KeyIndex(len(shape.schema), shape.primary_key) if shape.primary_key else None
        )
        self.rows = 0
        self.readers: set[str] = set()
        # client-timed with a primary key: the join of the times written (``stage_write``)
        self.keyed_upto: np.ndarray | None = None

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def schema(self) -> Schema:
        return self.shape.schema

    @property
    def domain(self) -> Domain:
        return Domain(self.shape.timing, self.shape.dims)

    @property
    def frontier(self) -> Antichain:
        return self.handle.frontier

    def describe(self, frontier: Antichain) -> dict[str, Any]:
        """Its description, with ``frontier`` (``Catalog.table_frontier``)."""
        return {
            "name": self.name,
            "columns": [{"name": c.name, "type": c.type.value} for c in self.schema.columns],
            "primary_key": list(self.primary_key),
            "timing": self.shape.timing,
            "time_dims": self.shape.dims,
            "frontier": frontier_to_wire(frontier),
            "rows": count_to_wire(self.rows),
            "readers": sorted(self.readers),
        }
