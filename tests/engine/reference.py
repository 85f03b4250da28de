"""A from-scratch reference for the engine's operators, on plain Counters of row tuples.

Pipelines are small trees (tuples) over two input collections ``A`` and ``B`` of rows
``(x, y)`` of ints. Every node outputs two int columns, so any node composes with any other.
``build`` turns a tree into engine collections, ``evaluate`` computes its result from scratch
on accumulated inputs. Reductions see only rows with positive count (the engine's contract).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

from hypothesis import strategies as st

from engine import Collection, col, iterate, lit

Rows = Counter  # Counter[tuple[int, int]]
Tree = tuple

LEAVES = ("A", "B")
UNARY = (
    "swap",
    "filter",
    "mod",
    "negate",
    "consolidate",
    "distinct",
    "count",
    "sum",
    "min",
    "max",
    "cdist",
    "threshold",
    "topk",
    "topk_desc",
    "general",
    "flat",
)
BINARY = ("concat", "join", "semi", "anti")
LOOPS = ("closure", "closure_capped", "mutual", "nested")


def trees(max_depth: int = 3, loops: bool = True) -> st.SearchStrategy[Tree]:
    leaf = st.sampled_from(LEAVES).map(lambda n: ("input", n))

    def extend(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
        options = [
            st.tuples(st.sampled_from(UNARY), children),
            st.tuples(st.sampled_from(BINARY), children, children),
        ]
        if loops:
            options.append(st.tuples(st.sampled_from(LOOPS), children))
        return st.one_of(*options)

    return st.recursive(leaf, extend, max_leaves=max_depth + 1)


def _clean(c: Counter) -> Counter:
    return Counter({k: v for k, v in c.items() if v != 0})


def _positive(c: Counter) -> dict:
    return {k: v for k, v in c.items() if v > 0}


def _groups(c: Counter) -> dict:
    g: dict = defaultdict(list)
    for (x, y), n in _positive(c).items():
        g[x].append((y, n))
    return g


def _join(a: Counter, b: Counter) -> Counter:
    out: Counter = Counter()
    for (x1, y1), n1 in a.items():
        for (x2, y2), n2 in b.items():
            if x1 == x2 and n1 and n2:
                out[(y1, y2)] += n1 * n2
    return _clean(out)


def _semi(a: Counter, b: Counter, anti: bool) -> Counter:
    present = {x for (x, _), n in b.items() if n > 0}
    return _clean(Counter({r: n for r, n in a.items() if (r[0] in present) != anti}))


def _topk(c: Counter, k: int, desc: bool) -> Counter:
    out: Counter = Counter()
    for x, rows in _groups(c).items():
        rows.sort(key=lambda r: -r[0] if desc else r[0])
        left = k
        for y, n in rows:
            if left <= 0:
                break
            take = min(n, left)
            out[(x, y)] += take
            left -= take
    return out


def _fix(step: Callable[[dict], dict], init: dict, cap: int | None) -> dict:
    cur = init
    for i in range(10_000):
        if cap is not None and i >= cap:
            return cur
        nxt = {k: _clean(v) for k, v in step(cur).items()}
        if nxt == cur:
            return cur
        cur = nxt
    raise AssertionError("reference iterate did not converge")


def _closure_step(base: Counter) -> Callable[[dict], dict]:
    return lambda v: {"r": _distinct(base + _join(_swap(v["r"]), base))}


def _swap(c: Counter) -> Counter:
    return _clean(Counter({(y, x): n for (x, y), n in c.items()}))


def _distinct(c: Counter) -> Counter:
    return Counter({r: 1 for r, n in c.items() if n > 0})


def evaluate(tree: Tree, inputs: dict[str, Counter]) -> Counter:
    op = tree[0]
    if op == "input":
        return _clean(Counter(inputs[tree[1]]))
    args = [evaluate(t, inputs) for t in tree[1:]]
    a = args[0]
    if op == "swap":
        return _swap(a)
    if op == "filter":
        return _clean(Counter({r: n for r, n in a.items() if r[0] <= r[1]}))
    if op == "mod":
        out: Counter = Counter()
        for (x, y), n in a.items():
            out[((x + y) % 3, x // 2)] += n
        return _clean(out)
    if op == "flat":
        out = Counter()
        for (x, y), n in a.items():
            for i in range(x, y):
                out[(x, i)] += n
        return _clean(out)
    if op == "negate":
        return Counter({r: -n for r, n in a.items()})
    if op == "consolidate":
        return a
    if op == "distinct":
        return _distinct(a)
    if op == "threshold":
        return Counter({r: 1 for r, n in a.items() if n >= 2})
    if op in ("count", "sum", "min", "max", "cdist"):
        out = Counter()
        for x, rows in _groups(a).items():
            if op == "count":
                v = sum(n for _, n in rows)
            elif op == "sum":
                v = sum(y * n for y, n in rows)
            elif op == "min":
                v = min(y for y, _ in rows)
            elif op == "max":
                v = max(y for y, _ in rows)
            else:
                v = len({y for y, _ in rows})
            out[(x, v)] += 1
        return out
    if op in ("topk", "topk_desc"):
        return _topk(a, 2, op == "topk_desc")
    if op == "general":  # sum of y*n modulo 5, plus the number of rows, via a Python reducer
        out = Counter()
        for x, rows in _groups(a).items():
            out[(x, sum(y * n for y, n in rows) % 5)] += len(rows)
        return out
    if op == "concat":
        return _add(args[0], args[1])
    if op == "join":
        return _join(args[0], args[1])
    if op in ("semi", "anti"):
        return _semi(args[0], args[1], op == "anti")
    base = _dom(a)
    if op == "closure":
        return _fix(_closure_step(base), {"r": base}, None)["r"]
    if op == "closure_capped":
        return _fix(_closure_step(base), {"r": base}, 2)["r"]
    if op == "mutual":

        def step(v: dict) -> dict:
            return {
                "odd": _distinct(_add(base, _join(_swap(v["even"]), base))),
                "even": _distinct(_join(_swap(v["odd"]), base)),
            }

        return _fix(step, {"odd": base, "even": Counter()}, None)["even"]
    if op == "nested":

        def outer(v: dict) -> dict:
            inner = _fix(_closure_step(v["r"]), {"r": v["r"]}, None)["r"]
            return {"r": _distinct(_add(base, _swap(inner)))}

        return _fix(outer, {"r": base}, None)["r"]
    raise ValueError(op)


def _add(a: Counter, b: Counter) -> Counter:
    out = Counter(a)
    for k, v in b.items():
        out[k] += v
    return _clean(out)


def _dom(c: Counter) -> Counter:
    """Loop bodies work on the distinct rows with values folded into 0..3 (bounded domain)."""
    folded: Counter = Counter()
    for (x, y), n in c.items():
        folded[(x % 4, y % 4)] += n
    return _distinct(folded)


# -- engine construction --------------------------------------------------------------------


def _e_dom(c: Collection) -> Collection:
    return c.select(x=col("x") % 4, y=col("y") % 4).distinct()


def _e_closure_body(base: Collection) -> Callable[[Collection], Collection]:
    def body(r: Collection) -> Collection:
        swapped = r.select(x="y", y="x")
        step = swapped.join(base, on=[("x", "x")], columns={"x": "left.y", "y": "right.y"})
        return base.concat(step).distinct()

    return body


def build(tree: Tree, inputs: dict[str, Collection]) -> Collection:
    op = tree[0]
    if op == "input":
        return inputs[tree[1]]
    args = [build(t, inputs) for t in tree[1:]]
    a = args[0]
    if op == "swap":
        return a.select(x="y", y="x")
    if op == "filter":
        return a.filter(col("x") <= col("y"))
    if op == "mod":
        return a.select(x=(col("x") + col("y")) % 3, y=col("x") // 2)
    if op == "flat":
        return a.flat_map("i", "x", "y").select(x="x", y="i")
    if op == "negate":
        return a.negate()
    if op == "consolidate":
        return a.consolidate()
    if op == "distinct":
        return a.distinct()
    if op == "threshold":
        return a.threshold(2)
    if op in ("count", "sum", "min", "max", "cdist"):
        fn = {"cdist": "count_distinct"}.get(op, op)
        return a.reduce(["x"], {"y": (fn, None if op == "count" else "y")})
    if op in ("topk", "topk_desc"):
        return a.top_k(["x"], [("y", op == "topk_desc")], 2)
    if op == "general":

        def fn(key: tuple, rows: list) -> list:
            return [((sum(v[0] * n for v, n in rows) % 5,), len(rows))]

        return a.reduce_with(["x"], fn, [("y", "int")])
    if op == "concat":
        return args[0].concat(args[1])
    if op == "join":
        return args[0].join(args[1], on=[("x", "x")], columns={"x": "left.y", "y": "right.y"})
    if op in ("semi", "anti"):
        return args[0].join(args[1], on=[("x", "x")], how=op)
    base = _e_dom(a)
    if op == "closure":
        return base.iterate(_e_closure_body(base))
    if op == "closure_capped":
        return base.iterate(_e_closure_body(base), max_iterations=2)
    if op == "mutual":

        def body(v: dict) -> dict:
            odd_step = (
                v["even"]
                .select(x="y", y="x")
                .join(base, on=[("x", "x")], columns={"x": "left.y", "y": "right.y"})
            )
            even_step = (
                v["odd"]
                .select(x="y", y="x")
                .join(base, on=[("x", "x")], columns={"x": "left.y", "y": "right.y"})
            )
            return {"odd": base.concat(odd_step).distinct(), "even": even_step.distinct()}

        empty = base.filter(lit(False))
        return iterate({"odd": base, "even": empty}, body)["even"]
    if op == "nested":

        def outer(r: Collection) -> Collection:
            inner = r.iterate(_e_closure_body(r))
            return base.concat(inner.select(x="y", y="x")).distinct()

        return base.iterate(outer)
    raise ValueError(op)
