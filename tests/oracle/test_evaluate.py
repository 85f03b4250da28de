"""Hand-computed checks of the oracle: every plan node, every expression function, the error
paths, and the API.md reachability plan against a breadth-first search."""

from __future__ import annotations

import hashlib
import math
from collections import Counter, deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .evaluate import (
    MAX_ROUNDS,
    NAN,
    Column,
    Database,
    IterationLimitError,
    PlanError,
    Relation,
    Row,
    Value,
    evaluate,
    schema_of,
)
from .plans import reach_plan

INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def table(name: str) -> dict[str, Any]:
    return {"op": "table", "name": name}


def var(name: str) -> dict[str, Any]:
    return {"op": "var", "name": name}


def call(fn: str, *args: Any, **extra: Any) -> dict[str, Any]:
    return {"fn": fn, "args": list(args), **extra}


def lit(value: Value) -> dict[str, Value]:
    return {"lit": value}


def db_of(tables: dict[str, tuple[list[Column], dict[Row, int]]], **views: Any) -> Database:
    return Database(
        {name: Relation.of(columns, rows) for name, (columns, rows) in tables.items()}, views
    )


def rows(plan: dict[str, Any], db: Database) -> dict[Row, int]:
    return dict(evaluate(plan, db).rows)


# One row of every type, to evaluate expressions on.
ONE = db_of(
    {
        "one": (
            [("i", "int"), ("n", "int"), ("f", "float"), ("s", "string"), ("t", "bool")],
            {(7, -7, 2.5, " Ab ", True): 1},
        )
    }
)


def value(expr: Any) -> Value:
    """The value of ``expr`` on the single row of ``one``."""
    result = evaluate({"op": "select", "input": table("one"), "columns": {"v": expr}}, ONE)
    ((row, count),) = result.rows.items()
    assert count == 1
    return row[0]


def type_of(expr: Any) -> str:
    ((_, type_),) = schema_of({"op": "select", "input": table("one"), "columns": {"v": expr}}, ONE)
    return type_


def error_of(plan: Any, db: Database = ONE) -> PlanError:
    with pytest.raises(PlanError) as caught:
        schema_of(plan, db, ("query",))
    with pytest.raises(PlanError):
        evaluate(plan, db)
    return caught.value


def expr_error(expr: Any) -> PlanError:
    return error_of({"op": "select", "input": table("one"), "columns": {"v": expr}})


# ---------------------------------------------------------------------------------------------
# Expressions


def test_literals_and_columns() -> None:
    assert (value(3), type_of(3)) == (3, "int")
    assert (value(2.0), type_of(2.0)) == (2.0, "float")
    assert (value(True), type_of(True)) == (True, "bool")
    assert (value(lit("i")), type_of(lit("i"))) == ("i", "string")
    assert (value(lit(4)), type_of(lit(4))) == (4, "int")
    assert (value("i"), type_of("s")) == (7, "string")


@pytest.mark.parametrize(
    ("expr", "expected", "type_"),
    [
        (call("add", 1, 2, 3), 6, "int"),
        (call("add", "i", 0.5), 7.5, "float"),
        (call("add", INT_MAX, 1), INT_MIN, "int"),
        (call("add", INT_MAX, 1, 0.5), float(INT_MIN) + 0.5, "float"),  # a left fold
        (call("sub", 1, 3), -2, "int"),
        (call("sub", INT_MIN, 1), INT_MAX, "int"),
        (call("mul", 2, 3, 4), 24, "int"),
        (call("mul", 2**62, 4), 0, "int"),
        (call("mul", 2, 1.25), 2.5, "float"),
        (call("div", 7, 2), 3, "int"),
        (call("div", -7, 2), -4, "int"),
        (call("div", 7, -2), -4, "int"),
        (call("div", -7, -2), 3, "int"),
        (call("div", 7, 0), 0, "int"),
        (call("div", INT_MIN, -1), INT_MIN, "int"),
        (call("div", 7, 2.0), 3.5, "float"),
        (call("div", 1.0, 0.0), math.inf, "float"),
        (call("div", -1, 0.0), -math.inf, "float"),
        (call("mod", 7, 3), 1, "int"),
        (call("mod", -7, 3), 2, "int"),
        (call("mod", 7, -3), -2, "int"),
        (call("mod", -7, -3), -1, "int"),
        (call("mod", 7, 0), 0, "int"),
        (call("mod", -7.5, 2.0), 0.5, "float"),
        (call("mod", 7.5, -2), -0.5, "float"),
        (call("neg", "i"), -7, "int"),
        (call("neg", INT_MIN), INT_MIN, "int"),
        (call("neg", 2.5), -2.5, "float"),
        (call("abs", "n"), 7, "int"),
        (call("abs", INT_MIN), INT_MIN, "int"),
        (call("abs", -2.5), 2.5, "float"),
    ],
)
def test_arithmetic(expr: Any, expected: Value, type_: str) -> None:
    assert type_of(expr) == type_
    result = value(expr)
    assert type(result) is type(expected)
    assert result == expected


