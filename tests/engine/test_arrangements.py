"""Arrangements shared between dataflows, and dataflows built after data arrived."""

from __future__ import annotations

from collections import Counter

import pytest

import engine.trace.spine as spine_mod
from engine import Antichain, Graph


def _rows(batch) -> Counter:  # type: ignore[no-untyped-def]
    c: Counter = Counter()
    for i in range(len(batch)):
        c[(tuple(int(x) for x in batch.data[:, i]), int(batch.times[0, i]))] += int(batch.diffs[i])
    return Counter({k: v for k, v in c.items() if v})


def test_a_dataflow_built_later_starts_from_the_arrangement() -> None:
    """A reader held at the latest complete time keeps the content final there, so a dataflow
    built later answers at once (the service holds such a reader on every arrangement)."""
    g = Graph()
    h, edges = g.new_input([("src", "int"), ("dst", "int")])
    by_src = edges.arrange_by_key(["src"])
    held = by_src.op.spine.reader(Antichain([(0,)]), name="history")
    early = by_src.as_collection().count(["src"]).capture()
    h.send_rows([(1, 2), (1, 3), (2, 3)], 0)
    h.advance_to(1)
    g.step()
    h.send_rows([(1, 4)], 1)
    h.advance_to(2)
    g.step()
    held.advance(Antichain([(1,)]))
    early_out = _rows(early.drain())
    # a new dataflow on the same arrangement, built now: same answer from the content
    late = g.import_arrangement(by_src).count(["src"]).capture()
    g.step()
    late_now = Counter()
    for (row, _), d in _rows(late.drain()).items():
        late_now[row] += d
    early_now = Counter()
    for (row, _), d in early_out.items():
        early_now[row] += d
    assert +late_now == +early_now == Counter({(1, 3): 1, (2, 1): 1})
    # and both follow new updates identically, at the update's time
    h.send_rows([(2, 5)], 2)
    h.advance_to(3)
    g.step()
    assert _rows(early.drain()) == _rows(late.drain()) == Counter({((2, 1), 2): -1, ((2, 2), 2): 1})


def test_hydrating_from_a_frontier_computes_no_earlier_history() -> None:
    g = Graph()
    h, c = g.new_input([("x", "int")])
    arr = c.arrange_by_self()
    for t in range(5):
        h.send_rows([(t,)], t)
    h.advance_to(5)
    g.step()
    late = arr.as_collection(hydrate_since=Antichain([(4,)])).capture()
    g.step()
    got = _rows(late.drain())
    assert {t for (_, t) in got} == {4}  # everything at or before 4 arrives at 4
    assert sorted(row[0] for (row, _) in got) == [0, 1, 2, 3, 4]


def test_readers_hold_back_compaction() -> None:
    g = Graph()
    h, c = g.new_input([("x", "int")])
    arr = c.arrange_by_self()
    held = arr.op.spine.reader(Antichain([(0,)]), name="test")
    for t in range(3):
        h.send_rows([(t,)], t)
        h.advance_to(t + 1)
        g.step()
    arr.op.spine.compact()
    assert sorted(arr.op.spine.content().times[0].tolist()) == [0, 1, 2]  # held at 0
    held.advance(Antichain([(3,)]))
    arr.op.spine.compact()
    assert sorted(arr.op.spine.content().times[0].tolist()) == [3, 3, 3]


def test_a_loop_lets_its_traces_compact_once_its_outer_times_are_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When a loop has run every outer time before its frontier, the traces inside it may
    compact to that frontier at once, so the step's own end (``Spine.settle``) folds the
    step's history away; waiting for the next step kept a whole step of history around."""
    from bench.reach import build_reach_graph
    from engine.operators.iterate import LoopRegion

    monkeypatch.setattr(spine_mod, "SETTLE_FROM", 1)  # this step is a bulk step, if small
    g, roots_in, edges_in, reach = build_reach_graph()  # the loop of seed 000's benchmark
    roots_in.send_rows([(0,)], 0)
    edges_in.send_rows([(i, i + 1) for i in range(6)], 0)
    for h in (roots_in, edges_in):
        h.advance_to(1)
    g.step()
    for t in range(1, 4):  # cut the path, then mend it, at three times in one step
        edges_in.send_rows([(t, t + 1)], t, -1)
        edges_in.send_rows([(t, t + 1)], t + 1, 1)
    for h in (roots_in, edges_in):
        h.advance_to(6)
    g.step()
    assert reach.upper == Antichain([(6,)])  # every time before 6 is final
    loop = next(op for op in g.scope.operators if isinstance(op, LoopRegion))
    spines = [op.spine for op in loop.inner.operators if hasattr(op, "spine")]
    assert spines
    for spine in spines:
        assert spine.since() == Antichain([(6, 0)]), spine.name
        assert len(spine.batches) <= 1, spine.name  # settled: the history folded away
        assert set(spine.content().times[0].tolist()) <= {6}, spine.name
    final = Counter()
    for (row, _), d in _rows(reach.drain()).items():
        final[row] += d
    assert +final == Counter({(0, n): 1 for n in range(7)})


