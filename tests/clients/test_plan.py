"""The plan builder renders exactly the plan JSON of API.md "Query plans"."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from clients import (
    Expr,
    cast,
    col,
    concat,
    count,
    count_distinct,
    fn,
    if_,
    iterate,
    lit,
    max_,
    min_,
    sum_,
    table,
    to_expr,
    var,
    view,
)

# Copied from API.md (one long line broken at a comma to fit the line length).
REACHABILITY = """
{"op": "iterate", "result": "reach",
 "vars": {"reach": {"op": "select", "input": {"op": "table", "name": "roots"},
                    "columns": {"root": "node", "node": "node"}}},
 "body": {"reach": {"op": "distinct", "input": {"op": "concat", "inputs": [
   {"op": "select", "input": {"op": "table", "name": "roots"},
    "columns": {"root": "node", "node": "node"}},
   {"op": "join", "left": {"op": "var", "name": "reach"}, "right": {"op": "table", "name": "edges"},
    "on": [["node", "src"]], "columns": {"root": "left.root", "node": "right.dst"}}]}}}}
"""


def test_reachability_example_is_reproduced_exactly() -> None:
    roots = table("roots").select(root="node", node="node")
    step = var("reach").join(
        table("edges"), on=[("node", "src")], columns={"root": "left.root", "node": "right.dst"}
    )
    plan = iterate(
        vars={"reach": roots}, body={"reach": concat(roots, step).distinct()}, result="reach"
    )
    assert plan.to_json() == json.loads(REACHABILITY)


def test_sources() -> None:
    assert table("edges").to_json() == {"op": "table", "name": "edges"}
    assert view("reach").to_json() == {"op": "view", "name": "reach"}
    assert var("r").to_json() == {"op": "var", "name": "r"}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (col("x") + 1, {"fn": "add", "args": ["x", 1]}),
        (1 + col("x"), {"fn": "add", "args": [1, "x"]}),
        (col("x") - col("y"), {"fn": "sub", "args": ["x", "y"]}),
        (10 - col("x"), {"fn": "sub", "args": [10, "x"]}),
        (col("x") * 2.5, {"fn": "mul", "args": ["x", 2.5]}),
        (2 * col("x"), {"fn": "mul", "args": [2, "x"]}),
        (col("x") / 2, {"fn": "div", "args": ["x", 2]}),
        (col("x") // 2, {"fn": "div", "args": ["x", 2]}),
        (7 // col("x"), {"fn": "div", "args": [7, "x"]}),
        (col("x") % 3, {"fn": "mod", "args": ["x", 3]}),
        (-col("x"), {"fn": "neg", "args": ["x"]}),
        (col("x").eq(3), {"fn": "eq", "args": ["x", 3]}),
        (col("x").ne(col("y")), {"fn": "ne", "args": ["x", "y"]}),
        (col("x") < 3, {"fn": "lt", "args": ["x", 3]}),
        (col("x") <= 3, {"fn": "le", "args": ["x", 3]}),
        (col("x") > 3, {"fn": "gt", "args": ["x", 3]}),
        (col("x") >= 3, {"fn": "ge", "args": ["x", 3]}),
        (col("x") > 3, {"fn": "gt", "args": ["x", 3]}),
        (col("a") & col("b"), {"fn": "and", "args": ["a", "b"]}),
        (col("a") | False, {"fn": "or", "args": ["a", False]}),
        (~col("a"), {"fn": "not", "args": ["a"]}),
        (lit("alice"), {"lit": "alice"}),
        (lit(3), {"lit": 3}),
        (col("name").eq(lit("bob")), {"fn": "eq", "args": ["name", {"lit": "bob"}]}),
        (fn("abs", col("x")), {"fn": "abs", "args": ["x"]}),
        (fn("hash", "a", "b", 1), {"fn": "hash", "args": ["a", "b", 1]}),
        (fn("lower", "s"), {"fn": "lower", "args": ["s"]}),
        (col("x").abs(), {"fn": "abs", "args": ["x"]}),
        (col("s").length() > 2, {"fn": "gt", "args": [{"fn": "length", "args": ["s"]}, 2]}),
        (col("s").lower(), {"fn": "lower", "args": ["s"]}),
        (col("s").upper(), {"fn": "upper", "args": ["s"]}),
        (cast(col("x"), "float"), {"fn": "cast", "args": ["x"], "to": "float"}),
        (col("x").cast("string"), {"fn": "cast", "args": ["x"], "to": "string"}),
        (if_(col("x") > 0, "x", 0), {"fn": "if", "args": [{"fn": "gt", "args": ["x", 0]}, "x", 0]}),
        (
            (col("x") + 1) * col("y") > 3,
            {
                "fn": "gt",
                "args": [{"fn": "mul", "args": [{"fn": "add", "args": ["x", 1]}, "y"]}, 3],
            },
        ),
    ],
)
def test_expressions(expr: Expr, expected: Any) -> None:
    assert expr.to_json() == expected


def test_booleans_stay_booleans_and_numpy_scalars_become_numbers() -> None:
    rendered = json.dumps((col("a") & True).to_json())
    assert rendered == '{"fn": "and", "args": ["a", true]}'
    assert json.dumps(to_expr(np.int64(3)).to_json()) == "3"  # type: ignore[arg-type]
    assert json.dumps(to_expr(np.float32(0.5)).to_json()) == "0.5"  # type: ignore[arg-type]
    assert json.dumps(to_expr(np.bool_(True)).to_json()) == "true"  # type: ignore[arg-type]
    assert to_expr("x").to_json() == "x"


def test_expressions_refuse_truth_values() -> None:
    with pytest.raises(TypeError, match="no truth value"):
        bool(col("x") > 1)
    with pytest.raises(TypeError):
        _ = 1 < col("x") < 3


def test_bad_literals_are_refused() -> None:
    with pytest.raises(ValueError, match="no JSON form"):
        col("x") + float("nan")
    with pytest.raises(ValueError, match="no JSON form"):
        lit(float("inf"))
    with pytest.raises(TypeError, match="as an expression"):
        col("x") + None  # type: ignore[operator]


def test_expressions_compare_by_value() -> None:
    assert col("x") + 1 == col("x") + 1
    assert col("x") + 1 != col("x") + 2
    assert len({col("x"), col("x"), col("y")}) == 2


def test_select_filter_flat_map() -> None:
    plan = (
        table("t")
        .select({"in put": "a"}, b=col("a") + 1, c=lit("k"))
        .filter(col("b") > 3)
        .flat_map(as_="i", start=0, stop=col("b"))
    )
    assert plan.to_json() == {
        "op": "flat_map",
        "input": {
            "op": "filter",
            "input": {
                "op": "select",
                "input": {"op": "table", "name": "t"},
                "columns": {"in put": "a", "b": {"fn": "add", "args": ["a", 1]}, "c": {"lit": "k"}},
            },
            "where": {"fn": "gt", "args": ["b", 3]},
        },
        "as": "i",
        "start": 0,
        "stop": "b",
    }


def test_select_refuses_a_column_given_twice() -> None:
    with pytest.raises(ValueError, match="both"):
        table("t").select({"a": "x"}, a="y")


def test_concat_and_negate() -> None:
    a, b, c = table("a"), table("b"), table("c")
    expected = {"op": "concat", "inputs": [a.to_json(), b.to_json(), c.to_json()]}
    assert concat(a, b, c).to_json() == expected
    assert a.concat(b, c).to_json() == expected
    assert a.negate().to_json() == {"op": "negate", "input": {"op": "table", "name": "a"}}
    with pytest.raises(ValueError):
        concat()


def test_joins() -> None:
    left, right = table("l"), table("r")
    l_json, r_json = left.to_json(), right.to_json()
    assert left.join(right, on="k").to_json() == {
        "op": "join",
        "left": l_json,
        "right": r_json,
        "on": [["k", "k"]],
    }
    assert left.join(right, on=["k", ("a", "b")], how="anti").to_json()["on"] == [
        ["k", "k"],
        ["a", "b"],
    ]
    semi = left.semijoin(right, on=[("x", "y")]).to_json()
    assert semi == {
        "op": "join",
        "left": l_json,
        "right": r_json,
        "on": [["x", "y"]],
        "how": "semi",
    }
    assert left.antijoin(right, on="k").to_json()["how"] == "anti"
    joined = left.join(right, on="k", columns={"s": col("left.a") + col("right.b")})
    assert joined.to_json()["columns"] == {"s": {"fn": "add", "args": ["left.a", "right.b"]}}
    with pytest.raises(ValueError, match="inner, semi or anti"):
        left.join(right, on="k", how="outer")
    # one (left, right) pair as a tuple, not two same-name keys (audit 46)
    assert left.join(right, on=("node", "src")).to_json()["on"] == [["node", "src"]]
    assert left.join(right, on=["node", "src"]).to_json()["on"] == [
        ["node", "node"],
        ["src", "src"],
    ]


def test_reduce_with_every_aggregate() -> None:
    plan = table("t").reduce(
        by=["k"], n=count(), s=sum_("x"), m=min_("x"), M=max_(col("x") * 2), d=count_distinct("x")
    )
    assert plan.to_json() == {
        "op": "reduce",
        "input": {"op": "table", "name": "t"},
        "by": ["k"],
        "aggregates": {
            "n": {"fn": "count"},
            "s": {"fn": "sum", "of": "x"},
            "m": {"fn": "min", "of": "x"},
            "M": {"fn": "max", "of": {"fn": "mul", "args": ["x", 2]}},
            "d": {"fn": "count_distinct", "of": "x"},
        },
    }
    assert table("t").reduce(by="src", n=count()).to_json()["by"] == ["src"]  # not s, r, c
    by_mapping = table("t").reduce({"by": count()})
    assert by_mapping.to_json()["aggregates"] == {"by": {"fn": "count"}}
    assert by_mapping.to_json()["by"] == []


def test_distinct_threshold_top_k() -> None:
    t = {"op": "table", "name": "t"}
    assert table("t").distinct().to_json() == {"op": "distinct", "input": t}
    assert table("t").threshold(2).to_json() == {"op": "threshold", "input": t, "at_least": 2}
    top = table("t").top_k(by=["g"], order_by=[("x", True), "y", ("z", False)], k=3)
    assert top.to_json() == {
        "op": "top_k",
        "input": t,
        "by": ["g"],
        "order_by": [{"col": "x", "desc": True}, {"col": "y"}, {"col": "z"}],
        "k": 3,
    }
    api_form = table("t").top_k(by="g", order_by=[{"col": "x", "desc": True}, {"col": "y"}], k=3)
    assert api_form.to_json() == top.to_json() | {
        "order_by": [{"col": "x", "desc": True}, {"col": "y"}]
    }
    assert table("t").top_k(order_by="x", k=1).to_json()["order_by"] == [{"col": "x"}]
    with pytest.raises(ValueError, match="an order key"):
        table("t").top_k(order_by=[{"column": "x"}], k=1)


def test_concat_takes_one_list_too_and_lit_checks_numpy_floats() -> None:
    a, b = table("a"), table("b")
    assert concat([a, b]).to_json() == concat(a, b).to_json()
    with pytest.raises(TypeError, match="concat takes plans"):
        concat([a, "b"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no JSON form"):
        lit(np.float32("nan"))  # type: ignore[arg-type]


def test_a_filter_on_a_python_bool_is_refused() -> None:
    """``col("x") == 1`` compares nodes (False): as a filter it would keep no row, silently."""
    with pytest.raises(TypeError, match=r"\.eq\(\)"):
        table("t").filter(col("x") == 1)
    assert table("t").filter(lit(True)).to_json()["where"] == {"lit": True}


def test_iterate_with_max_iterations_and_mutual_recursion() -> None:
    plan = iterate(
        vars={"a": table("x"), "b": table("y")},
        body={"a": var("b"), "b": var("a")},
        result="a",
        max_iterations=5,
    )
    assert plan.to_json() == {
        "op": "iterate",
        "vars": {"a": {"op": "table", "name": "x"}, "b": {"op": "table", "name": "y"}},
        "body": {"a": {"op": "var", "name": "b"}, "b": {"op": "var", "name": "a"}},
        "result": "a",
        "max_iterations": 5,
    }


def test_plans_are_immutable_and_render_fresh_json() -> None:
    columns = {"a": "x"}
    base = table("t").select(columns)
    columns["b"] = "y"
    base.filter(col("a") > 1)
    rendered = base.to_json()
    rendered["columns"]["c"] = "z"
    assert base.to_json() == {
        "op": "select",
        "input": {"op": "table", "name": "t"},
        "columns": {"a": "x"},
    }
    with pytest.raises(AttributeError):
        base.op = "filter"  # type: ignore[misc]
    with pytest.raises(TypeError):
        base.fields["input"] = table("u")  # type: ignore[index]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: col(3), "a column name is a str, not int 3"),
        (lambda: table(None), "a table name is a str"),
        (lambda: view(b"v"), "a view name is a str"),
        (lambda: var(1), "a var name is a str"),
        (lambda: fn(len, "x"), "a function name is a str"),
        (lambda: cast("x", int), "a cast's type is a str"),
        (lambda: col("x").cast(float), "a cast's type is a str"),
        (lambda: lit(None), "a literal is a bool, int, float or str, not NoneType"),
        (lambda: lit([1]), "a literal is a bool"),
        (lambda: table("t").select({1: "a"}), "an output column's name is a str"),
        (lambda: table("t").flat_map(as_=0, start=0, stop=1), "flat_map's as is a str"),
        (lambda: table("t").join("u", on="k"), "a join's other side is a Plan, not str"),
        (lambda: table("t").join(table("u"), on=[("k", 1)]), "a join key is a str"),
        (lambda: table("t").join(table("u"), on=[7]), "a join key is a column name or"),
        (
            lambda: table("t").join(table("u"), on="k", columns={2: "left.k"}),
            "an output column's name",
        ),
        (lambda: table("t").reduce(by=[1], n=count()), "a column name is a str, not int 1"),
        (lambda: table("t").reduce(by="k", n="count"), "aggregate 'n' is an Aggregate"),
        (lambda: table("t").reduce({5: count()}, by="k"), "an output column's name"),
        (lambda: table("t").threshold("2"), "threshold's at_least is an int, not str"),
        (lambda: table("t").threshold(True), "threshold's at_least is an int, not bool"),
        (lambda: table("t").top_k(1.5, order_by="a"), "top_k's k is an int, not float"),
        (lambda: table("t").top_k(1, order_by=[(3, True)]), "an order key's column is a str"),
        (lambda: table("t").top_k(1, order_by=[("a", "yes")]), "descending flag is a bool"),
        (lambda: table("t").top_k(1, order_by=[4]), "an order key is a column name or a"),
        (lambda: table("t").join(table("u"), on=1), "join keys are a name, a"),
        (lambda: table("t").antijoin(table("u"), on=1), "join keys are a name, a"),
        (lambda: table("t").reduce(by=1, n=count()), "columns are a name or a list"),
        (
            lambda: table("t").top_k(1, order_by={"col": "a", "desc": "yes"}),
            "descending flag is a bool",
        ),
        (
            lambda: iterate(vars={"r": "t"}, body={"r": var("r")}, result="r"),
            "var 'r' is a Plan, not str",
        ),
        (
            lambda: iterate(vars={"r": table("t")}, body={"r": None}, result="r"),
            "body 'r' is a Plan",
        ),
        (
            lambda: iterate(vars={"r": table("t")}, body={"r": var("r")}, result=0),
            "iterate's result is a str",
        ),
        (
            lambda: iterate(
                vars={"r": table("t")}, body={"r": var("r")}, result="r", max_iterations="9"
            ),
            "iterate's max_iterations is an int",
        ),
    ],
)
def test_the_builder_refuses_what_would_reach_the_server_as_another_plan(
    build: Any, match: str
) -> None:
    """A name given as a non-str, an int field as a str or bool, a non-plan as a plan: each
    refused as it is built (audit 109: ``col(3)`` went out as the literal 3, ``by=[1]`` as
    the column "1")."""
    with pytest.raises((TypeError, ValueError), match=match):
        build()


def test_builder_takes_numpy_ints_for_int_fields() -> None:
    plan = table("t").top_k(np.int64(2), order_by=("a", np.bool_(True))).threshold(np.int32(1))
    pair = table("t").top_k(1, order_by=[("a", True), "b"]).to_json()["order_by"]
    assert pair == [{"col": "a", "desc": True}, {"col": "b"}]
    assert plan.to_json()["at_least"] == 1 and plan.to_json()["input"]["k"] == 2
    assert plan.to_json()["input"]["order_by"] == [{"col": "a", "desc": True}]
    assert json.dumps(lit(np.int64(4)).to_json()) == '{"lit": 4}'
