"""Input handles: what a batch may hold, and that a rejected batch leaves no trace."""

from __future__ import annotations

import numpy as np
import pytest

from engine import Graph
from engine.errors import SchemaError, TimeError


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
    with pytest.raises(ValueError):
        h.send_columns([np.array([1, 2])], 0, np.array([1, 1, 1]))
    with pytest.raises(SchemaError):
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
