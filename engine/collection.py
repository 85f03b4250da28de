"""The fluent layer: collections and arrangements whose methods build operators.

Methods arrange and then delegate, as in differential dataflow's ``collection.rs``:
``join`` = arrange both sides by their keys + ``Join``; ``count`` = arrange by the group
columns + ``Reduce`` with an aggregate kernel. A collection used inside a loop body that
belongs to an enclosing scope is entered automatically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial, wraps
from typing import Concatenate, ParamSpec, TypeVar

from engine.errors import ExpressionError, GraphError, SchemaError
from engine.expr import Bound, Expr, Path, col, lit
from engine.lattice import Antichain
from engine.operators.arrange import Arrange, AsCollection
from engine.operators.base import Operator, Scope, undo_on_error
from engine.operators.capture import Capture
from engine.operators.iterate import (
    DEFAULT_ROUND_LIMIT,
    Enter,
    Leave,
    LoopRegion,
    LoopScope,
    Variable,
)
from engine.operators.join import Join
from engine.operators.linear import Concat, Consolidate, Filter, FlatMap, Map, Negate
from engine.operators.reduce import Reduce
from engine.operators.reduce_kernels import (
    AggregateKernel,
    AggregateSpec,
    DistinctKernel,
    GeneralKernel,
    PresenceKernel,
    ReduceKernel,
    ThresholdKernel,
    TopKKernel,
)
from engine.schema import ColumnType, Schema
from engine.trace import Layout

__all__ = ["Arrangement", "Collection", "iterate"]

ExprLike = Expr | str | int | float | bool
AGGREGATES = ("count", "sum", "min", "max", "count_distinct")


_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S", "Collection", "Arrangement")


def _all_or_nothing(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """A build method that raises leaves the graph as it was (``undo_on_error``)."""

    @wraps(method)
    def build(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with undo_on_error(self.scope):
            return method(self, *args, **kwargs)

    return build


def _expr(e: ExprLike) -> Expr:
    if isinstance(e, Expr):
        return e
    if isinstance(e, str):
        return col(e)
    return lit(e)


def _enter_chain(op: Operator, scope: Scope) -> Operator:
    """``op`` as seen from ``scope`` (entering every loop scope between them)."""
    if op.scope is scope:
        return op
    chain: list[Scope] = []
    s: Scope | None = scope
    while s is not None and s is not op.scope:
        chain.append(s)
        s = s.parent
    if s is None:
        raise GraphError(f"collection {op.name!r} is not visible from scope {scope.name!r}")
    current = op
    for inner in reversed(chain):
        assert isinstance(inner, LoopScope)
        current = inner.once(("enter", id(current), ()), partial(Enter, inner, current))
    return current


def _deepest(scopes: Sequence[Scope]) -> Scope:
    return max(scopes, key=lambda s: s.depth())


class Collection:
    """A stream of updates to a multiset of rows with named, typed columns."""

    __slots__ = ("op",)

    def __init__(self, op: Operator) -> None:
        self.op = op

    # -- basics -------------------------------------------------------------------------
    @property
    def schema(self) -> Schema:
        return self.op.schema

    @property
    def scope(self) -> Scope:
        return self.op.scope

    @property
    def dims(self) -> int:
        return self.op.dims

    def bind(self, e: ExprLike) -> Bound:
        return _expr(e).bind(self.schema)

    def _in(self, scope: Scope) -> Collection:
        return Collection(_enter_chain(self.op, scope))

    # -- record-at-a-time -----------------------------------------------------------------
    @_all_or_nothing
    def select(
        self, columns: Mapping[str, ExprLike] | None = None, **named: ExprLike
    ) -> Collection:
        """New columns computed from expressions: ``select(root="node", node="node")``."""
        spec = dict(columns or {}, **named)
        bound = [self.bind(e) for e in spec.values()]
        schema = Schema.of([(name, b.type) for name, b in zip(spec, bound, strict=True)])
        return Collection(Map(self.scope, self.op, bound, schema))

    @_all_or_nothing
    def filter(self, predicate: ExprLike) -> Collection:
        if isinstance(predicate, bool):  # ``col("a") != col("b")`` compares the objects
            raise SchemaError(
                f"filter got the Python bool {predicate}: write a.eq(b) / a.ne(b) for "
                "expressions (== and != compare them as objects), or lit(True)"
            )
        return Collection(Filter(self.scope, self.op, self.bind(predicate)))

    @_all_or_nothing
    def flat_map(self, as_name: str, start: ExprLike, stop: ExprLike) -> Collection:
        return Collection(FlatMap(self.scope, self.op, self.bind(start), self.bind(stop), as_name))

    @_all_or_nothing
    def concat(self, *others: Collection) -> Collection:
        scope = _deepest([self.scope, *(o.scope for o in others)])
        ops = [c._in(scope).op for c in (self, *others)]
        return Collection(Concat(scope, ops))

    @_all_or_nothing
    def negate(self) -> Collection:
        return Collection(Negate(self.scope, self.op))

    @_all_or_nothing
    def consolidate(self) -> Collection:
        """The same collection with each batch's equal (row, time) updates summed."""
        return Collection(Consolidate(self.scope, self.op))

    @_all_or_nothing
    def capture(self) -> Capture:
        """Record this collection's updates (see :meth:`Capture.drain`)."""
        return Capture(self.scope, self.op)

    # -- arrangements -------------------------------------------------------------------
    @_all_or_nothing
    def arrange_by_key(self, keys: Sequence[str], name: str = "") -> Arrangement:
        """This collection arranged by ``keys``: the output of an operator that keeps it
        arranged so already (a reduce's, by its groups) is that arrangement, unless a
        ``name`` asks for one of its own. Where the scope keeps what it builds (a loop's,
        always; the root's, inside ``Graph.building``), a collection arranged by the same
        keys again (a var joined twice, say) reads the first arrangement."""
        idx = self.schema.indices(keys)
        op = self.op
        if name:
            return Arrangement(Arrange(self.scope, op, idx, name))
        if isinstance(op, (Arrange, Reduce)) and list(op.layout.key_cols) == idx:
            return Arrangement(op)
        return self._arranged(idx, f"arrange by [{', '.join(keys)}]")

    @_all_or_nothing
    def arrange_by_self(self, name: str = "") -> Arrangement:
        idx = list(range(len(self.schema)))
        if name:
            return Arrangement(Arrange(self.scope, self.op, idx, name))
        return self._arranged(idx, "arrange by self")

    def _arranged(self, idx: list[int], label: str) -> Arrangement:
        """A new arrangement of this collection by columns ``idx``, or the one made before
        by the same columns where the scope keeps them (``Scope.once``)."""
        scope = self.scope
        make = partial(Arrange, scope, self.op, idx, label)
        arranged = scope.once(("arrange", id(self.op), tuple(idx)), make)
        assert isinstance(arranged, Arrange)
        return Arrangement(arranged)

    # -- joins ----------------------------------------------------------------------------
    @_all_or_nothing
    def join(
        self,
        other: Collection | Arrangement,
        on: Sequence[tuple[str, str]],
        how: str = "inner",
        columns: Mapping[str, ExprLike] | None = None,
    ) -> Collection:
        """Equi-join. ``inner``: left columns + right non-key columns, or ``columns`` with
        expressions over ``left.x`` / ``right.x``; ``semi``/``anti``: left rows whose key is /
        is not present on the right, with their own counts."""
        lkeys = [l for l, _ in on]
        rkeys = [r for _, r in on]
        if how in ("semi", "anti"):
            return self._semi(other, lkeys, rkeys, anti=how == "anti")
        if how != "inner":
            raise SchemaError(f"join how must be inner, semi or anti, not {how!r}")
        scope = _deepest([self.scope, other.scope])
        left = self._arranged_by(lkeys, scope)
        # a collection joined with itself on the same columns: one arrangement
        right = left if other is self and lkeys == rkeys else other._arranged_by(rkeys, scope)
        return left.join(right, columns)

    def _semi(
        self, other: Collection | Arrangement, lkeys: list[str], rkeys: list[str], anti: bool
    ) -> Collection:
        scope = _deepest([self.scope, other.scope])
        left_c = self._in(scope)
        right = other._arranged_by(rkeys, scope)
        key_schema = right.schema.select(right.op.layout.key_cols)

        def make() -> Reduce:
            layout = Layout.by_self(len(rkeys))
            return Reduce(scope, right.op, PresenceKernel(), key_schema, layout, "present")

        # the keys present on the right: once for every semi and anti join where the scope
        # keeps what it built
        present = scope.once(("present", id(right.op), ()), make)
        assert isinstance(present, Reduce)
        # a collection semi-joined with itself on the same columns: one arrangement
        left = right if other is self and lkeys == rkeys else left_c.arrange_by_key(lkeys)
        outputs = [(0, i) for i in range(len(left_c.schema))]
        semi = Collection(Join(scope, left.op, present, outputs, left_c.schema))
        return left_c.concat(semi.negate()) if anti else semi

    @_all_or_nothing
    def semijoin(
        self, other: Collection | Arrangement, on: Sequence[tuple[str, str]]
    ) -> Collection:
        return self.join(other, on, how="semi")

    @_all_or_nothing
    def antijoin(
        self, other: Collection | Arrangement, on: Sequence[tuple[str, str]]
    ) -> Collection:
        return self.join(other, on, how="anti")

    def _arranged_by(self, keys: Sequence[str], scope: Scope) -> Arrangement:
        return self._in(scope).arrange_by_key(keys)

    # -- reductions ---------------------------------------------------------------------
    @_all_or_nothing
    def reduce(
        self, by: Sequence[str], aggregates: Mapping[str, tuple[str, ExprLike | None]]
    ) -> Collection:
        """Group by ``by`` and compute ``{out: (fn, expr)}`` with fn in count, sum, min, max,
        count_distinct (``expr`` None for count)."""
        return Collection(self.reduce_arranged(by, aggregates).op)

    @_all_or_nothing
    def reduce_arranged(
        self, by: Sequence[str], aggregates: Mapping[str, tuple[str, ExprLike | None]]
    ) -> Arrangement:
        """The group is the multiset of whole input rows with that key (so rows with
        positive count are what aggregates see); computed aggregate inputs become extra
        columns, plain column references read the input column."""
        names = list(self.schema.names)
        extra: dict[str, ExprLike] = {}
        specs: list[AggregateSpec] = []
        outs: list[tuple[str, ColumnType]] = []
        for out, (fn, e) in aggregates.items():
            if fn not in AGGREGATES:
                raise SchemaError(f"unknown aggregate {fn!r}; use one of {list(AGGREGATES)}")
            if fn == "count" and e is None:
                specs.append(AggregateSpec("count", None, ColumnType.INT))
                outs.append((out, ColumnType.INT))
                continue
            if e is None:
                raise SchemaError(f"aggregate {out!r} ({fn}) needs an expression to aggregate")
            b = self.bind(e)
            if fn == "sum" and not b.type.numeric:
                raise SchemaError(f"sum needs an int or float expression, got {b.type.value}")
            if b.column is not None and names[b.column] not in by:
                source = names[b.column]
            else:  # a computed value, or a group column (a copy keeps it among the values)
                source = f"__agg{len(extra)}"
                extra[source] = e
            specs.append(AggregateSpec(fn, _value_index(names, list(extra), by, source), b.type))
            outs.append((out, specs[-1].out_type))
        shaped = self.select({**{n: n for n in names}, **extra}) if extra else self
        arranged = shaped.arrange_by_key(list(by))
        schema = Schema.of([*((b, shaped.schema.type_of(b)) for b in by), *outs])
        layout = Layout.by_key(len(schema), range(len(by)))
        return Arrangement(
            Reduce(self.scope, arranged.op, AggregateKernel(specs), schema, layout, "reduce")
        )

    @_all_or_nothing
    def count(self, by: Sequence[str], name: str = "count") -> Collection:
        return self.reduce(by, {name: ("count", None)})

    @_all_or_nothing
    def distinct(self) -> Collection:
        return Collection(self.distinct_arranged().op)

    @_all_or_nothing
    def distinct_arranged(self) -> Arrangement:
        return self._reduce_self(DistinctKernel(), "distinct")

    @_all_or_nothing
    def threshold(self, at_least: int) -> Collection:
        return Collection(self._reduce_self(ThresholdKernel(at_least), "threshold").op)

    def _reduce_self(self, kernel: ReduceKernel, name: str) -> Arrangement:
        arranged = self.arrange_by_self()
        layout = Layout.by_self(len(self.schema))
        return Arrangement(Reduce(self.scope, arranged.op, kernel, self.schema, layout, name))

    @_all_or_nothing
    def top_k(self, by: Sequence[str], order_by: Sequence[tuple[str, bool]], k: int) -> Collection:
        """The first ``k`` rows of each group by ``order_by`` (column, descending), ties
        broken by the remaining columns ascending; output rows are input rows (a row of
        count 2 is two of the ``k``)."""
        if k < 0:
            raise SchemaError(f"top_k needs k >= 0, not {k}")
        arranged = self.arrange_by_key(by)
        layout = arranged.op.layout
        val_types = [self.schema.columns[i].type for i in layout.val_cols]
        order = []
        for name, desc in order_by:
            idx = self.schema.index(name)
            if idx in layout.key_cols:
                continue  # constant within a group
            order.append((layout.val_cols.index(idx), bool(desc)))
        kernel = TopKKernel(k, order, val_types)
        return Collection(Reduce(self.scope, arranged.op, kernel, self.schema, layout, "top_k"))

    @_all_or_nothing
    def reduce_with(
        self,
        by: Sequence[str],
        fn: Callable[[tuple, list[tuple[tuple, int]]], list[tuple[tuple, int]]],
        columns: Sequence[tuple[str, ColumnType | str]],
    ) -> Collection:
        """The slow, general path: ``fn(key, [(values, count), ...]) -> [(out, mult), ...]``
        on storage values (ints; strings as ids; floats as bits)."""
        arranged = self.arrange_by_key(by)
        schema = Schema.of([*((b, self.schema.type_of(b)) for b in by), *columns])
        out_types = list(schema.types[len(by) :])
        layout = Layout.by_key(len(schema), range(len(by)))
        return Collection(
            Reduce(
                self.scope, arranged.op, GeneralKernel(fn, out_types), schema, layout, "reduce_with"
            )
        )

    # -- iteration ----------------------------------------------------------------------
    @_all_or_nothing
    def iterate(
        self, body: Callable[[Collection], Collection], max_iterations: int | None = None
    ) -> Collection:
        """Fixed point of ``body`` starting from this collection."""
        return iterate({"x": self}, lambda v: {"x": body(v["x"])}, max_iterations)["x"]


