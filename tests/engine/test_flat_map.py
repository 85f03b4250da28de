"""flat_map's ranges: exact lengths (no int64 wrap), and a bound on the rows of one step."""

from __future__ import annotations

import numpy as np
import pytest

from engine import Graph, LimitError, StepError
from engine.operators import linear


def _ranges(starts: list[int], stops: list[int]) -> tuple[list[tuple[int, int, int]], Graph]:
    g = Graph()
    h, c = g.new_input([("a", "int"), ("b", "int")], name="t")
    out = c.flat_map("i", "a", "b").capture()
    h.send_columns([np.array(starts), np.array(stops)], 0, 1)
    h.advance_to(1)
    g.step()
    got = out.drain()
    rows = zip(got.data[0].tolist(), got.data[2].tolist(), got.diffs.tolist(), strict=True)
    return sorted(rows), g


def test_ranges_at_the_ends_of_int64() -> None:
    top, bottom = 2**63 - 1, -(2**63)
    rows, _ = _ranges([top - 2, bottom, 5], [top, bottom + 1, 3])
    assert rows == [(bottom, bottom, 1), (top - 2, top - 2, 1), (top - 2, top - 1, 1)]


def test_a_range_whose_length_wraps_int64_is_refused_not_empty() -> None:
    # stop - start is 2**64 - 1, which int64 arithmetic takes for -1 (an empty range)
    with pytest.raises(StepError) as err:
        _ranges([-(2**63)], [2**63 - 1])
    ((_, exc),) = err.value.failures
    assert isinstance(exc, LimitError)
    assert f"{2**64 - 1:,} rows" in str(
        exc
    ) and "[-9223372036854775808, 9223372036854775807)" in str(exc)


def test_the_rows_of_one_step_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(linear, "FLAT_MAP_MOST", 10)
    rows, _ = _ranges([0, 20], [4, 26])  # 4 + 6 rows: at the bound
    assert len(rows) == 10
    for starts, stops, made in (([0], [11], 11), ([0, 20], [5, 26], 11)):
        with pytest.raises(StepError, match=f"flat_map would make {made} rows in one step"):
            _ranges(starts, stops)
