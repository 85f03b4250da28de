"""A loop's output held across its rounds is folded as it grows (``iterate.FOLD_FROM``):
the loop coordinate dropped and consolidated, so that a body whose output changes at every
round holds its live rows, not every round's changes (audit 81: memory grew with rounds
times writes until the loop ended). Folding must not change any output."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Graph, UpdateBatch, col
from engine.operators import iterate as iterate_module
from engine.operators.iterate import _Held


def _shifted(rows: list[tuple[int, int, int]], rounds: int) -> Counter:
    """Rows ``(x, time, diff)`` moved up by one each round for ``rounds`` rounds (a body that
    never converges, cut by ``max_iterations``): the captured outputs by (x, time)."""
    g = Graph()
    h, c = g.new_input([("x", "int")])
    out = c.iterate(lambda v: v.select(x=col("x") + 1), max_iterations=rounds).capture()
    for x, t, d in rows:
        h.send_rows([(x,)], t, d)
    h.advance_to(10)
    g.step()
    b = out.drain()
    got: Counter = Counter()
    for i in range(len(b)):
        got[(int(b.data[0, i]), int(b.times[0, i]))] += int(b.diffs[i])
    return Counter({k: v for k, v in got.items() if v})


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 4), st.sampled_from([1, -1, 2])),
        min_size=1,
        max_size=8,
    ),
    st.integers(1, 30),
)
def test_folding_a_loops_output_changes_nothing(rows: list, rounds: int) -> None:
    """Folded at every round or never, a loop's outputs are the same, and right."""
    saved = iterate_module.FOLD_FROM
    try:
        iterate_module.FOLD_FROM = 1
        folded = _shifted(rows, rounds)
        iterate_module.FOLD_FROM = 1 << 62
        whole = _shifted(rows, rounds)
    finally:
        iterate_module.FOLD_FROM = saved
    assert folded == whole
    want: Counter = Counter()
    for x, t, d in rows:
        want[(x + rounds, t)] += d
    assert whole == Counter({k: v for k, v in want.items() if v})


@pytest.mark.parametrize("rounds", [10, 1000])
def test_a_loops_changing_output_is_held_as_its_live_rows(rounds: int) -> None:
    """Each round retracts a row and inserts the next: once folded, what is held stays
    about the size of the live rows, however many rounds there are."""
    held = _Held(ncols=1, dims=2)
    width = 1 << 12  # rows changing in each round
    saved = iterate_module.FOLD_FROM
    iterate_module.FOLD_FROM = 1 << 14
    try:
        xs = np.arange(width, dtype=np.int64)
        most = 0
        for r in range(rounds):
            data = np.concatenate([xs + r, xs + r + 1]).reshape(1, -1)
            times = np.stack([np.zeros(2 * width, np.int64), np.full(2 * width, r, np.int64)])
            diffs = np.concatenate([np.full(width, -1 if r else 0), np.ones(width)])
            held.add(UpdateBatch(data, times, diffs.astype(np.int64)))
            most = max(most, held.records + len(held.folded or ()))
        result = held.result()
    finally:
        iterate_module.FOLD_FROM = saved
    assert result is not None and result.times.shape[0] == 1
    assert sorted(result.data[0].tolist()) == (xs + rounds).tolist()
    assert (result.diffs == 1).all()
    assert most <= 2 * iterate_module.FOLD_FROM + 2 * width + width
