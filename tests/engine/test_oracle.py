"""The oracle: for random dataflows and update streams, the output accumulated at every
complete time equals a from-scratch evaluation of the inputs accumulated at that time.

Streams carry many distinct times per step, retractions, multiplicities other than one,
updates sent ahead of the frontier, and (in the 2-D test) partially ordered input times.
Traces compact as frontiers advance (every reader follows its frontier)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Antichain, Graph, col, parallel, sort_kernels
from engine.operators import join as join_mod
from engine.trace import spine as spine_mod
from tests.engine.reference import Tree, build, evaluate, trees
from tests.engine.splitting import every_call_split

SETTINGS = settings()

update = st.tuples(
    st.sampled_from("AB"),
    st.integers(0, 4),
    st.integers(0, 4),
    st.integers(0, 3),
    st.sampled_from([1, 1, 1, -1, 2]),
)
steps_1d = st.lists(
    st.tuples(st.integers(1, 3), st.lists(update, max_size=6)), min_size=1, max_size=6
)


def _accumulate(updates: list, leq) -> dict[str, Counter]:
    acc: dict[str, Counter] = {"A": Counter(), "B": Counter()}
    for name, x, y, t, d in updates:
        if leq(t):
            acc[name][(x, y)] += d
    return acc


def _output_at(captured: list, leq) -> Counter:
    out: Counter = Counter()
    for row, t, d in captured:
        if leq(t):
            out[row] += d
    return Counter({k: v for k, v in out.items() if v})


def _drain(cap, captured: list) -> None:
    b = cap.drain()
    for i in range(len(b)):
        t = tuple(int(v) for v in b.times[:, i])
        captured.append(((int(b.data[0, i]), int(b.data[1, i])), t, int(b.diffs[i])))


def _setup(tree: Tree, dims: int):
    g = Graph()
    ha, a = g.new_input([("x", "int"), ("y", "int")], dims=dims, name="A")
    hb, b = g.new_input([("x", "int"), ("y", "int")], dims=dims, name="B")
    cap = build(tree, {"A": a, "B": b}).capture()
    return g, {"A": ha, "B": hb}, cap


@SETTINGS
@given(trees(), steps_1d)
def test_oracle_one_dimensional_times(tree: Tree, steps: list) -> None:
    _check_1d(tree, steps)


def _check_1d(tree: Tree, steps: list) -> None:
    g, handles, cap = _setup(tree, 1)
    frontier, sent, captured = 0, [], []
    for advance, ups in steps:
        for name, x, y, dt, d in ups:
            t = frontier + dt  # at or beyond the frontier, sometimes ahead of the next one
            handles[name].send_rows([(x, y)], t, d)
            sent.append((name, x, y, t, d))
        new = frontier + advance
        for h in handles.values():
            h.advance_to(new)
        g.step()
        _drain(cap, captured)
        for t in range(frontier, new):
            expect = evaluate(tree, _accumulate(sent, lambda s, t=t: s <= t))
            got = _output_at(captured, lambda s, t=t: s[0] <= t)
            assert got == expect, f"time {t}: {tree}"
        frontier = new


times2 = st.tuples(st.integers(0, 3), st.integers(0, 3))
steps_2d = st.lists(
    st.tuples(
        st.lists(times2, min_size=1, max_size=2),
        st.lists(
            st.tuples(
                st.sampled_from("AB"),
                st.integers(0, 4),
                st.integers(0, 4),
                times2,
                st.sampled_from([1, -1, 2]),
            ),
            max_size=6,
        ),
    ),
    min_size=1,
    max_size=5,
)


@SETTINGS
@given(trees(max_depth=2), steps_2d)
def test_oracle_two_dimensional_times(tree: Tree, steps: list) -> None:
    _check_2d(tree, steps)


def _check_2d(tree: Tree, steps: list) -> None:
    g, handles, cap = _setup(tree, 2)
    frontier = Antichain.minimum(2)
    sent, captured = [], []
    grid = [(a, b) for a in range(6) for b in range(6)]
    for targets, ups in steps:
        for name, x, y, t, d in ups:
            tt = np.asarray(t, dtype=np.int64).reshape(2, 1)
            if not frontier.beyond(tt)[0]:
                continue
            handles[name].send_rows([(x, y)], list(t), d)
            sent.append((name, x, y, t, d))
        proposal = Antichain(targets)
        if frontier.precedes(proposal):
            frontier = proposal
            for h in handles.values():
                h.advance_to(frontier)
        g.step()
        _drain(cap, captured)
        for t in grid:
            if frontier.beyond(np.asarray(t, dtype=np.int64).reshape(2, 1))[0]:
                continue
            le = lambda s, t=t: s[0] <= t[0] and s[1] <= t[1]  # noqa: E731
            expect = evaluate(tree, _accumulate(sent, le))
            got = _output_at(captured, le)
            assert got == expect, f"time {t}: {tree}"


@contextmanager
def _every_sort_packed() -> Iterator[None]:
    """Packed-key sorts for every size (normally only from ``PACKED_FROM`` rows, which the
    small streams of these tests rarely reach)."""
    saved = sort_kernels.PACKED_FROM
    sort_kernels.PACKED_FROM = 0
    try:
        yield
    finally:
        sort_kernels.PACKED_FROM = saved


@SETTINGS
@given(trees(max_depth=2), steps_1d, steps_2d)
def test_oracle_with_every_sort_packed(tree: Tree, steps1: list, steps2: list) -> None:
    with _every_sort_packed():
        _check_1d(tree, steps1)
        _check_2d(tree, steps2)


@SETTINGS
@given(trees(max_depth=2), steps_1d, steps_2d)
def test_oracle_with_traces_settling_after_every_step(
    tree: Tree, steps1: list, steps2: list
) -> None:
    """Every trace that got half its records in a step is merged into one batch at the
    step's end (normally only from ``SETTLE_FROM`` records: bulk loads)."""
    saved = spine_mod.SETTLE_FROM
    spine_mod.SETTLE_FROM = 0
    try:
        _check_1d(tree, steps1)
        _check_2d(tree, steps2)
    finally:
        spine_mod.SETTLE_FROM = saved


