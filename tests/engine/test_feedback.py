"""The compiled feedback of a loop variable (``sort_kernels.feedback_columns``) against
the numpy steps it fuses: ``body - initial`` consolidated, one iteration later, capped."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
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


def assert_consolidated(b: UpdateBatch) -> None:
    rows = list(zip(*b.data.tolist(), *b.times.tolist(), strict=True))
    assert len(rows) == len(set(rows))
    assert (b.diffs != 0).all()


@given(updates)
def test_a_trace_batch_s_updates_are_consolidated_as_marked(rows: list) -> None:
    """A loop variable feeds a body's output back unconsolidated when it is marked
    consolidated: a trace batch's updates are."""
    from engine.trace import Layout, TraceBatch

    b = TraceBatch.from_updates(Layout.by_key(1, [0]), batch_of(rows)).to_updates(
        Layout.by_key(1, [0])
    )
    assert b.consolidated
    assert_consolidated(b)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=14),
    st.lists(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=3), max_size=5),
)
def test_a_reduce_s_output_is_consolidated_as_marked(edges: list, steps: list) -> None:
    """Reachability's distinct (in one compiled call and through the general driver) marks
    its output consolidated, and it is, round after round; so its feedback skips
    consolidating."""
    from bench.reach import build_reach_graph
    from engine.operators.reduce import Reduce

    for one_call in (True, False):
        g, roots_in, edges_in, _ = build_reach_graph()
        reduces = []
        todo = list(g.scope.operators)
        while todo:
            op = todo.pop()
            todo.extend(getattr(getattr(op, "inner", None), "operators", []))
            if isinstance(op, Reduce):
                reduces.append(op)
        seen = []
        for op in reduces:
            if not one_call:
                op.one_call = None
            run = op.run

            def checked(op: Reduce = op, run=run, seen: list = seen) -> None:  # type: ignore[no-untyped-def]
                run()
                if op.output is not None and op.output.consolidated:
                    assert_consolidated(op.output)
                    seen.append(len(op.output))

            op.run = checked  # type: ignore[method-assign]
        roots_in.send_rows([(0,), (3,)], 0)
        edges_in.send_rows(edges, 0)
        live = list(edges)
        for t, batch in enumerate(steps, start=1):
            roots_in.advance_to(t)
            gone = []  # remove edges that are there
            for e in batch:
                if e in live:
                    live.remove(e)
                    gone.append(e)
            edges_in.send_rows(gone, t, -1)
            edges_in.send_rows([(d, s) for s, d in batch], t)  # and add some
            live.extend((d, s) for s, d in batch)
            edges_in.advance_to(t)
            g.step()
        roots_in.advance_to(len(steps) + 1)
        edges_in.advance_to(len(steps) + 1)
        g.step()
        assert seen  # each root reaches itself, at least