class Arrangement:
    """A collection arranged by key; shareable by any number of joins and reductions."""

    __slots__ = ("op",)

    def __init__(self, op: Arrange | Reduce) -> None:
        self.op = op

    @property
    def scope(self) -> Scope:
        return self.op.scope

    @property
    def schema(self) -> Schema:
        return self.op.schema

    @property
    def key_columns(self) -> list[str]:
        return [self.schema.columns[i].name for i in self.op.layout.key_cols]

    @_all_or_nothing
    def as_collection(self, hydrate_since: Antichain | None = None) -> Collection:
        """The arranged updates as a collection: from the whole current content if the
        arrangement already holds data (this is how a dataflow built later starts), advanced
        to ``hydrate_since`` if given (the new dataflow then starts at that frontier)."""
        if self.op.scope.is_loop:
            return Collection(self.op)
        return Collection(AsCollection(self.scope, self.op, hydrate_since))

    def _arranged_by(self, keys: Sequence[str], scope: Scope) -> Arrangement:
        if self.scope is scope and self.key_columns == list(keys):
            return self
        return self.as_collection()._arranged_by(keys, scope)

    @_all_or_nothing
    def join(self, right: Arrangement, columns: Mapping[str, ExprLike] | None = None) -> Collection:
        left = self
        lschema, rschema = left.schema, right.schema
        rkey = set(right.op.layout.key_cols)
        if columns is None:
            outputs = [(0, i) for i in range(len(lschema))]
            outputs += [(1, i) for i in range(len(rschema)) if i not in rkey]
            names = [
                (lschema.columns[i].name, lschema.columns[i].type) for i in range(len(lschema))
            ]
            names += [
                (rschema.columns[i].name, rschema.columns[i].type)
                for i in range(len(rschema))
                if i not in rkey
            ]
            seen = [n for n, _ in names]
            dup = sorted({n for n in seen if seen.count(n) > 1})
            if dup:
                raise SchemaError(
                    f"join output would repeat column(s) {dup}; give 'columns' to name the output"
                )
            return Collection(Join(self.scope, left.op, right.op, outputs, Schema.of(names)))
        outputs = [(0, i) for i in range(len(lschema))] + [(1, i) for i in range(len(rschema))]
        qualified = Schema.of(
            [(f"left.{c.name}", c.type) for c in lschema.columns]
            + [(f"right.{c.name}", c.type) for c in rschema.columns]
        )
        # errors name the output column: its path in an expression error, ``(out, ...)``
        resolved = {out: _qualify(_expr(e), lschema, rschema, (out,)) for out, e in columns.items()}
        bound = [b.bind(qualified, (out,)) for out, b in resolved.items()]
        if all(b.column is not None for b in bound):  # plain columns: the join emits them
            picked = [outputs[b.column] for b in bound if b.column is not None]
            schema = Schema.of([(n, b.type) for n, b in zip(resolved, bound, strict=True)])
            return Collection(Join(self.scope, left.op, right.op, picked, schema))
        joined = Collection(Join(self.scope, left.op, right.op, outputs, qualified))
        return joined.select(resolved)


