"""The aggregates' one-call step (``reduce_agg``) against the general driver and the truth.

The compiled step must give the same output differences, at the same times, as the general
path (``Reduce._step``), with and without splitting each step in two, for rows whose value
rows repeat a value, negative counts, updates ahead of the frontier and many times per
step; in a loop (connected components by least label) it must also give the right labels at
every time."""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Graph, call, col
from engine.hashing import key_codes
from engine.operators.reduce_agg import agg_step
from engine.operators.reduce_set import set_step
from engine.trace import Layout
from tests.engine.splitting import every_call_split
from tests.engine.test_reduce_paths import _new_times, _reduces, _spine_of

AGGREGATES = {
    "n": ("count", None),
    "s": ("sum", "v"),
    "lo": ("min", "v"),
    "hi": ("max", "v"),
    "nd": ("count_distinct", "v"),
    "any": ("max", "b"),
    "flo": ("min", "f"),
    "fhi": ("max", "f"),
}
FLOATS = (-1.5, 0.0, -0.0, 2.25, float("inf"), float("-inf"))


def _general_steps(reduces: list, one_call: bool) -> list:
    """Count the general driver's steps of ``reduces``; without ``one_call`` they all take it."""
    taken = [0]
    for op in reduces:
        if not one_call:
            op.one_call = None
        step = op._step

        def counted(delta, frontier, step=step) -> None:  # type: ignore[no-untyped-def]
            taken[0] += 1
            step(delta, frontier)

        op._step = counted
    return taken


def _outputs(captured) -> Counter:  # type: ignore[no-untyped-def]
    c: Counter = Counter()
    for i in range(len(captured)):
        row = tuple(int(x) for x in captured.data[:, i])
        c[(row, tuple(int(t) for t in captured.times[:, i]))] += int(captured.diffs[i])
    return Counter({k: v for k, v in c.items() if v})


steps = st.lists(
    st.tuples(
        st.integers(1, 3),  # how far the frontier moves
        st.lists(
            st.tuples(
                st.integers(0, 3),  # k
                st.integers(-2, 3),  # v
                st.integers(0, 1),  # b
                st.integers(0, 2),  # w: rows of one key sharing v
                st.integers(0, 4),  # time ahead of the frontier
                st.sampled_from([1, 1, 2, -1]),
            ),
            max_size=8,
        ),
    ),
    min_size=1,
    max_size=6,
)


def _aggregate_run(steps: list, one_call: bool, split: bool) -> tuple[Counter, int]:
    g = Graph()
    handle, rows = g.new_input(
        [("k", "int"), ("v", "int"), ("b", "bool"), ("w", "int"), ("f", "float")]
    )
    cap = rows.reduce(["k"], AGGREGATES).capture()
    reduces = _reduces(g.scope.operators)
    assert [op.one_call for op in reduces] == [agg_step]
    taken = _general_steps(reduces, one_call)
    frontier = 0
    with every_call_split() if split else nullcontext():
        for move, ups in steps:
            for k, v, b, w, ahead, d in ups:
                f = FLOATS[(v + 2 * w) % len(FLOATS)]
                handle.send_rows([(k, v, bool(b), w, f)], frontier + ahead, d)
            frontier += move
            handle.advance_to(frontier)
            g.step()
        handle.advance_to(frontier + 5)
        g.step()
    return _outputs(cap.drain()), taken[0]


@settings(max_examples=120, deadline=None)
@given(steps)
def test_aggregate_step_equals_the_general_path(steps: list) -> None:
    """count, sum, min, max, count_distinct of ints, max of a bool and min and max of a float
    (infinities, and -0.0 beside 0.0), by key, over rows
    with repeated values and negative counts: the one-call step (never falling back, times
    being one-dimensional), split in two or not, gives what the general driver gives."""
    general, taken = _aggregate_run(steps, one_call=False, split=False)
    assert taken or not general
    for split in (False, True):
        got, taken = _aggregate_run(steps, one_call=True, split=split)
        assert taken == 0
        assert got == general


