"""The C allocator's settings: freed memory stays with the process for the next step.

Every step allocates and frees arrays of about a megabyte by the dozen (batches being built
and merged, the kernels' scratch). glibc's ``malloc`` by default hands freed memory at the
top of its heap back to the kernel once more than a little of it is free, and serves
arrays from a threshold that adapts upwards with ``mmap``: either way the next step's
arrays land on fresh pages, and the kernel faults and zeroes every page on first touch. At
1k/2k reachability in batches of 1,000 that cost a fifth of the time (a merge of 467,000
records: 7.8 ms with the defaults, 5.4 ms with freed memory kept).

So, on glibc, the engine sets (``mallopt``, when it is imported):

* ``M_MMAP_THRESHOLD`` 32 MiB: arrays below it come from the heap and reuse its pages
  (32 MiB is where glibc's own adaptive threshold stops; bigger ones are still mapped and
  returned whole when freed);
* ``M_TRIM_THRESHOLD`` 128 MiB: up to that much free memory at the top of a heap is kept;
* ``M_TOP_PAD`` 16 MiB: a heap grows by at least that much at a time.

The price is up to 128 MiB of free memory per heap (one per thread that allocates) kept
mapped. ``DIFFLOW_MALLOC=system`` leaves glibc's defaults; so does setting any of glibc's
own ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or ``MALLOC_TOP_PAD_`` (the
variables glibc reads itself). Elsewhere than glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Callable, Mapping

from engine.errors import EngineError

__all__ = ["SETTINGS", "configured", "free_bytes", "give_back", "setting"]

_MIB = 1 << 20
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # mallopt's parameters (malloc.h)
SETTINGS = {_M_MMAP_THRESHOLD: 32 * _MIB, _M_TRIM_THRESHOLD: 128 * _MIB, _M_TOP_PAD: 16 * _MIB}
_GLIBC_OWN = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def configured(setting: str | None, environ: Mapping[str, str]) -> bool:
    """Whether to set the allocator: ``DIFFLOW_MALLOC=setting`` is ``tuned`` (the default)
    or ``system`` (any other value is an ``EngineError``); glibc's own variables in
    ``environ`` mean the user chose."""
    value = (setting or "").strip() or "tuned"
    if value not in ("tuned", "system"):
        raise EngineError(f"DIFFLOW_MALLOC must be 'tuned' or 'system', not {setting!r}")
    return value == "tuned" and not any(name in environ for name in _GLIBC_OWN)


def _apply() -> str:
    if not configured(os.environ.get("DIFFLOW_MALLOC"), os.environ):
        return "system"
    if platform.libc_ver()[0] != "glibc":
        return "system (not glibc)"
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if not all(mallopt(param, value) == 1 for param, value in SETTINGS.items()):
        return "system (mallopt refused)"
    return "tuned"


_SETTING = _apply()


def setting() -> str:
    """What the engine did to the allocator: ``tuned``, or ``system`` and why."""
    return _SETTING


def _trim() -> Callable[[], object] | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    trim = ctypes.CDLL(None).malloc_trim
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


_TRIM = _trim()


def give_back() -> None:
    """Hand the C heap's free pages back to the kernel (glibc's ``malloc_trim``), wherever
    they are in its heaps; for after a dataflow is dropped: the free memory the settings
    above keep is meant for the next step's arrays, and a dropped view's is far more."""
    if _TRIM is not None:
        _TRIM()


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _mallinfo() -> Callable[[], int] | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    info = getattr(ctypes.CDLL(None), "mallinfo2", None)  # glibc 2.33 and later
    if info is None:
        return None
    info.argtypes, info.restype = [], _MallInfo2
    return lambda: int(info().fordblks)


_FREE = _mallinfo()


def free_bytes() -> int | None:
    """Bytes free in the C heap's arenas, kept by the process (glibc's ``mallinfo2``; None
    where there is none): what :func:`give_back` could hand back at most."""
    return _FREE() if _FREE is not None else None
