"""Progress: which times are final, per operator and per loop round.

The rules, in one place:

* An input's frontier is what its handle says (``advance_to``).
* In the root scope an operator's input frontier is the meet of its inputs' output frontiers,
  and its output frontier equals its input frontier once it has run: every operator finishes
  all work at complete times when it runs, and holds only times that are not yet complete.
* In a loop scope at round ``r`` (iteration coordinate ``r``) every operator sees the round
  frontier ``{(f, 0) : f in F} ∪ {(0, ..., 0, r + 1)}``, where ``F`` is the loop region's
  input frontier in the parent scope: a time ``(t, i)`` is final iff ``t`` is complete in
  the parent and ``i <= r``. Rounds run in increasing order, operators in topological order,
  and the feedback edge adds one to the iteration coordinate, so nothing can arrive later at
  a time this frontier calls final.
* Traces inside a loop compact to the rest frontier ``{(f, 0) : f in F}``, which only moves
  forward across parent steps (the round frontier restarts at round 0 each parent step).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numba import njit

from engine.lattice import Antichain, frontier_reaches

__all__ = [
    "RoundFrontiers",
    "earliest_ready_round",
    "meet_all",
    "rest_frontier",
    "round_frontier",
]


def meet_all(frontiers: Iterable[Antichain], dims: int) -> Antichain:
    """Meet of frontiers (minimal elements of the union); closed when there are none."""
    out: Antichain | None = None
    for f in frontiers:
        out = f if out is None else out.meet(f)
    return out if out is not None else Antichain.closed(dims)


def rest_frontier(parent: Antichain) -> Antichain:
    """The frontier of a loop scope between parent steps: ``{(f, 0)}``."""
    return parent.extend(0)


class RoundFrontiers:
    """The frontiers of a loop scope's rounds (:func:`round_frontier`) for one parent
    frontier: the parent part is built once, each round only sets its bump."""

    __slots__ = ("dims", "fixed", "rows")

    def __init__(self, parent: Antichain) -> None:
        dims = self.dims = parent.dims + 1
        elements = parent.elements
        # the bump (0, ..., 0, r + 1) first, then the parent's elements extended by 0
        self.rows = np.zeros((elements.shape[0] + 1, dims), dtype=np.int64)
        self.rows[1:, :-1] = elements
        self.fixed: Antichain | None = None
        # a parent frontier holding time zero holds nothing else (it is an antichain); then
        # (0, ..., 0) is <= every bump and is every round's frontier. Read as Python ints:
        # numpy's reductions cost microseconds each on arrays this small, once per step.
        first = elements.tolist()
        if len(first) == 1 and not any(first[0]):
            self.fixed = Antichain.minimum(dims)

    def at(self, round_: int) -> Antichain:
        if self.fixed is not None:
            return self.fixed
        rows = self.rows.copy()
        rows[0, -1] = round_ + 1
        return Antichain.trusted(rows, self.dims)  # incomparable: the bump sorts first


def round_frontier(parent: Antichain, round_: int) -> Antichain:
    """The frontier of a loop scope after round ``round_`` has delivered its inputs."""
    return RoundFrontiers(parent).at(round_)


@njit(cache=True, nogil=True)
def earliest_ready_round(pending: np.ndarray, felems: np.ndarray, after: int) -> int:
    """The least iteration ``> after`` among loop-scope times ``pending`` (``(d + 1, m)``)
    whose parent part is complete at the parent frontier ``felems`` (``(e, d)``): the next
    round with work owed; -1 when there is none."""
    d = pending.shape[0] - 1
    best = -1
    for i in range(pending.shape[1]):
        it = pending[d, i]
        if it <= after or (best >= 0 and it >= best):
            continue
        if not frontier_reaches(felems, pending, i):  # its parent part is complete
            best = it
    return best
