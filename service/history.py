"""How far back a reader may still ask: the history frontier and the latest complete time.

For a frontier ``F`` the service keeps traces queryable at the latest complete times: the
history frontier is ``{max(f - 1, 0) for f in F}`` (coordinate-wise), so compaction never
collapses a time that ``GET .../rows`` may still name by default. For one dimension that is
``F - 1``. A closed frontier keeps the previous history frontier.
"""

from __future__ import annotations

import numpy as np

from engine import Antichain

__all__ = ["history_frontier", "latest_complete"]


def history_frontier(frontier: Antichain, previous: Antichain | None = None) -> Antichain:
    if frontier.is_empty:
        return previous if previous is not None else Antichain.minimum(frontier.dims)
    return Antichain(np.maximum(frontier.elements - 1, 0), frontier.dims)


def latest_complete(frontier: Antichain) -> tuple[int, ...] | None:
    """The default time for reads: one below the meet of the frontier (None if no time is
    complete yet). A closed frontier has no default (callers use their own)."""
    if frontier.is_empty:
        return None
    t = frontier.elements.min(axis=0) - 1
    if (t < 0).any():
        return None
    return tuple(int(x) for x in t)