@pytest.mark.parametrize(
    ("aggregates", "expected"),
    [
        ({"lo": ("min", "v")}, agg_step),
        ({"n": ("count", None), "nd": ("count_distinct", "v")}, agg_step),
        ({"s": ("sum", "f")}, None),  # a float sum rounds: the general path
        ({"lo": ("min", "f"), "hi": ("max", "f")}, agg_step),  # by value, not by their bits
        ({"lo": ("min", "t")}, None),  # strings order by text, not by id
        ({"nd": ("count_distinct", "w")}, None),  # not the first value column
    ],
)
def test_which_aggregates_step_in_one_call(aggregates: dict, expected: object) -> None:
    g = Graph()
    _, rows = g.new_input(
        [("k", "int"), ("v", "int"), ("w", "int"), ("f", "float"), ("t", "string")]
    )
    rows.reduce(["k"], aggregates).capture()
    assert [op.one_call for op in _reduces(g.scope.operators)] == [expected]
    _, rows = g.new_input([("k", "int")])
    rows.distinct().capture()
    assert _reduces(g.scope.operators)[-1].one_call is set_step
    _, keys = g.new_input([("k", "int")])
    rows.semijoin(keys, on=[("k", "k")]).capture()
    assert _reduces(g.scope.operators)[-1].one_call is agg_step  # presence: no aggregates


def _semi_run(steps: list, one_call: bool, split: bool) -> tuple[Counter, int]:
    """Semijoin and antijoin of rows ``(k, v)`` against rows ``(k, w)`` by ``k``."""
    g = Graph()
    left_in, left = g.new_input([("k", "int"), ("v", "int")])
    right_in, right = g.new_input([("k", "int"), ("w", "int")])
    semi = left.semijoin(right, on=[("k", "k")]).select(k="k", v="v", side=0)
    anti = left.antijoin(right, on=[("k", "k")]).select(k="k", v="v", side=1)
    cap = semi.concat(anti).capture()
    taken = _general_steps(_reduces(g.scope.operators), one_call)
    frontier = 0
    with every_call_split() if split else nullcontext():
        for move, ups in steps:
            for k, v, b, w, ahead, d in ups:
                target = right_in if b else left_in
                target.send_rows([(k, v if not b else w)], frontier + ahead, d)
            frontier += move
            left_in.advance_to(frontier)
            right_in.advance_to(frontier)
            g.step()
        left_in.advance_to(frontier + 5)
        right_in.advance_to(frontier + 5)
        g.step()
    return _outputs(cap.drain()), taken[0]


@settings(max_examples=80, deadline=None)
@given(steps)
def test_presence_step_equals_the_general_path(steps: list) -> None:
    """Semijoins and antijoins (a presence reduce of the right side by key, negative counts
    included): the one-call step, split in two or not, gives what the general driver
    gives."""
    general, _ = _semi_run(steps, one_call=False, split=False)
    for split in (False, True):
        got, taken = _semi_run(steps, one_call=True, split=split)
        assert taken == 0
        assert got == general