def _value_index(names: list[str], extra: list[str], by: Sequence[str], column: str) -> int:
    """Position of ``column`` among the value (non-key) columns of the shaped input."""
    return [n for n in [*names, *extra] if n not in by].index(column)


def _qualify(e: Expr, left: Schema, right: Schema, path: Path) -> Expr:
    """Rewrite bare column names in join output expressions to ``left.x`` / ``right.x``
    (``path``: where ``e`` is, for errors)."""
    from engine.expr import Call, Col

    if isinstance(e, Col):
        if e.name.startswith(("left.", "right.")):
            return e
        in_l, in_r = e.name in left.names, e.name in right.names
        if in_l and in_r:
            raise ExpressionError(
                f"column {e.name!r} is on both sides of the join; "
                f"write left.{e.name} or right.{e.name}",
                path,
            )
        if in_l:
            return col(f"left.{e.name}")
        if in_r:
            return col(f"right.{e.name}")
        return e
    if isinstance(e, Call):
        args = tuple(_qualify(a, left, right, (*path, "args", i)) for i, a in enumerate(e.args))
        return Call(e.fn, args, e.to)
    return e


def iterate(
    initial: Mapping[str, Collection],
    body: Callable[[Mapping[str, Collection]], Mapping[str, Collection]],
    max_iterations: int | None = None,
    round_limit: int = DEFAULT_ROUND_LIMIT,
    within: Scope | None = None,
    label: str | None = None,
) -> dict[str, Collection]:
    """Mutually recursive fixed point: each variable starts as its initial collection and
    all are replaced together by ``body(vars)`` until nothing changes (or after
    ``max_iterations`` replacements). Returns every variable's final collection.

    The loop nests in the deepest scope of its initial collections and ``within``: pass the
    enclosing loop's scope when building inside a loop body whose variables the new body
    reads even though its initial collections come from outside. ``label`` names the loop
    in its errors (a plan's path to it), so that one of several nested loops can be told."""
    if not initial:
        raise SchemaError("iterate needs at least one variable")
    if max_iterations is not None and max_iterations < 0:
        raise SchemaError(f"max_iterations must be None or >= 0, not {max_iterations}")
    with undo_on_error(next(iter(initial.values())).scope):
        return _iterate(initial, body, max_iterations, round_limit, within, label)


