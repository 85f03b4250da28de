"""Int64 sums that wrap in compiled code as they do in numpy (counts wrap at 64 bits).

Numba adds int64 values with LLVM's ``nsw`` flag (no signed wrap), which lets the optimiser
test the sign of a sum on its exact value: after ``s += x; if s <= 0``, a running count
that wrapped past 2**63 to a negative number was taken for a positive one, while ``s`` held
the wrapped value. A sum whose sign or order is tested adds here: as uint64 (no flag), read
back as int64, the same bits and one instruction.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["wrapping_add"]


@njit(cache=True, nogil=True, inline="always")
def wrapping_add(a: int, b: int) -> int:
    return int(np.int64(np.uint64(a) + np.uint64(b)))
