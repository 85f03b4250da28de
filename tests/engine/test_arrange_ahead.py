"""A batch arranged ahead of its step (``InputHandle.arrange_ahead``): the step inserts the
same trace batch it would have built, and everything downstream sees the same updates."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Graph, GraphError, TimeError
from engine.batch import UpdateBatch

COLUMNS = [("a", "int"), ("b", "int"), ("x", "float"), ("s", "string")]


def _graph(dims: int):  # type: ignore[no-untyped-def]
    g = Graph()
    h, c = g.new_input(COLUMNS, dims, "t")
    arr = c.arrange_by_self(name="t")
    counts = c.count(["a"]).capture()
    joined = c.join(c.select(a="a", y="b"), on=[("a", "a")]).capture()
    # a join that seeks in the arrangement itself, as a view's join of a table does
    probe_in, probe = g.new_input(COLUMNS, dims, "probe")
    seeks = probe.arrange_by_self().join(arr).capture()
    return g, h, arr, counts, (joined, probe_in, seeks)


def _rows(batch: UpdateBatch) -> Counter:
    c: Counter = Counter()
    for i in range(len(batch)):
        key = (tuple(batch.data[:, i].tolist()), tuple(batch.times[:, i].tolist()))
        c[key] += int(batch.diffs[i])
    return Counter({k: v for k, v in c.items() if v})


def _batch(g: Graph, n: int, seed: int, dims: int, t: int) -> UpdateBatch:
    rng = np.random.default_rng(seed)
    ids = g.interner.intern_many([f"s{i}" for i in range(7)])
    data = np.empty((4, n), dtype=np.int64)
    data[0] = rng.integers(0, max(1, n // 3), n)  # repeated rows, to consolidate
    data[1] = rng.integers(-3, 3, n)
    data[2] = np.float64(0.5).view(np.int64) + rng.integers(0, 2, n)
    data[3] = ids[rng.integers(0, 7, n)]
    diffs = rng.integers(-2, 3, n).astype(np.int64)
    times = np.full((dims, n), t, dtype=np.int64)
    return UpdateBatch(data, times, diffs)


def _run(n: int, seed: int, dims: int, ahead: bool):  # type: ignore[no-untyped-def]
    g, h, arr, counts, joined = _graph(dims)
    one, two = (1,) * dims, (2,) * dims
    h.send_rows([(1, 2, 0.5, "s1"), (4, -1, 1.5, "s2")], one)  # something there already
    h.advance_to(two)
    g.step()
    b = _batch(g, n, seed, dims, 3)
    pre = h.arrange_ahead(arr.op, b.data, b.diffs) if ahead else None
    h.send(b, pre)
    h.advance_to((4,) * dims)
    g.step()
    delta, content = arr.op.delta, arr.op.spine.content()
    joined, probe_in, seeks = joined
    # rows probed later find the records where the step put them, at their time
    some = b.data[:, ::3].copy()
    ones = np.ones(some.shape[1], dtype=np.int64)
    probe_in.send(UpdateBatch(some, np.full((dims, some.shape[1]), 5, dtype=np.int64), ones))
    probe_in.advance_to((6,) * dims)
    h.advance_to((6,) * dims)
    g.step()
    late = g.import_arrangement(arr).count(["s"]).capture()  # a dataflow built afterwards
    g.step()
    outputs = [_rows(x.drain()) for x in (counts, joined, seeks, late)]
    return delta, content, *outputs


def _same(x, y) -> None:  # type: ignore[no-untyped-def]
    for f in ("codes", "keys", "offsets", "vals", "times", "diffs"):
        assert np.array_equal(getattr(x, f), getattr(y, f)), f


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 600), seed=st.integers(0, 2**16), dims=st.sampled_from([1, 2]))
def test_a_batch_arranged_ahead_is_the_batch_its_step_would_arrange(
    n: int, seed: int, dims: int
) -> None:
    before, after = _run(n, seed, dims, False), _run(n, seed, dims, True)
    if before[0] is None:  # every update cancelled
        assert after[0] is None
    else:
        _same(before[0], after[0])
    _same(before[1], after[1])
    assert before[2:] == after[2:]


@pytest.mark.parametrize("n", [20_000, 300_000])  # the packed arrangement, in two halves
def test_a_big_batch_arranged_ahead(n: int) -> None:
    before, after = _run(n, 7, 1, False), _run(n, 7, 1, True)
    _same(before[0], after[0])
    _same(before[1], after[1])
    assert before[2:] == after[2:]


def test_two_batches_in_one_step_are_arranged_in_the_step() -> None:
    """Only a lone batch's records are taken as arranged: two sent before one step are
    concatenated and arranged together."""
    results = []
    for ahead in (False, True):
        g, h, arr, counts, _ = _graph(1)
        b1, b2 = _batch(g, 300, 1, 1, 0), _batch(g, 200, 2, 1, 0)
        h.send(b1, h.arrange_ahead(arr.op, b1.data, b1.diffs) if ahead else None)
        h.send(b2)
        h.advance_to(1)
        g.step()
        results.append((arr.op.spine.content(), _rows(counts.drain())))
    _same(results[0][0], results[1][0])
    assert results[0][1] == results[1][1]


def test_records_arranged_ahead_must_fit_their_batch() -> None:
    g, h, arr, counts, _ = _graph(1)
    b = _batch(g, 50, 3, 1, 0)
    pre = h.arrange_ahead(arr.op, b.data, b.diffs)
    with pytest.raises(GraphError, match="another input or other arrays"):
        h.send(UpdateBatch(b.data.copy(), b.times, b.diffs), pre)
    spread = b.times.copy()
    spread[0, 0] = 1
    with pytest.raises(TimeError, match="one time"):
        h.send(UpdateBatch(b.data, spread, b.diffs), pre)
    h2, _ = g.new_input(COLUMNS, 1, "u")
    with pytest.raises(GraphError, match="another input or other arrays"):
        h2.send(b, pre)
    with pytest.raises(GraphError, match="an arrangement of this input"):
        h2.arrange_ahead(arr.op, b.data, b.diffs)
    with pytest.raises(GraphError, match="an arrangement of this input"):
        h.arrange_ahead(counts, b.data, b.diffs)
    h.advance_to(1)
    g.step()  # nothing refused was buffered
    assert arr.op.spine.records() == 0 and not counts.drain().diffs.shape[0]
