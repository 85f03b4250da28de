"""Where lifecycles meet: a write parsed for a table that is dropped and made again before
the engine takes it, a write pending while the view it waits on is dropped and another made
under its name, and a view refused at registration while a write is pending."""

from __future__ import annotations

import gc
import json
import time
import weakref
from pathlib import Path

import httpx
import orjson
import pytest
from websockets.sync.client import connect

from service import runtime as runtime_module
from service.errors import NotFound, ServiceError
from service.ingest import parse_write
from service.runtime import Runtime
from service.settings import Settings
from service.views import arrangements_of
from service.writes import WriteCommand
from tests.service.conftest import assert_error, make_table, row_counts, rows, write
from tests.service.server import running_server


def test_a_write_parsed_for_a_dropped_table_is_refused(tmp_path: Path) -> None:
    """The write was checked against the old table's columns; the table now under the name
    has others. It is a 404, not applied (it killed the engine thread), and the engine goes
    on."""
    rt = Runtime(Settings(data_dir=tmp_path))
    rt.start()
    try:
        on_engine = lambda fn: rt.submit(fn).result(timeout=30)  # noqa: E731
        old = {"name": "x", "columns": [{"name": "a", "type": "int"}]}
        on_engine(lambda: rt.catalog.create_table(old))
        shape = rt.table_shape("x")
        parsed = parse_write({"updates": [{"insert": {"a": 1}}]}, shape, rt.interner, 10)
        cmd = WriteCommand("x", parsed, shape=shape)
        on_engine(lambda: rt.drop_table("x"))
        new = {
            "name": "x",
            "columns": [{"name": "a", "type": "string"}, {"name": "b", "type": "int"}],
        }
        on_engine(lambda: rt.catalog.create_table(new))
        rt.submit_write(cmd)
        with pytest.raises(NotFound, match="was dropped after this write arrived"):
            cmd.accepted.result(timeout=30)
        assert on_engine(lambda: rt.catalog.describe_table(rt.catalog.table("x")))["rows"] == 0
    finally:
        rt.stop()


def test_a_pending_write_forgets_a_dropped_view(client: httpx.Client, name: str) -> None:
    """The write to ``a`` waited on view ``v``; ``v`` is dropped and a new ``v`` reads ``b``:
    the write does not wait on it or report ``b``'s rows."""
    a, b, v = f"{name}_a", f"{name}_b", f"{name}_v"
    for t in (a, b):
        make_table(client, t, [("x", "int")], timing="client")
    assert (
        client.post("/v1/views", json={"name": v, "query": {"op": "table", "name": a}}).status_code
        == 201
    )
    pending = write(client, a, {"updates": [{"insert": {"x": 5}, "time": 3}]}, status=202)
    assert client.delete(f"/v1/views/{v}").status_code == 204
    assert (
        client.post("/v1/views", json={"name": v, "query": {"op": "table", "name": b}}).status_code
        == 201
    )
    write(client, a, {"updates": [], "advance_to": 10})
    r = client.get(f"/v1/completions/{pending['token']}")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "done" and r.json()["outputs"] == {}
    write(client, b, {"updates": [{"insert": {"x": 7}, "time": 3}], "advance_to": 10})
    assert client.get(f"/v1/completions/{pending['token']}").json()["outputs"] == {}
    assert row_counts(client, v) == {(("x", 7),): 1}


def test_a_view_refused_at_registration_is_no_failed_view(client: httpx.Client, name: str) -> None:
    """A view whose first contents fail is a 422 and never exists: a write pending meanwhile
    does not list it under ``failed_views``."""
    make_table(client, name, [("x", "int")], timing="client")
    write(client, name, {"updates": [{"insert": {"x": 2**40}, "time": 0}], "advance_to": 1})
    pending = write(client, name, {"updates": [{"insert": {"x": 1}, "time": 3}]}, status=202)
    span = {
        "op": "flat_map",
        "input": {"op": "table", "name": name},
        "as": "i",
        "start": 0,
        "stop": "x",
    }
    r = client.post("/v1/views", json={"name": f"{name}_bad", "query": span})
    assert r.status_code == 422 and r.json()["error"]["code"] == "view_failed", r.text
    done = write(client, name, {"updates": [], "advance_to": 10})
    assert done["status"] == "done"
    body = client.get(f"/v1/completions/{pending['token']}").json()
    assert body["status"] == "done" and "failed_views" not in body, body


