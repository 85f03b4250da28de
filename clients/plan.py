"""The fluent query-plan builder: immutable ``Plan`` nodes that render to API.md's plan JSON.

Every method returns a new node and leaves its receiver untouched, so partial plans can be
shared and reused. ``to_json()`` renders the tree; fields the contract marks optional are left
out when they hold their default (``how: inner``, ``desc: false``, ``max_iterations``), so the
output reads like a hand-written plan::

    reach = table("roots").select(root="node", node="node")
    plan = iterate(
        vars={"reach": reach},
        body={"reach": concat(reach, var("reach").join(
            table("edges"), on=[("node", "src")],
            columns={"root": "left.root", "node": "right.dst"})).distinct()},
        result="reach",
    )

Column expressions follow ``clients.expr``: a ``str`` is a column name, numbers and booleans
are literals, ``lit("...")`` is a string literal.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias

import numpy as np

from clients.expr import Expr, ExprLike, name_of, to_expr

__all__ = [
    "Aggregate",
    "Plan",
    "concat",
    "count",
    "count_distinct",
    "iterate",
    "max_",
    "min_",
    "sum_",
    "table",
    "var",
    "view",
]

JoinKey: TypeAlias = str | tuple[str, str] | Sequence[str]
OrderKey: TypeAlias = str | tuple[str, bool] | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One aggregate of ``reduce``: ``{"fn": fn, "of"?: EXPR}``."""

    fn: str
    of: Expr | None = None

    def to_json(self) -> dict[str, Any]:
        return {"fn": self.fn} if self.of is None else {"fn": self.fn, "of": self.of.to_json()}


def count(of: ExprLike | None = None) -> Aggregate:
    """The number of rows in the group (with multiplicity)."""
    return Aggregate("count", None if of is None else to_expr(of))


def sum_(of: ExprLike) -> Aggregate:
    """The sum of ``of`` over the group's rows."""
    return Aggregate("sum", to_expr(of))


def min_(of: ExprLike) -> Aggregate:
    """The least ``of`` in the group."""
    return Aggregate("min", to_expr(of))


def max_(of: ExprLike) -> Aggregate:
    """The greatest ``of`` in the group."""
    return Aggregate("max", to_expr(of))


def count_distinct(of: ExprLike) -> Aggregate:
    """The number of distinct values of ``of`` in the group."""
    return Aggregate("count_distinct", to_expr(of))


