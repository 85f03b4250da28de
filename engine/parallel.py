"""Two halves of one big compiled call at once: the calling thread and one helper thread.

The engine's kernels are compiled with ``nogil=True``: while one runs, the interpreter lock
is free, so a second thread can run another kernel on another core. A big reduce step or a
big merge splits by key range (keys are independent in both) into two calls, one here and
one on the helper; their results are joined in key order, so they equal the unsplit call's.
Small calls never split: handing work to a thread costs tens of microseconds.

The hand-over watches flags (``engine.spin``) before it sleeps on locks: after its half, the
helper watches for the next one for ``SPIN_MS``, and a caller whose half ends first
watches for the helper's as long, so that within a step, where splits follow each other
within a millisecond or two, neither side waits for the operating system to wake it (at
1k/2k reachability in batches of 1,000 a batch makes about 50 split calls; their hand-overs
cost about 130 µs each on locks alone). The locks still carry every hand-over: a side that
sees its flag takes its lock at once, and one that stops watching sleeps on it.

One wait is left: the helper needs the interpreter lock to start its half, and the caller
holds it until its own half enters compiled code (a few µs of argument checks), and a
thread that finds it held sleeps. So the helper, having seen a half handed over, watches
``LINGER_US`` longer before it takes the lock (hand-overs at 1k/2k in batches of 1,000:
about 45 µs a call without, 22 µs with 10 µs; 4 µs: 26 µs, 16 µs: 27 µs).

A third thread, the merge thread (``background``), runs a small step's big trace merges
whole while the step goes on (``engine.trace.spine``), each on that thread alone, unsplit,
so that the helper stays free for the step's own split calls.

``DIFFLOW_THREADS=1`` in the environment keeps everything on the calling thread; the default
is two threads when the process may run on at least two cores.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from engine import spin
from engine.errors import EngineError

__all__ = ["LINGER_US", "SPIN_MS", "background", "both", "configured", "middle_cut", "threads"]

SPIN_MS = 2.0  # how long each side watches its flag before it sleeps on a lock
LINGER_US = 10.0  # how long the helper waits after seeing a half before it takes it on

A = TypeVar("A")
B = TypeVar("B")


class _Inside(threading.local):
    helper = False  # set on the helper thread


_inside = _Inside()


def _nothing() -> None:
    """The helper's task between calls."""


class _Helper:
    """One daemon thread that runs one half at a time, handed over through two locks (a
    lock's release wakes a waiting thread in about 17-60 µs on the machines measured; a
    thread pool's submit and result, its queue, future and condition variables, took
    57-79 µs), each side first watching a flag for ``SPIN_MS`` (``flags[0]``: halves
    handed over so far, ``flags[1]``: halves done)."""

    def __init__(self) -> None:
        self.go = threading.Lock()  # released when a half is waiting for the helper
        self.done = threading.Lock()  # released when the helper has run it
        self.busy = threading.Lock()  # held by the caller whose half the helper runs
        self.go.acquire()
        self.done.acquire()
        self.task: Callable[[], Any] = _nothing
        self.result: Any = None
        self.error: BaseException | None = None
        self.flags = np.zeros(2, dtype=np.int64)
        self.handed = 0
        per_ms = spin.looks_per_ms()
        self.looks = max(1, int(SPIN_MS * per_ms))
        self.linger = int(LINGER_US * per_ms / 1000)
        threading.Thread(target=self._loop, name="difflow-half", daemon=True).start()

    def _loop(self) -> None:
        _inside.helper = True
        flags, looks, linger = self.flags, self.looks, self.linger
        spin.wait_until(flags, 0, 1, looks)
        ran = 0
        while True:
            # at once when the flag was seen: the caller releases the lock before it
            # publishes the flag
            self.go.acquire()
            task, self.task = self.task, _nothing
            try:
                self.result = task()
            except BaseException as e:  # handed to the caller, raised there
                self.error = e
            ran += 1
            self.done.release()
            spin.publish_and_wait(flags, 1, ran, 0, ran + 1, looks, linger)

    def run(self, here: Callable[[], A], there: Callable[[], B]) -> tuple[A, B]:
        if not self.busy.acquire(blocking=False):  # another thread's split holds it
            return here(), there()
        try:
            self.handed += 1
            self.task, self.result, self.error = there, None, None
            self.go.release()
            spin.publish(self.flags, 0, self.handed)
            try:
                first = here()
            finally:  # the helper's half must not outlive the call
                spin.wait_until(self.flags, 1, self.handed, self.looks)
                self.done.acquire()
            result, error, self.result, self.error = self.result, self.error, None, None
            if error is not None:
                raise error
            return first, result
        finally:
            self.busy.release()


_helper: _Helper | None = None
_helper_lock = threading.Lock()


def _forget_helper() -> None:
    """In a forked child: the parent's threads are not there; make new ones on use."""
    global _helper, _helper_lock, _merger
    _helper, _helper_lock, _merger = None, threading.Lock(), None


os.register_at_fork(after_in_child=_forget_helper)


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
    one (both in turn on this one when the process has one thread, or when the helper is
    busy with another thread's call)."""
    if _THREADS < 2 or _inside.helper:  # on the helper itself: a nested call waits for
        return here(), there()  # nobody (the one helper thread is this one)
    global _helper
    if _helper is None:
        with _helper_lock:
            if _helper is None:
                _helper = _Helper()
    return _helper.run(here, there)


_merger: ThreadPoolExecutor | None = None


def background(fn: Callable[..., A], *args: Any) -> Future[A]:
    """``fn(*args)`` on the merge thread (one worker, made on first use), in the order
    submitted; the future holds its result or its error."""
    global _merger
    if _merger is None:
        with _helper_lock:
            if _merger is None:
                _merger = ThreadPoolExecutor(1, thread_name_prefix="difflow-merge")
    return _merger.submit(fn, *args)


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