def _components(n: int, edges: Counter) -> list[int]:
    """The least node of each node's component (undirected), by union-find."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for (a, b), c in edges.items():
        if c > 0:
            ra, rb = find(a), find(b)
            parent[max(ra, rb)] = min(ra, rb)
    return [find(x) for x in range(n)]


def _components_run(n: int, initial: list, changes: list, one_call: bool, split: bool):  # type: ignore[no-untyped-def]
    g = Graph()
    nodes_in, nodes = g.new_input([("node", "int")])
    edges_in, edges = g.new_input([("src", "int"), ("dst", "int")])
    start = nodes.select(node="node", label="node")
    labels = start.iterate(
        lambda lab: (
            lab.join(
                edges, on=[("node", "src")], columns={"node": "right.dst", "label": "left.label"}
            )
            .concat(start)
            .reduce(["node"], {"label": ("min", "label")})
        )
    )
    cap = labels.capture()
    taken = _general_steps(_reduces(g.scope.operators), one_call)
    with every_call_split() if split else nullcontext():
        nodes_in.send_rows([(x,) for x in range(n)], 0)
        edges_in.send_rows([e for a, b in initial for e in ((a, b), (b, a))], 0)
        half = len(changes) // 2
        for lo, hi in ((0, 0), (0, half), (half, len(changes))):  # the load, then two steps
            for t in range(lo + 1, hi + 1):  # one change per time
                a, b, d = changes[t - 1]
                edges_in.send_rows([(a, b), (b, a)], t, d)
            nodes_in.advance_to(hi + 1)
            edges_in.advance_to(hi + 1)
            g.step()
    return cap.drain(), taken[0]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=16),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11), st.booleans()), max_size=12),
)
def test_connected_components_in_one_call_steps(n: int, initial: list, changes: list) -> None:
    """Least labels over an undirected graph (iterate of join, concat and min), with an edge
    added or removed at each of many times in each of two steps after the load: the one-call step, split or not,
    gives the general path's output, and the labels at every time are the components'."""
    initial = [(a % n, b % n) for a, b in initial]
    live = Counter(initial)
    stream = []
    for a, b, add in changes:
        a, b = a % n, b % n
        d = 1 if add or live[(a, b)] <= 0 else -1
        live[(a, b)] += d
        stream.append((a, b, d))
    general, taken = _components_run(n, initial, stream, one_call=False, split=False)
    assert taken
    want = _outputs(general)
    for split in (False, True):
        got, _ = _components_run(n, initial, stream, one_call=True, split=split)
        assert _outputs(got) == want
    live = Counter(initial)
    for t in range(len(stream) + 1):
        if t:
            a, b, d = stream[t - 1]
            live[(a, b)] += d
        acc: Counter = Counter()
        for (row, (tt,)), c in want.items():
            if tt <= t:
                acc[row] += c
        assert {row for row, c in acc.items() if c} == set(enumerate(_components(n, live)))
        assert all(c == 1 for c in acc.values() if c)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_connected_components_of_a_bigger_graph(seed: int) -> None:
    """30 nodes, 25 edges, 40 changes: labels take several rounds to settle, so a step's
    rounds meet the outputs of the earlier steps' later rounds."""
    rng = np.random.default_rng(seed)
    n = 30
    initial = [(int(a), int(b)) for a, b in rng.integers(0, n, size=(25, 2))]
    live = Counter(initial)
    stream = []
    for a, b in rng.integers(0, n, size=(40, 2)):
        d = 1 if rng.random() < 0.5 or live[(int(a), int(b))] <= 0 else -1
        live[(int(a), int(b))] += d
        stream.append((int(a), int(b), d))
    general, _ = _components_run(n, initial, stream, one_call=False, split=False)
    got, taken = _components_run(n, initial, stream, one_call=True, split=False)
    assert taken == 0  # every round's step in one call
    assert _outputs(got) == _outputs(general)


def test_aggregate_step_keeps_a_key_with_many_value_rows() -> None:
    """One key with thousands of value rows (past the insertion sorts), changing at many
    times in one step: the one-call step equals the general path."""
    rng = np.random.default_rng(7)
    ups = [
        (0, int(v), bool(v % 2), int(w), int(t), int(d))
        for v, w, t, d in zip(
            rng.integers(-50, 50, 3000),
            rng.integers(0, 3, 3000),
            rng.integers(0, 40, 3000),
            rng.choice([1, 1, -1], 3000),
            strict=True,
        )
    ]
    stream = [(40, ups)]
    assert _aggregate_run(stream, False, False)[0] == _aggregate_run(stream, True, False)[0]


