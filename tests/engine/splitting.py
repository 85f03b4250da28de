"""Every reduce step, trace merge, packed arrangement, join and key hashing split in two on two
threads, and every general reduce step run key by key (``reduce.PAIRS_PER_PART``), for
tests: the engine splits only big ones (thousands of records), which small random streams
never reach."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from engine import hashing, parallel
from engine.operators import join, reduce, reduce_step
from engine.trace import batch, packed_arrange


@contextmanager
def every_call_split() -> Iterator[None]:
    saved = (
        parallel._THREADS,
        reduce_step.SPLIT_FROM,
        batch.MERGE_SPLIT_FROM,
        packed_arrange.SPLIT_FROM,
        join.SPLIT_FROM,
        hashing.SPLIT_FROM,
        reduce.PAIRS_PER_PART,
    )
    parallel._THREADS, reduce_step.SPLIT_FROM, reduce.PAIRS_PER_PART = 2, 0, 0
    batch.MERGE_SPLIT_FROM = packed_arrange.SPLIT_FROM = join.SPLIT_FROM = hashing.SPLIT_FROM = 0
    try:
        yield
    finally:
        (
            parallel._THREADS,
            reduce_step.SPLIT_FROM,
            batch.MERGE_SPLIT_FROM,
            packed_arrange.SPLIT_FROM,
            join.SPLIT_FROM,
            hashing.SPLIT_FROM,
            reduce.PAIRS_PER_PART,
        ) = saved
