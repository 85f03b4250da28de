"""A from-scratch reference evaluator for difflow query plans.

``evaluate(plan, db)`` computes a plan's output collection directly from the current contents
of the tables: no incrementality, no numpy, just Counters and loops, so that every line can be
checked against the plan semantics by reading it. ``schema_of(plan, db)`` gives the output
columns, and both raise :class:`PlanError` (with the JSON path of the offending node) for an
invalid plan.

How it works: a plan is first *compiled* into a tree of :class:`_Node` objects. Compiling
checks every node, field, column, function and type and works out each node's output columns;
nothing runs yet, so a plan is rejected whole even in parts that would never execute (the body
of an iterate with ``max_iterations: 0``). Each node then carries a ``run(env)`` closure that
computes its rows from scratch, where ``env`` holds the current contents of the iterate
variables in scope.

Semantic choices beyond the contract (each is also noted where it is implemented):

* Floats are canonical: ``-0.0`` becomes ``0.0`` and every NaN becomes the one object
  :data:`NAN`, so NaN rows compare equal to each other in joins, ``distinct``, grouping and
  the fixed-point test (as their canonical IEEE bits would), while ``eq``/``lt``/... stay IEEE.
* Float sums are exact sums rounded once, whatever the rows' order.
* Where values are *ordered* (``reduce`` min/max, ``top_k``) NaN sorts after every
  other float; the ``min``/``max`` *functions* return NaN if any argument is NaN (IEEE).
* Int arithmetic, int sums and ``cast`` of a string to int wrap to signed 64 bits, and so
  does every node's output counts (as the engine keeps them);
  ``cast`` of a float to int truncates, and saturates at the ends of int64 beyond them.
* A mixed int/float comparison compares the two as floats.
* Fields a node does not define are rejected; ``iterate`` needs one body per var, and a var's
  initial plan may read the vars of enclosing iterates (not its own iterate's).
* ``join`` with ``columns`` is inner only (``semi``/``anti`` output the left rows).
* An error inside a stored view's plan is reported at the ``view`` node that reads it.
"""

from __future__ import annotations

import hashlib
import math
import operator
import re
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from functools import cmp_to_key
from typing import Any

__all__ = [
    "FUNCTIONS",
    "MAX_ROUNDS",
    "NAN",
    "TYPES",
    "Column",
    "Database",
    "IterationLimitError",
    "PlanError",
    "Relation",
    "Row",
    "Scope",
    "Value",
    "check_value",
    "compile_expr",
    "evaluate",
    "hash_values",
    "normalize_value",
    "schema_of",
]

Value = int | float | bool | str
Row = tuple[Value, ...]
Column = tuple[str, str]
Path = tuple[str | int, ...]
Env = Mapping[str, Counter[Row]]  # iterate var -> its current rows
VarColumns = Mapping[str, list[Column]]  # iterate var -> its columns

TYPES = ("int", "float", "bool", "string")
NUMERIC = ("int", "float")
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
MASK64 = 2**64 - 1
MAX_ROUNDS = 10_000
GOLDEN = 0x9E3779B97F4A7C15

NAN = float("nan")
"""The one NaN object: every NaN value is replaced by it, so that rows holding NaN compare
equal (Python compares tuple items by identity before ``==``)."""


class PlanError(Exception):
    """An invalid plan: ``message`` says what is wrong, ``path`` where (JSON keys and indexes
    from the root of the plan, after the caller's prefix)."""

    def __init__(self, message: str, path: Path) -> None:
        where = ".".join(str(p) for p in path) or "<root>"
        super().__init__(f"{message} (at {where})")
        self.message = message
        self.path = path


class IterationLimitError(RuntimeError):
    """An ``iterate`` without ``max_iterations`` did not converge within :data:`MAX_ROUNDS`."""


# ---------------------------------------------------------------------------------------------
# Values, relations, databases


def wrap64(x: int) -> int:
    """``x`` wrapped to a signed 64-bit integer (two's complement)."""
    return ((x - INT_MIN) & MASK64) + INT_MIN


def normalize_value(v: Value) -> Value:
    """Canonical form of a value: ``-0.0`` -> ``0.0`` and any NaN -> :data:`NAN`."""
    if type(v) is float:
        if math.isnan(v):
            return NAN
        if v == 0.0:
            return 0.0
    return v


def check_value(v: object, type_: str) -> bool:
    """Whether ``v`` is a value of column type ``type_`` (bools are not ints here)."""
    python_type = {"int": int, "float": float, "bool": bool, "string": str}[type_]
    if type(v) is not python_type:
        return False
    return type_ != "int" or INT_MIN <= v <= INT_MAX


def _consolidated(rows: Mapping[Row, int]) -> Counter[Row]:
    """A copy of ``rows`` without the rows whose count is zero."""
    return Counter({row: count for row, count in rows.items() if count != 0})


@dataclass
class Relation:
    """A multiset of rows: ``rows`` maps each row tuple (values in column order) to its
    multiplicity, which may be negative; rows with count 0 are absent."""

    columns: list[Column]
    rows: Counter[Row] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.columns = [(name, type_) for name, type_ in self.columns]
        self.rows = _consolidated(self.rows)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.columns]

    @property
    def types(self) -> list[str]:
        return [type_ for _, type_ in self.columns]

    @classmethod
    def of(cls, columns: Iterable[Column], rows: Iterable[Row] | Mapping[Row, int]) -> Relation:
        """A relation from rows given once each (an iterable) or with counts (a mapping)."""
        return cls(list(columns), Counter(rows))


