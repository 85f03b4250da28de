"""Smoke test of the scattered-times benchmark: the engine's output, accumulated at sampled
output and grid times, is the from-scratch count and max, in two to four dimensions.

No timing assertions: speed is measured by ``python -m bench.grid``, never in tests.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench import grid


@pytest.mark.parametrize(("rows", "dims"), [(40, 2), (25, 3), (10, 4)])
def test_outputs_match_from_scratch(rows: int, dims: int) -> None:
    got = grid.run(rows, dims, seed=1, verify=True)
    assert got["verified"] is True
    assert got["final_count"] == rows
    assert got["output_times"] >= rows  # each row's own time is a join
    assert got["output_changes"] >= got["output_times"]


def test_from_scratch_counts_and_maxima() -> None:
    b = np.array([3, 7, 5])
    times = np.array([[1, 2, 3], [3, 2, 1]])
    at = np.array([[1, 2, 3, 3, 0], [3, 3, 3, 1, 9]])
    count, most = grid.from_scratch(b, times, at)
    assert count.tolist() == [1, 2, 3, 1, 0]
    assert most.tolist() == [3, 7, 7, 5, -1]


def test_cli_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    grid.main(["--rows", "12", "--dims", "3", "--verify"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["rows"] == 12 and out["verified"] is True
