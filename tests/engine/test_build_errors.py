"""A build call that raises leaves the graph as it was (audit 107): no half-built operator
fails later steps, and no operator it added keeps running or holds an arrangement's
compaction back."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine import Collection, Graph, call, col
from engine.errors import EngineError, ExpressionError, GraphError, SchemaError

Build = Callable[[Collection, Collection], object]


def _iterate_body_raises(c: Collection, d: Collection) -> object:
    def body(r: Collection) -> Collection:
        r.join(d, on=[("k", "k")]).distinct()  # built, then the body fails
        raise SchemaError("the body gave up")

    return c.iterate(body)


@pytest.mark.parametrize(
    "build",
    [
        lambda c, d: c.filter(col("k") + 1),  # not a bool: the filter had joined the graph
        lambda c, d: c.filter(col("k") != col("s")),  # a Python bool: it kept every row
        lambda c, d: c.join(d, on=[("k", "zz")]),  # the left side was arranged first
        lambda c, d: c.join(d, on=[("k", "k")], columns={"y": call("lower", "v")}),
        lambda c, d: c.join(d, on=[("k", "zz")], how="anti"),
        lambda c, d: c.reduce(["k"], {"n": ("sum", "s")}),
        lambda c, d: c.reduce_with(["k"], lambda k, vs: [], [("n", "text")]),
        lambda c, d: c.iterate(lambda r: r.join(d, on=[("k", "k")])),  # wrong columns
        lambda c, d: c.iterate(lambda r: 5),  # type: ignore[arg-type,return-value]
        _iterate_body_raises,
    ],
)
def test_a_failed_build_leaves_the_graph_as_it_was(build: Build) -> None:
    g = Graph()
    h, c = g.new_input([("k", "int"), ("s", "string")])
    hd, d = g.new_input([("k", "int"), ("v", "int")])
    shared = d.arrange_by_key(["k"])
    out = c.join(shared, on=[("k", "k")]).capture()
    operators = list(g.scope.operators)
    readers = len(shared.op.spine.readers)
    with pytest.raises(EngineError):
        build(c, d)
    assert g.scope.operators == operators
    assert len(shared.op.spine.readers) == readers
    h.send_rows([(1, "a")], 0)
    hd.send_rows([(1, 10)], 0)
    for x in (h, hd):
        x.advance_to(1)
    g.step()  # no half-built operator fails it
    assert out.drain().data.tolist() == [[1], [0], [10]]


def test_a_failed_build_forgets_what_it_kept_for_sharing() -> None:
    """Inside ``Graph.building`` the root keeps arrangements for reuse: one made by a failed
    call is forgotten with it, so a later join arranges afresh and sees the data."""
    g = Graph()
    h, c = g.new_input([("k", "int"), ("s", "string")])
    with g.building():
        with pytest.raises(ExpressionError):
            c.join(c, on=[("k", "k")], columns={"y": col("nope")})
        out = c.join(c, on=[("k", "k")], columns={"a": "left.s", "b": "right.k"}).capture()
    h.send_rows([(3, "x")], 0)
    h.advance_to(1)
    g.step()
    assert out.drain().diffs.tolist() == [1]


def test_building_on_a_dropped_operator_is_a_graph_error() -> None:
    """Audit 107: it was accepted, and the new operator's output never came."""
    g = Graph()
    _h, c = g.new_input([("k", "int"), ("s", "string")])
    mark = len(g.scope.operators)
    counted = c.count(["k"])
    g.drop(g.operators_since(mark))
    with pytest.raises(GraphError, match="was dropped"):
        counted.distinct()
    assert len(g.scope.operators) == mark


def test_a_failed_call_caught_in_a_loop_body_leaves_the_loop_as_it_was() -> None:
    """Audit 108: only the outermost call undid, so a join that failed inside an iterate
    body, its error caught there, left its arrangements running in the loop."""

    def operators_in_loops(g: Graph) -> int:
        return sum(len(op.inner.operators) for op in g.scope.operators if hasattr(op, "inner"))

    counts = []
    for fail in (False, True):
        g = Graph()
        h, c = g.new_input([("k", "int"), ("s", "string")])

        def body(r: Collection, fail: bool = fail) -> Collection:
            if fail:
                with pytest.raises(SchemaError):
                    r.join(r, on=[("k", "zz")])
            return r.distinct()

        out = c.iterate(body).capture()
        counts.append(operators_in_loops(g))
        h.send_rows([(1, "a")], 0)
        h.advance_to(1)
        g.step()
        assert out.drain().diffs.tolist() == [1]
    assert counts[0] == counts[1]