@dataclass
class Database:
    """What plans read: tables (name -> contents) and views (name -> stored plan).

    Table rows are checked against the columns (arity and value types) and canonicalised
    (:func:`normalize_value`); a row that does not fit is a ``ValueError``."""

    tables: dict[str, Relation]
    views: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checked = {}
        for name, table in self.tables.items():
            if any(type_ not in TYPES for type_ in table.types):
                raise ValueError(f"table {name!r} has an unknown column type: {table.columns}")
            rows: Counter[Row] = Counter()
            for row, count in table.rows.items():
                if len(row) != len(table.columns) or not all(
                    check_value(v, t) for v, t in zip(row, table.types, strict=True)
                ):
                    raise ValueError(f"row {row!r} does not fit table {name!r} {table.columns}")
                rows[tuple(normalize_value(v) for v in row)] += count
            checked[name] = Relation(list(table.columns), rows)
        self.tables = checked

    @classmethod
    def from_counters(
        cls,
        schemas: Mapping[str, Iterable[Column]],
        contents: Mapping[str, Mapping[Row, int]],
        views: Mapping[str, dict[str, Any]] | None = None,
    ) -> Database:
        """A database with a table per schema, holding ``contents[name]`` (empty if absent)."""
        tables = {
            name: Relation.of(columns, contents.get(name, {})) for name, columns in schemas.items()
        }
        return cls(tables, dict(views or {}))


def hash_values(typed_values: Iterable[tuple[str, Value]]) -> int:
    """The ``hash`` function on ``(type, value)`` pairs: splitmix64 folding, as a signed int64."""
    h = GOLDEN
    for type_, value in typed_values:
        h = _splitmix64(h ^ _hash_word(type_, value))
    return wrap64(h)


