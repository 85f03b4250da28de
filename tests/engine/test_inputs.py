"""Input handles: what a batch may hold, and that a rejected batch leaves no trace."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from engine import Graph
from engine.errors import SchemaError, TimeError
from engine.operators.input import InputHandle


def test_a_batch_with_a_time_before_the_frontier_is_rejected_whole() -> None:
    g = Graph()
    h, c = g.new_input([("a", "int")], name="t")
    out = c.capture()
    h.advance_to(5)
    with pytest.raises(TimeError, match="time 4 is before the input frontier"):
        h.send_columns([np.array([1, 2, 3])], np.array([5, 4, 6]), 1)
    h.send_columns([np.array([7, 8])], 5, np.array([2, -1]))
    h.send_columns([np.array([9])], np.array([6]), 3)
    h.advance_to(7)
    g.step()
    got = out.drain()
    rows = zip(got.data[0].tolist(), got.times[0].tolist(), got.diffs.tolist(), strict=True)
    assert sorted(rows) == [
        (7, 5, 2),
        (8, 5, -1),
        (9, 6, 3),
    ]


def test_diffs_and_times_must_match_the_rows() -> None:
    g = Graph()
    h, _ = g.new_input([("a", "int")], name="t")
    with pytest.raises(SchemaError, match="3 diffs for 2 row"):
        h.send_columns([np.array([1, 2])], 0, np.array([1, 1, 1]))
    with pytest.raises(TimeError, match="3 times for 2 row"):
        h.send_columns([np.array([1, 2])], np.array([0, 1, 2]), 1)
    assert h.op.buffer == []


def test_an_update_at_the_time_kept_for_no_time_is_refused() -> None:
    """The kernels keep 2**63 - 1 for "no time": an update there is a TimeError, and the
    input is left as it was; a frontier may name it."""
    g = Graph()
    h, c = g.new_input([("x", "int")])
    out = c.distinct().capture()
    with pytest.raises(TimeError, match="below 2"):
        h.send_rows([(1,), (2,)], 2**63 - 1)
    h.send_rows([(1,)], 2**63 - 2)
    h.advance_to(2**63 - 1)
    g.step()
    b = out.drain()
    assert b.data.tolist() == [[1]] and b.times.tolist() == [[2**63 - 2]]


@pytest.mark.parametrize(
    ("send", "error", "match"),
    [
        # rows of the wrong length or kind: refused, not cut or padded (audit 107)
        (lambda h: h.send_rows([(1, 2, 3)], 1), SchemaError, "row 0 must be a tuple of 2"),
        (lambda h: h.send_rows([(1,)], 1), SchemaError, "row 0"),
        (lambda h: h.send_rows([{"a": 1, "s": "x"}], 1), SchemaError, "row 0"),
        # values of another kind: refused, not truncated or parsed
        (lambda h: h.send_rows([(2.7, "x")], 1), SchemaError, "'a' takes int values"),
        (lambda h: h.send_rows([("5", "x")], 1), SchemaError, "'a' takes int values"),
        (lambda h: h.send_rows([(None, "x")], 1), SchemaError, "'a' takes int values"),
        (lambda h: h.send_rows([(2**64, "x")], 1), SchemaError, "fit in 64-bit"),
        (lambda h: h.send_rows([(True, "x")], 1), SchemaError, "'a' takes int values, not True"),
        (lambda h: h.send_columns([[1, True], [0, 0]], 1), SchemaError, "not True"),
        (lambda h: h.send_columns([5, [0]], 1), SchemaError, "one list or 1-D array"),
        (lambda h: h.send_rows([(1, 1)], 1), SchemaError, "'s' is a string"),
        (lambda h: h.send_columns([[1, 2], [0]], 1), SchemaError, "'s' has 1 value"),
        (lambda h: h.send_columns([[1], [10**6]], 1), SchemaError, "interner never gave"),
        # diffs and times that are no integers
        (lambda h: h.send_rows([(1, "x")], 1, diff=0.5), SchemaError, "diffs take int"),
        (lambda h: h.send_rows([(1, "x")], 1.5), TimeError, "times must be integers"),
        (lambda h: h.send_rows([(1, "x")], "3"), TimeError, "times must be integers"),
        (lambda h: h.send_rows([(1, "x")], 2**64), TimeError, "times must be integers"),
        (lambda h: h.send_rows([(1, "x")], [1, 2]), TimeError, "2 times for 1 row"),
        (lambda h: h.advance_to(1.5), TimeError, "a frontier's times"),
        (lambda h: h.send_rows([(1, "x"), (2, "x")], [1, True]), TimeError, "not True"),
        (lambda h: h.send_rows([(1, "x")], 1, diff=[True]), SchemaError, "diffs take int"),
    ],
)
def test_a_batch_of_the_wrong_kind_is_refused_and_nothing_sent(
    send: Callable[[InputHandle], None], error: type[Exception], match: str
) -> None:
    g = Graph()
    h, c = g.new_input([("a", "int"), ("s", "string")])
    out = c.capture()
    with pytest.raises(error, match=match):
        send(h)
    h.send_rows([(7, "y")], 1)
    h.advance_to(2)
    g.step()
    assert out.drain().data.shape == (2, 1)  # the good batch alone


def test_a_bool_column_takes_bools_and_a_float_column_ints() -> None:
    g = Graph()
    h, c = g.new_input([("b", "bool"), ("f", "float")])
    out = c.distinct().capture()
    with pytest.raises(SchemaError, match="'b' takes bool values"):
        h.send_rows([(5, 1.0)], 0)
    h.send_rows([(True, 1), (True, 1.0)], 0)  # one row: the int is the same float
    h.advance_to(1)
    g.step()
    assert out.drain().diffs.tolist() == [1]
    with pytest.raises(SchemaError, match="unknown column type 'text'"):
        g.new_input([("x", "text")])
    with pytest.raises(TimeError, match="at least 1 coordinate, not 0"):
        g.new_input([("x", "int")], dims=0)


def test_per_row_times_of_two_coordinates_are_one_time_per_row() -> None:
    """Audit 108: with as many rows as coordinates, ``[(0, 5), (1, 6)]`` was read as the
    coordinates' rows, putting the rows at (0, 1) and (5, 6)."""
    g = Graph()
    h, c = g.new_input([("x", "int")], dims=2)
    out = c.capture()
    h.send_rows([(100,), (200,)], [(0, 5), (1, 6)])
    h.send_columns([np.array([300])], [[2, 7]])
    h.send_columns([np.array([400, 500])], np.array([[3, 4], [8, 9]]))  # an array: (dims, n)
    h.send_columns([np.array([], dtype=np.int64)], [])
    h.advance_to([[10, 10]])
    g.step()
    b = out.drain()
    got = sorted(zip(b.data[0].tolist(), map(tuple, b.times.T.tolist()), strict=True))
    assert got == [(100, (0, 5)), (200, (1, 6)), (300, (2, 7)), (400, (3, 8)), (500, (4, 9))]