def test_a_dropped_view_is_freed_at_once(tmp_path: Path) -> None:
    """A view's arrangements and their readers refer to each other, so only the collector
    frees them; their arrays do not count towards its next pass, which may come much later.
    Dropping the view frees them at once (audit 59: registering and dropping a reachability view over 400k
    edges grew the server by 100-200 MB a cycle)."""
    rt = Runtime(Settings(data_dir=tmp_path))
    rt.start()
    try:
        on_engine = lambda fn: rt.submit(fn).result(timeout=60)  # noqa: E731
        edges = {
            "name": "e",
            "columns": [{"name": "src", "type": "int"}, {"name": "dst", "type": "int"}],
        }
        on_engine(lambda: rt.catalog.create_table(edges))
        hop = {
            "op": "join",
            "left": {"op": "var", "name": "r"},
            "right": {"op": "table", "name": "e"},
            "on": [["dst", "src"]],
            "columns": {"src": "left.src", "dst": "right.dst"},
        }
        reach = {
            "name": "reach",
            "query": {
                "op": "iterate",
                "vars": {"r": {"op": "table", "name": "e"}},
                "body": {
                    "r": {
                        "op": "distinct",
                        "input": {"op": "concat", "inputs": [{"op": "table", "name": "e"}, hop]},
                    }
                },
                "result": "r",
            },
        }
        views = []
        for _ in range(3):
            v = on_engine(lambda: rt.catalog.create_view(reach))
            on_engine(rt.step)
            views.extend(weakref.ref(op.spine) for _, op in arrangements_of(v.ops))
            del v
            gc.collect()  # it has lived long: in the collector's oldest generation, rarely passed
            on_engine(lambda: rt.drop_view("reach"))
        assert len(views) >= 3 and [ref() for ref in views] == [None] * len(views)
    finally:
        rt.stop()


def test_kept_completions_are_out_of_the_collectors_sight(tmp_path: Path) -> None:
    """The finished writes a server remembers (100,000 by default) add nothing for Python's
    collector to walk: kept as dicts and lists (12 objects a one-row write into two views),
    60,000 of them made every full pass, a drop's among them, 0.4-1.1 s longer. Their
    bodies still answer."""
    rt = Runtime(Settings(data_dir=tmp_path))
    rt.start()
    try:
        on_engine = lambda fn: rt.submit(fn).result(timeout=60)  # noqa: E731
        spec = {
            "name": "t",
            "columns": [{"name": "x", "type": "int"}, {"name": "s", "type": "string"}],
        }
        on_engine(lambda: rt.catalog.create_table(spec))
        on_engine(
            lambda: rt.catalog.create_view({"name": "v", "query": {"op": "table", "name": "t"}})
        )
        select = {"op": "select", "input": {"op": "table", "name": "t"}, "columns": {"x": "x"}}
        on_engine(lambda: rt.catalog.create_view({"name": "w", "query": select}))
        shape = rt.table_shape("t")

        def writes(start: int, n: int) -> list[str]:
            cmds = [
                rt.submit_write(
                    WriteCommand(
                        "t",
                        parse_write(
                            {"updates": [{"insert": {"x": i, "s": f"s{i}"}}]},
                            shape,
                            rt.interner,
                            10,
                        ),
                        shape=shape,
                    )
                )
                for i in range(start, start + n)
            ]
            return [c.stepped.result(timeout=60)["token"] for c in cmds]

        writes(0, 1_000)
        tokens = writes(3_000, 2_000)
        for _ in range(5):  # each pass stops tracking the tuples that hold nothing it
            gc.collect()  # tracks, one level of nesting (of four) at least
        # everything the store keeps, each write's and each shared change list, is out of
        # sight (a count of all objects also counts the kernels the engine loads meanwhile)
        kept = [*rt.completions._done.values(), *rt.completions._shared.values()]
        assert len(kept) > 3_000
        assert [k for k in kept if gc.is_tracked(k)] == []
        found = rt.completions.lookup(tokens[7])
        assert found is not None and found[0] == "done"
        body = json.loads(orjson.dumps(found[1]))
        assert body["outputs"] == {
            "v": [{"data": {"x": 3_007, "s": "s3007"}, "time": body["times"][0], "diff": 1}],
            "w": [{"data": {"x": 3_007}, "time": body["times"][0], "diff": 1}],
        }
    finally:
        rt.stop()


