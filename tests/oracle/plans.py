"""Hypothesis strategies for checking the engine against the oracle.

* :func:`plans` (and :func:`plans_with_schema`): random *valid* query plans over given tables,
  covering every node (``var`` through ``iterate``; ``view`` is left to hand-written tests)
  and every expression function. Plans are built type-directed, so they are valid by
  construction; :func:`plans` also checks each with :func:`~tests.oracle.evaluate.schema_of`
  and discards any that is not.
* :func:`update_streams`: random ``(table, row, time, diff)`` lists over small value domains,
  with retractions, multiplicities other than +-1, many distinct times and optionally
  multi-dimensional (product-ordered) times; :func:`accumulate` and :func:`database_at` give
  the inputs at a time.

Each iterate var gets a *step*: a var joined with another plan (reachability-like), a var's
rows mapped by a select (counters, successors), a nested iterate, or any plan, computed from
the vars and coerced to the var's column types. Every generated ``iterate`` then terminates on
any input, in one of two ways:

* *monotone*: each body is ``distinct(concat([var, distinct(filter(step, guard))]))``, where
  the guard keeps only rows whose values lie in the small value domains below. From the first
  round on each var is a set that only grows, inside a finite set of rows, so it converges
  (``max_iterations`` is sometimes set as well);
* *bounded*: the body is the step itself, and ``max_iterations`` is set.

Iterates have one var or two (often mutually recursive), and nest (inner bodies read the outer
vars, and sometimes shadow one with a var of the same name).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import strategies as st

from .evaluate import TYPES, Column, Database, PlanError, Row, Value, schema_of

__all__ = [
    "DOMAINS",
    "Time",
    "Update",
    "accumulate",
    "database_at",
    "expressions",
    "plans",
    "plans_with_schema",
    "reach_plan",
    "rows",
    "update_streams",
    "values",
]

Time = int | tuple[int, ...]
Update = tuple[str, Row, Time, int]
"""One input update: (table name, row in column order, time, diff)."""
Plan = dict[str, Any]
Generated = tuple[Plan, list[Column]]

DOMAINS: dict[str, tuple[Value, ...]] = {
    "int": (0, 1, 2, 3, 4, 5, -(2**63), 2**63 - 1),  # the ends of int64: wrapping, ordering
    "float": (0.0, 0.5, 1.5, -1.0, 2.5),
    "bool": (False, True),
    "string": ("a", "b", "ab", "B", ""),
}
"""The small value domains of generated data (and of the iterate guards)."""


def reach_plan(roots: str = "roots", edges: str = "edges") -> Plan:
    """API.md's reachability example, as written there but for the two table names: every
    ``(root, node)`` with ``node`` reachable from a ``root`` over ``edges(src, dst)``."""
    seed = {
        "op": "select",
        "input": {"op": "table", "name": roots},
        "columns": {"root": "node", "node": "node"},
    }
    step = {
        "op": "join",
        "left": {"op": "var", "name": "reach"},
        "right": {"op": "table", "name": edges},
        "on": [["node", "src"]],
        "columns": {"root": "left.root", "node": "right.dst"},
    }
    return {
        "op": "iterate",
        "result": "reach",
        "vars": {"reach": seed},
        "body": {"reach": {"op": "distinct", "input": {"op": "concat", "inputs": [seed, step]}}},
    }


_NAMES = ("a", "b", "c", "x", "y", "z")  # output column names of generated nodes
_VAR_NAMES = ("v", "w")  # few, so that nested iterates often shadow an outer var
_MAX_NESTING = 2  # iterates within iterates


# ---------------------------------------------------------------------------------------------
# Data


def values(type_: str) -> st.SearchStrategy[Value]:
    """A value of column type ``type_`` from its small domain."""
    return st.sampled_from(DOMAINS[type_])


def rows(columns: Sequence[Column]) -> st.SearchStrategy[Row]:
    """A row tuple for ``columns``."""
    return st.tuples(*(values(type_) for _, type_ in columns))


def _times(n_times: int, time_dims: int, at_least: Time | None = None) -> st.SearchStrategy[Time]:
    """A time with coordinates in ``range(n_times)`` (an int for one dimension, else a tuple),
    at or after ``at_least`` if given."""
    if time_dims == 1:
        return st.integers(at_least if isinstance(at_least, int) else 0, n_times - 1)
    lows = at_least if isinstance(at_least, tuple) else (0,) * time_dims
    return st.tuples(*(st.integers(low, n_times - 1) for low in lows))


@st.composite
def update_streams(
    draw: st.DrawFn,
    tables: Mapping[str, Sequence[Column]],
    n_times: int = 6,
    *,
    min_updates: int = 0,
    max_updates: int = 30,
    time_dims: int = 1,
    negative_counts: bool = True,
) -> list[Update]:
    """A list of updates, sorted by time (lexicographically for tuples: a linear extension of
    the product order, so it can be fed to the engine in list order).

    Between ``min_updates`` and ``max_updates`` updates are drawn (plus retractions); raise
    ``min_updates`` to keep hypothesis from pairing big plans with near-empty streams.
    Times have ``time_dims`` coordinates in ``range(n_times)``. Diffs are 1, 2, 3 (and -1, -2
    when ``negative_counts``); some updates are later retracted in part or in full at a time
    at or after their own. With ``negative_counts=False`` every retraction follows its own
    insertion, so no row's accumulated count is ever negative at any time.
    """
    if n_times < 1 or time_dims < 1:
        raise ValueError("n_times and time_dims must be at least 1")
    names = sorted(tables)
    diffs = (1, 2, 3, -1, -2) if negative_counts else (1, 2, 3)
    updates: list[Update] = []
    for _ in range(draw(st.integers(min_updates, max_updates))):
        name = draw(st.sampled_from(names))
        row = draw(rows(tables[name]))
        updates.append((name, row, draw(_times(n_times, time_dims)), draw(st.sampled_from(diffs))))
    retractions: list[Update] = []
    for name, row, time, diff in updates:
        if diff > 0 and draw(st.booleans()):
            later = draw(_times(n_times, time_dims, at_least=time))
            retractions.append((name, row, later, -draw(st.integers(1, diff))))
    return sorted(updates + retractions, key=lambda update: update[2])


def _time_le(s: Time, t: Time) -> bool:
    """``s <= t`` in the product order (plain ``<=`` for one dimension)."""
    if isinstance(s, int) and isinstance(t, int):
        return s <= t
    if isinstance(s, tuple) and isinstance(t, tuple) and len(s) == len(t):
        return all(a <= b for a, b in zip(s, t, strict=True))
    raise ValueError(f"times {s!r} and {t!r} are not of the same shape")


def accumulate(
    stream: Iterable[Update], t: Time, tables: Iterable[str] = ()
) -> dict[str, Counter[Row]]:
    """Each table's contents at time ``t``: the sum of the diffs of the updates at times
    ``<= t`` (product order), without rows whose count is zero. The result has an entry for
    every table named in ``tables`` or in the stream."""
    contents: dict[str, Counter[Row]] = {name: Counter() for name in tables}
    for name, row, time, diff in stream:
        contents.setdefault(name, Counter())
        if _time_le(time, t):
            contents[name][row] += diff
    return {
        name: Counter({row: count for row, count in counter.items() if count != 0})
        for name, counter in contents.items()
    }


def database_at(
    tables: Mapping[str, Sequence[Column]],
    stream: Iterable[Update],
    t: Time,
    views: Mapping[str, Plan] | None = None,
) -> Database:
    """The oracle's database at time ``t`` of ``stream``."""
    return Database.from_counters(tables, accumulate(stream, t, tables), views)