@SETTINGS
@given(trees(max_depth=2), steps_1d, steps_2d)
def test_oracle_with_every_merge_on_the_merge_thread(
    tree: Tree, steps1: list, steps2: list
) -> None:
    """Every trace merge of two batches runs on the merge thread while the step goes on
    reading both (normally only a small step's merges of ``BACKGROUND_FROM`` records), and
    no small batch waits to be merged with the next."""
    names = ("BACKGROUND_FROM", "BACKGROUND_STEP", "SMALL_RECORDS")
    saved = [getattr(spine_mod, name) for name in names], parallel._THREADS
    for name, value in zip(names, (0, 1 << 62, 0), strict=True):
        setattr(spine_mod, name, value)
    parallel._THREADS = 2
    try:
        _check_1d(tree, steps1)
        _check_2d(tree, steps2)
    finally:
        for name, value in zip(names, saved[0], strict=True):
            setattr(spine_mod, name, value)
        parallel._THREADS = saved[1]


@SETTINGS
@given(trees(max_depth=2), steps_1d, steps_2d)
def test_oracle_with_every_step_and_merge_split_in_two(
    tree: Tree, steps1: list, steps2: list
) -> None:
    """Every one-call reduce step, trace merge, packed arrangement and join runs as two key
    ranges on two threads (normally only big ones do)."""
    with every_call_split():
        _check_1d(tree, steps1)
        _check_2d(tree, steps2)


@SETTINGS
@given(trees(max_depth=2), steps_1d, steps_2d, st.sampled_from([0, 1, 3, 8]))
def test_oracle_with_every_join_in_parts(tree: Tree, steps1: list, steps2: list, most: int) -> None:
    """Every join makes its record pairs ``most`` at a time, each part consolidated, a key
    a few records at a time where it has more (normally only from 2M pairs)."""
    saved = join_mod.PAIRS_PER_PART
    join_mod.PAIRS_PER_PART = most
    try:
        _check_1d(tree, steps1)
        _check_2d(tree, steps2)
    finally:
        join_mod.PAIRS_PER_PART = saved


@SETTINGS
@given(trees(max_depth=2), st.lists(update, min_size=1, max_size=12))
def test_batching_never_changes_results(tree: Tree, ups: list) -> None:
    """k updates at k distinct times in one step == k single-time steps, update for update."""
    ups = [(n, x, y, i, d) for i, (n, x, y, _, d) in enumerate(ups)]
    results = []
    for one_step in (True, False):
        g, handles, cap = _setup(tree, 1)
        captured: list = []
        if one_step:
            for n, x, y, t, d in ups:
                handles[n].send_rows([(x, y)], t, d)
            for h in handles.values():
                h.advance_to(len(ups))
            g.step()
            _drain(cap, captured)
        else:
            for n, x, y, t, d in ups:
                handles[n].send_rows([(x, y)], t, d)
                for h in handles.values():
                    h.advance_to(t + 1)
                g.step()
                _drain(cap, captured)
        c: Counter = Counter()
        for row, t, d in captured:
            c[(row, t)] += d
        results.append(Counter({k: v for k, v in c.items() if v}))
    assert results[0] == results[1]


def test_nested_iterate_reads_the_enclosing_variable() -> None:
    """A nested loop whose initial value comes from outside but whose body reads a variable
    of the enclosing loop nests inside that loop (found by the random-plan suite)."""
    from engine import Graph, iterate

    g = Graph()
    h, a = g.new_input([("x", "int")])

    def outer(v: dict) -> dict:
        w = v["w"]

        def inner(u: dict) -> dict:
            step = u["u"].join(w, on=[("x", "x")], columns={"x": "left.x"})
            return {"u": u["u"].concat(step.select(x=(col("x") + 1) % 4)).distinct()}

        nested = iterate({"u": a}, inner, within=w.scope)["u"]
        return {"w": w.concat(nested).distinct()}

    out = iterate({"w": a}, outer)["w"].capture()
    h.send_rows([(0,)], 0)
    h.advance_to(1)
    g.step()
    got = out.drain()
    assert sorted(got.data[0].tolist()) == [0, 1, 2, 3]