def test_float_nan_and_negative_zero() -> None:
    assert math.isnan(value(call("div", 0.0, 0.0)))
    assert math.isnan(value(call("mod", 1.0, 0.0)))
    assert math.isnan(value(call("mod", math.inf, 3.0)))
    assert value(call("abs", call("div", 0.0, 0.0))) is NAN  # one canonical NaN object
    assert value(call("cast", call("neg", 0.0), to="string")) == "0.0"
    assert value(call("cast", call("mul", -1.0, 0.0), to="string")) == "0.0"
    assert value(call("cast", call("div", 0.0, 0.0), to="string")) == "nan"


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (call("eq", 1, 1.0), True),
        (call("eq", "i", 7), True),
        (call("ne", lit("a"), lit("b")), True),
        (call("lt", lit("B"), lit("a")), True),  # code point order
        (call("lt", False, True), True),
        (call("ge", 2, 2.5), False),
        (call("le", 2.5, 2.5), True),
        (call("gt", "i", "n"), True),
        (call("eq", call("div", 0.0, 0.0), call("div", 0.0, 0.0)), False),  # IEEE
        (call("and", True, True, False), False),
        (call("and", "t", True), True),
        (call("or", False, False, True), True),
        (call("or", False, False), False),
        (call("not", "t"), False),
    ],
)
def test_comparisons_and_logic(expr: Any, expected: bool) -> None:
    assert type_of(expr) == "bool"
    assert value(expr) is expected


@pytest.mark.parametrize(
    ("expr", "expected", "type_"),
    [
        (call("if", "t", 1, 2), 1, "int"),
        (call("if", True, 1, 2.5), 1.0, "float"),
        (call("if", False, lit("a"), lit("b")), "b", "string"),
        (call("min", 3, 1, 2), 1, "int"),
        (call("min", 5), 5, "int"),
        (call("max", 1, 2.5), 2.5, "float"),
        (call("min", 2, 3.0), 2.0, "float"),
        (call("max", lit("a"), lit("B")), "a", "string"),
        (call("min", True, False), False, "bool"),
        (call("length", "s"), 4, "int"),
        (call("lower", "s"), " ab ", "string"),
        (call("upper", "s"), " AB ", "string"),
        (call("concat", lit("a"), "s", lit("c")), "a Ab c", "string"),
        (call("concat", lit("x")), "x", "string"),
    ],
)
def test_choice_and_string_functions(expr: Any, expected: Value, type_: str) -> None:
    assert type_of(expr) == type_
    result = value(expr)
    assert type(result) is type(expected)
    assert result == expected


def test_min_max_functions_propagate_nan() -> None:
    nan = call("div", 0.0, 0.0)
    assert math.isnan(value(call("max", 1.0, nan)))
    assert math.isnan(value(call("min", nan, 1)))


@pytest.mark.parametrize(
    ("arg", "to", "expected"),
    [
        (2.7, "int", 2),
        (-2.7, "int", -2),
        (call("div", 0.0, 0.0), "int", 0),
        (call("div", 1.0, 0.0), "int", INT_MAX),
        (call("div", -1.0, 0.0), "int", INT_MIN),
        (1e300, "int", INT_MAX),
        (9.21e18, "int", 9_210_000_000_000_000_000),
        (-(2.0**63), "int", INT_MIN),
        (True, "int", 1),
        (lit(" 42 "), "int", 42),
        (lit("-3"), "int", -3),
        (lit("4.5"), "int", 0),
        (lit("x"), "int", 0),
        (3, "int", 3),
        (3, "float", 3.0),
        (False, "float", 0.0),
        (lit(" 1.5"), "float", 1.5),
        (lit("zz"), "float", 0.0),
        (0, "bool", False),
        (-2, "bool", True),
        (0.0, "bool", False),
        (0.5, "bool", True),
        (lit(""), "bool", False),
        (lit("0"), "bool", True),
        (True, "string", "True"),
        (1.5, "string", "1.5"),
        (-12, "string", "-12"),
        (lit("s"), "string", "s"),
    ],
)
def test_cast(arg: Any, to: str, expected: Value) -> None:
    expr = call("cast", arg, to=to)
    assert type_of(expr) == to
    result = value(expr)
    assert type(result) is type(expected)
    assert result == expected