def _splitmix64(x: int) -> int:
    x = (x + GOLDEN) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def _hash_word(type_: str, value: Value) -> int:
    """The 64 bits one argument contributes to ``hash``, as an unsigned int."""
    if type_ == "int":
        return value & MASK64
    if type_ == "bool":
        return int(value)
    if type_ == "float":
        x = NAN if math.isnan(value) else value + 0.0
        return int(struct.unpack("<Q", struct.pack("<d", x))[0])
    digest = hashlib.blake2b(value.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _order_key(v: Value) -> tuple[int, Value]:
    """A total order on the values of one type: the natural one, NaN after every float."""
    if type(v) is float and math.isnan(v):
        return (1, 0.0)
    return (0, v)


def _compare(a: Value, b: Value) -> int:
    """-1, 0 or 1 as ``a`` sorts before, with, or after ``b`` (see :func:`_order_key`)."""
    ka, kb = _order_key(a), _order_key(b)
    return (ka > kb) - (ka < kb)


# ---------------------------------------------------------------------------------------------
# Expressions


Compiled = tuple[str, Callable[[Row], Value]]
"""A type-checked expression: its result type and a function from a row to the value."""


class Scope:
    """The column names an expression may read: name -> (index in the row, type). Names in
    ``ambiguous`` exist on both sides of a join and may not be used bare."""

    def __init__(
        self, names: dict[str, tuple[int, str]], ambiguous: frozenset[str] = frozenset()
    ) -> None:
        self.names = names
        self.ambiguous = ambiguous

    @classmethod
    def of_columns(cls, columns: list[Column]) -> Scope:
        return cls({name: (i, type_) for i, (name, type_) in enumerate(columns)})

    @classmethod
    def of_join(cls, left: list[Column], right: list[Column]) -> Scope:
        """Rows are the left row followed by the right row: ``left.x``, ``right.x``, and bare
        ``x`` when ``x`` is a column of exactly one side."""
        names: dict[str, tuple[int, str]] = {}
        for i, (name, type_) in enumerate(left):
            names[f"left.{name}"] = (i, type_)
        for j, (name, type_) in enumerate(right):
            names[f"right.{name}"] = (len(left) + j, type_)
        left_names = {name for name, _ in left}
        right_names = {name for name, _ in right}
        for i, (name, type_) in enumerate(left):
            if name not in right_names:
                names[name] = (i, type_)
        for j, (name, type_) in enumerate(right):
            if name not in left_names:
                names[name] = (len(left) + j, type_)
        return cls(names, frozenset(left_names & right_names))

    def lookup(self, name: str, path: Path) -> tuple[int, str]:
        if name in self.ambiguous:
            raise PlanError(
                f"column {name!r} is on both sides of the join: write left.{name} or right.{name}",
                path,
            )
        if name not in self.names:
            raise PlanError(f"unknown column {name!r} (known: {sorted(self.names)})", path)
        return self.names[name]


def compile_expr(expr: object, scope: Scope, path: Path) -> Compiled:
    """Type-check ``expr`` against ``scope``; return its type and evaluation function."""
    if isinstance(expr, bool):
        return "bool", _constant(expr)
    if isinstance(expr, int | float):
        return _literal(expr, path)
    if isinstance(expr, str):
        index, type_ = scope.lookup(expr, path)
        return type_, operator.itemgetter(index)
    if isinstance(expr, dict) and "lit" in expr:
        _check_keys(expr, {"lit"}, set(), path, "literal")
        return _literal(expr["lit"], path)
    if isinstance(expr, dict) and "fn" in expr:
        name = expr["fn"]
        if not isinstance(name, str):
            raise PlanError("'fn' must be a function name", (*path, "fn"))
        _check_keys(expr, {"fn", "args"}, {"to"} if name == "cast" else set(), path, "call")
        if name not in FUNCTIONS:
            raise PlanError(f"unknown function {name!r}", path)
        if not isinstance(expr["args"], list):
            raise PlanError("'args' must be a list of expressions", (*path, "args"))
        args = [compile_expr(arg, scope, (*path, "args", i)) for i, arg in enumerate(expr["args"])]
        return FUNCTIONS[name](args, expr, path)
    raise PlanError(f"not an expression: {expr!r}", path)


def _constant(value: Value) -> Callable[[Row], Value]:
    return lambda row: value


def _literal(value: object, path: Path) -> Compiled:
    if isinstance(value, bool):
        return "bool", _constant(value)
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise PlanError(f"int literal {value} is outside the 64-bit range", path)
        return "int", _constant(value)
    if isinstance(value, float):
        return "float", _constant(normalize_value(value))
    if isinstance(value, str):
        return "string", _constant(value)
    raise PlanError(f"not a literal: {value!r}", path)


def _arity(name: str, args: list[Compiled], lo: int, hi: int | None, path: Path) -> None:
    if len(args) < lo or (hi is not None and len(args) > hi):
        wanted = f"{lo}" if lo == hi else f"{lo}+" if hi is None else f"{lo} to {hi}"
        raise PlanError(f"{name} takes {wanted} arguments, got {len(args)}", path)


def _require(name: str, args: list[Compiled], allowed: tuple[str, ...], path: Path) -> None:
    for i, (type_, _) in enumerate(args):
        if type_ not in allowed:
            raise PlanError(
                f"{name} argument {i} must be {' or '.join(allowed)}, not {type_}",
                (*path, "args", i),
            )


def _float_div(a: float, b: float) -> float:
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return NAN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _float_mod(a: float, b: float) -> float:
    return NAN if b == 0.0 else a % b


# name -> (int op, float op) for the binary arithmetic functions.
_ARITHMETIC: dict[str, tuple[Callable[[int, int], int], Callable[[float, float], float]]] = {
    "add": (lambda a, b: wrap64(a + b), operator.add),
    "sub": (lambda a, b: wrap64(a - b), operator.sub),
    "mul": (lambda a, b: wrap64(a * b), operator.mul),
    "div": (lambda a, b: 0 if b == 0 else wrap64(a // b), _float_div),
    "mod": (lambda a, b: 0 if b == 0 else a % b, _float_mod),
}


def _arithmetic(name: str, lo: int, hi: int | None) -> Callable[..., Compiled]:
    """A left fold of a binary arithmetic op: int op int stays int, otherwise both operands
    become floats (step by step, so ``add(int, int, float)`` adds the ints as ints first)."""
    int_op, float_op = _ARITHMETIC[name]

    def make(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
        _arity(name, args, lo, hi, path)
        _require(name, args, NUMERIC, path)
        result_type = "int" if all(t == "int" for t, _ in args) else "float"

        def run(row: Row) -> Value:
            acc_type, acc = args[0][0], args[0][1](row)
            for type_, fn in args[1:]:
                value = fn(row)
                if acc_type == "int" and type_ == "int":
                    acc = int_op(acc, value)
                else:
                    acc = normalize_value(float_op(float(acc), float(value)))
                    acc_type = "float"
            return acc

        return result_type, run

    return make


def _neg(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
    _arity("neg", args, 1, 1, path)
    _require("neg", args, NUMERIC, path)
    type_, fn = args[0]
    if type_ == "int":
        return "int", lambda row: wrap64(-fn(row))
    return "float", lambda row: normalize_value(-fn(row))


def _abs(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
    _arity("abs", args, 1, 1, path)
    _require("abs", args, NUMERIC, path)
    type_, fn = args[0]
    if type_ == "int":
        return "int", lambda row: wrap64(abs(fn(row)))
    return "float", lambda row: normalize_value(abs(fn(row)))


def _common_type(name: str, args: list[Compiled], path: Path, first: int = 0) -> str:
    """The type arguments ``first``, ``first + 1``, ... share: all numeric (float if any is
    float) or all of one type."""
    types = [t for t, _ in args[first:]]
    if all(t in NUMERIC for t in types):
        return "float" if "float" in types else "int"
    for i, t in enumerate(types):
        if t != types[0]:
            raise PlanError(
                f"{name} arguments must all be numeric or all of one type; "
                f"argument {first + i} is {t}, argument {first} is {types[0]}",
                (*path, "args", first + i),
            )
    return types[0]


def _as_type(type_: str, value: Value) -> Value:
    """An int promoted to float when ``type_`` is float (the numeric common type)."""
    return float(value) if type_ == "float" else value


_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


def _comparison(name: str) -> Callable[..., Compiled]:
    compare = _COMPARISONS[name]

    def make(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
        _arity(name, args, 2, 2, path)
        common = _common_type(name, args, path)
        (_, left), (_, right) = args
        return "bool", lambda row: compare(
            _as_type(common, left(row)), _as_type(common, right(row))
        )

    return make


def _logic(name: str) -> Callable[..., Compiled]:
    def make(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
        _arity(name, args, 1 if name == "not" else 2, 1 if name == "not" else None, path)
        _require(name, args, ("bool",), path)
        fns = [fn for _, fn in args]
        if name == "not":
            return "bool", lambda row: not fns[0](row)
        if name == "and":
            return "bool", lambda row: all(fn(row) for fn in fns)
        return "bool", lambda row: any(fn(row) for fn in fns)

    return make


def _if(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
    _arity("if", args, 3, 3, path)
    if args[0][0] != "bool":
        raise PlanError(f"if condition must be bool, not {args[0][0]}", (*path, "args", 0))
    (_, cond), (_, then), (_, otherwise) = args
    result_type = _common_type("if", args, path, first=1)
    return result_type, lambda row: _as_type(
        result_type, then(row) if cond(row) else otherwise(row)
    )


def _extreme(name: str) -> Callable[..., Compiled]:
    pick = min if name == "min" else max

    def make(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
        _arity(name, args, 1, None, path)
        result_type = _common_type(name, args, path)

        def run(row: Row) -> Value:
            values = [_as_type(result_type, fn(row)) for _, fn in args]
            if result_type == "float" and any(math.isnan(v) for v in values):
                return NAN
            return pick(values)

        return result_type, run

    return make


def _string_fn(name: str, result_type: str, fn: Callable[[str], Value]) -> Callable[..., Compiled]:
    def make(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
        _arity(name, args, 1, 1, path)
        _require(name, args, ("string",), path)
        arg = args[0][1]
        return result_type, lambda row: fn(arg(row))

    return make


def _concat(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
    _arity("concat", args, 1, None, path)
    _require("concat", args, ("string",), path)
    return "string", lambda row: "".join(fn(row) for _, fn in args)


def _hash(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
    _arity("hash", args, 1, None, path)
    return "int", lambda row: hash_values((type_, fn(row)) for type_, fn in args)


_INT_TEXT = re.compile(r"[+-]?\d+(?:_\d+)*")


def _parse_int(s: str) -> int:
    s = s.strip()
    try:
        return wrap64(int(s))
    except ValueError:  # int() refuses more than 4,300 digits; Decimal has no such limit
        return wrap64(int(Decimal(s))) if _INT_TEXT.fullmatch(s) else 0


def _parse_float(s: str) -> float:
    try:
        return normalize_value(float(s.strip()))
    except ValueError:
        return 0.0


def _float_to_int(x: float) -> int:
    if math.isnan(x):
        return 0
    if x >= 2.0**63:  # beyond int64: its ends (infinities too)
        return INT_MAX
    if x <= -(2.0**63):
        return INT_MIN
    return int(x)


# (from type, to type) -> conversion; a cast to the same type is the identity.
_CASTS: dict[tuple[str, str], Callable[[Any], Value]] = {
    ("int", "float"): float,
    ("int", "bool"): lambda v: v != 0,
    ("int", "string"): str,
    ("float", "int"): _float_to_int,
    ("float", "bool"): lambda v: v != 0.0,
    ("float", "string"): str,
    ("bool", "int"): int,
    ("bool", "float"): float,
    ("bool", "string"): str,
    ("string", "int"): _parse_int,
    ("string", "float"): _parse_float,
    ("string", "bool"): lambda v: len(v) > 0,
}


def _cast(args: list[Compiled], expr: dict[str, Any], path: Path) -> Compiled:
    _arity("cast", args, 1, 1, path)
    to = expr.get("to")
    if to not in TYPES:
        raise PlanError(f"cast needs 'to': one of {', '.join(TYPES)}; got {to!r}", path)
    from_type, fn = args[0]
    if from_type == to:
        return to, fn
    convert = _CASTS[(from_type, to)]
    return to, lambda row: convert(fn(row))


FUNCTIONS: dict[str, Callable[[list[Compiled], dict[str, Any], Path], Compiled]] = {
    "add": _arithmetic("add", 2, None),
    "sub": _arithmetic("sub", 2, 2),
    "mul": _arithmetic("mul", 2, None),
    "div": _arithmetic("div", 2, 2),
    "mod": _arithmetic("mod", 2, 2),
    "neg": _neg,
    "abs": _abs,
    **{name: _comparison(name) for name in _COMPARISONS},
    "and": _logic("and"),
    "or": _logic("or"),
    "not": _logic("not"),
    "if": _if,
    "min": _extreme("min"),
    "max": _extreme("max"),
    "length": _string_fn("length", "int", len),
    "lower": _string_fn("lower", "string", str.lower),
    "upper": _string_fn("upper", "string", str.upper),
    "concat": _concat,
    "hash": _hash,
    "cast": _cast,
}
"""Function name -> compiler: checks arity and argument types, returns the compiled call."""


# ---------------------------------------------------------------------------------------------
# Plans


@dataclass(frozen=True)
class _Node:
    """A checked plan node: its output columns and how to compute its rows from scratch."""

    columns: list[Column]
    run: Callable[[Env], Counter[Row]]


def _by_name(node: _Node, like: list[Column]) -> _Node:
    """A union lines its inputs up by column name where they have the same names in another
    order (rows are objects), otherwise by position."""
    names, want = [n for n, _ in node.columns], [n for n, _ in like]
    if names == want or sorted(names) != sorted(want):
        return node
    order = [names.index(n) for n in want]

    def run(env: Env) -> Counter[Row]:
        return Counter({tuple(row[i] for i in order): c for row, c in node.run(env).items()})

    return _Node([node.columns[i] for i in order], run)


def _check_keys(
    obj: dict[str, Any], required: set[str], optional: set[str], path: Path, what: str
) -> None:
    missing = sorted(required - obj.keys())
    if missing:
        raise PlanError(f"{what} is missing {', '.join(missing)}", path)
    unknown = sorted(obj.keys() - required - optional)
    if unknown:
        raise PlanError(f"{what} has unknown fields {', '.join(unknown)}", path)


def _expect(value: object, kind: type | tuple[type, ...], what: str, path: Path) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PlanError(f"{what} has the wrong JSON type: {value!r}", path)


def _column_index(columns: list[Column], name: object, path: Path) -> int:
    names = [n for n, _ in columns]
    if not isinstance(name, str) or name not in names:
        raise PlanError(f"unknown column {name!r} (known: {names})", path)
    return names.index(name)


def _column_list(columns: list[Column], names: object, path: Path) -> list[int]:
    """Indexes of a JSON list of distinct column names."""
    _expect(names, list, "a column list", path)
    indexes = [_column_index(columns, n, (*path, i)) for i, n in enumerate(names)]
    for i, index in enumerate(indexes):
        if index in indexes[:i]:
            raise PlanError(f"column {columns[index][0]!r} is listed twice", (*path, i))
    return indexes


def _unique_names(columns: list[Column], path: Path) -> list[Column]:
    seen: set[str] = set()
    for name, _ in columns:
        if name in seen:
            raise PlanError(f"output column {name!r} appears twice", path)
        seen.add(name)
    return columns


def _counts_wrapped(run: Callable[[Env], Counter[Row]]) -> Callable[[Env], Counter[Row]]:
    """``run`` with its counts wrapped to signed 64 bits, as the engine keeps them: every
    node sees its inputs' counts as the engine's operators do (an iterated self-join can
    square a count each round; ``distinct`` and the other non-linear nodes read the wrapped
    value)."""

    def wrapped(env: Env) -> Counter[Row]:
        out: Counter[Row] = Counter()
        for row, count in run(env).items():
            if INT_MIN <= count <= INT_MAX:  # the usual case: nothing to wrap
                out[row] = count
            elif wrap64(count):
                out[row] = wrap64(count)
        return out

    return wrapped


class _Compiler:
    """Checks a plan and builds its :class:`_Node` tree. ``var_columns`` maps each iterate
    var in scope to its columns; ``views_open`` guards against views that read themselves."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.views_open: list[str] = []

    def plan(self, plan: object, path: Path, var_columns: VarColumns) -> _Node:
        if not isinstance(plan, dict) or not isinstance(plan.get("op"), str):
            raise PlanError("a plan node must be an object with an 'op' string", path)
        op = plan["op"]
        compile_op = getattr(self, f"op_{op}", None)
        if compile_op is None:
            raise PlanError(f"unknown node {op!r}", path)
        node: _Node = compile_op(plan, path, var_columns)
        return _Node(node.columns, _counts_wrapped(node.run))

    def child(self, plan: dict[str, Any], key: str, path: Path, var_columns: VarColumns) -> _Node:
        return self.plan(plan[key], (*path, key), var_columns)

    # -- sources -------------------------------------------------------------------------------

    def op_table(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "name"}, set(), path, "table")
        name = plan["name"]
        if not isinstance(name, str) or name not in self.db.tables:
            raise PlanError(f"unknown table {name!r}", path)
        table = self.db.tables[name]
        return _Node(list(table.columns), lambda env: Counter(table.rows))

    def op_view(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "name"}, set(), path, "view")
        name = plan["name"]
        if not isinstance(name, str) or name not in self.db.views:
            raise PlanError(f"unknown view {name!r}", path)
        if name in self.views_open:
            raise PlanError(f"view {name!r} reads itself", path)
        self.views_open.append(name)
        try:
            stored = self.plan(self.db.views[name], (), {})
        except PlanError as e:
            raise PlanError(f"view {name!r} is invalid: {e}", path) from e
        finally:
            self.views_open.pop()
        return _Node(stored.columns, lambda env: stored.run({}))

    def op_var(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "name"}, set(), path, "var")
        name = plan["name"]
        if not isinstance(name, str) or name not in var_columns:
            raise PlanError(f"unknown var {name!r} (in scope: {sorted(var_columns)})", path)
        return _Node(list(var_columns[name]), lambda env: Counter(env[name]))

    # -- row by row ----------------------------------------------------------------------------

    def op_select(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "input", "columns"}, set(), path, "select")
        source = self.child(plan, "input", path, var_columns)
        _expect(plan["columns"], dict, "select 'columns'", (*path, "columns"))
        scope = Scope.of_columns(source.columns)
        outputs = {
            out: compile_expr(expr, scope, (*path, "columns", out))
            for out, expr in plan["columns"].items()
        }
        fns = [fn for _, fn in outputs.values()]

        def run(env: Env) -> Counter[Row]:
            rows: Counter[Row] = Counter()
            for row, count in source.run(env).items():
                rows[tuple(fn(row) for fn in fns)] += count
            return _consolidated(rows)

        return _Node([(out, type_) for out, (type_, _) in outputs.items()], run)

    def op_filter(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "input", "where"}, set(), path, "filter")
        source = self.child(plan, "input", path, var_columns)
        type_, where = compile_expr(
            plan["where"], Scope.of_columns(source.columns), (*path, "where")
        )
        if type_ != "bool":
            raise PlanError(f"filter 'where' must be bool, not {type_}", (*path, "where"))

        def run(env: Env) -> Counter[Row]:
            return Counter({row: count for row, count in source.run(env).items() if where(row)})

        return _Node(source.columns, run)

    def op_flat_map(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "input", "as", "start", "stop"}, set(), path, "flat_map")
        source = self.child(plan, "input", path, var_columns)
        new = plan["as"]
        _expect(new, str, "flat_map 'as'", (*path, "as"))
        if new in [name for name, _ in source.columns]:
            raise PlanError(f"flat_map 'as' column {new!r} already exists", (*path, "as"))
        scope = Scope.of_columns(source.columns)
        bounds = []
        for key in ("start", "stop"):
            type_, fn = compile_expr(plan[key], scope, (*path, key))
            if type_ != "int":
                raise PlanError(f"flat_map {key!r} must be int, not {type_}", (*path, key))
            bounds.append(fn)
        start, stop = bounds

        def run(env: Env) -> Counter[Row]:
            rows: Counter[Row] = Counter()
            for row, count in source.run(env).items():
                for i in range(start(row), stop(row)):
                    rows[(*row, i)] += count
            return _consolidated(rows)

        return _Node([*source.columns, (new, "int")], run)

    def op_concat(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "inputs"}, set(), path, "concat")
        inputs = plan["inputs"]
        _expect(inputs, list, "concat 'inputs'", (*path, "inputs"))
        if not inputs:
            raise PlanError("concat needs at least one input", (*path, "inputs"))
        sources = [self.plan(p, (*path, "inputs", i), var_columns) for i, p in enumerate(inputs)]
        sources = [sources[0], *(_by_name(source, sources[0].columns) for source in sources[1:])]
        types = [t for _, t in sources[0].columns]
        for i, source in enumerate(sources):
            if [t for _, t in source.columns] != types:
                raise PlanError(
                    f"concat input {i} has column types {[t for _, t in source.columns]}, "
                    f"input 0 has {types}",
                    (*path, "inputs", i),
                )

        def run(env: Env) -> Counter[Row]:
            rows: Counter[Row] = Counter()
            for source in sources:
                for row, count in source.run(env).items():
                    rows[row] += count
            return _consolidated(rows)

        return _Node(sources[0].columns, run)

    def op_negate(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "input"}, set(), path, "negate")
        source = self.child(plan, "input", path, var_columns)

        def run(env: Env) -> Counter[Row]:
            return Counter({row: -count for row, count in source.run(env).items()})

        return _Node(source.columns, run)

    # -- join ----------------------------------------------------------------------------------

    def op_join(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "left", "right", "on"}, {"how", "columns"}, path, "join")
        left = self.child(plan, "left", path, var_columns)
        right = self.child(plan, "right", path, var_columns)
        how = plan.get("how", "inner")
        if how not in ("inner", "semi", "anti"):
            raise PlanError(f"join 'how' must be inner, semi or anti; got {how!r}", (*path, "how"))
        _expect(plan["on"], list, "join 'on'", (*path, "on"))
        left_keys, right_keys = [], []
        for i, pair in enumerate(plan["on"]):
            pair_path = (*path, "on", i)
            if not isinstance(pair, list) or len(pair) != 2:
                raise PlanError(
                    "each 'on' entry must be a [left column, right column] pair", pair_path
                )
            li = _column_index(left.columns, pair[0], (*pair_path, 0))
            ri = _column_index(right.columns, pair[1], (*pair_path, 1))
            if left.columns[li][1] != right.columns[ri][1]:
                raise PlanError(
                    f"join key types differ: left {pair[0]!r} is {left.columns[li][1]}, "
                    f"right {pair[1]!r} is {right.columns[ri][1]}",
                    pair_path,
                )
            left_keys.append(li)
            right_keys.append(ri)

        def left_key(row: Row) -> Row:
            return tuple(row[i] for i in left_keys)

        def right_key(row: Row) -> Row:
            return tuple(row[i] for i in right_keys)

        if how != "inner":
            if "columns" in plan:
                raise PlanError(
                    f"a {how} join outputs the left rows: no 'columns'", (*path, "columns")
                )
            keep_present = how == "semi"

            def run_filtering(env: Env) -> Counter[Row]:
                present = {right_key(row) for row, count in right.run(env).items() if count > 0}
                return Counter(
                    {
                        row: count
                        for row, count in left.run(env).items()
                        if (left_key(row) in present) == keep_present
                    }
                )

            return _Node(left.columns, run_filtering)

        if "columns" in plan:
            _expect(plan["columns"], dict, "join 'columns'", (*path, "columns"))
            scope = Scope.of_join(left.columns, right.columns)
            outputs = {
                out: compile_expr(expr, scope, (*path, "columns", out))
                for out, expr in plan["columns"].items()
            }
            columns = [(out, type_) for out, (type_, _) in outputs.items()]
            fns = [fn for _, fn in outputs.values()]

            def output(joined: Row) -> Row:
                return tuple(fn(joined) for fn in fns)
        else:
            kept = [j for j in range(len(right.columns)) if j not in right_keys]
            columns = _unique_names([*left.columns, *(right.columns[j] for j in kept)], path)

            def output(joined: Row) -> Row:
                return joined[: len(left.columns)] + tuple(
                    joined[len(left.columns) + j] for j in kept
                )

        def run_inner(env: Env) -> Counter[Row]:
            by_key: dict[Row, list[tuple[Row, int]]] = {}
            for row, count in right.run(env).items():
                by_key.setdefault(right_key(row), []).append((row, count))
            rows: Counter[Row] = Counter()
            for lrow, lcount in left.run(env).items():
                for rrow, rcount in by_key.get(left_key(lrow), []):
                    rows[output(lrow + rrow)] += lcount * rcount
            return _consolidated(rows)

        return _Node(columns, run_inner)

    # -- grouping ------------------------------------------------------------------------------

    def op_reduce(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "input", "by", "aggregates"}, set(), path, "reduce")
        source = self.child(plan, "input", path, var_columns)
        by = _column_list(source.columns, plan["by"], (*path, "by"))
        _expect(plan["aggregates"], dict, "reduce 'aggregates'", (*path, "aggregates"))
        scope = Scope.of_columns(source.columns)
        aggregates: list[tuple[str, Callable[[list[tuple[Row, int]]], Value]]] = []
        columns = [source.columns[i] for i in by]
        for out, spec in plan["aggregates"].items():
            agg_path = (*path, "aggregates", out)
            type_, aggregate = _compile_aggregate(spec, scope, agg_path)
            columns.append((out, type_))
            aggregates.append((out, aggregate))
        _unique_names(columns, (*path, "aggregates"))

        def run(env: Env) -> Counter[Row]:
            groups: dict[Row, list[tuple[Row, int]]] = {}
            for row, count in source.run(env).items():
                if count > 0:
                    groups.setdefault(tuple(row[i] for i in by), []).append((row, count))
            return Counter(
                {
                    key + tuple(aggregate(members) for _, aggregate in aggregates): 1
                    for key, members in groups.items()
                }
            )

        return _Node(columns, run)

    def op_distinct(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "input"}, set(), path, "distinct")
        source = self.child(plan, "input", path, var_columns)

        def run(env: Env) -> Counter[Row]:
            return Counter({row: 1 for row, count in source.run(env).items() if count > 0})

        return _Node(source.columns, run)

    def op_threshold(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "input", "at_least"}, set(), path, "threshold")
        source = self.child(plan, "input", path, var_columns)
        _expect(plan["at_least"], int, "threshold 'at_least'", (*path, "at_least"))
        at_least = max(plan["at_least"], 1)

        def run(env: Env) -> Counter[Row]:
            return Counter({row: 1 for row, count in source.run(env).items() if count >= at_least})

        return _Node(source.columns, run)

    def op_top_k(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "input", "by", "order_by", "k"}, set(), path, "top_k")
        source = self.child(plan, "input", path, var_columns)
        by = _column_list(source.columns, plan["by"], (*path, "by"))
        _expect(plan["order_by"], list, "top_k 'order_by'", (*path, "order_by"))
        order: list[tuple[int, bool]] = []  # (column index, descending)
        for i, spec in enumerate(plan["order_by"]):
            spec_path = (*path, "order_by", i)
            _expect(spec, dict, "an order_by entry", spec_path)
            _check_keys(spec, {"col"}, {"desc"}, spec_path, "order_by entry")
            index = _column_index(source.columns, spec["col"], (*spec_path, "col"))
            desc = spec.get("desc", False)
            _expect(desc, bool, "order_by 'desc'", (*spec_path, "desc"))
            if index not in [j for j, _ in order]:  # a repeated column orders nothing more
                order.append((index, desc))
        ordered = {i for i, _ in order}
        order += [
            (i, False) for i in range(len(source.columns)) if i not in by and i not in ordered
        ]
        k = plan["k"]
        _expect(k, int, "top_k 'k'", (*path, "k"))
        if k < 0:
            raise PlanError(f"top_k 'k' must not be negative, got {k}", (*path, "k"))

        def compare_rows(a: Row, b: Row) -> int:
            for index, desc in order:
                c = _compare(a[index], b[index])
                if c != 0:
                    return -c if desc else c
            return 0

        def run(env: Env) -> Counter[Row]:
            groups: dict[Row, list[Row]] = {}
            counts = source.run(env)
            for row, count in counts.items():
                if count > 0:
                    groups.setdefault(tuple(row[i] for i in by), []).append(row)
            rows: Counter[Row] = Counter()
            for members in groups.values():
                remaining = k
                for row in sorted(members, key=cmp_to_key(compare_rows)):
                    if remaining == 0:
                        break
                    taken = min(counts[row], remaining)
                    rows[row] = taken
                    remaining -= taken
            return rows

        return _Node(source.columns, run)

    # -- fixed point ---------------------------------------------------------------------------

    def op_iterate(self, plan: dict[str, Any], path: Path, var_columns: VarColumns) -> _Node:
        _check_keys(plan, {"op", "vars", "body", "result"}, {"max_iterations"}, path, "iterate")
        _expect(plan["vars"], dict, "iterate 'vars'", (*path, "vars"))
        _expect(plan["body"], dict, "iterate 'body'", (*path, "body"))
        if not plan["vars"]:
            raise PlanError("iterate needs at least one var", (*path, "vars"))
        # A var's initial plan sees the enclosing scope only, not the vars of this iterate.
        initial = {
            name: self.plan(p, (*path, "vars", name), var_columns)
            for name, p in plan["vars"].items()
        }
        inner_columns = {**var_columns, **{name: node.columns for name, node in initial.items()}}
        for name in plan["body"]:
            if name not in initial:
                raise PlanError(f"body for unknown var {name!r}", (*path, "body", name))
        bodies = {}
        for name, node in initial.items():
            if name not in plan["body"]:
                raise PlanError(f"var {name!r} has no body", (*path, "body"))
            body_path = (*path, "body", name)
            body = _by_name(self.plan(plan["body"][name], body_path, inner_columns), node.columns)
            if [t for _, t in body.columns] != [t for _, t in node.columns]:
                raise PlanError(
                    f"body of var {name!r} has column types {[t for _, t in body.columns]}, "
                    f"its initial plan has {[t for _, t in node.columns]}",
                    body_path,
                )
            bodies[name] = body
        result = plan["result"]
        if not isinstance(result, str) or result not in initial:
            raise PlanError(f"iterate 'result' must name a var, got {result!r}", (*path, "result"))
        limit = plan.get("max_iterations")
        if limit is not None:
            _expect(limit, int, "iterate 'max_iterations'", (*path, "max_iterations"))
            if limit < 0:
                raise PlanError("max_iterations must not be negative", (*path, "max_iterations"))

        def run(env: Env) -> Counter[Row]:
            current = {name: node.run(env) for name, node in initial.items()}
            replacements = 0
            while limit is None or replacements < limit:
                if replacements >= MAX_ROUNDS:
                    raise IterationLimitError(f"iterate did not converge in {MAX_ROUNDS} rounds")
                body_env = {**env, **current}
                following = {name: body.run(body_env) for name, body in bodies.items()}
                replacements += 1
                if following == current:
                    break
                current = following
            return current[result]

        return _Node(initial[result].columns, run)


def _compile_aggregate(
    spec: object, scope: Scope, path: Path
) -> tuple[str, Callable[[list[tuple[Row, int]]], Value]]:
    """One reduce aggregate: its type and a function of a group's (row, positive count) list."""
    _expect(spec, dict, "an aggregate", path)
    _check_keys(spec, {"fn"}, {"of"}, path, "aggregate")
    fn = spec["fn"]
    if fn not in ("count", "sum", "min", "max", "count_distinct"):
        raise PlanError(f"unknown aggregate {fn!r}", (*path, "fn"))
    if "of" not in spec:
        if fn != "count":
            raise PlanError(f"aggregate {fn} needs 'of'", path)
        value_type, value = "int", _constant(1)
    else:
        value_type, value = compile_expr(spec["of"], scope, (*path, "of"))

    if fn == "count":
        return "int", lambda members: wrap64(sum(count for _, count in members))
    if fn == "count_distinct":
        return "int", lambda members: len({value(row) for row, _ in members})
    if fn in ("min", "max"):
        pick = min if fn == "min" else max
        return value_type, lambda members: pick((value(row) for row, _ in members), key=_order_key)
    if value_type not in NUMERIC:
        raise PlanError(f"sum of a {value_type} is not defined", (*path, "of"))
    if value_type == "int":
        return "int", lambda members: wrap64(sum(count * value(row) for row, count in members))

    def float_sum(members: list[tuple[Row, int]]) -> Value:
        return normalize_value(exact_float_sum([(value(row), count) for row, count in members]))

    return "float", float_sum


def exact_float_sum(terms: list[tuple[float, int]]) -> float:
    """The exact sum of ``value * count``, rounded once; an infinite or NaN value makes it
    the float sum of those terms' products (IEEE: infinities of both signs give NaN)."""
    special = [v * c for v, c in terms if not math.isfinite(v)]
    if special:
        return sum(special)
    total = sum((Fraction(v) * c for v, c in terms), Fraction(0))
    try:
        return float(total)
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def schema_of(plan: object, db: Database, path: Path = ()) -> list[Column]:
    """The output columns of ``plan``; :class:`PlanError` if it is invalid. ``path`` prefixes
    error paths (e.g. ``("query",)``)."""
    try:
        return _Compiler(db).plan(plan, (), {}).columns
    except PlanError as e:
        raise PlanError(e.message, (*path, *e.path)) from None


def evaluate(plan: object, db: Database, path: Path = ()) -> Relation:
    """The rows of ``plan`` over ``db``, computed from scratch; :class:`PlanError` if invalid."""
    try:
        node = _Compiler(db).plan(plan, (), {})
    except PlanError as e:
        raise PlanError(e.message, (*path, *e.path)) from None
    return Relation(node.columns, node.run({}))