def test_a_bug_in_a_write_refuses_it_and_the_engine_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception that is no service error (a bug) while a write is taken answers that
    write 500 ``internal``; the engine thread lives on for the next request."""

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    rt = Runtime(Settings(data_dir=tmp_path))
    rt.start()
    try:
        spec = {"name": "x", "columns": [{"name": "a", "type": "int"}]}
        rt.submit(lambda: rt.catalog.create_table(spec)).result(timeout=30)
        shape = rt.table_shape("x")
        parsed = parse_write({"updates": [{"insert": {"a": 1}}]}, shape, rt.interner, 10)
        monkeypatch.setattr(runtime_module, "stage_write", broken)
        cmd = rt.submit_write(WriteCommand("x", parsed, shape=shape))
        with pytest.raises(ServiceError, match="RuntimeError: a bug") as err:
            cmd.accepted.result(timeout=30)
        assert err.value.status == 500 and err.value.code == "internal"
        assert (
            rt.submit(lambda: rt.catalog.describe_table(rt.catalog.table("x"))).result(timeout=30)[
                "rows"
            ]
            == 0
        )
    finally:
        rt.stop()


def test_a_view_that_starts_ahead_of_its_frontier(tmp_path: Path) -> None:
    """One input has forgotten its times before 995 (history 5, frontier 1000), the other is
    at 0: the view starts at 995, its frontier is 10. It names no read time before its start,
    and changes at earlier times reach it at 995, with the hydrated row, for reads and
    subscribers alike (they were published at their own times, under a snapshot that held
    none of them, and so lost)."""
    with running_server(tmp_path, history=5) as s, s.client() as c:
        for t in ("a", "c"):
            make_table(c, t, [("k", "int")], timing="client")
        write(c, "c", {"updates": [{"insert": {"k": 100}, "time": 0}], "advance_to": 1000})
        union = {
            "op": "concat",
            "inputs": [{"op": "table", "name": "a"}, {"op": "table", "name": "c"}],
        }
        assert c.post("/v1/views", json={"name": "v", "query": union}).status_code == 201
        with connect(f"{s.ws_url}/v1/views/v/subscribe?snapshot=true&progress=false") as ws:
            assert json.loads(ws.recv(timeout=10))["time"] is None  # nothing since its start
            for k in range(10):
                write(c, "a", {"updates": [{"insert": {"k": k}, "time": k}], "advance_to": k + 1})
            assert rows(c, "v") == {"time": None, "frontier": [10], "rows": []}
            err = assert_error(
                c.get("/v1/views/v/rows", params={"as_of": 9}), 409, "time_unavailable"
            )
            assert err["detail"]["valid_from"] == [995]
            write(c, "a", {"updates": [], "advance_to": 1001})
            frame = json.loads(ws.recv(timeout=10))
        want = {(("k", k),): 1 for k in [*range(10), 100]}
        assert frame["type"] == "diff" and frame["time"] == 995
        assert {(("k", u["data"]["k"]),): u["diff"] for u in frame["updates"]} == want
        assert row_counts(c, "v") == want and rows(c, "v")["time"] == 999
        assert c.get("/v1/views/v").json()["rows"] == 11


def test_a_view_over_a_view_that_starts_ahead_starts_there_too(tmp_path: Path) -> None:
    """A view reading a view that starts beyond its frontier starts at that start, not at
    its input's latest complete time: before, it named a read time before the start with
    no rows, and answered reads there with empty contents."""
    with running_server(tmp_path, history=5) as s, s.client() as c:
        for t in ("a", "b"):
            make_table(c, t, [("k", "int")], timing="client")
        for t in range(20):
            write(c, "a", {"updates": [{"insert": {"k": t}, "time": t}], "advance_to": t + 1})
        write(c, "b", {"updates": [{"insert": {"k": 100}, "time": 2}], "advance_to": 8})
        union = {
            "op": "concat",
            "inputs": [{"op": "table", "name": "a"}, {"op": "table", "name": "b"}],
        }
        count = {
            "op": "reduce",
            "input": {"op": "view", "name": "u"},
            "by": [],
            "aggregates": {"n": {"fn": "count"}},
        }
        assert c.post("/v1/views", json={"name": "u", "query": union}).status_code == 201
        assert c.post("/v1/views", json={"name": "n", "query": count}).status_code == 201
        write(c, "b", {"updates": [], "advance_to": 15})
        assert rows(c, "n") == {"time": None, "frontier": [15], "rows": []}
        with connect(f"{s.ws_url}/v1/views/n/subscribe?snapshot=true&progress=false") as ws:
            assert json.loads(ws.recv(timeout=10))["time"] is None
        write(c, "b", {"updates": [], "advance_to": 18})
        for view in ("u", "n"):
            err = assert_error(
                c.get(f"/v1/views/{view}/rows", params={"as_of": 14}), 409, "time_unavailable"
            )
            assert err["detail"]["valid_from"] == [15]
        assert rows(c, "n")["rows"] == [{"data": {"n": 19}, "count": 1}]  # 0..17 and 100
        at_15 = c.get("/v1/views/n/rows", params={"as_of": 15}).json()
        assert at_15["rows"] == [{"data": {"n": 17}, "count": 1}]


def test_an_answer_nobody_waits_for_any_more_is_not_logged_as_lost() -> None:
    """A request the stopping server stopped waiting for (503) leaves the engine's answer to
    come later, an exception such as "not applied", to a future nobody awaits: asyncio
    logged "Future exception was never retrieved" for each (audit 92: up to 1,529 errors in
    one shutdown's log)."""
    import asyncio
    from concurrent.futures import Future

    reported: list[str] = []

    async def scenario(rt: Runtime) -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: reported.append(str(context.get("message")))
        )
        answer: Future = Future()
        waiting = asyncio.create_task(rt.settled(answer))
        await asyncio.sleep(0)
        rt.begin_shutdown()
        rt._stop_waiting()  # what wind_down does once the step in progress had its time
        with pytest.raises(ServiceError):
            await waiting
        answer.set_exception(ServiceError("the engine's answer, after all", code="late"))
        await asyncio.sleep(0.05)  # the answer reaches the event loop
        del waiting
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(scenario(Runtime(Settings())))
    assert not [m for m in reported if "never retrieved" in m], reported


