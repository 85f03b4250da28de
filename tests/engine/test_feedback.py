"""The compiled feedback of a loop variable (``sort_kernels.feedback_columns``) against
the numpy steps it fuses: ``body - initial`` consolidated, one iteration later, capped."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine.batch import UpdateBatch
from engine.consolidate import consolidate
from engine.sort_kernels import feedback_columns

updates = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 3), st.integers(-2, 2)),
    max_size=30,
)


def batch_of(rows: list[tuple[int, int, int, int]]) -> UpdateBatch:
    """Rows of (value, outer time, iteration, diff)."""
    a = np.asarray(rows, dtype=np.int64).reshape(-1, 4).T
    return UpdateBatch.build(a[:1], a[1:3], a[3])


def counts(data: np.ndarray, times: np.ndarray, diffs: np.ndarray) -> Counter:
    c: Counter = Counter()
    for v, t, i, d in zip(data[0], times[0], times[1], diffs, strict=True):
        c[(int(v), int(t), int(i))] += int(d)
    return c


@given(updates, updates, st.integers(-1, 4))
def test_feedback_is_the_consolidated_difference_one_iteration_later(
    body_rows: list, init_rows: list, cap: int
) -> None:
    body, init = batch_of(body_rows), batch_of(init_rows)
    data, times, diffs, first, last = feedback_columns(
        body.data, body.times, body.diffs, init.data, init.times, init.diffs, cap
    )
    want = consolidate(UpdateBatch.concat([body, init.negate()], 1, 2))
    shifted = want.times + np.array([[0], [1]])
    keep = shifted[1] <= cap if cap >= 0 else np.ones(len(want), dtype=bool)
    assert counts(data, times, diffs) == counts(
        want.data[:, keep], shifted[:, keep], want.diffs[keep]
    )
    assert (diffs != 0).all()
    rows = list(zip(data[0], times[0], times[1], strict=True))
    assert rows == sorted(set(rows))  # consolidated: sorted, distinct
    if len(diffs):
        assert (first, last) == (times[1].min(), times[1].max())
    else:
        assert (first, last) == (0, 0)
