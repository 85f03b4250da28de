"""Expressions of query plans: immutable nodes that render to the EXPR JSON of API.md.

``col("x") + 1 > col("y")`` builds ``{"fn": "gt", "args": [{"fn": "add", "args": ["x", 1]},
"y"]}``. One coercion helper, ``to_expr``, turns Python values into nodes with the wire's own
rules: a ``str`` is a column name (as a JSON string is), an ``int``/``float``/``bool`` is a
literal; string literals need ``lit("...")``.

Operators map to server functions: ``+ - * % -x`` are ``add sub mul mod neg``; both ``/`` and
``//`` are ``div`` (the server divides ints toward negative infinity, floats exactly);
``< <= > >=`` are ``lt le gt ge``; ``& | ~`` are ``and or not``. ``==`` and ``!=`` keep their
Python meaning (nodes compare by value), so equality is spelled ``.eq()`` / ``.ne()``.
The one-argument functions are methods too: ``.abs() .length() .lower() .upper()
.cast(to)``; any other call is ``fn(name, ...)``.
Nodes refuse ``bool()`` so that ``a < b < c`` or ``x and y`` fail loudly instead of silently
dropping a condition.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

__all__ = ["Expr", "ExprLike", "cast", "col", "fn", "if_", "lit", "to_expr"]


class Expr(ABC):
    """An expression node; build with ``col``, ``lit``, ``fn`` or operators."""

    __slots__ = ()

    @abstractmethod
    def to_json(self) -> Any:
        """The EXPR JSON of this node (fresh objects on every call)."""

    def __bool__(self) -> bool:
        raise TypeError("an expression has no truth value: use & | ~ instead of and / or / not")

    def _call(self, name: str, *others: ExprLike) -> Call:
        return Call(name, (self, *(to_expr(o) for o in others)))

    def _rcall(self, name: str, other: ExprLike) -> Call:
        return Call(name, (to_expr(other), self))

    def __add__(self, other: ExprLike) -> Call:
        return self._call("add", other)

    def __radd__(self, other: ExprLike) -> Call:
        return self._rcall("add", other)

    def __sub__(self, other: ExprLike) -> Call:
        return self._call("sub", other)

    def __rsub__(self, other: ExprLike) -> Call:
        return self._rcall("sub", other)

    def __mul__(self, other: ExprLike) -> Call:
        return self._call("mul", other)

    def __rmul__(self, other: ExprLike) -> Call:
        return self._rcall("mul", other)

    def __truediv__(self, other: ExprLike) -> Call:
        return self._call("div", other)

    def __rtruediv__(self, other: ExprLike) -> Call:
        return self._rcall("div", other)

    __floordiv__ = __truediv__
    __rfloordiv__ = __rtruediv__

    def __mod__(self, other: ExprLike) -> Call:
        return self._call("mod", other)

    def __rmod__(self, other: ExprLike) -> Call:
        return self._rcall("mod", other)

    def __neg__(self) -> Call:
        return self._call("neg")

    def __lt__(self, other: ExprLike) -> Call:
        return self._call("lt", other)

    def __le__(self, other: ExprLike) -> Call:
        return self._call("le", other)

    def __gt__(self, other: ExprLike) -> Call:
        return self._call("gt", other)

    def __ge__(self, other: ExprLike) -> Call:
        return self._call("ge", other)

    def __and__(self, other: ExprLike) -> Call:
        return self._call("and", other)

    def __rand__(self, other: ExprLike) -> Call:
        return self._rcall("and", other)

    def __or__(self, other: ExprLike) -> Call:
        return self._call("or", other)

    def __ror__(self, other: ExprLike) -> Call:
        return self._rcall("or", other)

    def __invert__(self) -> Call:
        return self._call("not")

    def eq(self, other: ExprLike) -> Call:
        """``self == other`` on the server."""
        return self._call("eq", other)

    def ne(self, other: ExprLike) -> Call:
        """``self != other`` on the server."""
        return self._call("ne", other)

    def abs(self) -> Call:
        """The absolute value (``abs``)."""
        return self._call("abs")

    def length(self) -> Call:
        """A string's length in code points (``length``)."""
        return self._call("length")

    def lower(self) -> Call:
        """A string in lower case (``lower``)."""
        return self._call("lower")

    def upper(self) -> Call:
        """A string in upper case (``upper``)."""
        return self._call("upper")

    def cast(self, to: str) -> Call:
        """This value converted to column type ``to`` (``int``, ``float``, ``bool``, ``string``)."""
        return cast(self, to)


