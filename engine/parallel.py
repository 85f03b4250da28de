"""Two halves of one big compiled call at once: the calling thread and one helper thread.

The engine's kernels are compiled with ``nogil=True``: while one runs, the interpreter lock
is free, so a second thread can run another kernel on another core. A big reduce step or a
big merge splits by key range (keys are independent in both) into two calls, one here and
one on the helper; their results are joined in key order, so they equal the unsplit call's.
Small calls never split: handing work to a thread costs tens of microseconds.

``DIFFLOW_THREADS=1`` in the environment keeps everything on the calling thread; the default
is two threads when the process may run on at least two cores.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

import numpy as np

from engine.errors import EngineError

__all__ = ["both", "configured", "middle_cut", "threads"]

A = TypeVar("A")
B = TypeVar("B")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class _Inside(threading.local):
    helper = False  # set on the helper thread


_inside = _Inside()


def _mark_helper() -> None:
    _inside.helper = True


def _forget_pool() -> None:
    """In a forked child: the parent's helper thread is not there; make a new one on use."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def configured(setting: str | None, cores: int) -> int:
    """The thread count ``DIFFLOW_THREADS=setting`` asks for on ``cores`` usable cores: 1 or
    2 when set (any other value is an ``EngineError``), else 2 when there are two cores."""
    if setting is None or not setting.strip():
        return 2 if cores >= 2 else 1
    if setting.strip() not in ("1", "2"):
        raise EngineError(f"DIFFLOW_THREADS must be 1 or 2, not {setting!r}")
    return int(setting)


_THREADS = configured(os.environ.get("DIFFLOW_THREADS"), _usable_cores())


def threads() -> int:
    """How many threads a split call uses: 1 or 2 (fixed when the engine is imported)."""
    return _THREADS


def both(here: Callable[[], A], there: Callable[[], B]) -> tuple[A, B]:
    """``(here(), there())``: ``there`` on the helper thread while ``here`` runs on this
    one (both in turn on this one when the process has one thread)."""
    if _THREADS < 2 or _inside.helper:  # on the helper itself: a nested call waits for
        return here(), there()  # nobody (the one helper thread is this one)
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="difflow-half", initializer=_mark_helper
                )
    future = _pool.submit(there)
    try:
        first = here()
    except BaseException:
        wait([future])  # the helper's half must not outlive the call
        raise
    return first, future.result()


def middle_cut(codes: list[np.ndarray]) -> np.ndarray | None:
    """Where each of several ascending code arrays splits in two: before the middle code of
    the longest (after it, when that is every array's least code), so that equal codes stay
    on one side. None when one side would be empty."""
    total = sum(len(c) for c in codes)
    if total < 2:
        return None
    longest = max(codes, key=len)
    pivot = longest[len(longest) // 2]
    for side in ("left", "right"):
        cut = np.array([np.searchsorted(c, pivot, side) for c in codes], dtype=np.int64)
        if 0 < int(cut.sum()) < total:
            return cut
    return None
