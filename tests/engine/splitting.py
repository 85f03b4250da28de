"""Every reduce step and trace merge split in two on two threads, for tests: the engine
splits only big ones (thousands of records), which small random streams never reach."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from engine import parallel
from engine.operators import reduce_step
from engine.trace import batch


@contextmanager
def every_call_split() -> Iterator[None]:
    saved = parallel._THREADS, reduce_step.SPLIT_FROM, batch.MERGE_SPLIT_FROM
    parallel._THREADS, reduce_step.SPLIT_FROM, batch.MERGE_SPLIT_FROM = 2, 0, 0
    try:
        yield
    finally:
        parallel._THREADS, reduce_step.SPLIT_FROM, batch.MERGE_SPLIT_FROM = saved