MASK = 2**64 - 1


def splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def signed(x: int) -> int:
    return x - 2**64 if x >= 2**63 else x


def test_hash_by_hand() -> None:
    h0 = 0x9E3779B97F4A7C15
    assert value(call("hash", 1)) == signed(splitmix64(h0 ^ 1)) == -1612297016619662647
    assert value(call("hash", 0)) == signed(splitmix64(h0)) == 7960286522194355700
    assert value(call("hash", 1, 2)) == signed(splitmix64(splitmix64(h0 ^ 1) ^ 2))
    assert value(call("hash", -1)) == signed(splitmix64(h0 ^ MASK))
    assert value(call("hash", True)) == value(call("hash", 1))  # bool: 0/1
    one_bits = 0x3FF0000000000000  # IEEE-754 bits of 1.0
    assert value(call("hash", 1.0)) == signed(splitmix64(h0 ^ one_bits))
    assert (
        value(call("hash", call("neg", 0.0))) == value(call("hash", 0.0)) == signed(splitmix64(h0))
    )
    nan_bits = 0x7FF8000000000000
    assert value(call("hash", call("div", 0.0, 0.0))) == signed(splitmix64(h0 ^ nan_bits))
    a = int.from_bytes(hashlib.blake2b(b"a", digest_size=8).digest(), "little")
    assert a == 0x2F42665B399EF840
    assert value(call("hash", lit("a"))) == signed(splitmix64(h0 ^ a))
    assert value(call("hash", lit("a"), "i")) == signed(splitmix64(splitmix64(h0 ^ a) ^ 7))
    assert type_of(call("hash", "s", "f", "t")) == "int"


@pytest.mark.parametrize(
    ("expr", "path"),
    [
        ("nope", ()),
        (call("add", lit("a"), 1), ("args", 0)),
        (call("add", 1), ()),
        (call("sub", 1, 2, 3), ()),
        (call("neg", True), ("args", 0)),
        (call("and", 1, True), ("args", 0)),
        (call("not", True, False), ()),
        (call("if", 1, 2, 3), ("args", 0)),
        (call("if", True, 1, lit("a")), ("args", 2)),
        (call("min", 1, lit("a")), ("args", 1)),
        (call("max"), ()),
        (call("eq", 1, lit("a")), ("args", 1)),
        (call("lt", True, 1), ("args", 1)),
        (call("length", 1), ("args", 0)),
        (call("concat", lit("a"), 1), ("args", 1)),
        (call("cast", 1), ()),
        (call("cast", 1, to="date"), ()),
        (call("upper", call("lower", 3)), ("args", 0, "args", 0)),
        (call("sqrt", 4), ()),
        (lit([1]), ()),
        (2**63, ()),
        ({"fn": "add"}, ()),
        ({"lit": 1, "extra": 2}, ()),
        ([1, 2], ()),
    ],
)
def test_expression_errors(expr: Any, path: tuple[Any, ...]) -> None:
    assert expr_error(expr).path == ("query", "columns", "v", *path)


# ---------------------------------------------------------------------------------------------
# Nodes

R = [("k", "int"), ("x", "int")]


def test_table_select_counts_add() -> None:
    db = db_of({"r": (R, {(1, 10): 2, (1, 20): 3, (2, 10): -1})})
    assert rows(table("r"), db) == {(1, 10): 2, (1, 20): 3, (2, 10): -1}
    plan = {"op": "select", "input": table("r"), "columns": {"y": call("mul", "x", 2), "k": "k"}}
    assert schema_of(plan, db) == [("y", "int"), ("k", "int")]
    assert rows(plan, db) == {(20, 1): 2, (40, 1): 3, (20, 2): -1}
    project = {"op": "select", "input": table("r"), "columns": {"k": "k"}}
    assert rows(project, db) == {(1,): 5, (2,): -1}
    cancel = db_of({"r": (R, {(1, 10): 2, (1, 20): -2})})
    assert rows(project, cancel) == {}


def test_filter() -> None:
    db = db_of({"r": (R, {(1, 10): 2, (2, 20): -3, (3, 30): 1})})
    plan = {"op": "filter", "input": table("r"), "where": call("ge", "x", 20)}
    assert rows(plan, db) == {(2, 20): -3, (3, 30): 1}
    assert error_of({"op": "filter", "input": table("r"), "where": "x"}, db).path == (
        "query",
        "where",
    )