def _iterate(
    initial: Mapping[str, Collection],
    body: Callable[[Mapping[str, Collection]], Mapping[str, Collection]],
    max_iterations: int | None,
    round_limit: int,
    within: Scope | None,
    label: str | None,
) -> dict[str, Collection]:
    parent = _deepest(
        [c.scope for c in initial.values()] + ([within] if within is not None else [])
    )
    dims = {c._in(parent).dims for c in initial.values()}
    if len(dims) != 1:
        raise GraphError("iterate variables must share one time domain")
    inner = LoopScope(parent, dims.pop() + 1, label or f"{parent.name}/iterate")
    variables: dict[str, Variable] = {}
    for name, c in initial.items():
        enter = _enter_chain(c._in(parent).op, inner)
        assert isinstance(enter, Enter)
        variables[name] = Variable(inner, enter, name)
    results = body({n: Collection(v) for n, v in variables.items()})
    if not isinstance(results, Mapping) or set(results) != set(variables):
        raise SchemaError(f"iterate body must define exactly the variables {sorted(variables)}")
    for name, res in results.items():
        if not isinstance(res, Collection):
            raise SchemaError(f"iterate body of {name!r} must be a Collection, not {res!r}")
        v = variables[name]
        r = res._in(inner)
        if r.schema.types != v.schema.types:
            raise SchemaError(
                f"body of {name!r} has columns {[t.value for t in r.schema.types]}, "
                f"its initial value {[t.value for t in v.schema.types]}"
            )
        v.body = r.op
    outer_inputs = []
    for op in inner.operators:
        if isinstance(op, Enter) and op.outer not in outer_inputs:
            outer_inputs.append(op.outer)
    region = LoopRegion(
        parent, inner, outer_inputs, list(variables.values()), max_iterations, round_limit
    )
    return {n: Collection(Leave(parent, region, v)) for n, v in variables.items()}