# ---------------------------------------------------------------------------------------------
# Expressions


def _literal(draw: st.DrawFn, type_: str) -> Any:
    if type_ == "int":
        value = draw(st.integers(-2, 6))
        return {"lit": value} if draw(st.booleans()) else value
    if type_ == "string":
        return {"lit": draw(values("string"))}
    return draw(values(type_))


# Expression forms producing each type (besides a column and a literal).
_FORMS: dict[str, tuple[str, ...]] = {
    "int": ("arithmetic", "arithmetic", "neg", "abs", "min_max", "if", "cast", "length", "hash"),
    "float": ("arithmetic", "arithmetic", "neg", "abs", "min_max", "if", "cast"),
    "bool": ("compare", "logic", "min_max", "if", "cast"),
    "string": ("case", "concat", "min_max", "if", "cast"),
}


def _call(fn: str, *args: Any) -> dict[str, Any]:
    return {"fn": fn, "args": list(args)}


def _numeric_types(draw: st.DrawFn, want: str, n: int) -> list[str]:
    """Argument types for ``n`` numeric arguments whose common type is ``want``."""
    if want == "int":
        return ["int"] * n
    types = draw(st.lists(st.sampled_from(("int", "float")), min_size=n, max_size=n))
    if "float" not in types:
        types[draw(st.integers(0, n - 1))] = "float"
    return types