def test_flat_map() -> None:
    db = db_of({"r": (R, {(1, 3): 2, (5, 4): 1, (0, 2): -1})})
    plan = {"op": "flat_map", "input": table("r"), "as": "i", "start": "k", "stop": "x"}
    assert schema_of(plan, db) == [*R, ("i", "int")]
    assert rows(plan, db) == {(1, 3, 1): 2, (1, 3, 2): 2, (0, 2, 0): -1, (0, 2, 1): -1}
    taken = {"op": "flat_map", "input": table("r"), "as": "x", "start": 0, "stop": 1}
    assert error_of(taken, db).path == ("query", "as")
    floats = {"op": "flat_map", "input": table("r"), "as": "i", "start": 0, "stop": 1.0}
    assert error_of(floats, db).path == ("query", "stop")


def test_concat_and_negate() -> None:
    db = db_of(
        {
            "r": (R, {(1, 10): 2, (2, 20): 1}),
            "s": ([("a", "int"), ("b", "int")], {(1, 10): -2, (3, 30): 4}),
            "t": ([("a", "int"), ("b", "float")], {}),
        }
    )
    plan = {"op": "concat", "inputs": [table("r"), table("s"), table("r")]}
    assert schema_of(plan, db) == R
    assert rows(plan, db) == {(1, 10): 2, (2, 20): 2, (3, 30): 4}
    assert rows({"op": "negate", "input": table("s")}, db) == {(1, 10): 2, (3, 30): -4}
    bad = {"op": "concat", "inputs": [table("r"), table("s"), table("t")]}
    assert error_of(bad, db).path == ("query", "inputs", 2)
    assert error_of({"op": "concat", "inputs": []}, db).path == ("query", "inputs")
    # rows are objects: the same names in another order line up by name (here x, k: so
    # the types line up too); other names line up by position, as s's a, b did above
    swapped = {"op": "select", "input": table("s"), "columns": {"x": "b", "k": "a"}}
    plan = {"op": "concat", "inputs": [table("r"), swapped]}
    assert schema_of(plan, db) == R
    assert rows(plan, db) == {(2, 20): 1, (3, 30): 4}  # (1, 10) cancels
    # types that line up only by name
    first = {"op": "select", "input": table("t"), "columns": {"k": "a", "y": "b"}}
    then = {"op": "select", "input": table("t"), "columns": {"y": "b", "k": "a"}}
    assert schema_of({"op": "concat", "inputs": [first, then]}, db) == [
        ("k", "int"),
        ("y", "float"),
    ]


JOIN_DB = db_of(
    {
        "l": ([("k", "int"), ("a", "string")], {(1, "x"): 2, (2, "y"): -1, (3, "z"): 1}),
        "r": ([("k", "int"), ("b", "int")], {(1, 10): 3, (1, 11): -1, (2, 20): 1, (4, 40): 1}),
    }
)


def test_inner_join_default_columns() -> None:
    plan = {"op": "join", "left": table("l"), "right": table("r"), "on": [["k", "k"]]}
    assert schema_of(plan, JOIN_DB) == [("k", "int"), ("a", "string"), ("b", "int")]
    assert rows(plan, JOIN_DB) == {(1, "x", 10): 6, (1, "x", 11): -2, (2, "y", 20): -1}
    explicit = {**plan, "how": "inner"}
    assert rows(explicit, JOIN_DB) == rows(plan, JOIN_DB)


def test_inner_join_columns_expressions() -> None:
    plan = {
        "op": "join",
        "left": table("l"),
        "right": table("r"),
        "on": [["k", "k"]],
        "columns": {"b": "right.b", "key": "left.k", "a": call("concat", "a", lit("!"))},
    }
    assert schema_of(plan, JOIN_DB) == [("b", "int"), ("key", "int"), ("a", "string")]
    assert rows(plan, JOIN_DB) == {(10, 1, "x!"): 6, (11, 1, "x!"): -2, (20, 2, "y!"): -1}
    ambiguous = {**plan, "columns": {"k": "k"}}
    assert error_of(ambiguous, JOIN_DB).path == ("query", "columns", "k")


def test_join_errors() -> None:
    base = {"op": "join", "left": table("l"), "right": table("r")}
    assert error_of({**base, "on": [["a", "k"]]}, JOIN_DB).path == ("query", "on", 0)
    assert error_of({**base, "on": [["k", "zz"]]}, JOIN_DB).path == ("query", "on", 0, 1)
    assert error_of({**base, "on": [["k", "k"]], "how": "outer"}, JOIN_DB).path == (
        "query",
        "how",
    )
    # Default output: right.b would clash with a left column named b.
    renamed = {"op": "select", "input": table("l"), "columns": {"k": "k", "b": "a"}}
    clash = {"op": "join", "left": renamed, "right": table("r"), "on": [["k", "k"]]}
    assert error_of(clash, JOIN_DB).path == ("query",)