def test_the_engine_idle_after_a_step_hands_back_free_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Audit 116: after a burst of writes the C heap kept the memory they freed (900 MB
    after subscribers that fell behind were closed) until a view was dropped. The engine,
    idle for ``IDLE_TRIM_S`` after a step, now hands it back when there is
    ``IDLE_TRIM_FROM`` of it: once per idle spell, and not when there is less."""
    trims: list[float] = []
    free = [1 << 40]
    monkeypatch.setattr(runtime_module, "IDLE_TRIM_S", 0.2)
    monkeypatch.setattr(runtime_module, "free_bytes", lambda: free[0])
    monkeypatch.setattr(runtime_module, "give_back", lambda: trims.append(time.monotonic()))
    rt = Runtime(Settings(data_dir=tmp_path))
    rt.start()
    try:
        rt.submit(
            lambda: rt.catalog.create_table(
                {"name": "t", "columns": [{"name": "x", "type": "int"}]}
            )
        ).result(timeout=60)
        shape = rt.table_shape("t")

        def write(i: int) -> None:
            parsed = parse_write({"updates": [{"insert": {"x": i}}]}, shape, rt.interner, 10)
            rt.submit_write(WriteCommand("t", parsed, shape=shape)).stepped.result(timeout=60)

        time.sleep(1.0)
        assert trims == []  # no step yet: nothing was freed
        write(1)
        stepped = time.monotonic()
        time.sleep(1.0)
        assert len(trims) == 1 and trims[0] - stepped >= 0.15, trims  # once, after the idle
        write(2)
        free[0] = 1 << 20  # little free memory: kept for the next step
        time.sleep(1.0)
        assert len(trims) == 1, trims
    finally:
        rt.stop()
