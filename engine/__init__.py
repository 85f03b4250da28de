"""difflow's engine: differential dataflow in Python on numpy.

Build a dataflow on a :class:`Graph`, feed it through :class:`InputHandle` objects, call
``graph.step()``, and read outputs from :class:`Capture` operators::

    g = Graph()
    roots_in, roots = g.new_input([("node", "int")])
    edges_in, edges = g.new_input([("src", "int"), ("dst", "int")])
    start = roots.select(root="node", node="node")
    reach = start.iterate(lambda r: r.join(edges, on=[("node", "src")],
                                           columns={"root": "left.root", "node": "right.dst"})
                                      .concat(start).distinct())
    out = reach.capture()
"""

from engine import (
    allocator,  # noqa: F401 (freed memory kept for the next step: see there)
    array_boxing,  # noqa: F401 (before any kernel: how kernels return arrays)
    jit_cache,  # noqa: F401 (before any kernel: where the kernels below are cached)
)
from engine.batch import UpdateBatch
from engine.collection import Arrangement, Collection, iterate
from engine.consolidate import consolidate
from engine.errors import (
    EngineError,
    ExpressionError,
    GraphError,
    IterationLimitError,
    IterationStopped,
    LimitError,
    SchemaError,
    StepError,
    TimeError,
)
from engine.expr import Expr, call, col, lit
from engine.graph import Graph
from engine.interning import StringInterner
from engine.lattice import Antichain, advance_by, join, leq, meet
from engine.operators import Capture, InputHandle
from engine.schema import Column, ColumnType, Schema
from engine.trace import Layout, Spine, TraceBatch, TraceReader

__all__ = [
    "Antichain",
    "Arrangement",
    "Capture",
    "Collection",
    "Column",
    "ColumnType",
    "EngineError",
    "Expr",
    "ExpressionError",
    "Graph",
    "GraphError",
    "InputHandle",
    "IterationLimitError",
    "IterationStopped",
    "Layout",
    "LimitError",
    "Schema",
    "SchemaError",
    "Spine",
    "StepError",
    "StringInterner",
    "TimeError",
    "TraceBatch",
    "TraceReader",
    "UpdateBatch",
    "advance_by",
    "call",
    "col",
    "consolidate",
    "iterate",
    "join",
    "leq",
    "lit",
    "meet",
]