def test_semi_and_anti_join_read_positive_right_rows() -> None:
    db = db_of(
        {
            "l": (
                [("k", "int"), ("a", "string")],
                {(1, "a"): 3, (2, "b"): -2, (3, "c"): 1, (4, "d"): 2},
            ),
            # key 1: only a negative row; key 2: present; key 4: +1 and -1 on different rows.
            "r": ([("k", "int"), ("v", "int")], {(1, 0): -1, (2, 0): 2, (4, 0): 1, (4, 1): -1}),
        }
    )
    semi = {"op": "join", "left": table("l"), "right": table("r"), "on": [["k", "k"]]}
    assert rows({**semi, "how": "semi"}, db) == {(2, "b"): -2, (4, "d"): 2}
    assert rows({**semi, "how": "anti"}, db) == {(1, "a"): 3, (3, "c"): 1}
    assert schema_of({**semi, "how": "anti"}, db) == [("k", "int"), ("a", "string")]


def test_reduce_ignores_non_positive_rows() -> None:
    db = db_of(
        {
            "r": (
                [("g", "string"), ("x", "int"), ("f", "float")],
                {
                    ("a", 1, 0.5): 2,
                    ("a", 3, 0.25): 1,
                    ("a", 3, 1.0): 1,
                    ("a", 100, 9.0): -1,
                    ("b", 5, 1.0): -2,
                    ("c", 7, 2.0): 1,
                },
            )
        }
    )
    plan = {
        "op": "reduce",
        "input": table("r"),
        "by": ["g"],
        "aggregates": {
            "n": {"fn": "count"},
            "total": {"fn": "sum", "of": "x"},
            "ftotal": {"fn": "sum", "of": "f"},
            "lo": {"fn": "min", "of": "x"},
            "hi": {"fn": "max", "of": call("mul", "x", -1)},
            "kinds": {"fn": "count_distinct", "of": "x"},
        },
    }
    assert schema_of(plan, db) == [
        ("g", "string"),
        ("n", "int"),
        ("total", "int"),
        ("ftotal", "float"),
        ("lo", "int"),
        ("hi", "int"),
        ("kinds", "int"),
    ]
    assert rows(plan, db) == {
        ("a", 4, 8, 2.25, 1, -1, 2): 1,
        ("c", 1, 7, 2.0, 7, -7, 1): 1,
    }
    everything = {
        "op": "reduce",
        "input": table("r"),
        "by": [],
        "aggregates": {"n": {"fn": "count"}},
    }
    assert rows(everything, db) == {(5,): 1}
    strings = {
        "op": "reduce",
        "input": table("r"),
        "by": ["x"],
        "aggregates": {"first": {"fn": "min", "of": "g"}, "last": {"fn": "max", "of": "g"}},
    }
    assert rows(strings, db) == {(1, "a", "a"): 1, (3, "a", "a"): 1, (7, "c", "c"): 1}


def test_reduce_empty_and_errors() -> None:
    db = db_of({"r": (R, {(1, 1): -1})})
    plan = {"op": "reduce", "input": table("r"), "by": [], "aggregates": {"n": {"fn": "count"}}}
    assert rows(plan, db) == {}
    strings = db_of({"r": ([("s", "string")], {})})
    bad_sum = {
        "op": "reduce",
        "input": table("r"),
        "by": [],
        "aggregates": {"t": {"fn": "sum", "of": "s"}},
    }
    assert error_of(bad_sum, strings).path == ("query", "aggregates", "t", "of")
    no_of = {"op": "reduce", "input": table("r"), "by": [], "aggregates": {"t": {"fn": "max"}}}
    assert error_of(no_of, db).path == ("query", "aggregates", "t")
    clash = {"op": "reduce", "input": table("r"), "by": ["k"], "aggregates": {"k": {"fn": "count"}}}
    assert error_of(clash, db).path == ("query", "aggregates")
    unknown = {"op": "reduce", "input": table("r"), "by": ["k", "q"], "aggregates": {}}
    assert error_of(unknown, db).path == ("query", "by", 1)