ExprLike: TypeAlias = Expr | bool | int | float | str


@dataclass(frozen=True, slots=True, eq=True)
class Col(Expr):
    """A column by name: a JSON string (``"left.x"`` / ``"right.x"`` inside join columns)."""

    name: str

    def to_json(self) -> Any:
        return self.name


@dataclass(frozen=True, slots=True, eq=True)
class Value(Expr):
    """A literal: a bare JSON number or boolean, or ``{"lit": v}`` when ``boxed``."""

    value: bool | int | float | str
    boxed: bool = False

    def to_json(self) -> Any:
        return {"lit": self.value} if self.boxed else self.value


@dataclass(frozen=True, slots=True, eq=True)
class Call(Expr):
    """A function call ``{"fn": name, "args": [...]}``, plus ``"to"`` for ``cast``."""

    name: str
    args: tuple[Expr, ...]
    to: str | None = None

    def to_json(self) -> Any:
        node: dict[str, Any] = {"fn": self.name, "args": [a.to_json() for a in self.args]}
        if self.to is not None:
            node["to"] = self.to
        return node


def to_expr(value: ExprLike) -> Expr:
    """The node for ``value``: nodes as they are, ``str`` as a column, numbers and booleans
    (numpy scalars included) as literals."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, str):
        return Col(value)
    if isinstance(value, (bool, np.bool_)):
        return Value(bool(value))
    if isinstance(value, numbers.Integral):
        return Value(int(value))
    if isinstance(value, numbers.Real):
        return Value(_finite(float(value)))
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as an expression")


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{value!r} has no JSON form; plans take finite numbers only")
    return value


def name_of(value: Any, what: str) -> str:
    """``value``, which must be a ``str`` (a column, table, view, var or function name):
    anything else would reach the server as another node (``col(3)`` as the literal 3)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} is a str, not {type(value).__name__} {value!r}")
    return value


def col(name: str) -> Col:
    """The column ``name`` (``"left.x"`` / ``"right.x"`` name a join side's column)."""
    return Col(name_of(name, "a column name"))


def lit(value: bool | int | float | str) -> Value:
    """Any literal, written ``{"lit": value}``; the way to put a string constant in a plan."""
    if isinstance(value, (bool, np.bool_)):
        return Value(bool(value), boxed=True)
    if isinstance(value, numbers.Integral):
        return Value(int(value), boxed=True)
    if isinstance(value, numbers.Real):
        return Value(_finite(float(value)), boxed=True)  # numpy floats included
    if isinstance(value, str):
        return Value(value, boxed=True)
    raise TypeError(f"a literal is a bool, int, float or str, not {type(value).__name__} {value!r}")


def fn(name: str, *args: ExprLike) -> Call:
    """A call of the server function ``name`` (``abs``, ``min``, ``length``, ``hash``, ...)."""
    return Call(name_of(name, "a function name"), tuple(to_expr(a) for a in args))


def cast(value: ExprLike, to: str) -> Call:
    """``value`` converted to column type ``to``: ``{"fn": "cast", "args": [v], "to": to}``."""
    return Call("cast", (to_expr(value),), name_of(to, "a cast's type"))


def if_(condition: ExprLike, then: ExprLike, otherwise: ExprLike) -> Call:
    """``then`` where ``condition`` holds, else ``otherwise``."""
    return fn("if", condition, then, otherwise)
