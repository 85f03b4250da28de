"""``Graph.between_rounds``: loops call their hook at each round and stop once it answers
true (an event set from any thread, say), nested loops included; loops of other dataflows,
and loops whose hook was taken back, run as before. ``Graph.step(pause)`` calls ``pause``
between operators and at every round of every loop, for that step only."""

from __future__ import annotations

import threading

import pytest

from engine import Graph, IterationStopped, StepError, col, iterate


def _counting_up(g: Graph, limit: int, nested: bool = False):  # type: ignore[no-untyped-def]
    """A dataflow whose loop never converges (every round moves its one row up by one),
    inside an outer loop if ``nested``; returns its input handle and operators."""
    mark = len(g.scope.operators)
    handle, xs = g.new_input([("x", "int")], name="up")

    def up(v):  # type: ignore[no-untyped-def]
        return iterate({"x": v["x"]}, lambda w: {"x": w["x"].select(x=col("x") + 1)}, None, limit)

    if nested:
        iterate({"x": xs}, lambda v: up(v), None, limit)["x"].capture()
    else:
        up({"x": xs})["x"].capture()
    return handle, g.operators_since(mark)


def _reach(g: Graph):  # type: ignore[no-untyped-def]
    """A converging dataflow beside it: the nodes reachable from node 0."""
    edges_in, edges = g.new_input([("src", "int"), ("dst", "int")], name="edges")
    start = edges.filter(col("src").eq(0)).select(node="src").distinct()
    reach = start.iterate(
        lambda r: (
            r.join(edges, on=[("node", "src")], columns={"node": "right.dst"})
            .concat(start)
            .distinct()
        )
    )
    return edges_in, reach.capture()


def _stopped(exc: pytest.ExceptionInfo[StepError]) -> list[BaseException]:
    return [e for _, e in exc.value.failures if isinstance(e, IterationStopped)]


def test_a_loop_whose_event_is_set_stops_at_its_next_round_and_others_go_on() -> None:
    g = Graph()
    up_in, up_ops = _counting_up(g, limit=1_000_000)
    edges_in, out = _reach(g)
    stop = threading.Event()
    stop.set()
    g.between_rounds(up_ops, stop.is_set)
    up_in.send_rows([(0,)], time=0)
    edges_in.send_rows([(0, 1), (1, 2), (5, 6)], time=0)
    for h in (up_in, edges_in):
        h.advance_to(1)
    with pytest.raises(StepError) as exc:
        g.step()
    (err,) = _stopped(exc)
    assert len(exc.value.failures) == 1
    assert "round 0" in str(err)
    batch = out.drain()
    assert sorted(batch.data[0].tolist()) == [0, 1, 2]  # the other dataflow ran


def test_a_loop_stops_when_another_thread_sets_its_event_nested_loops_too() -> None:
    for nested in (False, True):
        g = Graph()
        # a bound it would take minutes to reach: the event, set soon, ends it first
        up_in, up_ops = _counting_up(g, limit=10_000_000, nested=nested)
        stop = threading.Event()
        g.between_rounds(up_ops, stop.is_set)
        up_in.send_rows([(0,)], time=0)
        up_in.advance_to(1)
        timer = threading.Timer(0.2, stop.set)
        timer.start()
        with pytest.raises(StepError) as exc:
            g.step()
        timer.join()
        (err,) = _stopped(exc)
        assert "round 0" not in str(err)  # it ran until the event came


def test_a_stop_taken_back_leaves_the_loop_as_it_was() -> None:
    g = Graph()
    edges_in, out = _reach(g)
    stop = threading.Event()
    g.between_rounds(g.scope.operators, stop.is_set)
    g.between_rounds(g.scope.operators, None)
    stop.set()
    edges_in.send_rows([(0, 1), (1, 2)], time=0)
    edges_in.advance_to(1)
    g.step()
    assert sorted(out.drain().data[0].tolist()) == [0, 1, 2]


def test_the_hook_runs_at_every_round_of_nested_loops_and_may_do_work_there() -> None:
    g = Graph()
    up_in, up_ops = _counting_up(g, limit=1_000, nested=True)
    calls = []
    g.between_rounds(up_ops, lambda: calls.append(1) is None and len(calls) >= 50)
    up_in.send_rows([(0,)], time=0)
    up_in.advance_to(1)
    with pytest.raises(StepError) as exc:
        g.step()
    assert len(_stopped(exc)) == 1
    assert len(calls) == 50  # the outer loop's first round, then the inner loop's rounds


def test_a_step_pauses_between_operators_and_at_every_round_of_every_loop() -> None:
    g = Graph()
    up_in, xs = g.new_input([("x", "int")], name="up")

    def up(v):  # type: ignore[no-untyped-def]  # 5 rounds up, inside 3 rounds up
        return iterate({"x": v["x"]}, lambda w: {"x": w["x"].select(x=col("x") + 1)}, 5)

    ups = iterate({"x": xs}, lambda v: up(v), 3)["x"].capture()
    edges_in, out = _reach(g)
    ops = len(g.scope.operators)
    calls, rounds = [], []
    g.between_rounds(g.scope.operators, lambda: rounds.append(1) is None and False)
    up_in.send_rows([(0,)], time=0)
    up_in.advance_to(1)
    edges_in.send_rows([(0, 1), (1, 2), (2, 3)], time=0)
    edges_in.advance_to(1)
    g.step(lambda: calls.append(1))
    assert ups.drain().data[0].tolist() == [15]  # the same answers
    assert sorted(out.drain().data[0].tolist()) == [0, 1, 2, 3]
    assert len(rounds) > 4 + 3 * 5 + 4  # the outer loop's, the inner loop's, reachability's
    assert len(calls) == ops + len(rounds)
    paused = len(calls)
    edges_in.send_rows([(3, 4)], time=1)
    edges_in.advance_to(2)
    g.step()  # no pause given: none called, though the loop ran rounds
    assert len(calls) == paused and len(rounds) > paused - ops
    assert out.drain().data[0].tolist() == [4]