def test_distinct_and_threshold() -> None:
    db = db_of({"r": (R, {(1, 1): 3, (2, 2): 1, (3, 3): -2, (4, 4): 2})})
    assert rows({"op": "distinct", "input": table("r")}, db) == {(1, 1): 1, (2, 2): 1, (4, 4): 1}
    at = {"op": "threshold", "input": table("r")}
    assert rows({**at, "at_least": 2}, db) == {(1, 1): 1, (4, 4): 1}
    assert rows({**at, "at_least": 3}, db) == {(1, 1): 1}
    assert rows({**at, "at_least": -5}, db) == {(1, 1): 1, (2, 2): 1, (4, 4): 1}


def test_top_k_with_multiplicities() -> None:
    db = db_of(
        {
            "r": (
                [("g", "string"), ("score", "int"), ("name", "string")],
                {
                    ("a", 9, "p"): 2,
                    ("a", 9, "o"): 2,
                    ("a", 5, "q"): 4,
                    ("a", 10, "z"): -1,  # not positive: ignored
                    ("b", 1, "r"): 1,
                },
            )
        }
    )
    plan = {
        "op": "top_k",
        "input": table("r"),
        "by": ["g"],
        "order_by": [{"col": "score", "desc": True}],
        "k": 3,
    }
    # Group a, by score descending then name ascending: (9, o) x2, (9, p) x2 cut to 1.
    assert rows(plan, db) == {("a", 9, "o"): 2, ("a", 9, "p"): 1, ("b", 1, "r"): 1}
    ascending = {**plan, "order_by": [{"col": "score"}], "k": 5}
    assert rows(ascending, db) == {("a", 5, "q"): 4, ("a", 9, "o"): 1, ("b", 1, "r"): 1}
    global_top = {**plan, "by": [], "order_by": [{"col": "name", "desc": True}], "k": 2}
    assert rows(global_top, db) == {("b", 1, "r"): 1, ("a", 5, "q"): 1}
    assert rows({**plan, "k": 0}, db) == {}
    assert error_of({**plan, "k": -1}, db).path == ("query", "k")
    bad_col = {**plan, "order_by": [{"col": "nope"}]}
    assert error_of(bad_col, db).path == ("query", "order_by", 0, "col")


def test_top_k_counts_past_int64_fill_k_places_once() -> None:
    # Each count fits in 64 bits but the group's running total passes 2**63: the places
    # stay filled, as the engine keeps them (audit 5).
    big = 2**63 - 2
    db = db_of({"r": ([("a", "int")], {(30,): 1, (22,): big, (20,): 1, (10,): 3, (2,): 2})})
    plan = {"op": "top_k", "input": table("r"), "by": [], "order_by": [{"col": "a", "desc": True}]}
    assert rows({**plan, "k": 3}, db) == {(30,): 1, (22,): 2}
    assert rows({**plan, "k": INT_MAX}, db) == {(30,): 1, (22,): big}


def test_views_are_evaluated_recursively() -> None:
    db = db_of(
        {"r": (R, {(1, 10): 1, (2, 20): 1})},
        big={"op": "filter", "input": table("r"), "where": call("gt", "x", 15)},
        keys={"op": "select", "input": {"op": "view", "name": "big"}, "columns": {"k": "k"}},
        loop={"op": "view", "name": "loop"},
        broken={"op": "select", "input": table("r"), "columns": {"y": "nope"}},
    )
    assert rows({"op": "view", "name": "keys"}, db) == {(2,): 1}
    assert error_of({"op": "view", "name": "loop"}, db).path == ("query",)
    assert error_of({"op": "negate", "input": {"op": "view", "name": "broken"}}, db).path == (
        "query",
        "input",
    )
    assert error_of({"op": "view", "name": "none"}, db).path == ("query",)


def test_node_errors() -> None:
    assert error_of({"op": "sort", "input": table("one")}).path == ("query",)
    assert error_of(table("missing")).path == ("query",)
    assert error_of({"op": "distinct"}).path == ("query",)
    assert error_of({"op": "distinct", "input": table("one"), "extra": 1}).path == ("query",)
    assert error_of({"op": "negate", "input": {"op": "negate", "input": 3}}).path == (
        "query",
        "input",
        "input",
    )
    assert error_of(var("v")).path == ("query",)


# ---------------------------------------------------------------------------------------------
# Iterate

REACH = reach_plan()

GRAPH = [("roots", [("node", "int")]), ("edges", [("src", "int"), ("dst", "int")])]


def graph_db(roots: set[int], edges: set[tuple[int, int]]) -> Database:
    return Database.from_counters(
        dict(GRAPH), {"roots": {(r,): 1 for r in roots}, "edges": {e: 1 for e in edges}}
    )