def test_a_reduce_output_arranged_by_its_groups_is_the_reduce_itself() -> None:
    """A join on a reduce's group columns reads the reduce's own arrangement (no second one
    of the same updates); by other columns, or with a name of its own, it is arranged anew.
    The self-join of the counts, through the one arrangement, matches counts squared."""
    g = Graph()
    h, rows = g.new_input([("k", "int"), ("v", "int")])
    counts = rows.count(["k"])
    assert counts.arrange_by_key(["k"]).op is counts.op
    assert counts.arrange_by_key(["count"]).op is not counts.op
    assert counts.arrange_by_key(["k"], name="mine").op is not counts.op
    squared = counts.join(
        counts, on=[("k", "k")], columns={"k": "left.k", "n": "left.count", "m": "right.count"}
    )
    out = squared.capture()
    got: Counter = Counter()
    contents: Counter = Counter()
    for t, batch in enumerate([[(1, 5), (1, 6), (2, 7)], [(2, 8), (3, 1)], [(1, 9)]]):
        h.send_rows(batch, t)
        h.advance_to(t + 1)
        g.step()
        for (row, _), d in _rows(out.drain()).items():
            got[row] += d
        contents.update(k for k, _ in batch)
        want = Counter({(k, n, n): 1 for k, n in contents.items()})
        assert +got == want, t


def test_a_build_reads_the_arrangements_offered_to_it() -> None:
    """Inside ``Graph.building(provide)``, the arrangement ``provide`` offers for a key (a
    service's shared arrangement of a table) is read in place of a new one, by inner, semi
    and anti joins alike, and the right side is arranged once for all three. Inside a loop,
    a collection arranged by the same columns again reads the first arrangement."""
    from engine.operators.arrange import Arrange

    g = Graph()
    hl, left = g.new_input([("k", "int"), ("v", "int")])
    hr, right = g.new_input([("k", "int")])
    kept = left.arrange_by_key(["k"], name="kept")  # named: a new one, never shared

    def offer(key):  # type: ignore[no-untyped-def]
        kind, op_id, cols = key
        return kept.op if (kind, op_id, cols) == ("arrange", id(left.op), (0,)) else None

    with g.building(offer):
        mark = len(g.scope.operators)
        outs = {
            how: left.join(right, on=[("k", "k")], how=how).capture()
            for how in ("inner", "semi", "anti")
        }
        made = g.operators_since(mark)
    assert sum(isinstance(op, Arrange) for op in made) == 1  # the right side's
    assert sum(any(i is kept.op for i in op.inputs) for op in made) == 3  # the joins
    assert [op.name for op in made].count("present") == 1
    hl.send_rows([(1, 10), (2, 20), (2, 21)], 0)
    hr.send_rows([(2,), (3,)], 0)
    hl.advance_to(1)
    hr.advance_to(1)
    g.step()
    got = {how: {row for (row, _), d in _rows(c.drain()).items() if d} for how, c in outs.items()}
    assert got == {
        "inner": {(2, 20), (2, 21)},
        "semi": {(2, 20), (2, 21)},
        "anti": {(1, 10)},
    }

    scopes = []

    def body(x):  # type: ignore[no-untyped-def]
        scopes.append(x.scope)
        a = x.join(right, on=[("k", "k")], columns={"k": "left.k", "v": "left.v"})
        b = x.join(right, on=[("k", "k")], how="semi")
        c = x.join(right, on=[("k", "k")], how="anti")
        assert x.arrange_by_key(["k"]).op is x.arrange_by_key(["k"]).op
        assert x.arrange_by_self().op is x.arrange_by_key(["k", "v"]).op
        return a.concat(b, c, x.threshold(2)).distinct()

    left.iterate(body)
    inner = scopes[0].operators
    keyed = [op for op in inner if isinstance(op, Arrange)]
    # the var by k and by itself (the threshold's input), the entered right side by k, the
    # distinct's input: once each
    assert sorted(op.name for op in keyed) == sorted(
        ["arrange by [k]", "arrange by [k]", "arrange by self", "arrange by self"]
    ), [op.name for op in keyed]
    assert len({id(op.inputs[0]) for op in keyed}) == 3
    # the semi and the anti join read one set of the right side's keys
    assert [op.name for op in inner].count("present") == 1


def test_the_root_scope_shares_what_it_builds_only_while_building() -> None:
    """Inside ``Graph.building()``, the root scope hands a collection arranged again by the
    same columns the first arrangement, and the same present keys to a semi- and an
    anti-join, as a loop scope always does; outside it (dataflows that come and go share the
    root), every call builds its own."""
    from engine.operators.arrange import Arrange

    g = Graph()
    _, rows = g.new_input([("k", "int"), ("v", "int")])
    _, keys = g.new_input([("k", "int")])
    assert rows.arrange_by_key(["k"]).op is not rows.arrange_by_key(["k"]).op
    with g.building():
        first = rows.arrange_by_key(["k"])
        assert rows.arrange_by_key(["k"]).op is first.op
        assert rows.arrange_by_self().op is rows.arrange_by_key(["k", "v"]).op
        mark = len(g.scope.operators)
        rows.join(keys, on=[("k", "k")], how="semi")
        rows.join(keys, on=[("k", "k")], how="anti")
        made = g.operators_since(mark)
        assert [op.name for op in made].count("present") == 1
        # the left side read the first arrangement; the right one arranged once
        assert sum(isinstance(op, Arrange) for op in made) == 1
    assert rows.arrange_by_key(["k"]).op is not first.op
