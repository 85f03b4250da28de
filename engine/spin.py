"""Spin waits on shared flags: one thread hands work to another faster than a lock can wake it.

A thread blocked on a lock sleeps in the kernel, and its core goes idle; the release that
wakes it costs tens of microseconds on the virtual machines measured here (a round trip of
two wake-ups read 62 µs at the median, and a split call's hand-over and hand-back cost
about 100 µs in all, see ``engine.parallel``). A thread that instead watches a flag in
memory sees it change within a fraction of a microsecond. The waits here are compiled
(``nogil``): a thread spinning in one holds neither the interpreter lock nor anything
else, and gives up after a given number of looks, so that the caller can fall back to
sleeping on a lock.

Flags are ``int64`` arrays written and read atomically (release and acquire): what a
thread wrote before it published a value is seen by the thread that sees the value.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["looks_per_ms", "publish", "publish_and_wait", "wait_until"]


def _flag_pointer(context: Any, builder: Any, aryty: Any, ary: Any, index: Any) -> Any:
    array = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, array, [index])


def _load_typing(typingctx: Any, flags: Any, index: Any) -> Any:
    if not (isinstance(flags, types.Array) and flags.dtype == types.int64):
        return None
    sig = types.int64(flags, index)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ptr = _flag_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(ptr, ordering="acquire", align=8)

    return sig, codegen


def _store_typing(typingctx: Any, flags: Any, index: Any, value: Any) -> Any:
    if not (isinstance(flags, types.Array) and flags.dtype == types.int64):
        return None
    sig = types.void(flags, index, types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ptr = _flag_pointer(context, builder, signature.args[0], args[0], args[1])
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(value, ptr, ordering="release", align=8)
        return context.get_dummy_value()

    return sig, codegen


# flags[i], read with acquire ordering (never hoisted out of a loop, unlike a plain read)
_load: Any = intrinsic(_load_typing)
# flags[i] = value, with release ordering
_store: Any = intrinsic(_store_typing)


@njit(cache=True, nogil=True)
def wait_until(flags: np.ndarray, i: int, value: int, looks: int) -> bool:
    """Whether ``flags[i]`` reads ``value`` within ``looks`` looks."""
    for _ in range(looks):  # noqa: SIM110 - a plain loop compiles to the tightest code
        if _load(flags, i) == value:
            return True
    return False


@njit(cache=True, nogil=True)
def publish(flags: np.ndarray, i: int, value: int) -> None:
    """``flags[i] = value``, after everything this thread wrote before."""
    _store(flags, i, value)


@njit(cache=True, nogil=True)
def publish_and_wait(
    flags: np.ndarray, i: int, value: int, j: int, expect: int, looks: int, linger: int
) -> bool:
    """``flags[i] = value``, then whether ``flags[j]`` reads ``expect`` within ``looks``
    looks; once it does, ``linger`` more looks pass before the call returns. One call: the
    interpreter lock is already released when the value appears, so a thread that waited
    for it takes the lock at once; the lingering leaves the other thread time to release
    it in turn (``engine.parallel``)."""
    _store(flags, i, value)
    if not wait_until(flags, j, expect, looks):
        return False
    seen = True
    for _ in range(linger):  # looks kept (an ordered load is never dropped as unused)
        seen = _load(flags, j) == expect
    return seen


def looks_per_ms() -> int:
    """About how many looks :func:`wait_until` makes in a millisecond here (the fastest of
    three timed waits that never succeed)."""
    flags = np.zeros(1, np.int64)
    looks = 1 << 18
    wait_until(flags, 0, 1, 1)  # compiled (or loaded) before timing
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        wait_until(flags, 0, 1, looks)
        best = min(best, time.perf_counter() - t)
    return max(1, int(looks / (best * 1e3)))
