"""The plan compiler: API.md's query plans to engine dataflows.

``compile_plan`` walks the JSON tree once, checking every node and expression as it builds
engine collections, and raises :class:`~service.errors.Invalid` with ``detail.path`` naming
the offending node (``query.body.reach.left``). Tables and views enter through ``Sources``,
which hands out each source once per plan; the caller compiles inside ``Graph.building``,
whose ``provide`` turns a source arranged at the top level into the catalog's shared
arrangement of it, and rolls back operators created by a plan that fails (see
``Catalog.create_view``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine import (
    Collection,
    ColumnType,
    EngineError,
    Expr,
    ExpressionError,
    call,
    col,
    iterate,
    lit,
)
from engine.expr import FUNCTIONS
from service.codec import nests_deeper
from service.errors import Conflict, Invalid, member_path

__all__ = ["NAME_RE", "CompiledPlan", "Domain", "Sources", "compile_plan", "parse_expr"]

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")  # the whole name: ``fullmatch``
TYPES = ("int", "float", "bool", "string")
HOWS = ("inner", "semi", "anti")
AGG_FNS = ("count", "sum", "min", "max", "count_distinct")
NODE_FIELDS: dict[str, tuple[set[str], set[str]]] = {  # required, optional
    "table": ({"name"}, set()),
    "view": ({"name"}, set()),
    "var": ({"name"}, set()),
    "select": ({"input", "columns"}, set()),
    "filter": ({"input", "where"}, set()),
    "flat_map": ({"input", "as", "start", "stop"}, set()),
    "concat": ({"inputs"}, set()),
    "negate": ({"input"}, set()),
    "join": ({"left", "right", "on"}, {"how", "columns"}),
    "reduce": ({"input", "by", "aggregates"}, set()),
    "distinct": ({"input"}, set()),
    "threshold": ({"input", "at_least"}, set()),
    "top_k": ({"input", "by", "order_by", "k"}, set()),
    "iterate": ({"vars", "body", "result"}, {"max_iterations"}),
}


@dataclass(frozen=True, slots=True)
class Domain:
    """A time domain: server-timed (one dimension) or client-timed with ``dims``."""

    timing: str
    dims: int

    def describe(self) -> str:
        return (
            "server-timed"
            if self.timing == "server"
            else f"client-timed with time_dims {self.dims}"
        )


class Sources:
    """What a plan may read: tables and views by name, as collections (arranged at the top
    level, they read the catalog's shared arrangements: ``Graph.building``'s ``provide``)."""

    def __init__(
        self,
        lookup: Callable[[str], tuple[str, Domain, str | None] | None],
        collection: Callable[[str], Collection],
    ) -> None:
        self._lookup = lookup
        self._collection = collection
        self._collections: dict[str, Collection] = {}
        self.inputs: list[str] = []
        self.domain: Domain | None = None

    def resolve(self, kind: str, name: Any, path: str) -> tuple[str, Domain]:
        if not isinstance(name, str):
            raise Invalid(f"{path}.name must be a string", {"path": f"{path}.name"}, "invalid_plan")
        found = self._lookup(name)
        if found is None or found[0] != kind:
            raise Invalid(f"{path}: unknown {kind} {name!r}", {"path": path}, "unknown_name")
        _, domain, failure = found
        if failure is not None:  # its dataflow left the engine: nothing would reach a reader
            raise Conflict(
                f"view {name!r} failed ({failure}); drop it and register it again",
                {"path": path, "error": failure},
                "view_failed",
            )
        if self.domain is None:
            self.domain = domain
        elif self.domain != domain:
            raise Invalid(
                f"{path}: {kind} {name!r} is {domain.describe()} but the plan already reads "
                f"{self.domain.describe()} inputs; a view reads one time domain",
                {"path": path},
                "mixed_domains",
            )
        if name not in self.inputs:
            self.inputs.append(name)
        return name, domain

    def collection(self, name: str) -> Collection:
        if name not in self._collections:
            self._collections[name] = self._collection(name)
        return self._collections[name]


@dataclass
class CompiledPlan:
    collection: Collection
    inputs: list[str]
    domain: Domain


@dataclass
class _Env:
    sources: Sources
    round_limit: int
    vars: list[dict[str, Collection]] = field(default_factory=list)
    # subplans compiled so far, by their JSON's digest (``_digest``) and the var bindings of
    # the loops they were compiled in (held here, so that their ids stay theirs): a subplan
    # written twice in a plan (a loop's start, say, as a var's initial value and inside its
    # body) is built once and read twice, as it would be through a name
    compiled: dict[tuple[str, tuple[int, ...]], tuple[Collection, list[dict]]] = field(
        default_factory=dict
    )
    digests: dict[int, tuple[str, frozenset[str]]] = field(default_factory=dict)  # _digest
    # loops a subplan is built in however few it reads: those around the body of a loop
    # with ``max_iterations`` 0, which never runs, so that nothing in it runs outside
    floor: int = 0

    def depth(self, free: frozenset[str]) -> int:
        """How many of the loops around a subplan it depends on: the depth of the innermost
        loop binding one of its ``free`` vars (0 for none)."""
        return max(
            (i + 1 for i, scope in enumerate(self.vars) if not free.isdisjoint(scope)), default=0
        )

    @property
    def in_loop(self) -> bool:
        return bool(self.vars)


MAX_DEPTH = 200  # levels of JSON objects and lists a plan may nest


def compile_plan(
    plan: Any, sources: Sources, round_limit: int, path: str = "query"
) -> CompiledPlan:
    if nests_deeper(plan, MAX_DEPTH):  # its echo in the view's description must render
        raise _fail(
            path,
            f"the plan nests more than {MAX_DEPTH} levels of objects and lists; "
            "build deep chains from views that read views",
        )
    env = _Env(sources, round_limit)
    _digest(plan, env.digests)
    out = _compile(plan, env, path)
    if sources.domain is None:
        raise Invalid("a plan must read at least one table or view", {"path": path}, "invalid_plan")
    return CompiledPlan(out, list(sources.inputs), sources.domain)


# -- nodes ------------------------------------------------------------------------------------


def _fail(path: str, message: str, code: str = "invalid_plan") -> Invalid:
    return Invalid(f"{path}: {message}", {"path": path}, code)


def _node(plan: Any, path: str) -> str:
    if not isinstance(plan, dict):
        raise _fail(path, "a plan node must be an object with an 'op'")
    # an unknown node's ``detail.path`` is the node's own, as API.md's example names nodes
    if "op" not in plan:
        raise _fail(
            path, f"a plan node needs an 'op': one of {sorted(NODE_FIELDS)}", "unknown_node"
        )
    op = plan["op"]
    if not isinstance(op, str) or op not in NODE_FIELDS:
        raise _fail(path, f"unknown node {op!r}; nodes are {sorted(NODE_FIELDS)}", "unknown_node")
    required, optional = NODE_FIELDS[op]
    # ``detail.path`` names the (first) field, as for a table's or load's body
    at = member_path(plan, required, optional | {"op"}, path)
    missing = sorted(required - set(plan))
    if missing:
        raise _fail(at, f"{op} needs field(s) {missing}")
    extra = sorted(set(plan) - required - optional - {"op"})
    if extra:
        raise _fail(at, f"{op} has unknown field(s) {extra}")
    return str(op)


def _engine(path: str, fn: Callable[[], Collection]) -> Collection:
    try:
        return fn()
    except ExpressionError as exc:
        sub = ".".join(str(p) for p in exc.path)
        full = f"{path}.{sub}" if sub else path
        raise Invalid(f"{full}: {exc}", {"path": full}, "invalid_expression") from exc
    except EngineError as exc:
        raise Invalid(f"{path}: {exc}", {"path": path}, "invalid_plan") from exc


def _names(value: Any, path: str) -> list[str]:
    if not isinstance(value, list):
        raise _fail(path, "must be a list of column names")
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise _fail(f"{path}.{i}", "must be a column name (a string)")
        if v in value[:i]:
            raise _fail(f"{path}.{i}", f"column {v!r} is listed twice")
    return list(value)


def _check_columns(c: Collection, names: list[str], path: str) -> None:
    for i, n in enumerate(names):
        if n not in c.schema.names:
            raise _fail(
                f"{path}.{i}",
                f"unknown column {n!r}; columns are {list(c.schema.names)}",
                "unknown_column",
            )


def _out_name(name: str, path: str) -> None:
    if not NAME_RE.fullmatch(name):
        raise _fail(path, f"column name {name!r} must match {NAME_RE.pattern}")


def _compile(plan: Any, env: _Env, path: str) -> Collection:
    op = _node(plan, path)
    if op in ("table", "view", "var"):
        return _compile_node(plan, op, env, path)
    digest, free = env.digests[id(plan)]
    # a subplan is built in the innermost loop whose vars it reads, outside the loops within
    # that (it is the same collection in each of them, entered; an iterate it holds nests
    # there, with fewer time coordinates), and once there
    depth = max(env.depth(free), env.floor)
    key = (digest, tuple(id(v) for v in env.vars[:depth]))
    hit = env.compiled.get(key)
    if hit is not None:
        return hit[0]
    around, env.vars = env.vars, env.vars[:depth]
    try:
        out = _compile_node(plan, op, env, path)
    finally:
        env.vars = around
    env.compiled[key] = (out, list(env.vars[:depth]))
    return out


def _digest(node: Any, into: dict[int, tuple[str, frozenset[str]]]) -> tuple[str, frozenset[str]]:
    """A digest of ``node``'s JSON (equal for equal JSON, keys in any order) and the vars it
    reads that no iterate within it binds, for every object under it, into ``into`` by
    ``id``: one walk of the plan (a text per subplan would cost its size at every level
    above it)."""
    if isinstance(node, dict):
        parts, free = [], frozenset[str]()
        binds = node.get("op") == "iterate" and isinstance(node.get("vars"), dict)
        for k in sorted(node):
            d, f = _digest(node[k], into)
            parts.append(f"{json.dumps(k)}:{d}")
            free |= f - frozenset(node["vars"]) if k == "body" and binds else f
        if node.get("op") == "var" and isinstance(node.get("name"), str):
            free |= {node["name"]}
        out = (_hashed("{" + ",".join(parts) + "}"), free)
        into[id(node)] = out
        return out
    if isinstance(node, list):
        items = [_digest(v, into) for v in node]
        return _hashed("[" + ",".join(d for d, _ in items) + "]"), frozenset[str]().union(
            *(f for _, f in items)
        )
    return json.dumps(node, allow_nan=True), frozenset[str]()


def _hashed(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _compile_node(plan: dict, op: str, env: _Env, path: str) -> Collection:
    if op in ("table", "view"):
        name, _ = env.sources.resolve(op, plan["name"], path)
        return env.sources.collection(name)
    if op == "var":
        name = plan["name"]
        if not isinstance(name, str):
            raise _fail(f"{path}.name", "must be a var name", "unknown_var")
        for scope in reversed(env.vars):
            if name in scope:
                return scope[name]
        raise _fail(path, f"unknown var {name!r}", "unknown_var")
    if op == "select":
        inp = _compile(plan["input"], env, f"{path}.input")
        cols = plan["columns"]
        if not isinstance(cols, dict):
            raise _fail(f"{path}.columns", "must be an object of {out: EXPR}")
        exprs = {}
        for name, e in cols.items():
            _out_name(name, f"{path}.columns.{name}")
            exprs[name] = _bind_check(
                inp, parse_expr(e, f"{path}.columns.{name}"), f"{path}.columns.{name}"
            )
        return _engine(path, lambda: inp.select(exprs))
    if op == "filter":
        inp = _compile(plan["input"], env, f"{path}.input")
        where = parse_expr(plan["where"], f"{path}.where")
        if (
            _bind_check(inp, where, f"{path}.where") is not None
            and inp.bind(where).type is not ColumnType.BOOL
        ):
            raise _fail(f"{path}.where", "must be a bool expression", "invalid_expression")
        return _engine(path, lambda: inp.filter(where))
    if op == "flat_map":
        inp = _compile(plan["input"], env, f"{path}.input")
        as_name = plan["as"]
        if not isinstance(as_name, str):
            raise _fail(f"{path}.as", "must be a column name")
        _out_name(as_name, f"{path}.as")
        if as_name in inp.schema.names:
            raise _fail(f"{path}.as", f"column {as_name!r} already exists")
        start = parse_expr(plan["start"], f"{path}.start")
        stop = parse_expr(plan["stop"], f"{path}.stop")
        for e, p in ((start, "start"), (stop, "stop")):
            _bind_check(inp, e, f"{path}.{p}")
            if inp.bind(e).type is not ColumnType.INT:
                raise _fail(f"{path}.{p}", "must be an int expression", "invalid_expression")
        return _engine(path, lambda: inp.flat_map(as_name, start, stop))
    if op == "concat":
        inputs = plan["inputs"]
        if not isinstance(inputs, list) or not inputs:
            raise _fail(f"{path}.inputs", "must be a non-empty list of plans")
        parts = [_compile(p, env, f"{path}.inputs.{i}") for i, p in enumerate(inputs)]
        parts = [parts[0], *(_by_name(part, parts[0]) for part in parts[1:])]
        first = parts[0].schema.types
        for i, part in enumerate(parts[1:], 1):
            if part.schema.types != first:
                raise _fail(
                    f"{path}.inputs.{i}",
                    f"column types {[t.value for t in part.schema.types]} differ from the first "
                    f"input's {[t.value for t in first]}",
                    "type_mismatch",
                )
        return _engine(path, lambda: parts[0].concat(*parts[1:]) if len(parts) > 1 else parts[0])
    if op == "negate":
        inp = _compile(plan["input"], env, f"{path}.input")
        return _engine(path, inp.negate)
    if op == "join":
        return _compile_join(plan, env, path)
    if op == "reduce":
        return _compile_reduce(plan, env, path)
    if op in ("distinct", "threshold"):
        inp = _compile(plan["input"], env, f"{path}.input")
        if op == "distinct":
            return _engine(path, inp.distinct)
        k = _int_field(plan["at_least"], f"{path}.at_least", -(2**63), "an integer")
        return _engine(path, lambda: inp.threshold(k))
    if op == "top_k":
        return _compile_top_k(plan, env, path)
    return _compile_iterate(plan, env, path)


def _bind_check(c: Collection, e: Expr, path: str) -> Expr:
    try:
        c.bind(e)
    except ExpressionError as exc:
        sub = ".".join(str(p) for p in exc.path)
        full = f"{path}.{sub}" if sub else path
        raise Invalid(f"{full}: {exc}", {"path": full}, "invalid_expression") from exc
    return e


def _compile_join(plan: dict, env: _Env, path: str) -> Collection:
    how = plan.get("how", "inner")
    if how not in HOWS:
        raise _fail(f"{path}.how", f"must be one of {list(HOWS)}")
    on = plan["on"]
    if not isinstance(on, list):
        raise _fail(f"{path}.on", "must be a list of [left column, right column] pairs")
    for i, p in enumerate(on):
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)):
            raise _fail(f"{path}.on.{i}", "must be a [left column, right column] pair")
    lkeys, rkeys = [p[0] for p in on], [p[1] for p in on]
    columns = plan.get("columns")
    if "columns" in plan and how != "inner":
        raise _fail(f"{path}.columns", "only an inner join takes 'columns'")
    left = _compile(plan["left"], env, f"{path}.left")
    right = _compile(plan["right"], env, f"{path}.right")
    for i, (lk, rk) in enumerate(on):
        if lk not in left.schema.names:
            raise _fail(
                f"{path}.on.{i}.0",
                f"unknown left column {lk!r}; columns are {list(left.schema.names)}",
                "unknown_column",
            )
        if rk not in right.schema.names:
            raise _fail(
                f"{path}.on.{i}.1",
                f"unknown right column {rk!r}; columns are {list(right.schema.names)}",
                "unknown_column",
            )
        lt, rt = left.schema.type_of(lk), right.schema.type_of(rk)
        if lt != rt:
            raise _fail(
                f"{path}.on.{i}",
                f"join key {lk!r} is {lt.value} but {rk!r} is {rt.value}",
                "type_mismatch",
            )
    pairs = list(zip(lkeys, rkeys, strict=True))
    if how != "inner":
        return _engine(path, lambda: left.join(right, on=pairs, how=how))
    parsed = None
    if "columns" in plan:
        if not isinstance(columns, dict):
            raise _fail(f"{path}.columns", "must be an object of {out: EXPR}")
        parsed = {}
        for name, e in columns.items():
            _out_name(name, f"{path}.columns.{name}")
            parsed[name] = parse_expr(e, f"{path}.columns.{name}")
    return _engine(
        f"{path}.columns" if parsed is not None else path,
        lambda: left.join(right, on=pairs, columns=parsed),
    )


def _compile_reduce(plan: dict, env: _Env, path: str) -> Collection:
    inp = _compile(plan["input"], env, f"{path}.input")
    by = _names(plan["by"], f"{path}.by")
    _check_columns(inp, by, f"{path}.by")
    aggs = plan["aggregates"]
    if not isinstance(aggs, dict):
        raise _fail(f"{path}.aggregates", "must be an object of {out: {fn, of?}}")
    spec: dict[str, tuple[str, Expr | None]] = {}
    for name, a in aggs.items():
        p = f"{path}.aggregates.{name}"
        _out_name(name, p)
        if name in by:
            raise _fail(p, f"aggregate {name!r} repeats a group column")
        if not isinstance(a, dict) or "fn" not in a or set(a) - {"fn", "of"}:
            raise _fail(member_path(a, {"fn"}, {"of"}, p), 'must be {"fn": ..., "of"?: EXPR}')
        fn = a["fn"]
        if fn not in AGG_FNS:
            raise _fail(
                f"{p}.fn",
                f"unknown aggregate {fn!r}; use one of {list(AGG_FNS)}",
                "unknown_function",
            )
        if "of" not in a:
            if fn != "count":
                raise _fail(p, f"{fn} needs 'of'")
            spec[name] = ("count", None)
            continue
        e = _bind_check(inp, parse_expr(a["of"], f"{p}.of"), f"{p}.of")
        if fn == "sum" and not inp.bind(e).type.numeric:
            raise _fail(f"{p}.of", "sum needs an int or float expression", "invalid_expression")
        spec[name] = (fn, e)
    return _engine(path, lambda: inp.reduce(by, spec))


def _compile_top_k(plan: dict, env: _Env, path: str) -> Collection:
    inp = _compile(plan["input"], env, f"{path}.input")
    by = _names(plan["by"], f"{path}.by")
    _check_columns(inp, by, f"{path}.by")
    k = _int_field(plan["k"], f"{path}.k", 0, "a non-negative integer")
    order = plan["order_by"]
    if not isinstance(order, list):
        raise _fail(f"{path}.order_by", 'must be a list of {"col", "desc"?}')
    spec = []
    for i, o in enumerate(order):
        p = f"{path}.order_by.{i}"
        if not isinstance(o, dict) or "col" not in o or set(o) - {"col", "desc"}:
            raise _fail(
                member_path(o, {"col"}, {"desc"}, p), 'must be {"col": name, "desc"?: bool}'
            )
        if o["col"] not in inp.schema.names:
            raise _fail(
                f"{p}.col",
                f"unknown column {o['col']!r}; columns are {list(inp.schema.names)}",
                "unknown_column",
            )
        desc = o.get("desc", False)
        if not isinstance(desc, bool):
            raise _fail(f"{p}.desc", "must be true or false")
        spec.append((o["col"], desc))
    return _engine(path, lambda: inp.top_k(by, spec, k))


def _by_name(part: Collection, like: Collection) -> Collection:
    """``part`` with its columns in ``like``'s order where it has the same names in another
    order (rows are objects: a union lines them up by name); otherwise as it is, lined up by
    position."""
    names, want = part.schema.names, like.schema.names
    if names == want or sorted(names) != sorted(want):
        return part
    return part.select({n: n for n in want})


def _compile_iterate(plan: dict, env: _Env, path: str) -> Collection:
    vars_, body, result = plan["vars"], plan["body"], plan["result"]
    if not isinstance(vars_, dict) or not vars_:
        raise _fail(f"{path}.vars", "must be a non-empty object of {name: PLAN}")
    if not isinstance(body, dict):
        raise _fail(f"{path}.body", f"must be an object defining the vars {sorted(vars_)}")
    if set(body) != set(vars_):
        # the first var without a body, else the first body for no var
        odd = sorted(set(vars_) - set(body)) or sorted(set(body) - set(vars_))
        raise _fail(f"{path}.body.{odd[0]}", f"must define exactly the vars {sorted(vars_)}")
    if not isinstance(result, str) or result not in vars_:
        raise _fail(f"{path}.result", f"must name one of the vars {sorted(vars_)}", "unknown_var")
    cap = None
    if "max_iterations" in plan:
        cap = _int_field(
            plan["max_iterations"], f"{path}.max_iterations", 0, "a non-negative integer"
        )
    initial = {}
    for name, p in vars_.items():
        if not NAME_RE.fullmatch(name):
            raise _fail(f"{path}.vars.{name}", f"var name {name!r} must match {NAME_RE.pattern}")
        initial[name] = _compile(p, env, f"{path}.vars.{name}")

    def body_fn(v: Mapping[str, Collection]) -> dict[str, Collection]:
        env.vars.append(dict(v))
        floor = env.floor
        if cap == 0:
            env.floor = len(env.vars)
        try:
            out = {}
            for name in vars_:
                b = _by_name(_compile(body[name], env, f"{path}.body.{name}"), initial[name])
                if b.schema.types != initial[name].schema.types:
                    raise _fail(
                        f"{path}.body.{name}",
                        f"has column types {[t.value for t in b.schema.types]} but var {name!r} "
                        f"has {[t.value for t in initial[name].schema.types]}",
                        "type_mismatch",
                    )
                out[name] = b
            return out
        finally:
            env.vars.pop()
            env.floor = floor

    within = next(iter(env.vars[-1].values())).scope if env.in_loop else None
    try:
        results = iterate(initial, body_fn, cap, env.round_limit, within, label=path)
    except EngineError as exc:
        raise _fail(path, str(exc)) from exc
    return results[result]


# -- expressions ----------------------------------------------------------------------------


def _int_field(v: Any, path: str, least: int, what: str) -> int:
    """A plan's integer field (``k``, ``at_least``, ``max_iterations``), within int64."""
    if isinstance(v, bool) or not isinstance(v, int) or not least <= v < 2**63:
        raise _fail(path, f"must be {what} below 2**63")
    return v