def _gen_expr(draw: st.DrawFn, scope: Sequence[Column], want: str, depth: int) -> Any:
    """A random expression of type ``want`` over the columns in ``scope``, nested at most
    ``depth`` calls deep."""
    same_type = [name for name, type_ in scope if type_ == want]
    forms = ["column"] if same_type else []
    if depth == 0 or not same_type:  # literals at the leaves (mostly), calls above
        forms.append("literal")
    if depth > 0:
        forms += _FORMS[want]
    form = draw(st.sampled_from(forms))

    def sub(type_: str) -> Any:
        return _gen_expr(draw, scope, type_, depth - 1)

    if form == "column":
        return draw(st.sampled_from(same_type))
    if form == "literal":
        return _literal(draw, want)
    if form == "arithmetic":
        fn = draw(st.sampled_from(("add", "sub", "mul", "div", "mod")))
        n = draw(st.integers(2, 3)) if fn in ("add", "mul") else 2
        return _call(fn, *(sub(t) for t in _numeric_types(draw, want, n)))
    if form in ("neg", "abs"):
        return _call(form, sub(want))
    if form == "min_max":
        n = draw(st.integers(1, 3))
        arg_types = _numeric_types(draw, want, n) if want in ("int", "float") else [want] * n
        return _call(draw(st.sampled_from(("min", "max"))), *(sub(t) for t in arg_types))
    if form == "if":
        then_type, else_type = _numeric_types(draw, want, 2) if want == "float" else (want, want)
        return _call("if", sub("bool"), sub(then_type), sub(else_type))
    if form == "cast":
        return {"fn": "cast", "args": [sub(draw(st.sampled_from(TYPES)))], "to": want}
    if form == "length":
        return _call("length", sub("string"))
    if form == "hash":
        args = [sub(t) for t in draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=2))]
        hashed = _call("hash", *args)
        return _call("mod", hashed, 7) if draw(st.booleans()) else hashed
    if form == "compare":
        fn = draw(st.sampled_from(("eq", "ne", "lt", "le", "gt", "ge")))
        left = draw(st.sampled_from(TYPES))
        right = draw(st.sampled_from(("int", "float"))) if left in ("int", "float") else left
        return _call(fn, sub(left), sub(right))
    if form == "logic":
        fn = draw(st.sampled_from(("and", "or", "not")))
        n = 1 if fn == "not" else draw(st.integers(2, 3))
        return _call(fn, *(sub("bool") for _ in range(n)))
    if form == "case":
        return _call(draw(st.sampled_from(("lower", "upper"))), sub("string"))
    # form == "concat"
    return _call("concat", *(sub("string") for _ in range(draw(st.integers(1, 3)))))


@st.composite
def expressions(draw: st.DrawFn, scope: Sequence[Column], want: str, depth: int = 3) -> Any:
    """A random expression of type ``want`` over the columns in ``scope``."""
    return _gen_expr(draw, scope, want, depth)