def _key_codes_sorted(keys: list) -> tuple[np.ndarray, np.ndarray, dict]:
    """One-column keys as a step sees them: codes ascending, keys, and each key's slot."""
    q = np.asarray(keys, dtype=np.int64).reshape(1, -1)
    codes = key_codes(q)
    order = np.argsort(codes, kind="stable")
    k_codes, k_keys = np.ascontiguousarray(codes[order]), np.ascontiguousarray(q[:, order])
    return k_codes, k_keys, {int(k): i for i, k in enumerate(k_keys[0])}


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 2),
    st.integers(0, 2**32 - 1),
    st.integers(0, 90),
    st.integers(1, 12),
    st.booleans(),
)
def test_key_pass_equals_the_general_grid(
    d: int, seed: int, n_hist: int, n_new: int, two_elements: bool
) -> None:
    """``line_agg_differences`` against the general driver's pieces (the full candidate
    grid, accumulations by sorting, the aggregate kernel, the Möbius inversion) over random
    input and output histories: one- and two-dimensional times with records at rounds
    before, at and after ``r``, frontiers of one or two elements, repeated value rows."""
    from engine.interning import StringInterner
    from engine.lattice import Antichain
    from engine.operators.reduce import mobius
    from engine.operators.reduce_agg import (
        COUNT,
        COUNT_DISTINCT,
        MAX,
        MIN,
        SUM,
        line_agg_differences,
    )
    from engine.operators.reduce_kernels import (
        AggregateKernel,
        AggregateSpec,
        KernelContext,
        accumulate_at,
        consolidate_rows,
    )
    from engine.operators.reduce_times import candidate_grid
    from engine.schema import ColumnType
    from engine.trace.seek import gather_spine

    rng = np.random.default_rng(seed)
    r = int(rng.integers(0, 4)) if d == 2 else 0
    felems = [[0, r + 1]] if d == 2 else [[30]]
    if two_elements:
        felems = [*felems, [30, 0]] if d == 2 else [[int(rng.integers(20, 40))]]
    fe = np.asarray(felems, dtype=np.int64)
    specs = [
        AggregateSpec("count", None, ColumnType.INT),
        AggregateSpec("sum", 0, ColumnType.INT),
        AggregateSpec("min", 0, ColumnType.INT),
        AggregateSpec("max", 1, ColumnType.INT),
        AggregateSpec("count_distinct", 0, ColumnType.INT),
    ]
    kernel = AggregateKernel(specs)
    fns = np.array([COUNT, SUM, MIN, MAX, COUNT_DISTINCT], np.int64)
    cols = np.array([-1, 0, 0, 1, 0], np.int64)

    def recs(n: int, nv: int) -> list:
        times = rng.integers(0, 40, size=(n, d))
        if d == 2:
            times[:, 1] = rng.integers(0, r + 3, size=n)
        return [
            (int(rng.integers(0, 5)), *map(int, rng.integers(-2, 3, nv)), *map(int, t), int(c))
            for t, c in zip(times, rng.choice([-1, 1, 1, 2], n), strict=True)
        ]

    ins = _spine_of(Layout.by_key(3, [0]), d, recs(n_hist, 2))
    outs = _spine_of(Layout.by_key(6, [0]), d, recs(n_hist // 2, 5))
    new = sorted(
        {
            (int(k), int(t))
            for k, t in zip(rng.integers(0, 5, n_new), rng.integers(0, 30, n_new), strict=True)
        }
    )
    k_codes, k_keys, slot = _key_codes_sorted(sorted({k for k, _ in new}))
    owner, n_times = _new_times(new, slot, d, r)
    nkeys = k_codes.shape[0]
    inp = gather_spine(k_codes, k_keys, ins.seek_table(), True, 2, d)
    out = gather_spine(k_codes, k_keys, outs.seek_table(), True, 5, d)
    got = line_agg_differences(
        nkeys,
        k_codes,
        k_keys,
        owner,
        n_times,
        ins.seek_table(),
        outs.seek_table(),
        fe,
        True,
        np.full(d - 1, r, np.int64),
        2,
        fns,
        cols,
    )

    grid = candidate_grid(
        nkeys,
        owner,
        n_times,
        np.concatenate([inp[0], out[0]]),
        np.concatenate([inp[2], out[2]], axis=1),
        Antichain([tuple(e) for e in felems]),
    )
    want_out: set = set()
    if len(grid):
        ctx = KernelContext(StringInterner(), (ColumnType.INT, ColumnType.INT))
        g_in = accumulate_at(grid.owner, grid.times, nkeys, inp[0], inp[1], inp[2], inp[3])
        d_g, d_v, d_c = kernel.apply(*g_in, len(grid), ctx)
        o_g, o_v, o_c = accumulate_at(grid.owner, grid.times, nkeys, *out)
        e = consolidate_rows(
            np.concatenate([d_g, o_g]),
            np.concatenate([d_v, o_v], axis=1),
            np.concatenate([d_c, -o_c]),
        )
        c, v, diffs = mobius(grid, *e)
        want_out = {
            (
                int(grid.owner[ci]),
                tuple(map(int, v[:, i])),
                tuple(map(int, grid.times[:, ci])),
                int(x),
            )
            for i, (ci, x) in enumerate(zip(c, diffs, strict=True))
        }
    ko, vals, t0, diffs_, g_owner, g_times = got
    got_out = [
        (
            int(ko[i]),
            tuple(map(int, vals[:, i])),
            (int(t0[i]),) + ((r,) if d == 2 else ()),
            int(diffs_[i]),
        )
        for i in range(ko.shape[0])
    ]
    assert set(got_out) == want_out and len(got_out) == len(want_out)
    assert got_out == sorted(got_out, key=lambda e: (e[0], e[1], e[2]))  # trace order
    got_pending = [(int(o), *map(int, g_times[:, i])) for i, o in enumerate(g_owner)]
    assert got_pending == sorted(
        {(int(o), *map(int, grid.pending_times[:, i])) for i, o in enumerate(grid.pending_owner)}
    )


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=30))
def test_float_keys_order_floats_as_numpy(values: list) -> None:
    """The float aggregates' key of a float's bits orders floats as numpy's ranks do (the
    general path's): -0.0 ties with 0.0, NaNs tie above infinity."""
    from engine.operators.reduce_agg import _float_key

    floats = np.asarray(values, dtype=np.float64)
    keys = [_float_key(int(b)) for b in floats.view(np.int64)]
    _, ranks = np.unique(floats, return_inverse=True)
    for i in range(len(values)):
        for j in range(len(values)):
            assert (keys[i] < keys[j]) == (ranks[i] < ranks[j])


