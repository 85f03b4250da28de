"""Kernels return arrays without calling back into Python for each one.

numba turns each array a compiled kernel returns into a numpy array by calling
``NRT_adapt_ndarray_to_python_acqref`` with the array's Python class. Since numba learned
numpy subclasses (numba#7121), its boxer embeds that class pickled and, for every
array returned, calls back into Python to unpickle it (memoised): 0.6 µs an array on this
machine (a kernel returning six arrays took 4.8 µs a call, 1.1 µs without it), plus a new
reference to ``numpy.ndarray`` that is never released. A single update at 1k/2k
reachability returns about 320 arrays from kernels.

:func:`install` registers numba's array boxer again, reading the class from the compiled
function's environment instead, as numba reads the dtype there (numba#1198 moved the dtype
out of a pickle for the same cost). It runs when the engine is imported, before any kernel
is compiled; kernels compiled before it keep numba's boxer (the cache directory is per
digest of the engine's sources, so cached kernels were compiled with this in place). Where
numba's registry is not laid out as this expects, it leaves numba's boxer alone; a test
checks that it is in place.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba.core import boxing, cgutils, pythonapi, types  # noqa: F401 (boxing: numba's boxers first)
from numba.np import numpy_support

__all__ = ["install", "installed"]


def _box_array(typ: Any, val: Any, c: Any) -> Any:
    """numba's ``box_array``, with the array's class read from the environment."""
    if not c.context.enable_nrt:  # as numba: the array came from Python; return its parent
        nativeary = c.context.make_array(typ)(c.context, c.builder, value=val)
        c.pyapi.incref(nativeary.parent)
        return nativeary.parent
    env = c.env_manager
    dtype = env.read_const(env.add_const(numpy_support.as_dtype(typ.dtype)))
    cls = env.read_const(env.add_const(typ.box_type))  # borrowed: the callee takes no reference
    pyapi, i32 = c.pyapi, ir.IntType(32)
    fnty = ir.FunctionType(pyapi.pyobj, [pyapi.voidptr, pyapi.pyobj, i32, i32, pyapi.pyobj])
    fn = pyapi._get_function(fnty, name="NRT_adapt_ndarray_to_python_acqref")
    ndim = c.context.get_constant(types.int32, typ.ndim)
    writable = c.context.get_constant(types.int32, int(typ.mutable))
    aryptr = cgutils.alloca_once_value(c.builder, val)
    out = c.builder.call(fn, [c.builder.bitcast(aryptr, pyapi.voidptr), cls, ndim, writable, dtype])
    c.context.nrt.decref(c.builder, typ, val)  # the Python array holds the reference now
    return out


def _registry() -> dict[Any, Any] | None:
    functions = getattr(getattr(pythonapi, "_boxers", None), "functions", None)
    if not isinstance(functions, dict) or types.Array not in functions:
        return None
    return functions


def install() -> None:
    """Box arrays with :func:`_box_array` from now on (kernels compiled from now on)."""
    functions = _registry()
    if functions is not None:
        functions[types.Array] = _box_array


def installed() -> bool:
    functions = _registry()
    return functions is not None and functions[types.Array] is _box_array


install()
