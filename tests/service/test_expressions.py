"""Expressions (parsed as the service parses a plan's, evaluated by the engine) against the
oracle's evaluator, on rows at the edges of every type: the ends of int64, floats that
overflow, strings that change length when their case does."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine import Graph, Schema, StringInterner, UpdateBatch
from service.codec import ColumnBuilder, decode_rows
from service.plan import parse_expr
from tests.oracle.evaluate import Scope, compile_expr, normalize_value
from tests.oracle.plans import expressions

COLUMNS = [
    ("i", "int"),
    ("j", "int"),
    ("f", "float"),
    ("g", "float"),
    ("b", "bool"),
    ("s", "string"),
]
EDGES: dict[str, list[Any]] = {
    "int": [0, 1, -1, 7, -(2**63), 2**63 - 1, 2**53 + 1, -(2**62)],
    "float": [0.0, 0.5, -1.5, 1e300, -1e300, 5e-324, 9.3e18, float(2**53)],
    "bool": [False, True],
    "string": [
        "",
        "a",
        "B",
        "ß",
        "ǅ",
        "12",
        " -3 ",
        "1e3",
        "99999999999999999999",
        "İ",
        "1" * 5000,
    ],
}
ROWS = st.lists(st.tuples(*(st.sampled_from(EDGES[t]) for _, t in COLUMNS)), min_size=1, max_size=6)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def engine_values(expr: Any, rows: list[tuple[Any, ...]]) -> list[Any]:
    schema = Schema.of(COLUMNS)
    builder = ColumnBuilder(schema)
    for n, row in enumerate(rows):
        builder.add(dict(zip(schema.names, row, strict=True)), f"rows[{n}]")
    interner = StringInterner()
    g = Graph(interner)
    h, c = g.new_input(schema, name="t")
    selected = c.select(out=parse_expr(expr, "expr"))
    out = selected.capture()
    data = builder.storage(interner)
    # each row once, at its own time, so that equal outputs stay apart
    times = np.arange(len(rows), dtype=np.int64).reshape(1, -1)
    h.send(UpdateBatch(data, times, np.ones(len(rows), dtype=np.int64)))
    h.advance_to(len(rows))
    g.step()
    got = out.drain()
    values = decode_rows(got.data, selected.schema, interner)
    by_time = {int(t): v["out"] for t, v in zip(got.times[0].tolist(), values, strict=True)}
    return [by_time[n] for n in range(len(rows))]


ZERO_ROW = (0, 0, 0.0, 0.0, False, "")


@settings(max_examples=400, deadline=None)
@example({"fn": "cast", "args": [{"fn": "neg", "args": ["f"]}], "to": "string"}, [ZERO_ROW])
@example({"fn": "cast", "args": [{"fn": "mul", "args": [-1.5, "g"]}], "to": "string"}, [ZERO_ROW])
@example({"fn": "cast", "args": [{"fn": "div", "args": ["f", 0.0]}], "to": "string"}, [ZERO_ROW])
@example({"fn": "div", "args": [1, {"fn": "neg", "args": ["f"]}]}, [ZERO_ROW])  # inf, not -inf
@example({"fn": "add", "args": ["i", "i", "f"]}, [(-(2**63), *ZERO_ROW[1:])])  # ints wrap first
@example({"fn": "div", "args": ["i", -1]}, [(-(2**63), *ZERO_ROW[1:])])  # wraps, no warning
@example({"fn": "mod", "args": ["i", -1]}, [(-(2**63), *ZERO_ROW[1:])])
@given(
    st.sampled_from(["int", "float", "bool", "string"]).flatmap(
        lambda t: expressions(COLUMNS, t, 3)
    ),
    ROWS,
)
def test_expressions_agree_with_the_oracle(expr: Any, rows: list[tuple[Any, ...]]) -> None:
    _, fn = compile_expr(expr, Scope.of_columns(COLUMNS), ())
    expected = [normalize_value(fn(row)) for row in rows]
    got = engine_values(expr, rows)
    assert all(same(a, b) for a, b in zip(got, expected, strict=True)), (expr, rows, got, expected)


def test_a_cast_of_more_digits_than_int_takes_wraps() -> None:
    """Audit 47: ``int()`` refuses more than 4,300 digits, and such a string cast to 0 as if
    it did not parse; its digits wrap at 64 bits as shorter ones do."""
    texts = ["1" * 5000, "-1_" + "1" * 4999, "1" * 5000 + "x"]
    got = engine_values(
        {"fn": "cast", "args": ["s"], "to": "int"}, [(*ZERO_ROW[:5], s) for s in texts]
    )
    ones = sum(10**k for k in range(5000)) % 2**64  # 8198552921648689607: below 2**63
    assert got == [ones, -ones, 0]


@settings(max_examples=50, deadline=None)
@given(
    names=st.lists(st.text(min_size=1, max_size=8), min_size=0, max_size=6, unique=True),
    n=st.integers(0, 5),
)
@example(names=["a'b", 'c"d', "e\\f", "}{", "x\n", "é"], n=2)
def test_rows_decode_as_dicts_of_their_columns(names: list[str], n: int) -> None:
    """Rows come out as dicts keyed by the column names, whatever characters the names hold
    (the decoding comprehension is built with the names written in as literals)."""
    interner = StringInterner()
    types = ["int", "string", "float", "bool"]
    schema = Schema.of((name, types[i % 4]) for i, name in enumerate(names))
    columns = []
    for i in range(len(names)):
        t = types[i % 4]
        values = [j * 10 + i for j in range(n)]
        if t == "string":
            columns.append(interner.intern_many([f"s{v}" for v in values]))
        elif t == "float":
            columns.append(np.asarray(values, dtype=np.float64).view(np.int64))
        else:
            columns.append(np.asarray([v % 2 if t == "bool" else v for v in values], np.int64))
    data = np.asarray(columns, dtype=np.int64).reshape(len(names), n)
    rows = decode_rows(data, schema, interner)
    expected = [
        {
            name: (
                f"s{j * 10 + i}"
                if types[i % 4] == "string"
                else float(j * 10 + i)
                if types[i % 4] == "float"
                else bool((j * 10 + i) % 2)
                if types[i % 4] == "bool"
                else j * 10 + i
            )
            for i, name in enumerate(names)
        }
        for j in range(n)
    ]
    assert rows == expected
    assert [[type(v) for v in r.values()] for r in rows] == [
        [type(v) for v in r.values()] for r in expected
    ]
