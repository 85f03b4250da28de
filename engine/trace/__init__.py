"""Storage: arranged batches, the LSM spine, readers and compaction. Knows nothing of
scheduling or operators."""

from engine.trace.batch import TraceBatch
from engine.trace.layout import Layout
from engine.trace.spine import History, Spine, TraceReader

__all__ = ["History", "Layout", "Spine", "TraceBatch", "TraceReader"]
