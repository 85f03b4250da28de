"""How far back a reader may still ask: the history frontier and the latest complete time.

For a frontier ``F`` and a history window ``w >= 1`` the service keeps traces queryable at
every time at or beyond ``{max(f - w, 0) for f in F}`` (coordinate-wise): reads ``as_of`` any
complete time in that range are answered, older ones are compacted away. ``w = 1`` keeps just
the latest complete times (``F - 1`` in one dimension). A closed frontier keeps the previous
history frontier.
"""

from __future__ import annotations

import numpy as np

from engine import Antichain

__all__ = ["frontier_join", "history_frontier", "latest_complete"]


def history_frontier(
    frontier: Antichain, window: int, previous: Antichain | None = None
) -> Antichain:
    if frontier.is_empty:
        return previous if previous is not None else Antichain.minimum(frontier.dims)
    return Antichain(np.maximum(frontier.elements - max(window, 1), 0), frontier.dims)


def frontier_join(a: Antichain, b: Antichain) -> Antichain:
    """The least frontier at or beyond both: the minimal pairwise joins of their elements
    (closed if either is)."""
    if a.is_empty or b.is_empty:
        return Antichain.closed(a.dims)
    pairs = np.maximum(a.elements[:, None, :], b.elements[None, :, :]).reshape(-1, a.dims)
    return Antichain(pairs, a.dims)


def latest_complete(
    frontier: Antichain, extent: np.ndarray | None = None
) -> tuple[int, ...] | None:
    """The default time for reads: the greatest complete time below a bound, the
    frontier's coordinate-wise maximum less one (in one dimension ``F - 1``; for
    ``[[0, 2], [2, 0]]``, ``(1, 1)``), raised to ``extent`` (the greatest coordinates of the
    data's times) where that is more: below ``[[1, 7]]`` every ``(x, 6)`` is complete, and
    data at ``(3, 1)`` is read at ``(3, 6)``, not at ``(0, 6)``. Where incomparable times
    are latest, the lexicographically greatest of them. None if no time is complete yet; a
    closed frontier has no default (callers use their own). Every answer is also kept by
    any history window (``history_frontier``): it is at or beyond some ``max(f - w, 0)``."""
    if frontier.is_empty:
        return None
    upper = np.maximum(frontier.elements.max(axis=0) - 1, 0)
    if extent is not None:
        upper = np.maximum(upper, extent)
    if frontier.complete(upper.reshape(-1, 1))[0]:  # one element, or one dimension: the usual
        return tuple(int(x) for x in upper)
    t = np.zeros(frontier.dims, dtype=np.int64)
    if not frontier.complete(t.reshape(-1, 1))[0]:
        return None
    # coordinate by coordinate, the greatest value that keeps a complete time below it (the
    # complete times are a down-set: bisect)
    for i in range(frontier.dims):
        lo, hi = 0, int(upper[i])
        while lo < hi:
            mid = (lo + hi + 1) // 2
            t[i] = mid
            if frontier.complete(t.reshape(-1, 1))[0]:
                lo = mid
            else:
                hi = mid - 1
        t[i] = lo
    return tuple(int(x) for x in t)