def bfs_reach(roots: set[int], edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    reached = set()
    for root in roots:
        seen, queue = {root}, deque([root])
        while queue:
            node = queue.popleft()
            for src, dst in edges:
                if src == node and dst not in seen:
                    seen.add(dst)
                    queue.append(dst)
        reached |= {(root, node) for node in seen}
    return reached


def test_reachability_on_a_small_graph() -> None:
    edges = {(1, 2), (2, 3), (3, 1), (3, 4), (5, 6), (6, 5), (7, 7)}
    db = graph_db({1, 5}, edges)
    assert schema_of(REACH, db) == [("root", "int"), ("node", "int")]
    expected = {(1, 1), (1, 2), (1, 3), (1, 4), (5, 5), (5, 6)}
    assert bfs_reach({1, 5}, edges) == expected
    assert rows(REACH, db) == {pair: 1 for pair in expected}


@settings(max_examples=60, deadline=None)
@given(
    st.sets(st.integers(0, 6), max_size=3),
    st.sets(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=14),
)
def test_reachability_matches_bfs(roots: set[int], edges: set[tuple[int, int]]) -> None:
    assert rows(REACH, graph_db(roots, edges)) == {pair: 1 for pair in bfs_reach(roots, edges)}


def test_mutually_recursive_vars_even_and_odd_paths() -> None:
    def step(source: str) -> dict[str, Any]:
        return {
            "op": "join",
            "left": var(source),
            "right": table("edges"),
            "on": [["node", "src"]],
            "columns": {"node": "dst"},
        }

    plan = {
        "op": "iterate",
        "vars": {
            "even": table("roots"),
            "odd": {"op": "filter", "input": table("roots"), "where": False},
        },
        "body": {
            "even": {
                "op": "distinct",
                "input": {"op": "concat", "inputs": [table("roots"), step("odd")]},
            },
            "odd": {"op": "distinct", "input": step("even")},
        },
        "result": "odd",
    }
    edges = {(1, 2), (2, 3), (3, 4), (4, 2)}
    # Walks from 1: 2 (length 1), 3 (2), 4 (3), 2 (4), 3 (5), ...
    assert rows(plan, graph_db({1}, edges)) == {(2,): 1, (3,): 1, (4,): 1}
    assert rows({**plan, "result": "even"}, graph_db({1}, edges)) == {
        (1,): 1,
        (2,): 1,
        (3,): 1,
        (4,): 1,
    }
    line = {(1, 2), (2, 3), (3, 4)}
    assert rows(plan, graph_db({1}, line)) == {(2,): 1, (4,): 1}
    assert rows({**plan, "result": "even"}, graph_db({1}, line)) == {(1,): 1, (3,): 1}


COUNTER_DB = Database.from_counters({"start": [("n", "int")]}, {"start": {(0,): 2}})
COUNTER = {
    "op": "iterate",
    "vars": {"c": table("start")},
    "body": {"c": {"op": "select", "input": var("c"), "columns": {"n": call("add", "n", 1)}}},
    "result": "c",
}


def test_max_iterations_counts_replacements() -> None:
    assert rows({**COUNTER, "max_iterations": 0}, COUNTER_DB) == {(0,): 2}
    assert rows({**COUNTER, "max_iterations": 3}, COUNTER_DB) == {(3,): 2}


def test_non_converging_iterate_hits_the_safety_bound() -> None:
    assert MAX_ROUNDS == 10_000
    with pytest.raises(IterationLimitError):
        evaluate(COUNTER, COUNTER_DB)


def test_vars_are_replaced_together() -> None:
    db = Database.from_counters(
        {"p": [("n", "int")], "q": [("n", "int")]}, {"p": {(1,): 1}, "q": {(2,): 1}}
    )
    swap = {
        "op": "iterate",
        "vars": {"a": table("p"), "b": table("q")},
        "body": {"a": var("b"), "b": var("a")},
        "result": "a",
    }
    assert rows({**swap, "max_iterations": 1}, db) == {(2,): 1}
    assert rows({**swap, "max_iterations": 2}, db) == {(1,): 1}
    # The names come from the initial plans even when the body names columns otherwise.
    renamed = {
        **swap,
        "body": {"a": {"op": "select", "input": var("b"), "columns": {"m": "n"}}, "b": var("a")},
    }
    assert schema_of({**renamed, "max_iterations": 1}, db) == [("n", "int")]


def test_nested_iterate_reads_outer_vars_and_shadows() -> None:
    edges = {(1, 2), (2, 3), (3, 4)}
    db = graph_db({1}, edges)
    # Outer: reachable nodes. Each outer round runs an inner closure over the outer var.
    inner = {
        "op": "iterate",
        "vars": {"frontier": {"op": "filter", "input": table("roots"), "where": False}},
        "body": {
            "frontier": {
                "op": "distinct",
                "input": {
                    "op": "concat",
                    "inputs": [
                        var("seen"),  # the outer var
                        {
                            "op": "join",
                            "left": var("frontier"),
                            "right": table("edges"),
                            "on": [["node", "src"]],
                            "columns": {"node": "dst"},
                        },
                    ],
                },
            }
        },
        "result": "frontier",
    }
    outer = {
        "op": "iterate",
        "vars": {"seen": table("roots")},
        "body": {
            "seen": {"op": "distinct", "input": {"op": "concat", "inputs": [var("seen"), inner]}}
        },
        "result": "seen",
    }
    assert rows(outer, db) == {(1,): 1, (2,): 1, (3,): 1, (4,): 1}
    # An inner var named like the outer one shadows it.
    shadow = {
        "op": "iterate",
        "vars": {"seen": table("roots")},
        "body": {
            "seen": {
                "op": "iterate",
                "vars": {"seen": {"op": "select", "input": table("roots"), "columns": {"node": 9}}},
                "body": {"seen": var("seen")},
                "result": "seen",
            }
        },
        "result": "seen",
    }
    assert rows(shadow, db) == {(9,): 1}


def test_iterate_errors() -> None:
    db = graph_db({1}, {(1, 2)})
    wrong_types = {
        **REACH,
        "body": {"reach": {"op": "select", "input": var("reach"), "columns": {"root": "root"}}},
    }
    assert error_of(wrong_types, db).path == ("query", "body", "reach")
    own_var = {**REACH, "vars": {"reach": var("reach")}}
    assert error_of(own_var, db).path == ("query", "vars", "reach")
    assert error_of({**REACH, "result": "other"}, db).path == ("query", "result")
    assert error_of({**REACH, "body": {}}, db).path == ("query", "body")
    extra = {**REACH, "body": {**REACH["body"], "more": var("reach")}}
    assert error_of(extra, db).path == ("query", "body", "more")
    assert error_of({**REACH, "max_iterations": -1}, db).path == ("query", "max_iterations")
    # An error deep in a body carries its whole path.
    body = REACH["body"]["reach"]
    join = body["input"]["inputs"][1]
    broken = {
        **REACH,
        "body": {"reach": {**join, "left": {"op": "bogus"}}},
    }
    assert error_of(broken, db).path == ("query", "body", "reach", "left")
    bad_key = {**REACH, "body": {"reach": {**join, "on": [["node", "nope"]]}}}
    assert error_of(bad_key, db).path == ("query", "body", "reach", "on", 0, 1)


# ---------------------------------------------------------------------------------------------
# Relations and databases


def test_database_checks_and_canonicalises_rows() -> None:
    db = Database.from_counters({"f": [("x", "float")]}, {"f": {(-0.0,): 2}})
    assert dict(db.tables["f"].rows) == {(0.0,): 2}
    assert str(next(iter(db.tables["f"].rows))[0]) == "0.0"
    with pytest.raises(ValueError):
        Database.from_counters({"i": [("x", "int")]}, {"i": {(True,): 1}})
    with pytest.raises(ValueError):
        Database.from_counters({"i": [("x", "int")]}, {"i": {(1, 2): 1}})
    with pytest.raises(ValueError):
        Database.from_counters({"d": [("x", "date")]}, {})
    as_lists = Database.from_counters({"i": [["x", "int"]]}, {"i": {(1,): 1}})  # JSON-style
    assert schema_of(table("i"), as_lists) == [("x", "int")]


def test_nan_rows_are_one_row() -> None:
    db = Database.from_counters({"f": [("x", "float")]}, {"f": {(0.0,): 1, (1.0,): 1}})
    plan = {"op": "select", "input": table("f"), "columns": {"y": call("div", "x", 0.0)}}
    # 0/0 is NaN and 1/0 is inf: two rows; NaN rows would merge under distinct.
    result = evaluate({"op": "distinct", "input": {"op": "concat", "inputs": [plan, plan]}}, db)
    assert len(result.rows) == 2
    assert sorted(result.rows.values()) == [1, 1]


def test_relation_drops_zero_counts() -> None:
    relation = Relation.of(R, Counter({(1, 1): 0, (2, 2): 3}))
    assert dict(relation.rows) == {(2, 2): 3}
    assert relation.names == ["k", "x"]
    assert relation.types == ["int", "int"]