def _guard(columns: Sequence[Column]) -> Any:
    """A condition true exactly of rows whose values lie in :data:`DOMAINS` (ints by range)."""
    conditions: list[Any] = []
    for name, type_ in columns:
        if type_ == "int":
            inner = _call("and", _call("ge", name, 0), _call("le", name, 5))
            ends = [_call("eq", name, {"lit": v}) for v in DOMAINS["int"] if not 0 <= v <= 5]
            conditions.append(_call("or", inner, *ends) if ends else inner)
        elif type_ == "float":
            conditions.append(_call("or", *(_call("eq", name, v) for v in DOMAINS["float"])))
        elif type_ == "string":
            literals = [{"lit": v} for v in DOMAINS["string"]]
            conditions.append(_call("or", *(_call("eq", name, lit) for lit in literals)))
    if not conditions:
        return True
    return conditions[0] if len(conditions) == 1 else _call("and", *conditions)


# ---------------------------------------------------------------------------------------------
# Plans


@dataclass(frozen=True)
class _Context:
    """What a generated node may read: tables, iterate vars in scope (name -> columns)."""

    tables: Mapping[str, list[Column]]
    vars: Mapping[str, list[Column]]
    allow_iterate: bool
    nesting: int  # how many iterates enclose the node
    # the subplans generated so far in this plan, with the vars they read (and their
    # columns) and the nesting they were made at: a node may repeat one wherever those vars
    # are bound with those columns, as plans written by hand repeat a loop's start or a
    # filtered table (inside a nested iterate that binds the same var names to other
    # collections, a copy means something else; one that reads no var fits anywhere)
    made: list[tuple[Plan, list[Column], int, tuple[Any, ...]]] = field(
        default_factory=list, compare=False, hash=False
    )


def _free_vars(plan: Any) -> set[str]:
    """The vars ``plan`` reads that no iterate inside it binds."""
    if isinstance(plan, list):
        return set().union(*(_free_vars(p) for p in plan))
    if not isinstance(plan, dict):
        return set()
    if plan.get("op") == "var":
        return {plan["name"]}
    if plan.get("op") == "iterate":
        body = set().union(*(_free_vars(b) for b in plan["body"].values()))
        return _free_vars(list(plan["vars"].values())) | (body - set(plan["vars"]))
    return _free_vars(list(plan.values()))


def _remember(ctx: _Context, plan: Plan, columns: list[Column]) -> None:
    reads = tuple(sorted((name, tuple(ctx.vars[name])) for name in _free_vars(plan)))
    ctx.made.append((plan, columns, ctx.nesting, reads))


def _again(draw: st.DrawFn, ctx: _Context) -> Generated | None:
    """Sometimes a copy of a subplan made before that may stand here (the vars it reads
    bound with the same columns, no deeper nesting of iterates than allowed), else None."""
    fits = [
        (plan, columns)
        for plan, columns, nesting, reads in ctx.made
        if all(name in ctx.vars and tuple(ctx.vars[name]) == cols for name, cols in reads)
        and ((ctx.allow_iterate and nesting >= ctx.nesting) or '"iterate"' not in json.dumps(plan))
    ]
    if not fits or draw(st.integers(0, 5)) != 0:
        return None
    loops = [f for f in fits if '"iterate"' in json.dumps(f[0])]
    if loops and draw(st.booleans()):  # an iterate repeated is built where each copy stands
        fits = loops
    plan, columns = draw(st.sampled_from(fits))
    return copy.deepcopy(plan), list(columns)


def _fresh_name(columns: Sequence[Column]) -> str:
    taken = {name for name, _ in columns}
    return next(f"i{n}" for n in range(len(taken) + 1) if f"i{n}" not in taken)


def _out_names(draw: st.DrawFn, n: int, avoid: Iterable[str] = ()) -> list[str]:
    pool = [name for name in _NAMES if name not in set(avoid)]
    return draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n, unique=True))


