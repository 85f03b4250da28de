"""Kernels return arrays through the engine's array boxer (``engine.array_boxing``): the
same arrays as numba's, without a call into Python or a leaked reference per array."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import numpy as np
from numba import njit

from engine import array_boxing


@njit(cache=False)
def _arrays(a: np.ndarray, b: np.ndarray) -> tuple:
    return (
        a,  # the argument itself (numba returns its parent)
        a[::2],  # a strided view
        b.T,  # Fortran order
        np.empty(0, np.int64),
        (a > 1).copy(),  # bools
        b * 0.5,  # floats, 2-D
        np.zeros((2, 0, 3), np.int32),
    )


def _calls_into(name: str, run: Callable[[], Any]) -> int:
    """How often ``run`` enters a Python function called ``name``."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event == "call" and frame.f_code.co_name == name:
            count += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count


def test_the_engine_boxer_is_in_place() -> None:
    assert array_boxing.installed()


def test_returned_arrays_are_numpy_arrays_with_their_values() -> None:
    a = np.arange(7, dtype=np.int64)
    b = np.arange(12, dtype=np.int64).reshape(3, 4)
    got = _arrays(a, b)
    expected = (a, a[::2], b.T, np.empty(0, np.int64), a > 1, b * 0.5, np.zeros((2, 0, 3)))
    assert got[0] is a
    for g, e in zip(got, expected, strict=True):
        assert type(g) is np.ndarray
        assert g.shape == e.shape
        assert g.dtype == np.asarray(e).dtype or g.size == 0
        assert np.array_equal(g, e)
    assert got[2].flags.f_contiguous
    assert all(g.flags.writeable for g in got)


def test_no_call_into_python_and_no_reference_kept_per_array() -> None:
    a = np.arange(7, dtype=np.int64)
    b = np.arange(12, dtype=np.int64).reshape(3, 4)
    _arrays(a, b)
    assert _calls_into("_numba_unpickle", lambda: _arrays(a, b)) == 0
    before = sys.getrefcount(np.ndarray)
    for _ in range(1000):
        _arrays(a, b)
    assert sys.getrefcount(np.ndarray) - before < 100  # numba's boxer: +7,000
