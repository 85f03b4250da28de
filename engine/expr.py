"""Column expressions: an immutable tree built from names, type-checked against a schema,
then evaluated on whole columns at once.

Build with :func:`col`, :func:`lit` and :func:`call` (or Python operators on expressions:
``col("x") + 1 > col("y")``; a bare string argument names a column, ``lit("text")`` is a
string literal); :meth:`Expr.bind` checks names and types against a
:class:`~engine.schema.Schema` and returns a :class:`Bound` expression whose
:meth:`Bound.evaluate` maps a ``(k, n)`` data block to one typed numpy array.

Semantics (documented in the README):

* ``div`` and ``mod`` of ints round toward negative infinity (Python ``//`` and ``%``); an
  integer divisor of zero gives 0. Float ``div`` is true division (IEEE: x/0 is inf or nan).
* int arithmetic wraps at 64 bits; an int and a float combine as floats.
* strings compare by code point; ``length``/``lower``/``upper``/``concat`` act on the text.
* ``cast`` follows Python: ``int(3.7) == 3``, ``str(True) == "True"``, ``bool("") is False``;
  a string that does not parse casts to 0 / 0.0, digits beyond 64 bits wrap; a float cast
  to int saturates at +-9.2e18 (infinities too; NaN casts to 0).
* ``hash`` is a stable int64 (see :func:`stable_hash`): the same on every run and machine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import ExpressionError
from engine.hashing import mix64, string_hashes
from engine.interning import StringInterner
from engine.schema import ColumnType, Schema, decode

__all__ = [
    "FUNCTIONS",
    "Bound",
    "Call",
    "Col",
    "EvalContext",
    "Expr",
    "Lit",
    "call",
    "col",
    "lit",
    "stable_hash",
]

INT, FLOAT, BOOL, STRING = ColumnType.INT, ColumnType.FLOAT, ColumnType.BOOL, ColumnType.STRING
Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class EvalContext:
    """What evaluation reads: the data block, its schema, and the string interner."""

    data: np.ndarray
    schema: Schema
    interner: StringInterner

    @property
    def n(self) -> int:
        return int(self.data.shape[1])


class Expr:
    """An unbound expression. Immutable; combine with operators or :func:`call`."""

    __slots__ = ()

    def bind(self, schema: Schema, path: Path = ()) -> Bound:
        raise NotImplementedError

    # Python operators build calls (``==`` stays identity: use ``.eq``).
    def __add__(self, o: object) -> Expr:
        return call("add", self, o)

    def __radd__(self, o: object) -> Expr:
        return call("add", o, self)

    def __sub__(self, o: object) -> Expr:
        return call("sub", self, o)

    def __rsub__(self, o: object) -> Expr:
        return call("sub", o, self)

    def __mul__(self, o: object) -> Expr:
        return call("mul", self, o)

    def __rmul__(self, o: object) -> Expr:
        return call("mul", o, self)

    def __truediv__(self, o: object) -> Expr:
        return call("div", self, o)

    def __floordiv__(self, o: object) -> Expr:
        return call("div", self, o)

    def __mod__(self, o: object) -> Expr:
        return call("mod", self, o)

    def __neg__(self) -> Expr:
        return call("neg", self)

    def __lt__(self, o: object) -> Expr:
        return call("lt", self, o)

    def __le__(self, o: object) -> Expr:
        return call("le", self, o)

    def __gt__(self, o: object) -> Expr:
        return call("gt", self, o)

    def __ge__(self, o: object) -> Expr:
        return call("ge", self, o)

    def __and__(self, o: object) -> Expr:
        return call("and", self, o)

    def __or__(self, o: object) -> Expr:
        return call("or", self, o)

    def __invert__(self) -> Expr:
        return call("not", self)

    def eq(self, o: object) -> Expr:
        return call("eq", self, o)

    def ne(self, o: object) -> Expr:
        return call("ne", self, o)

    def cast(self, to: ColumnType | str) -> Expr:
        return Call("cast", (self,), ColumnType(to))


@dataclass(frozen=True, slots=True, eq=False)
class Col(Expr):
    name: str

    def bind(self, schema: Schema, path: Path = ()) -> Bound:
        if self.name not in schema.names:
            raise ExpressionError(
                f"unknown column {self.name!r}; columns are {list(schema.names)}", path
            )
        i = schema.index(self.name)
        t = schema.columns[i].type
        return Bound(t, lambda ctx: decode(ctx.data[i], t), column=i)


@dataclass(frozen=True, slots=True, eq=False)
class Lit(Expr):
    value: Any
    type: ColumnType

    def bind(self, schema: Schema, path: Path = ()) -> Bound:
        v, t = self.value, self.type
        if t is STRING:
            return Bound(t, lambda ctx: np.full(ctx.n, ctx.interner.intern(v), dtype=np.int64))
        dtype = {INT: np.int64, FLOAT: np.float64, BOOL: np.bool_}[t]
        if t is FLOAT:
            v = float(v) + 0.0  # canonical: no -0.0
        return Bound(t, lambda ctx: np.full(ctx.n, v, dtype=dtype))


@dataclass(frozen=True, slots=True, eq=False)
class Call(Expr):
    fn: str
    args: tuple[Expr, ...]
    to: ColumnType | None = None

    def bind(self, schema: Schema, path: Path = ()) -> Bound:
        spec = FUNCTIONS.get(self.fn)
        if spec is None:
            raise ExpressionError(
                f"unknown function {self.fn!r}; functions are {sorted(FUNCTIONS)}", path
            )
        lo, hi = spec.arity
        if not (lo <= len(self.args) and (hi is None or len(self.args) <= hi)):
            want = f"{lo}" if lo == hi else f"{lo} or more" if hi is None else f"{lo} to {hi}"
            raise ExpressionError(f"{self.fn} takes {want} argument(s), got {len(self.args)}", path)
        if self.fn == "cast" and self.to is None:
            raise ExpressionError(
                "cast needs a target type 'to' (int, float, bool, string)", (*path, "to")
            )
        args = [a.bind(schema, (*path, "args", i)) for i, a in enumerate(self.args)]
        out_type = spec.typer(self.fn, [a.type for a in args], self.to, path)
        run = spec.make(args, out_type, self.to)
        if out_type is FLOAT:  # floats are canonical in every value, not only when stored:
            # -0.0 + 0.0 is 0.0, so div(1, neg(0.0)) is inf, as with neg(0.0) stored first
            return Bound(out_type, lambda ctx: run(ctx) + 0.0)
        return Bound(out_type, run)


def col(name: str) -> Col:
    return Col(name)


def lit(value: object, type: ColumnType | str | None = None) -> Lit:
    if type is not None:
        return Lit(value, ColumnType(type))
    if isinstance(value, bool):
        return Lit(value, BOOL)
    if isinstance(value, int):
        return Lit(value, INT)
    if isinstance(value, float):
        return Lit(value, FLOAT)
    if isinstance(value, str):
        return Lit(value, STRING)
    raise ExpressionError(f"unsupported literal {value!r}")


def _coerce(value: object) -> Expr:
    """An expression argument: expressions as they are, a string names a column (as in the
    plan language and the collection methods; write ``lit("text")`` for a string literal),
    other Python values are literals."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, str):
        return col(value)
    return lit(value)


