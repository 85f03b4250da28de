"""The operators a view keeps: every one of them feeds the view's result (an operator nothing
reads would still run, and hold its input's trace, at every step), and each subplan it
repeats is built once, in the innermost loop whose vars it reads. Checked on the catalog of a
runtime in this process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.operators import AsCollection, LoopRegion, Map, Operator
from service import catalog as catalog_module
from service.runtime import Runtime
from service.settings import Settings
from tests.oracle.plans import reach_plan

TABLES = {"a": ["x", "y"], "b": ["x", "z"], "roots": ["node"], "edges": ["src", "dst"]}


def _self_join(table: str) -> dict[str, Any]:
    return {
        "op": "join",
        "left": {"op": "table", "name": table},
        "right": {"op": "table", "name": table},
        "on": [["x", "x"]],
        "columns": {"l": "left.y", "r": "right.y"},
    }


# the second var of this iterate is not its result
TWO_VARS = {
    "op": "iterate",
    "vars": {"v": {"op": "table", "name": "a"}, "w": {"op": "table", "name": "b"}},
    "body": {
        "v": {"op": "distinct", "input": {"op": "var", "name": "v"}},
        "w": {"op": "distinct", "input": {"op": "var", "name": "w"}},
    },
    "result": "v",
}

PLANS = {
    "self_join": _self_join("a"),
    "two_vars": TWO_VARS,
    "reach": reach_plan(),
}


def _read_by(roots: list[Operator], ops: list[Operator]) -> set[int]:
    """Ids of the ``ops`` whose output reaches one of ``roots``: grown to a fixed point."""
    live = {id(op) for op in roots}
    grew = True
    while grew:
        grew = False
        for op in [*roots, *ops]:
            if id(op) in live:
                for i in op.inputs:
                    grew = grew or id(i) not in live
                    live.add(id(i))
    return live


def _walk(ops: list[Operator]) -> Iterator[Operator]:
    for op in ops:
        yield op
        inner = getattr(op, "inner", None)
        if inner is not None:
            yield from _walk(inner.operators)


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = Runtime(Settings(data_dir=tmp_path))
    rt.start()
    try:
        for name, columns in TABLES.items():
            spec = {"name": name, "columns": [{"name": c, "type": "int"} for c in columns]}
            rt.submit(lambda spec=spec: rt.catalog.create_table(spec)).result(timeout=30)
        yield rt
    finally:
        rt.stop()


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_every_operator_of_a_view_feeds_its_result(runtime: Runtime, plan: str) -> None:
    rt = runtime
    spec = {"name": "v", "query": PLANS[plan]}
    v = rt.submit(lambda: rt.catalog.create_view(spec)).result(timeout=60)
    live = _read_by([v.capture, v.output.op], v.ops)
    idle = [f"{type(op).__name__} {op.name}" for op in v.ops if id(op) not in live]
    assert not idle
    in_graph = {id(op) for op in rt.graph.scope.operators}
    assert all(id(op) in in_graph for op in v.ops)


def test_a_table_read_twice_is_one_operator_and_a_repeated_select_one_map(
    runtime: Runtime,
) -> None:
    """API.md's reachability plan writes its start (a select over the roots) twice."""
    rt = runtime
    spec = {"name": "v", "query": PLANS["reach"]}
    v = rt.submit(lambda: rt.catalog.create_view(spec)).result(timeout=60)
    ops = list(_walk(v.ops))
    assert sum(isinstance(op, Map) for op in ops) == 1
    assert sum(isinstance(op, AsCollection) for op in ops) == 2  # the roots' and the edges'


def test_a_view_that_fails_while_being_made_leaves_nothing(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug after the plan compiled (here: computing the view's start) refuses the view
    with nothing left of it: no operator, no reader listed on its tables (which can then be
    dropped), no view; the next view is made as usual."""
    rt = runtime
    before = list(rt.graph.scope.operators)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(catalog_module, "meet_all", broken)
    spec = {"name": "v", "query": PLANS["reach"]}
    with pytest.raises(RuntimeError, match="a bug"):
        rt.submit(lambda: rt.catalog.create_view(spec)).result(timeout=60)
    monkeypatch.undo()
    assert rt.graph.scope.operators == before
    describe = rt.submit(
        lambda: [rt.catalog.describe_table(rt.catalog.table(t)) for t in TABLES]
    ).result(30)
    assert all(d["readers"] == [] for d in describe)
    assert "v" not in rt.catalog.views
    rt.submit(lambda: rt.catalog.drop_table("a")).result(timeout=30)
    v = rt.submit(lambda: rt.catalog.create_view(spec)).result(timeout=60)
    assert v.name == "v" and rt.catalog.describe_table(rt.catalog.table("edges"))["readers"] == [
        "v"
    ]


def _var(name: str) -> dict[str, Any]:
    return {"op": "var", "name": name}


def _closure(start: dict[str, Any], var: str) -> dict[str, Any]:
    """``start``'s rows (x, y) and every (x, z) a chain of them reaches, as an iterate."""
    step = {
        "op": "join",
        "left": _var(var),
        "right": start,
        "on": [["y", "x"]],
        "columns": {"x": "left.x", "y": "right.y"},
    }
    body = {"op": "distinct", "input": {"op": "concat", "inputs": [_var(var), step]}}
    return {"op": "iterate", "vars": {var: start}, "body": {var: body}, "result": var}


def test_a_loop_in_a_loop_body_nests_in_the_innermost_loop_whose_vars_it_reads(
    runtime: Runtime,
) -> None:
    """In the body of a loop ``w`` inside a loop ``e``: a loop over ``e`` alone nests in
    ``e`` (three time coordinates, not four: it is the same collection at every round of
    ``w``), a loop over the table alone outside both (two), and only the loop over ``w``
    inside ``w``. Each is built once, though the body writes the one over ``e`` twice."""
    rt = runtime
    a = {"op": "table", "name": "a"}
    over_e = _closure(_var("e"), "u")
    w_body = {
        "op": "distinct",
        "input": {
            "op": "concat",
            "inputs": [_var("w"), over_e, _closure(a, "t"), _closure(_var("w"), "s"), over_e],
        },
    }
    w_loop = {"op": "iterate", "vars": {"w": _var("e")}, "body": {"w": w_body}, "result": "w"}
    query = {"op": "iterate", "vars": {"e": a}, "body": {"e": w_loop}, "result": "e"}
    v = rt.submit(lambda: rt.catalog.create_view({"name": "v", "query": query})).result(60)
    depths = sorted(
        (op.inner.name.count(".body."), op.inner.dims)
        for op in _walk(v.ops)
        if isinstance(op, LoopRegion)
    )
    # (how many bodies its plan path enters, its time coordinates): e; w; the table's, the
    # one over e and the one over w
    assert depths == [(0, 2), (1, 3), (2, 2), (2, 3), (2, 4)]