@dataclass(frozen=True, slots=True)
class Plan:
    """A plan node ``{"op": op, **fields}``; build with ``table``/``view``/``var`` and chain."""

    op: str
    fields: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The plan JSON of this tree (fresh objects on every call)."""
        return {"op": self.op, **{key: _encode(value) for key, value in self.fields.items()}}

    def select(self, columns: Mapping[str, ExprLike] | None = None, /, **named: ExprLike) -> Plan:
        """Map each row to ``{out: EXPR}``, given as a mapping, as keywords, or both."""
        exprs = {_out(out): to_expr(e) for out, e in _merge(columns, named).items()}
        return _node("select", input=self, columns=exprs)

    def filter(self, where: ExprLike) -> Plan:
        """Keep the rows where ``where`` is true (``lit(True)`` for a constant: a Python
        bool here is most likely ``col(...) == ...``, which compares nodes, not values)."""
        if isinstance(where, bool):
            raise TypeError(
                "filter got a Python bool: spell equality .eq() / .ne() (== compares "
                "expression nodes), or write a constant condition as lit(True) / lit(False)"
            )
        return _node("filter", input=self, where=to_expr(where))

    def flat_map(self, as_: str, start: ExprLike, stop: ExprLike) -> Plan:
        """One row per integer ``as_`` in ``[start, stop)``, with the input's columns."""
        as_ = name_of(as_, "flat_map's as")
        fields = {"input": self, "as": as_, "start": to_expr(start), "stop": to_expr(stop)}
        return _node("flat_map", **fields)

    def concat(self, *others: Plan) -> Plan:
        """The multiset union of this plan and ``others``."""
        return concat(self, *others)

    def negate(self) -> Plan:
        """Every diff flipped."""
        return _node("negate", input=self)

    def join(
        self,
        other: Plan,
        on: JoinKey | Sequence[JoinKey],
        how: str = "inner",
        columns: Mapping[str, ExprLike] | None = None,
    ) -> Plan:
        """Equi-join on ``on``: a list of ``(left_col, right_col)`` pairs, where a bare name
        stands for a pair of equal names (``on="k"`` is ``[("k", "k")]``). ``columns``
        (``{out: EXPR}``, EXPR may name ``left.x`` / ``right.x``) replaces the default output
        of left columns plus right non-key columns."""
        if how not in ("inner", "semi", "anti"):
            raise ValueError(f"how must be inner, semi or anti, not {how!r}")
        right = _plan(other, "a join's other side")
        fields: dict[str, Any] = {"left": self, "right": right, "on": _join_keys(on)}
        if how != "inner":
            fields["how"] = how
        if columns is not None:
            fields["columns"] = {_out(out): to_expr(e) for out, e in columns.items()}
        return _node("join", **fields)

    def semijoin(self, other: Plan, on: JoinKey | Sequence[JoinKey]) -> Plan:
        """The rows (with their counts) whose key is present in ``other``."""
        return self.join(other, on, how="semi")

    def antijoin(self, other: Plan, on: JoinKey | Sequence[JoinKey]) -> Plan:
        """The rows (with their counts) whose key is absent from ``other``."""
        return self.join(other, on, how="anti")

    def reduce(
        self,
        aggregates: Mapping[str, Aggregate] | None = None,
        /,
        *,
        by: str | Sequence[str] = (),
        **named: Aggregate,
    ) -> Plan:
        """Group by ``by`` and compute ``{out: aggregate}`` (a mapping, keywords, or both)."""
        columns = _columns(by)
        merged = _merge(aggregates, named)
        for out, aggregate in merged.items():
            _out(out)
            if not isinstance(aggregate, Aggregate):
                raise TypeError(
                    f"aggregate {out!r} is an Aggregate (count(), sum_(...), ...), not "
                    f"{type(aggregate).__name__} {aggregate!r}"
                )
        return _node("reduce", input=self, by=columns, aggregates=merged)

    def distinct(self) -> Plan:
        """Each present row once."""
        return _node("distinct", input=self)

    def threshold(self, at_least: int) -> Plan:
        """Each row once if its count is at least ``at_least``."""
        return _node("threshold", input=self, at_least=_int(at_least, "threshold's at_least"))

    def top_k(
        self,
        k: int,
        *,
        by: str | Sequence[str] = (),
        order_by: OrderKey | Sequence[OrderKey] = (),
    ) -> Plan:
        """The first ``k`` rows per ``by`` group in ``order_by`` order: one key or a list of
        them, each a column (ascending), ``(column, descending)`` or API.md's
        ``{"col", "desc"?}``."""
        one = isinstance(order_by, (str, Mapping)) or (
            isinstance(order_by, tuple)
            and len(order_by) == 2
            and isinstance(order_by[1], (bool, np.bool_))
        )
        keys: list[Any] = [order_by] if one else list(order_by)
        order = [_order_key(key) for key in keys]
        return _node("top_k", input=self, by=_columns(by), order_by=order, k=_int(k, "top_k's k"))


def table(name: str) -> Plan:
    """A table's collection."""
    return _node("table", name=name_of(name, "a table name"))


def view(name: str) -> Plan:
    """A view's collection."""
    return _node("view", name=name_of(name, "a view name"))


def var(name: str) -> Plan:
    """An ``iterate`` variable, read inside the iterate's bodies."""
    return _node("var", name=name_of(name, "a var name"))


def concat(*plans: Plan | Sequence[Plan]) -> Plan:
    """The multiset union of ``plans`` (given one by one, or as one list)."""
    inputs = list(plans[0]) if len(plans) == 1 and not isinstance(plans[0], Plan) else plans
    if not inputs:
        raise ValueError("concat needs at least one plan")
    for p in inputs:
        if not isinstance(p, Plan):
            raise TypeError(f"concat takes plans, not {type(p).__name__}")
    return _node("concat", inputs=list(inputs))