def call(fn: str, *args: object, to: ColumnType | str | None = None) -> Call:
    return Call(fn, tuple(_coerce(a) for a in args), ColumnType(to) if to is not None else None)


class Bound:
    """A type-checked expression: ``evaluate(ctx)`` returns a typed array of length ``n``."""

    __slots__ = ("column", "fn", "type")

    def __init__(
        self, type: ColumnType, fn: Callable[[EvalContext], np.ndarray], column: int | None = None
    ) -> None:
        self.type = type
        self.fn = fn
        self.column = column  # set when the expression is a bare column reference

    def evaluate(self, ctx: EvalContext) -> np.ndarray:
        return self.fn(ctx)


# -- typing rules -------------------------------------------------------------------------


def _name(t: ColumnType) -> str:
    return t.value


def _numeric(fn: str, ts: list[ColumnType], to: object, path: Path) -> ColumnType:
    for i, t in enumerate(ts):
        if not t.numeric:
            raise ExpressionError(
                f"{fn} needs int or float arguments, got {_name(t)}", (*path, "args", i)
            )
    return FLOAT if FLOAT in ts else INT


def _comparable(fn: str, ts: list[ColumnType], path: Path) -> None:
    a, b = ts[0], ts[1]
    if a.numeric and b.numeric:
        return
    if a != b:
        raise ExpressionError(f"{fn} cannot compare {_name(a)} with {_name(b)}", path)


