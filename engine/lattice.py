"""Times, the product-order lattice, and frontiers (antichains), vectorised.

Times travel as ``(d, n)`` int64 arrays: one contiguous row per coordinate, one column per
time. ``s <= t`` iff every coordinate is ``<=``; ``join`` is the coordinate-wise max and
``meet`` the coordinate-wise min. One-dimensional times are the ``d == 1`` case.

An :class:`Antichain` (a frontier) holds mutually incomparable times as an ``(m, d)`` array;
the times that may still appear are those ``>=`` some element, and the empty antichain means
"closed". Invariant: the elements of an Antichain are pairwise incomparable and sorted
lexicographically, so equal antichains compare equal element by element.

``advance_by(t, F) = meet over f in F of join(t, f)`` replaces a time by the least time that
no future time (one ``>=`` F) can tell apart from it (seed 000, "Compaction").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numba import njit

from engine.errors import TimeError

__all__ = [
    "NO_TIME",
    "Antichain",
    "advance_by",
    "as_times",
    "frontier_reaches",
    "join",
    "leq",
    "meet",
    "time_tuples",
]

TimeLike = int | Sequence[int]
# the compiled kernels' "no time" (an infinite bound): no update may be at it
NO_TIME = int(np.iinfo(np.int64).max)


def is_int(v: object) -> bool:
    """Whether ``v`` is an integer (Python's or numpy's), a bool not counting as one."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def as_times(values: object, dims: int) -> np.ndarray:
    """A time, a list of times, or an array as a ``(dims, n)`` int64 array; anything but
    integers below 2**63 is a :class:`TimeError`. A list of lists (or tuples) is one time
    per item, ``[(0, 5), (1, 6)]``; an array is ``(dims, n)`` already; a flat list is one
    time of ``dims`` coordinates where ``dims`` > 1, else one time per item."""
    rows = isinstance(values, (list, tuple)) and any(isinstance(v, (list, tuple)) for v in values)
    if isinstance(values, (list, tuple)):
        if rows and not all(isinstance(v, (list, tuple)) for v in values):
            raise TimeError("times must be all integers (one time) or all lists (one per row)")
        items = [x for v in values for x in v] if rows else list(values)
        for x in items:
            if not is_int(x):
                raise TimeError(f"times must be integers, not {x!r}")
    try:
        raw = np.asarray(values)
    except ValueError as exc:  # ragged lists
        raise TimeError(f"times must be integers, or lists of {dims} integers: {exc}") from exc
    if rows and raw.ndim == 2:
        raw = raw.T  # one time per item: (n, dims) -> (dims, n)
    if raw.size and raw.dtype.kind not in "iu":
        raise TimeError(f"times must be integers, not {raw.dtype} values such as {raw.flat[0]!r}")
    if raw.dtype.kind == "u" and raw.size and int(raw.max()) > NO_TIME:
        raise TimeError("times must be below 2**63")
    arr = raw.astype(np.int64)
    if arr.ndim == 0:
        arr = arr.reshape(1, 1)
    elif arr.ndim == 1:
        if arr.size == 0:
            return np.zeros((dims, 0), dtype=np.int64)
        if dims > 1 and arr.size != dims:
            raise TimeError(f"a time here is a list of {dims} integers, not of {arr.size}")
        arr = arr.reshape(1, -1) if dims == 1 else arr.reshape(dims, 1)
    if arr.ndim != 2 or arr.shape[0] != dims:
        raise TimeError(f"expected times with {dims} coordinate(s), got shape {arr.shape}")
    if arr.size and int(arr.min()) < 0:
        raise TimeError("times are non-negative integers")
    return np.ascontiguousarray(arr)


def leq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise ``a <= b`` in the product order for ``(d, n)`` arrays (broadcasting)."""
    out = a[0] <= b[0]
    for j in range(1, a.shape[0]):
        out &= a[j] <= b[j]
    return np.asarray(out)


def join(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least upper bound (coordinate-wise max)."""
    return np.maximum(a, b)