def _column_subset(draw: st.DrawFn, columns: Sequence[Column], max_size: int) -> list[str]:
    names = [name for name, _ in columns]
    return draw(st.lists(st.sampled_from(names), max_size=max_size, unique=True)) if names else []


def _coerce(draw: st.DrawFn, plan: Plan, columns: list[Column], target: list[Column]) -> Generated:
    """``plan`` if its column types are ``target``'s, else a select computing them (named as
    in ``target``); with its columns."""
    if [t for _, t in columns] == [t for _, t in target]:
        return plan, columns
    exprs = {name: _gen_expr(draw, columns, type_, 1) for name, type_ in target}
    return {"op": "select", "input": plan, "columns": exprs}, list(target)


def _gen_plan(draw: st.DrawFn, ctx: _Context, depth: int, root: bool = False) -> Generated:
    """A random plan of at most ``depth`` operator levels (exactly ``depth`` at the ``root``),
    and its output columns."""
    if depth == 0:
        return _gen_leaf(draw, ctx)
    again = None if root else _again(draw, ctx)
    if again is not None:
        return again
    plan, columns = _gen_new(draw, ctx, depth, root)
    _remember(ctx, plan, columns)
    return plan, columns


def _gen_new(draw: st.DrawFn, ctx: _Context, depth: int, root: bool) -> Generated:
    ops = [] if root else ["leaf"]
    ops += [op for op in _OPERATORS if op != "iterate"]
    if ctx.allow_iterate and depth >= 2 and ctx.nesting < _MAX_NESTING:
        ops.append("iterate")
    op = draw(st.sampled_from(ops))
    if op == "leaf":
        return _gen_leaf(draw, ctx)
    return _OPERATORS[op](draw, ctx, depth)


def _gen_leaf(draw: st.DrawFn, ctx: _Context) -> Generated:
    if len(ctx.vars) > 0 and draw(st.booleans()):
        name = draw(st.sampled_from(sorted(ctx.vars)))
        return {"op": "var", "name": name}, list(ctx.vars[name])
    name = draw(st.sampled_from(sorted(ctx.tables)))
    return {"op": "table", "name": name}, list(ctx.tables[name])