def _compare(fn: str, ts: list[ColumnType], to: object, path: Path) -> ColumnType:
    _comparable(fn, ts, path)
    return BOOL


def _boolean(fn: str, ts: list[ColumnType], to: object, path: Path) -> ColumnType:
    for i, t in enumerate(ts):
        if t is not BOOL:
            raise ExpressionError(f"{fn} needs bool arguments, got {_name(t)}", (*path, "args", i))
    return BOOL


def _same(fn: str, ts: list[ColumnType], to: object, path: Path) -> ColumnType:
    if all(t.numeric for t in ts):
        return FLOAT if FLOAT in ts else INT
    if len(set(ts)) != 1:
        raise ExpressionError(
            f"{fn} needs arguments of one type, got {[_name(t) for t in ts]}", path
        )
    return ts[0]


def _if(fn: str, ts: list[ColumnType], to: object, path: Path) -> ColumnType:
    if ts[0] is not BOOL:
        raise ExpressionError(f"if needs a bool condition, got {_name(ts[0])}", (*path, "args", 0))
    return _same(fn, ts[1:], to, path)


def _strings(out: ColumnType) -> Callable[[str, list[ColumnType], object, Path], ColumnType]:
    def typer(fn: str, ts: list[ColumnType], to: object, path: Path) -> ColumnType:
        for i, t in enumerate(ts):
            if t is not STRING:
                raise ExpressionError(
                    f"{fn} needs string arguments, got {_name(t)}", (*path, "args", i)
                )
        return out

    return typer


def _hash(fn: str, ts: list[ColumnType], to: object, path: Path) -> ColumnType:
    return INT


def _cast(fn: str, ts: list[ColumnType], to: object, path: Path) -> ColumnType:
    assert isinstance(to, ColumnType)
    return to


# -- evaluation ---------------------------------------------------------------------------

Maker = Callable[[list[Bound], ColumnType, ColumnType | None], Callable[[EvalContext], np.ndarray]]


def _as(x: np.ndarray, t: ColumnType) -> np.ndarray:
    return x.astype(np.float64) if t is FLOAT else x


