"""Python's cyclic collector paused while bulk results are built.

Every dict a response holds counts towards the collector's next pass, and with the
service's heap the older generations' passes follow: building one write's 476k changes
(audit 24's 3-D grid) took 1.34 s of dicts, against 0.2-0.3 s with no collection meanwhile.
What is built holds no cycles, so nothing is lost by collecting after it instead. Sections
may overlap across threads: the collector resumes when the last one ends, and only if it
was running when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
