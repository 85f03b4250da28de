"""A view's runtime state: its dataflow, its output arrangement, and what it has published.

Invariants: outputs at times the view's frontier calls complete are *final*: they are
published once, in time order, to subscribers and kept in ``final_history`` while writes
that may ask for them are pending; outputs at other times wait in ``pending_out``.
``rows`` is the total multiplicity of the final outputs, exact (a Python int); its description
saturates it to int64 (``count_to_wire``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from engine import Antichain, Arrangement, Capture, Schema, TraceReader, UpdateBatch
from engine.operators import Arrange, Arranged, Operator, Reduce
from engine.operators.iterate import LoopRegion
from service.codec import count_to_wire, frontier_to_wire
from service.plan import Domain
from service.subscriptions import Subscriber

__all__ = ["ViewState", "arrangements_of"]


def arrangements_of(ops: list[Operator]) -> list[tuple[str, Arrange | Reduce]]:
    """Every operator holding a spine among ``ops``, loop bodies included, each with a name
    of its own: its operator's name, after ``iterate: `` per loop it is in, and ``#2``,
    ``#3``, ... where that name was taken (descriptions and metric labels tell them apart)."""
    named: list[tuple[str, Arrange | Reduce]] = []
    _collect(ops, "", named)
    taken: dict[str, int] = {}
    out = []
    for label, op in named:
        taken[label] = taken.get(label, 0) + 1
        out.append((label if taken[label] == 1 else f"{label} #{taken[label]}", op))
    return out


def _collect(ops: list[Operator], prefix: str, out: list[tuple[str, Arrange | Reduce]]) -> None:
    for op in ops:
        if isinstance(op, (Arrange, Reduce)):
            out.append((prefix + op.name, op))
        if isinstance(op, LoopRegion):
            _collect(op.inner.operators, prefix + "iterate: ", out)


class ViewState:
    def __init__(
        self,
        name: str,
        query: Any,
        schema: Schema,
        inputs: list[str],
        domain: Domain,
        tables: set[str],
        ops: list[Operator],
        capture: Capture,
        output: Arrangement,
    ) -> None:
        self.name = name
        self.query = query
        self.schema = schema
        self.inputs = inputs
        self.domain = domain
        self.tables = tables  # every table it reads, directly or through views
        self.ops = ops
        self.capture = capture
        self.output = output
        self.history: TraceReader = output.op.spine.reader(name="history")
        self.frontier = Antichain.minimum(domain.dims)
        self.pending_out: list[UpdateBatch] = []
        self.final_history: list[UpdateBatch] = []
        self.rows = 0
        self.latencies: deque[float] = deque(maxlen=4096)
        self.subscribers: set[Subscriber] = set()
        self.readers: set[str] = set()
        self.failure: str | None = None  # set when its dataflow failed; it no longer runs
        # where it started (``Catalog.create_view``), while its frontier has not reached it:
        # outputs at earlier times are advanced to it, as its hydrated content was (an input
        # that had forgotten those times could not say what the view held at them)
        self.start: Antichain | None = None

    def latency_summary(self) -> dict[str, float | None]:
        if not self.latencies:
            return {"p50": None, "p99": None}
        arr = np.fromiter(self.latencies, dtype=np.float64)
        return {
            "p50": round(float(np.percentile(arr, 50)), 3),
            "p99": round(float(np.percentile(arr, 99)), 3),
        }

    def describe(self, shared: list[tuple[str, Arranged, list[str]]]) -> dict[str, Any]:
        arrangements = [
            {
                "name": label,
                "records": op.spine.records(),
                "bytes": op.spine.nbytes(),
                "shared_with": [],
            }
            for label, op in arrangements_of(self.ops)
        ]
        arrangements += [
            {
                "name": n,
                "records": op.spine.records(),
                "bytes": op.spine.nbytes(),
                "shared_with": others,
            }
            for n, op, others in shared
        ]
        return {
            "name": self.name,
            "query": self.query,
            "columns": [{"name": c.name, "type": c.type.value} for c in self.schema.columns],
            "inputs": list(self.inputs),
            "frontier": frontier_to_wire(self.frontier),
            "rows": count_to_wire(self.rows),
            "arrangements": arrangements,
            "latency_ms": self.latency_summary(),
            "state": "failed" if self.failure else "ready",
            **({"error": self.failure} if self.failure else {}),
        }
