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

__all__ = ["history_frontier", "latest_complete"]


def history_frontier(
    frontier: Antichain, window: int, previous: Antichain | None = None
) -> Antichain:
    if frontier.is_empty:
        return previous if previous is not None else Antichain.minimum(frontier.dims)
    return Antichain(np.maximum(frontier.elements - max(window, 1), 0), frontier.dims)


def latest_complete(frontier: Antichain) -> tuple[int, ...] | None:
    """The default time for reads: one below the meet of the frontier (None if no time is
    complete yet). A closed frontier has no default (callers use their own)."""
    if frontier.is_empty:
        return None
    t = frontier.elements.min(axis=0) - 1
    if (t < 0).any():
        return None
    return tuple(int(x) for x in t)