def _gen_select(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    source, columns = _gen_plan(draw, ctx, depth - 1)
    exprs: dict[str, Any] = {}
    out: list[Column] = []
    for name in _out_names(draw, draw(st.integers(1, 3))):
        type_ = draw(st.sampled_from([t for _, t in columns] + list(TYPES)))
        exprs[name] = _gen_expr(draw, columns, type_, draw(st.integers(0, 2)))
        out.append((name, type_))
    return {"op": "select", "input": source, "columns": exprs}, out


def _gen_filter(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    source, columns = _gen_plan(draw, ctx, depth - 1)
    if draw(st.booleans()):
        where = _gen_expr(draw, columns, "bool", draw(st.integers(1, 2)))
    else:  # a column against a value of its domain: selective, but rarely always false
        name, type_ = draw(st.sampled_from(columns))
        value = draw(values(type_))
        fn = draw(st.sampled_from(("eq", "ne", "lt", "le", "gt", "ge")))
        where = _call(fn, name, {"lit": value})
    return {"op": "filter", "input": source, "where": where}, columns


def _gen_flat_map(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    source, columns = _gen_plan(draw, ctx, depth - 1)
    # Bounds are small: literals, or an int expression taken mod 3 (start) / mod 5 (stop).
    bounds: list[Any] = []
    for modulus in (3, 5):
        if draw(st.booleans()):
            bounds.append(draw(st.integers(-1, modulus - 1)))
        else:
            bounds.append(_call("mod", _gen_expr(draw, columns, "int", 1), modulus))
    new = _fresh_name(columns)
    plan = {"op": "flat_map", "input": source, "as": new, "start": bounds[0], "stop": bounds[1]}
    return plan, [*columns, (new, "int")]


def _gen_concat(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    first, columns = _gen_plan(draw, ctx, depth - 1)
    inputs = [first]
    for _ in range(draw(st.integers(1, 2))):
        other, other_columns = _gen_plan(draw, ctx, depth - 1)
        other, _ = _coerce(draw, other, other_columns, columns)
        inputs.append({"op": "negate", "input": other} if draw(st.booleans()) else other)
    return {"op": "concat", "inputs": inputs}, columns


def _gen_negate(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    source, columns = _gen_plan(draw, ctx, depth - 1)
    return {"op": "negate", "input": source}, columns


def _join_scope(left: list[Column], right: list[Column]) -> list[Column]:
    """The names a join's ``columns`` expressions may use, with their types."""
    left_names = {name for name, _ in left}
    right_names = {name for name, _ in right}
    return [
        *((f"left.{name}", t) for name, t in left),
        *((f"right.{name}", t) for name, t in right),
        *((name, t) for name, t in left if name not in right_names),
        *((name, t) for name, t in right if name not in left_names),
    ]


def _join_keys(
    draw: st.DrawFn, left_columns: list[Column], right: Plan, right_columns: list[Column]
) -> tuple[list[list[str]], Plan, list[Column]]:
    """1 or 2 ``on`` pairs of equal types, and the right side (given a computed key column
    when it has none of a left key's type) with its columns."""
    on: list[list[str]] = []
    for name, type_ in draw(
        st.lists(st.sampled_from(left_columns), min_size=1, max_size=2, unique=True)
    ):
        candidates = [n for n, t in right_columns if t == type_]
        if not candidates:
            new = _fresh_name(right_columns)
            exprs = {n: n for n, _ in right_columns}
            exprs[new] = _gen_expr(draw, right_columns, type_, 1)
            right = {"op": "select", "input": right, "columns": exprs}
            right_columns = [*right_columns, (new, type_)]
            candidates = [new]
        on.append([name, draw(st.sampled_from(candidates))])
    return on, right, right_columns


def _gen_join(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    left, left_columns = _gen_plan(draw, ctx, depth - 1)
    right, right_columns = _gen_plan(draw, ctx, depth - 1)
    on, right, right_columns = _join_keys(draw, left_columns, right, right_columns)
    plan: Plan = {"op": "join", "left": left, "right": right, "on": on}
    how = draw(st.sampled_from((None, "inner", "semi", "anti")))
    if how is not None:
        plan["how"] = how
    if how in ("semi", "anti"):
        return plan, left_columns
    right_keys = {r for _, r in on}
    default = [*left_columns, *((n, t) for n, t in right_columns if n not in right_keys)]
    if len({n for n, _ in default}) == len(default) and draw(st.booleans()):
        return plan, default
    scope = _join_scope(left_columns, right_columns)
    exprs = {}
    out: list[Column] = []
    for name in _out_names(draw, draw(st.integers(1, 3))):
        type_ = draw(st.sampled_from([t for _, t in scope]))
        exprs[name] = _gen_expr(draw, scope, type_, draw(st.integers(0, 1)))
        out.append((name, type_))
    plan["columns"] = exprs
    return plan, out


def _gen_reduce(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    source, columns = _gen_plan(draw, ctx, depth - 1)
    by = _column_subset(draw, columns, 2)
    types = dict(columns)
    aggregates: dict[str, Any] = {}
    out: list[Column] = [(name, types[name]) for name in by]
    for name in _out_names(draw, draw(st.integers(1, 2)), avoid=by):
        fn = draw(st.sampled_from(("count", "sum", "min", "max", "count_distinct")))
        if fn == "count":
            aggregates[name] = {"fn": "count"}
            out.append((name, "int"))
            continue
        numeric = [t for t in types.values() if t in ("int", "float")] + ["int", "float"]
        type_ = draw(st.sampled_from(numeric if fn == "sum" else [*types.values(), *TYPES]))
        aggregates[name] = {
            "fn": fn,
            "of": _gen_expr(draw, columns, type_, draw(st.integers(0, 1))),
        }
        out.append((name, "int" if fn == "count_distinct" else type_))
    return {"op": "reduce", "input": source, "by": by, "aggregates": aggregates}, out


def _gen_distinct(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    source, columns = _gen_plan(draw, ctx, depth - 1)
    return {"op": "distinct", "input": source}, columns


def _gen_threshold(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    source, columns = _gen_plan(draw, ctx, depth - 1)
    return {"op": "threshold", "input": source, "at_least": draw(st.integers(-1, 3))}, columns


def _gen_top_k(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    source, columns = _gen_plan(draw, ctx, depth - 1)
    by = _column_subset(draw, columns, min(2, len(columns) - 1))
    rest = [(n, t) for n, t in columns if n not in by]
    order_by = []
    for name in _column_subset(draw, rest, 2) or [rest[0][0]]:
        desc = draw(st.sampled_from((None, False, True)))
        order_by.append({"col": name} if desc is None else {"col": name, "desc": desc})
    k = draw(st.integers(0, 3))
    return {"op": "top_k", "input": source, "by": by, "order_by": order_by, "k": k}, columns


def _gen_step(
    draw: st.DrawFn, ctx: _Context, own_vars: list[str], target: list[Column], depth: int
) -> Generated:
    """The new contents of an iterate var with columns ``target``, computed from the vars
    (``own_vars`` are those of the iterate): one of

    * *expand*: a var joined with another plan, new rows computed from both (reachability);
    * *map*: a var's rows mapped to new ones (counters, successors);
    * a nested iterate (when the depth and nesting allow), or any plan, coerced to the types.
    """
    again = _again(draw, ctx)
    if again is not None:
        return _coerce(draw, *again, target)
    kinds = ["expand", "map", "plan"]
    if depth >= 2 and ctx.nesting < _MAX_NESTING:
        kinds.append("nested")
    kind = draw(st.sampled_from(kinds))
    if kind == "nested":
        step, columns = _gen_iterate(draw, ctx, depth)
        return _coerce(draw, step, columns, target)
    if kind == "plan":
        step, columns = _gen_plan(draw, ctx, depth)
        return _coerce(draw, step, columns, target)
    source = draw(st.sampled_from(own_vars))
    source_columns = list(ctx.vars[source])
    if kind == "map":
        exprs = {name: _gen_progress(draw, source_columns, t) for name, t in target}
        mapped = {"op": "select", "input": {"op": "var", "name": source}, "columns": exprs}
        _remember(ctx, mapped, target)
        return mapped, target
    right, right_columns = _gen_plan(draw, ctx, depth - 1)
    on, right, right_columns = _join_keys(draw, source_columns, right, right_columns)
    scope = _join_scope(source_columns, right_columns)
    # Prefer the right side's columns (a graph walk moves to the neighbour's values).
    right_scope = [(f"right.{name}", t) for name, t in right_columns]
    exprs = {name: _gen_progress(draw, scope, t, prefer=right_scope) for name, t in target}
    plan = {"op": "join", "left": {"op": "var", "name": source}, "right": right, "on": on}
    expanded = {**plan, "columns": exprs}
    _remember(ctx, expanded, target)
    return expanded, target


def _gen_progress(
    draw: st.DrawFn, scope: Sequence[Column], type_: str, prefer: Sequence[Column] = ()
) -> Any:
    """An expression for an iterate step's output column: a copy of a column (from ``prefer``
    if it has one of the type), an int successor ``(x + 1) mod 6`` (so that iterations make
    progress for a few rounds), or any expression."""
    copies = [n for n, t in prefer if t == type_] or [n for n, t in scope if t == type_]
    kinds = ["expr"]
    if copies:
        kinds += ["copy", "successor"] if type_ == "int" else ["copy"]
    kind = draw(st.sampled_from(kinds))
    if kind == "copy":
        return draw(st.sampled_from(copies))
    if kind == "successor":
        return _call("mod", _call("add", draw(st.sampled_from(copies)), 1), 6)
    return _gen_expr(draw, scope, type_, draw(st.integers(0, 2)))


def _gen_iterate(draw: st.DrawFn, ctx: _Context, depth: int) -> Generated:
    names = draw(st.lists(st.sampled_from(_VAR_NAMES), min_size=1, max_size=2, unique=True))
    # Initial plans read no vars (not even those of enclosing iterates); often just a table,
    # so that the iteration has something to start from.
    outside = replace(ctx, vars={})
    initial = {
        name: _gen_leaf(draw, outside)
        if draw(st.sampled_from((True, False)))
        else _gen_plan(draw, outside, depth - 1)
        for name in names
    }
    var_columns = {name: columns for name, (_, columns) in initial.items()}
    body_ctx = replace(ctx, vars={**ctx.vars, **var_columns}, nesting=ctx.nesting + 1)
    monotone = draw(st.sampled_from((True, False)))
    bodies = {}
    for name in names:
        step, step_columns = _gen_step(draw, body_ctx, names, var_columns[name], depth - 1)
        if monotone:
            guarded = {"op": "filter", "input": step, "where": _guard(step_columns)}
            grown = [{"op": "var", "name": name}, {"op": "distinct", "input": guarded}]
            step = {"op": "distinct", "input": {"op": "concat", "inputs": grown}}
        bodies[name] = step
    result = draw(st.sampled_from(names))
    plan: Plan = {
        "op": "iterate",
        "vars": {name: p for name, (p, _) in initial.items()},
        "body": bodies,
        "result": result,
    }
    if not monotone or draw(st.sampled_from((False, False, True))):
        plan["max_iterations"] = draw(st.sampled_from((3, 1, 2, 5, 0)))
    return plan, var_columns[result]


_OPERATORS: dict[str, Callable[[st.DrawFn, _Context, int], Generated]] = {
    "select": _gen_select,
    "filter": _gen_filter,
    "flat_map": _gen_flat_map,
    "concat": _gen_concat,
    "negate": _gen_negate,
    "join": _gen_join,
    "reduce": _gen_reduce,
    "distinct": _gen_distinct,
    "threshold": _gen_threshold,
    "top_k": _gen_top_k,
    "iterate": _gen_iterate,
}


@st.composite
def plans_with_schema(
    draw: st.DrawFn,
    tables: Mapping[str, Sequence[Column]],
    max_depth: int = 3,
    allow_iterate: bool = True,
    root_op: str | None = None,
) -> Generated:
    """A random plan over ``tables`` (name -> columns) with at most ``max_depth`` operator
    levels, and the output columns the generator meant it to have (not checked: use
    :func:`plans` for checked plans). ``root_op`` (a node such as ``"iterate"``) fixes the
    root's operator (``iterate`` needs ``max_depth >= 2``)."""
    if not tables:
        raise ValueError("plans need at least one table")
    ctx = _Context({name: list(columns) for name, columns in tables.items()}, {}, allow_iterate, 0)
    if root_op is not None:
        if root_op not in _OPERATORS or (root_op == "iterate" and max_depth < 2) or max_depth < 1:
            raise ValueError(f"no plan of depth {max_depth} has a root {root_op!r}")
        return _OPERATORS[root_op](draw, ctx, max_depth)
    return _gen_plan(draw, ctx, max_depth, root=True)


def plans(
    tables: Mapping[str, Sequence[Column]],
    max_depth: int = 3,
    allow_iterate: bool = True,
    root_op: str | None = None,
) -> st.SearchStrategy[Plan]:
    """Random valid plans over ``tables``: those of :func:`plans_with_schema` whose columns
    :func:`~tests.oracle.evaluate.schema_of` confirms (all of them, unless the generator has a
    bug)."""
    db = Database.from_counters(tables, {})

    def confirmed(generated: Generated) -> bool:
        plan, columns = generated
        try:
            return schema_of(plan, db) == columns
        except PlanError:
            return False

    generated = plans_with_schema(tables, max_depth, allow_iterate, root_op)
    return generated.filter(confirmed).map(lambda g: g[0])