def _literal(v: Any, path: str) -> Expr:
    if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
        raise _fail(path, "integer literal does not fit in 64 bits", "invalid_expression")
    return lit(v)


def parse_expr(e: Any, path: str) -> Expr:
    """EXPR: a string is a column, a number or bool a literal, ``{"lit": v}`` any literal,
    ``{"fn": NAME, "args": [...], "to"?: type}`` a call."""
    if isinstance(e, str):
        return col(e)
    if isinstance(e, bool):
        return lit(e)
    if isinstance(e, (int, float)):
        return _literal(e, path)
    if isinstance(e, dict):
        if "lit" in e:
            if set(e) != {"lit"}:
                where = member_path(e, {"lit"}, set(), path)
                raise _fail(where, '{"lit": v} takes no other fields', "invalid_expression")
            v = e["lit"]
            if v is None or isinstance(v, (list, dict)):
                raise _fail(
                    path, "a literal is an int, float, bool or string", "invalid_expression"
                )
            return _literal(v, path)
        if "fn" in e:
            if set(e) - {"fn", "args", "to"}:
                raise _fail(
                    member_path(e, {"fn"}, {"args", "to"}, path),
                    f"unknown field(s) {sorted(set(e) - {'fn', 'args', 'to'})}",
                    "invalid_expression",
                )
            args = e.get("args", [])
            if not isinstance(args, list):
                raise _fail(f"{path}.args", "must be a list of expressions", "invalid_expression")
            to = e.get("to")
            if to is not None and to not in TYPES:
                raise _fail(f"{path}.to", f"must be one of {list(TYPES)}", "invalid_expression")
            if to is not None and e["fn"] != "cast":
                raise _fail(f"{path}.to", "only cast takes 'to'", "invalid_expression")
            if not isinstance(e["fn"], str):
                raise _fail(f"{path}.fn", "must be a function name", "unknown_function")
            if e["fn"] not in FUNCTIONS:
                raise _fail(
                    f"{path}.fn",
                    f"unknown function {e['fn']!r}; functions are {sorted(FUNCTIONS)}",
                    "unknown_function",
                )
            parsed = [parse_expr(a, f"{path}.args.{i}") for i, a in enumerate(args)]
            return call(e["fn"], *parsed, to=to)
    raise _fail(path, f"not an expression: {e!r}", "invalid_expression")
