"""Float sums that do not depend on the order of their terms: each segment's sum of
``value * count`` correctly rounded, as ``math.fsum`` of the exact products would be.

A ``sum`` of floats is recomputed from a group's rows at every time it may change, and the
rows come in whatever order the history left them. Added in some order, float rounding
makes the result depend on it, and a large value added and retracted leaves its rounding
behind (rows ``1e15, 0.2, -1e15`` sum to 0.25 or 0.2 depending on the order). Here each
product is split exactly into floats (Dekker's product of the value with the count's two
32-bit halves) and the terms are added without error into Shewchuk's non-overlapping
partials, rounded once at the end (the algorithm of CPython's ``math.fsum``).

An infinite or NaN value makes the sum the plain float sum of such terms' products, in order
(IEEE: infinities of both signs give NaN). Where the partials overflow (terms near the float
range: ``1e308, 1e308, -1e308``), or a finite value's product is beyond the float range (a
row ``1e308`` of count 2 beside ``-1e308``: the same sum as two rows ``1e308``), the segment
is summed again in exact rational arithmetic, rounded once (to an infinity of its sign beyond
the float range), where ``math.fsum`` would raise.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numba import njit

__all__ = ["segment_fsums"]

_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's splitter for 53-bit mantissas
_TWO32 = 4294967296.0
_PARTIALS = 64  # non-overlapping partials of finite doubles: at most about 40
_HUGE = 2.0**900  # values beyond this are scaled down before splitting (the splitter overflows)
_DOWN, _UP = 2.0**-200, 2.0**200


@njit(cache=True, nogil=True)
def _two_product(a: float, b: float) -> tuple[float, float]:
    """``(p, e)`` with ``p = fl(a * b)`` and ``p + e == a * b`` exactly (Dekker), for
    ``|b| < 2**32`` and ``a * b`` well inside the float range."""
    p = a * b
    t = _SPLIT * a
    a_hi = t - (t - a)
    a_lo = a - a_hi
    t = _SPLIT * b
    b_hi = t - (t - b)
    b_lo = b - b_hi
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


@njit(cache=True, nogil=True)
def _add(partials: np.ndarray, n: int, x: float) -> int:
    """Add ``x`` to the ``n`` partials without error; their new count."""
    i = 0
    for j in range(n):
        y = partials[j]
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            partials[i] = lo
            i += 1
        x = hi
    if x != 0.0:
        partials[i] = x
        i += 1
    return i


@njit(cache=True, nogil=True)
def _rounded(partials: np.ndarray, n: int) -> float:
    """The partials' exact sum, correctly rounded (half to even)."""
    if n == 0:
        return 0.0
    n -= 1
    hi = partials[n]
    lo = 0.0
    while n > 0:
        x = hi
        n -= 1
        y = partials[n]
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            break
    if n > 0 and ((lo < 0.0 and partials[n - 1] < 0.0) or (lo > 0.0 and partials[n - 1] > 0.0)):
        y = lo * 2.0
        x = hi + y
        if y == x - hi:
            hi = x
    return hi


def segment_fsums(values: np.ndarray, counts: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per segment (beginning where ``starts`` is true; the first one at 0), the correctly
    rounded sum of ``values[i] * counts[i]``."""
    out, overflowed = _segment_fsums(values, counts, starts)
    if overflowed.any():
        bounds = np.append(np.flatnonzero(starts), values.shape[0])
        for s in np.flatnonzero(overflowed).tolist():
            lo, hi = int(bounds[s]), int(bounds[s + 1])
            out[s] = _exact(values[lo:hi].tolist(), counts[lo:hi].tolist())
    return out


def _exact(values: list[float], counts: list[int]) -> float:
    """``sum(v * c)`` in rational arithmetic, rounded once (all values finite)."""
    total = sum((Fraction(v) * c for v, c in zip(values, counts, strict=True)), Fraction(0))
    try:
        return float(total)
    except OverflowError:
        return math.inf if total > 0 else -math.inf


@njit(cache=True, nogil=True)
def _segment_fsums(
    values: np.ndarray, counts: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`segment_fsums`, and per segment whether its finite terms' partials overflowed
    or a finite value's product did (its sum is then to be taken again exactly)."""
    n = values.shape[0]
    nseg = 0
    for i in range(n):
        if starts[i]:
            nseg += 1
    out = np.empty(nseg, np.float64)
    overflowed = np.zeros(nseg, np.bool_)
    partials = np.empty(_PARTIALS, np.float64)
    s = -1
    np_ = 0
    special = 0.0
    has_special = False
    big = False  # a finite value's product beyond the float range: summed exactly
    for i in range(n + 1):
        if i == n or starts[i]:
            if s >= 0:
                if has_special:
                    out[s] = special
                else:
                    out[s] = _rounded(partials, np_)
                    overflowed[s] = big or not np.isfinite(out[s])
            if i == n:
                break
            s += 1
            np_ = 0
            special = 0.0
            has_special = False
            big = False
        v, c = values[i], counts[i]
        prod = v * c
        if not np.isfinite(v):
            special = prod if not has_special else special + prod
            has_special = True
            continue
        if has_special or big:
            continue
        if not np.isfinite(prod):
            big = True
            continue
        scale = 1.0
        if abs(v) > _HUGE:  # powers of two: exact both ways
            v, scale = v * _DOWN, _UP
        # |c| = hi * 2**32 + lo with 0 <= lo < 2**32: both halves exact floats, of c's sign,
        # so neither product is larger than the whole (halves of opposite signs could
        # overflow where the whole does not: 2**31 as 2**32 - 2**31); each product split
        # (-(c + 1) + 1: -2**63 has no int64 negation)
        m = np.uint64(c) if c >= 0 else np.uint64(-(c + 1)) + np.uint64(1)
        sign = -1.0 if c < 0 else 1.0
        c_hi = sign * float(m >> np.uint64(32))
        c_lo = sign * float(m & np.uint64(0xFFFFFFFF))
        p, e = _two_product(v, c_lo)
        np_ = _add(partials, np_, p * scale)
        np_ = _add(partials, np_, e * scale)
        if c_hi != 0.0:
            p, e = _two_product(v, c_hi)
            np_ = _add(partials, np_, p * (_TWO32 * scale))
            np_ = _add(partials, np_, e * (_TWO32 * scale))
    return out, overflowed