def meet(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Greatest lower bound (coordinate-wise min)."""
    return np.minimum(a, b)


def advance_by(times: np.ndarray, frontier: Antichain) -> np.ndarray:
    """Advance ``(d, n)`` times by a frontier: meet over ``f`` of ``join(t, f)``.

    The result is indistinguishable from the input by every time ``>=`` the frontier. An empty
    (closed) frontier leaves times unchanged: nothing remains that could observe them.
    """
    elems = frontier.elements
    if elems.shape[0] == 0:
        return times
    out = np.maximum(times, elems[0][:, None])
    for f in elems[1:]:
        np.minimum(out, np.maximum(times, f[:, None]), out=out)
    return out


def time_tuples(times: np.ndarray) -> list[tuple[int, ...]]:
    """The columns of a ``(d, n)`` time array as tuples (for messages and tests)."""
    return list(zip(*times.tolist(), strict=True))


class Antichain:
    """A frontier: pairwise incomparable times, kept minimal and sorted."""

    __slots__ = ("dims", "elements")

    def __init__(self, elements: np.ndarray | Iterable[TimeLike], dims: int | None = None) -> None:
        if isinstance(elements, np.ndarray):
            arr = np.asarray(elements, dtype=np.int64)
        else:
            rows = [
                tuple(e) if isinstance(e, (tuple, list, np.ndarray)) else (e,) for e in elements
            ]
            if not rows:
                if dims is None:
                    raise TimeError("an empty antichain needs its dimension")
                arr = np.zeros((0, dims), dtype=np.int64)
            else:
                arr = np.asarray(rows, dtype=np.int64)
        if arr.ndim != 2:
            raise TimeError("antichain elements must be an (m, d) array")
        if dims is not None and arr.shape[1] != dims:
            raise TimeError(f"frontier times must have {dims} coordinate(s)")
        self.dims = int(arr.shape[1])
        self.elements = _minimal(arr)

    # -- constructors -------------------------------------------------------------------
    @classmethod
    def minimum(cls, dims: int) -> Antichain:
        """The frontier at the start of time: every time may still appear."""
        return cls(np.zeros((1, dims), dtype=np.int64))

    @classmethod
    def trusted(cls, elements: np.ndarray, dims: int) -> Antichain:
        """Wrap elements known to be pairwise incomparable and sorted (no checks)."""
        out = cls.__new__(cls)
        out.dims = dims
        out.elements = elements
        return out

    @classmethod
    def closed(cls, dims: int) -> Antichain:
        """The empty frontier: nothing more will come."""
        return cls(np.zeros((0, dims), dtype=np.int64))

    # -- queries ------------------------------------------------------------------------
    @property
    def is_empty(self) -> bool:
        return self.elements.shape[0] == 0

    def beyond(self, times: np.ndarray) -> np.ndarray:
        """Mask of ``(d, n)`` times that are ``>=`` some element (may still change)."""
        if times.ndim != 2 or times.shape[0] != self.dims:
            raise TimeError(f"expected ({self.dims}, n) times, got shape {times.shape}")
        return _beyond(self.elements, np.ascontiguousarray(times))  # C order: one signature

    def complete(self, times: np.ndarray) -> np.ndarray:
        """Mask of ``(d, n)`` times no element is ``<=``: final, nothing more arrives there."""
        return ~self.beyond(times)

    def less_equal_time(self, time: np.ndarray) -> bool:
        """Whether some element is ``<=`` one ``(d,)`` time."""
        return bool(self.beyond(time.reshape(-1, 1))[0])

    def meet(self, other: Antichain) -> Antichain:
        """The frontier of the union: times either may still produce. When one frontier
        precedes the other (equal ones, usually: a step's inputs advance together) it is
        the meet, and no new antichain is built."""
        if self.dims != other.dims:
            raise TimeError("cannot combine frontiers of different dimensions")
        if _covers(self.elements, other.elements):
            return self
        if _covers(other.elements, self.elements):
            return other
        return Antichain(np.concatenate([self.elements, other.elements]), self.dims)

    def precedes(self, other: Antichain) -> bool:
        """``self <= other`` as frontiers: every element of ``other`` is ``>=`` one of ours."""
        if self.dims != other.dims:
            raise TimeError("cannot compare frontiers of different dimensions")
        return _covers(self.elements, other.elements)

    def extend(self, coordinate: int = 0) -> Antichain:
        """Each element with one more coordinate appended (entering a nested scope)."""
        m = self.elements.shape[0]
        col = np.full((m, 1), coordinate, dtype=np.int64)
        return Antichain(np.concatenate([self.elements, col], axis=1), self.dims + 1)

    def truncate(self) -> Antichain:
        """Each element without its last coordinate (leaving a nested scope)."""
        return Antichain(self.elements[:, :-1].copy(), self.dims - 1)

    def to_list(self) -> list[int] | list[list[int]]:
        """Plain Python form: ``[t, ...]`` for one dimension, ``[[..], ...]`` otherwise."""
        if self.dims == 1:
            return [int(e[0]) for e in self.elements]
        return [[int(x) for x in e] for e in self.elements]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Antichain):
            return NotImplemented
        a, b = self.elements, other.elements  # (m, d) int64: shape, then bytes (fast for tiny ones)
        return a.shape == b.shape and a.tobytes() == b.tobytes()

    def __hash__(self) -> int:
        return hash((self.dims, self.elements.tobytes()))

    def __repr__(self) -> str:
        return f"Antichain({self.to_list()})"


def _minimal(arr: np.ndarray) -> np.ndarray:
    """Minimal elements of an ``(m, d)`` array of times, deduplicated and sorted."""
    m = arr.shape[0]
    if m <= 1:
        return np.ascontiguousarray(arr)
    if m == 2:  # the common case (a loop round's frontier): no sort machinery
        a, b = arr[0], arr[1]
        if (a <= b).all():
            return np.ascontiguousarray(arr[:1])
        if (b <= a).all():
            return np.ascontiguousarray(arr[1:])
        return np.ascontiguousarray(arr if tuple(a) < tuple(b) else arr[::-1])
    arr = arr[np.lexsort(arr.T[::-1])]
    keep = np.ones(m, dtype=bool)
    keep[1:] = (arr[1:] != arr[:-1]).any(axis=1)
    arr = arr[keep]
    # le[i, j]: arr[j] <= arr[i] and j != i  ->  arr[i] is not minimal
    le = np.asarray((arr[None, :, :] <= arr[:, None, :]).all(axis=2), dtype=bool)
    np.fill_diagonal(le, False)
    return np.ascontiguousarray(arr[~le.any(axis=1)])


# Frontiers hold one or two elements and are compared every round: one compiled loop costs
# a fraction of the broadcast comparisons numpy needs (several calls of a few µs each).
@njit(cache=True, nogil=True, inline="always")
def frontier_reaches(elems: np.ndarray, times: np.ndarray, i: int) -> bool:
    """Whether some row of ``elems`` (``(m, w)``) is ``<=`` column ``i`` of ``times`` in its
    first ``w`` coordinates: the time may still change (compiled code's ``beyond``). Inlined
    into its callers, which call it once per record."""
    for e in range(elems.shape[0]):
        le = True
        for c in range(elems.shape[1]):
            if elems[e, c] > times[c, i]:
                le = False
                break
        if le:
            return True
    return False


@njit(cache=True, nogil=True)
def _beyond(elems: np.ndarray, times: np.ndarray) -> np.ndarray:
    """For each column of ``times``, whether some row of ``elems`` is ``<=`` it."""
    out = np.zeros(times.shape[1], np.bool_)
    for i in range(times.shape[1]):
        out[i] = frontier_reaches(elems, times, i)
    return out


@njit(cache=True, nogil=True)
def _covers(elems: np.ndarray, others: np.ndarray) -> bool:
    """Whether every row of ``others`` is ``>=`` some row of ``elems``."""
    columns = others.T
    for o in range(others.shape[0]):  # noqa: SIM110 - generators do not compile
        if not frontier_reaches(elems, columns, o):
            return False
    return True