@pytest.mark.parametrize("one_call", [True, False])
@pytest.mark.parametrize("build", ["count", "distinct", "threshold"])
def test_a_count_that_wraps_past_2_63_within_one_step_is_not_positive(
    build: str, one_call: bool
) -> None:
    """A row's count goes 3 * 2**61 at time 0, then 2**63 at time 1, which wraps to -2**63
    (counts wrap at 64 bits): not positive, so the row is absent at time 1, with both times
    in one step. The compiled steps once tested the sign of the unwrapped sum (numba adds
    int64 with LLVM's no-signed-wrap flag) and kept the row."""
    g = Graph()
    handle, rows = g.new_input([("k", "int")])
    if build == "count":
        out = rows.reduce(["k"], {"n": ("count", None)})
    else:
        out = rows.distinct() if build == "distinct" else rows.threshold(2)
    cap = out.capture()
    if not one_call:
        _general_steps(_reduces(g.scope.operators), one_call=False)
    handle.send_rows([(1,)] * 3, 0, 2**61)
    handle.send_rows([(1,)], 1, 2**61)
    handle.advance_to(2)
    g.step()
    got = _outputs(cap.drain())
    at_1 = Counter()
    for (row, (t,)), d in got.items():
        at_1[row] += d if t <= 1 else 0
    first = (1, 3 * 2**61) if build == "count" else (1,)
    assert +at_1 == Counter() and not -at_1
    assert got[(first, (0,))] == 1  # present at time 0


TEXT = st.sampled_from(["", "a", "ab", "b", "\x00", "é", "zz"])


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 5), TEXT, st.integers(-3, 3), st.integers(-2, 3)),
            max_size=8,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_min_max_of_text_and_with_a_float_sum_in_groups_of_one_and_more(
    steps: list[list[tuple[int, str, int, int]]],
) -> None:
    """The general path's min and max (text; ints beside a float sum, which keeps them off
    the compiled step) in groups holding one row beside groups holding several, as rows
    come and go: the output accumulated to each time is the aggregate of the contents."""
    g = Graph()
    h, c = g.new_input([("g", "int"), ("s", "string"), ("v", "int")], name="t")
    aggs = {"lo": ("min", "s"), "hi": ("max", "s"), "ilo": ("min", "v"), "ihi": ("max", "v")}
    out = c.select(g="g", s="s", v="v", f=call("cast", col("v"), to="float"))
    out = out.reduce(["g"], {**aggs, "fs": ("sum", col("f"))}).capture()
    present: Counter[tuple[int, str, int]] = Counter()
    total: Counter[tuple[int, str, str, int, int, float]] = Counter()
    for t, rows in enumerate(steps):
        rows = [r for r in rows if r[3]]
        if rows:
            ids = g.interner.intern_many([s for _, s, _, _ in rows])
            cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in (0, 2)]
            diffs = np.array([r[3] for r in rows], dtype=np.int64)
            h.send_columns([cols[0], ids, cols[1]], t, diffs)
        h.advance_to(t + 1)
        g.step()
        got = out.drain()
        lo, hi = g.interner.lookup_many(got.data[1]), g.interner.lookup_many(got.data[2])
        fs = got.data[5].view(np.float64).tolist()
        for i, d in enumerate(got.diffs.tolist()):
            ints = (int(got.data[3][i]), int(got.data[4][i]))
            total[int(got.data[0][i]), lo[i], hi[i], *ints, fs[i]] += d
        for gr, s, v, d in rows:
            present[gr, s, v] += d
        expect: Counter[tuple[int, str, str, int, int, float]] = Counter()
        for group in {gr for gr, _, _ in present}:
            held = [(s, v, n) for (gr, s, v), n in present.items() if gr == group and n > 0]
            if held:
                texts, ints = [s for s, _, _ in held], [v for _, v, _ in held]
                fsum = float(sum(v * n for _, v, n in held))
                expect[group, min(texts), max(texts), min(ints), max(ints), fsum] += 1
        assert {key: n for key, n in total.items() if n} == expect