def iterate(
    vars: Mapping[str, Plan],
    body: Mapping[str, Plan],
    result: str,
    max_iterations: int | None = None,
) -> Plan:
    """The fixed point of ``body`` from ``vars``: each var starts as its plan and all are
    replaced together by their bodies until nothing changes (or ``max_iterations`` times)."""
    fields: dict[str, Any] = {
        "vars": {name_of(k, "a var name"): _plan(p, f"var {k!r}") for k, p in dict(vars).items()},
        "body": {name_of(k, "a var name"): _plan(p, f"body {k!r}") for k, p in dict(body).items()},
        "result": name_of(result, "iterate's result"),
    }
    if max_iterations is not None:
        fields["max_iterations"] = _int(max_iterations, "iterate's max_iterations")
    return _node("iterate", **fields)


def _node(op: str, **fields: Any) -> Plan:
    return Plan(op, MappingProxyType({key: _freeze(value) for key, value in fields.items()}))


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    return value


def _encode(value: Any) -> Any:
    if isinstance(value, Plan | Expr | Aggregate):
        return value.to_json()
    if isinstance(value, Mapping):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_encode(item) for item in value]
    return value


def _merge(mapping: Mapping[str, Any] | None, named: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(mapping or {})
    twice = merged.keys() & named.keys()
    if twice:
        raise ValueError(f"given both in the mapping and as keywords: {sorted(twice)}")
    merged.update(named)
    return merged


def _columns(names: str | Sequence[str]) -> list[str]:
    """Column names: a bare ``str`` is one column (not its letters)."""
    if isinstance(names, str):
        return [names]
    if not isinstance(names, Sequence | np.ndarray):
        raise TypeError(f"columns are a name or a list of names, not {names!r}")
    return [name_of(n, "a column name") for n in names]


def _out(name: Any) -> str:
    return name_of(name, "an output column's name")


def _plan(value: Any, what: str) -> Plan:
    if not isinstance(value, Plan):
        raise TypeError(f"{what} is a Plan, not {type(value).__name__} {value!r}")
    return value


def _int(value: Any, what: str) -> int:
    """An integer field (``k``, ``at_least``, ``max_iterations``); bools are not."""
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} is an int, not {type(value).__name__} {value!r}")
    return int(value)


def _join_keys(on: JoinKey | Sequence[JoinKey]) -> list[list[str]]:
    """``"k"``, ``("l", "r")`` (one pair), or a list of names and pairs."""
    if isinstance(on, str) or (
        isinstance(on, tuple) and len(on) == 2 and all(isinstance(k, str) for k in on)
    ):
        keys: list[Any] = [on]
    elif isinstance(on, Sequence | np.ndarray):
        keys = list(on)
    else:
        raise TypeError(f"join keys are a name, a (left, right) pair or a list of them, not {on!r}")
    pairs: list[list[str]] = []
    for key in keys:
        if isinstance(key, str):
            pairs.append([key, key])
        elif isinstance(key, Sequence | np.ndarray) and len(key) == 2:
            pairs.append([str(name_of(k, "a join key")) for k in key])
        else:
            raise ValueError(f"a join key is a column name or a (left, right) pair, not {key!r}")
    return pairs


def _order_key(key: Any) -> dict[str, Any]:
    if isinstance(key, str):
        return {"col": key}
    if isinstance(key, Mapping):  # API.md's own form
        if set(key) - {"col", "desc"} or not isinstance(key.get("col"), str):
            raise ValueError(f'an order key is {{"col": name, "desc"?: bool}}, not {key!r}')
        return _order_key((key["col"], key.get("desc", False)))
    if not isinstance(key, Sequence) or len(key) != 2:
        raise ValueError(
            f"an order key is a column name or a (column, descending) pair, not {key!r}"
        )
    name, descending = key[0], key[1]
    name_of(name, "an order key's column")
    if not isinstance(descending, (bool, np.bool_)):
        raise TypeError(f"an order key's descending flag is a bool, not {descending!r}")
    return {"col": name, "desc": True} if descending else {"col": name}