def _fold(op: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Maker:
    """A left fold, each step typed as its two operands are: ``add(i, i, f)`` adds the ints
    (wrapping) before the float comes in, as ``add(add(i, i), f)`` does."""

    def make(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
        def run(ctx: EvalContext) -> np.ndarray:
            acc, acc_t = args[0].evaluate(ctx), args[0].type
            with np.errstate(all="ignore"):
                for a in args[1:]:
                    step = FLOAT if FLOAT in (acc_t, a.type) else acc_t
                    acc, acc_t = op(_as(acc, step), _as(a.evaluate(ctx), step)), step
            return acc

        return run

    return make


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b)
    with np.errstate(over="ignore"):  # -2**63 // -1 wraps to -2**63
        return np.where(b == 0, 0, np.floor_divide(a, safe))


def _int_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    safe = np.where(b == 0, 1, b)
    with np.errstate(over="ignore"):
        return np.where(b == 0, 0, np.mod(a, safe))


def _make_div(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
    def run(ctx: EvalContext) -> np.ndarray:
        a, b = (_as(x.evaluate(ctx), out) for x in args)
        if out is INT:
            return _int_div(a, b)
        with np.errstate(all="ignore"):
            return np.true_divide(a, b)

    return run


def _make_mod(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
    def run(ctx: EvalContext) -> np.ndarray:
        a, b = (_as(x.evaluate(ctx), out) for x in args)
        if out is INT:
            return _int_mod(a, b)
        with np.errstate(all="ignore"):
            return np.mod(a, b)

    return run


def _unary(op: Callable[[np.ndarray], np.ndarray]) -> Maker:
    def make(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
        return lambda ctx: op(args[0].evaluate(ctx))

    return make


def _comparison(op: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Maker:
    def make(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
        a_t, b_t = args[0].type, args[1].type

        def run(ctx: EvalContext) -> np.ndarray:
            a, b = args[0].evaluate(ctx), args[1].evaluate(ctx)
            if a_t is STRING and op not in (np.equal, np.not_equal):
                ranks = ctx.interner.ranks(np.concatenate([a, b]))
                a, b = ranks[: a.shape[0]], ranks[a.shape[0] :]
            elif a_t != b_t:  # int vs float
                a, b = a.astype(np.float64), b.astype(np.float64)
            return np.asarray(op(a, b))

        return run

    return make


def _extreme(pick_max: bool) -> Maker:
    def make(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
        def run(ctx: EvalContext) -> np.ndarray:
            vals = [_as(a.evaluate(ctx), out) for a in args]
            if out is STRING:
                ranks = ctx.interner.ranks(np.concatenate(vals))
                n = ctx.n
                rk = [ranks[i * n : (i + 1) * n] for i in range(len(vals))]
                best, best_rank = vals[0], rk[0]
                for v, r in zip(vals[1:], rk[1:], strict=True):
                    take = r > best_rank if pick_max else r < best_rank
                    best = np.where(take, v, best)
                    best_rank = np.where(take, r, best_rank)
                return best
            op = np.maximum if pick_max else np.minimum
            acc = vals[0]
            for v in vals[1:]:
                acc = op(acc, v)
            return acc

        return run

    return make


def _make_if(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
    def run(ctx: EvalContext) -> np.ndarray:
        c = args[0].evaluate(ctx)
        return np.where(c, _as(args[1].evaluate(ctx), out), _as(args[2].evaluate(ctx), out))

    return run


def _string_fn(fn: Callable[[str], object], result: ColumnType) -> Maker:
    def make(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
        def run(ctx: EvalContext) -> np.ndarray:
            ids = args[0].evaluate(ctx)
            if result is STRING:
                return ctx.interner.intern_results(ids, fn)
            return np.asarray(ctx.interner.map_strings(ids, fn), dtype=np.int64).reshape(-1)

        return run

    return make


def _make_concat(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
    def run(ctx: EvalContext) -> np.ndarray:
        cols = np.stack([a.evaluate(ctx) for a in args]) if args else np.zeros((0, ctx.n))
        if ctx.n == 0:
            return np.zeros(0, dtype=np.int64)
        uniq, inverse = np.unique(cols, axis=1, return_inverse=True)
        texts = ["".join(ctx.interner.lookup(int(i)) for i in c) for c in uniq.T]
        return ctx.interner.intern_many(texts)[inverse.reshape(-1)]

    return run


def stable_hash(
    columns: Sequence[np.ndarray], types: Sequence[ColumnType], interner: StringInterner, n: int
) -> np.ndarray:
    """The ``hash`` function: a stable int64 of the arguments, row by row.

    Each argument becomes 64 bits (int: itself; bool: 0/1; float: canonical IEEE bits;
    string: blake2b-64 of its UTF-8 bytes, little-endian); starting from
    ``h = 0x9E3779B97F4A7C15``, each is folded in as ``h = splitmix64(h ^ v)``.
    """
    h = np.full(n, 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for values, t in zip(columns, types, strict=True):
            if t is STRING:
                v = interner.text_hashes(values, string_hashes)
            elif t is FLOAT:
                f = np.asarray(values, dtype=np.float64) + 0.0
                v = np.where(np.isnan(f), np.nan, f).view(np.int64)
            else:
                v = np.asarray(values, dtype=np.int64)
            h = mix64(h ^ v.view(np.uint64))
    return h.view(np.int64)


def _make_hash(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
    def run(ctx: EvalContext) -> np.ndarray:
        return stable_hash(
            [a.evaluate(ctx) for a in args], [a.type for a in args], ctx.interner, ctx.n
        )

    return run


_TWO_63 = 2.0**63  # floats at or beyond it (or at or below its negation) do not fit in int64


_INT_TEXT = re.compile(r"[+-]?\d+(?:_\d+)*")  # what ``int()`` takes, whatever its length
_CHUNK = 4000  # digits ``int()`` converts at once (it refuses more than 4,300)


def _parse(kind: type, s: str) -> object:
    s = s.strip()
    try:
        value = kind(s)
    except ValueError:
        if kind is not int or not _INT_TEXT.fullmatch(s):
            return kind(0)
        value = _long_int(s)
    if kind is int:  # digits beyond 64 bits wrap, as int arithmetic does
        return (value + 2**63) % 2**64 - 2**63
    return value


def _long_int(s: str) -> int:
    """``int(s)`` modulo 2**64 for digits beyond ``int()``'s limit on their number."""
    digits = s.lstrip("+-").replace("_", "")
    value = 0
    for i in range(0, len(digits), _CHUNK):
        chunk = digits[i : i + _CHUNK]
        value = (value * 10 ** len(chunk) + int(chunk)) % 2**64
    return -value if s.startswith("-") else value


def _float_to_int(x: np.ndarray) -> np.ndarray:
    """Truncated toward zero; beyond int64 it saturates at its ends (infinities too), NaN
    gives 0. Every float strictly between -2**63 and 2**63 converts exactly."""
    fits = np.nan_to_num(np.clip(x, -_TWO_63, 2.0**63 - 1024.0), nan=0.0)  # 2**63-1024: the
    out = np.trunc(fits).astype(np.int64)  # greatest float below 2**63
    out[x >= _TWO_63] = np.iinfo(np.int64).max
    return out


def _make_cast(args: list[Bound], out: ColumnType, to: ColumnType | None) -> Callable:
    src = args[0].type

    def run(ctx: EvalContext) -> np.ndarray:
        v = args[0].evaluate(ctx)
        if src is to:
            return v
        if src is STRING:
            if to is INT:
                return np.asarray(
                    ctx.interner.map_strings(v, lambda s: _parse(int, s)), dtype=np.int64
                ).reshape(-1)
            if to is FLOAT:
                return np.asarray(
                    ctx.interner.map_strings(v, lambda s: _parse(float, s)), dtype=np.float64
                ).reshape(-1)
            return np.asarray(ctx.interner.map_strings(v, bool), dtype=np.bool_).reshape(-1)
        if to is STRING:
            if src is BOOL:
                return np.where(
                    v, ctx.interner.intern("True"), ctx.interner.intern("False")
                ).astype(np.int64)
            if src is FLOAT:
                v = v + 0.0  # canonical: -0.0 prints as 0.0
            uniq, inverse = np.unique(v, return_inverse=True)
            texts = [str(x) for x in uniq.tolist()]
            return (
                ctx.interner.intern_many(texts)[inverse.reshape(-1)]
                if texts
                else v.astype(np.int64)
            )
        if to is BOOL:
            return v != 0
        if to is FLOAT:
            return v.astype(np.float64)
        # to INT
        return _float_to_int(v) if src is FLOAT else v.astype(np.int64)

    return run


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    arity: tuple[int, int | None]
    typer: Callable[[str, list[ColumnType], ColumnType | None, Path], ColumnType]
    make: Maker


FUNCTIONS: dict[str, FunctionSpec] = {
    "add": FunctionSpec((2, None), _numeric, _fold(np.add)),
    "sub": FunctionSpec((2, 2), _numeric, _fold(np.subtract)),
    "mul": FunctionSpec((2, None), _numeric, _fold(np.multiply)),
    "div": FunctionSpec((2, 2), _numeric, _make_div),
    "mod": FunctionSpec((2, 2), _numeric, _make_mod),
    "neg": FunctionSpec((1, 1), _numeric, _unary(np.negative)),
    "abs": FunctionSpec((1, 1), _numeric, _unary(np.abs)),
    "eq": FunctionSpec((2, 2), _compare, _comparison(np.equal)),
    "ne": FunctionSpec((2, 2), _compare, _comparison(np.not_equal)),
    "lt": FunctionSpec((2, 2), _compare, _comparison(np.less)),
    "le": FunctionSpec((2, 2), _compare, _comparison(np.less_equal)),
    "gt": FunctionSpec((2, 2), _compare, _comparison(np.greater)),
    "ge": FunctionSpec((2, 2), _compare, _comparison(np.greater_equal)),
    "and": FunctionSpec((2, None), _boolean, _fold(np.logical_and)),
    "or": FunctionSpec((2, None), _boolean, _fold(np.logical_or)),
    "not": FunctionSpec((1, 1), _boolean, _unary(np.logical_not)),
    "if": FunctionSpec((3, 3), _if, _make_if),
    "min": FunctionSpec((1, None), _same, _extreme(False)),
    "max": FunctionSpec((1, None), _same, _extreme(True)),
    "length": FunctionSpec((1, 1), _strings(INT), _string_fn(len, INT)),
    "lower": FunctionSpec((1, 1), _strings(STRING), _string_fn(str.lower, STRING)),
    "upper": FunctionSpec((1, 1), _strings(STRING), _string_fn(str.upper, STRING)),
    "concat": FunctionSpec((1, None), _strings(STRING), _make_concat),
    "hash": FunctionSpec((1, None), _hash, _make_hash),
    "cast": FunctionSpec((1, 1), _cast, _make_cast),
}
