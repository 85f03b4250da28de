"""The Python ``Client`` and ``AsyncClient`` end to end, against one real server for the module.

Views are built with the fluent plan builder (``clients.plan``); their rows and the outputs of
writes are checked against a model of the tables computed here. Every test uses its own
table and view names, so tests do not depend on each other's order.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest

from clients import (
    AsyncClient,
    Client,
    ConflictError,
    DifflowError,
    InvalidError,
    NotFoundError,
    col,
    concat,
    count,
    iterate,
    sum_,
    table,
    var,
    write_body,
)
from tests.oracle.plans import reach_plan as reach_plan_json
from tests.service.server import Server, running_server

Rows = dict[tuple, int]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # no heartbeats: a slow machine must not slip one in between the frames tests expect
    with running_server(tmp_path_factory.mktemp("client-server"), heartbeat_s=3600) as s:
        yield s


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[Client]:
    with Client(server.url) as c:
        yield c


def key(data: Mapping[str, Any]) -> tuple:
    return tuple(sorted(data.items()))


def rows_of(answer: Mapping[str, Any]) -> Rows:
    """A ``rows`` answer as ``{row key: count}``."""
    rows = {key(r["data"]): r["count"] for r in answer["rows"]}
    assert len(rows) == len(answer["rows"])
    return rows


def consolidate(updates: Iterable[Mapping[str, Any]]) -> Rows:
    """``[{"data", "diff"}, ...]`` summed per row, zeros dropped."""
    total: Counter[tuple] = Counter()
    for u in updates:
        total[key(u["data"])] += u["diff"]
    return {k: v for k, v in total.items() if v}


def difference(before: Rows, after: Rows) -> Rows:
    keys = before.keys() | after.keys()
    return {
        k: after.get(k, 0) - before.get(k, 0) for k in keys if after.get(k, 0) != before.get(k, 0)
    }


def reach_plan(roots: str, edges: str) -> Any:
    """The same plan from the builder (as in the docstring of ``clients.plan``)."""
    seed = table(roots).select(root="node", node="node")
    step = var("reach").join(
        table(edges), on=[("node", "src")], columns={"root": "left.root", "node": "right.dst"}
    )
    return iterate(
        vars={"reach": seed}, body={"reach": concat(seed, step).distinct()}, result="reach"
    )


def reachable(roots: set[int], edges: set[tuple[int, int]]) -> Rows:
    rows: Rows = {}
    for root in roots:
        seen, frontier = {root}, [root]
        while frontier:
            node = frontier.pop()
            for src, dst in edges:
                if src == node and dst not in seen:
                    seen.add(dst)
                    frontier.append(dst)
        rows.update({key({"root": root, "node": node}): 1 for node in seen})
    return rows


# --- tables and writes ------------------------------------------------------------------------


def test_health_tables_and_metrics(client: Client) -> None:
    assert client.health() == {"status": "ok"}
    made = [
        client.create_table("h_dict", {"a": "int", "b": "string"}),
        client.create_table("h_pairs", [("x", "float"), ("y", "bool")], primary_key=["x"]),
        client.create_table(
            "h_dicts", [{"name": "k", "type": "int"}], timing="client", time_dims=2
        ),
    ]
    assert [t["columns"] for t in made] == [
        [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}],
        [{"name": "x", "type": "float"}, {"name": "y", "type": "bool"}],
        [{"name": "k", "type": "int"}],
    ]
    assert [(t["primary_key"], t["timing"], t["time_dims"]) for t in made] == [
        ([], "server", 1),
        (["x"], "server", 1),
        ([], "client", 2),
    ]
    assert all((t["rows"], t["readers"]) == (0, []) for t in made)
    listed = {t["name"]: t for t in client.tables()}
    for t in made:
        assert listed[t["name"]] == client.table(t["name"]) == t

    client.write(
        "h_pairs", [{"insert": {"x": 0.5, "y": True}}, {"insert": {"x": -2.25, "y": False}}]
    )
    assert client.table("h_pairs")["rows"] == 2
    client.drop_table("h_dict")
    assert "h_dict" not in {t["name"] for t in client.tables()}
    with pytest.raises(NotFoundError):
        client.table("h_dict")
    assert "difflow_" in client.metrics()
    # every endpoint has a method, GET /v1/loads included (audit 109)
    assert client.loads() == {"loads": []}


def test_reduce_and_join_views_from_the_builder(client: Client) -> None:
    client.create_table("o_orders", {"id": "int", "customer": "int", "amount": "int"}, ["id"])
    client.create_table("o_customers", {"customer": "int", "region": "string"}, ["customer"])
    per_customer = table("o_orders").reduce(by=["customer"], n=count(), total=sum_("amount"))
    per_region = (
        table("o_orders")
        .filter(col("amount") >= 5)
        .join(table("o_customers"), on="customer")
        .reduce(by=["region"], n=count(), total=sum_(col("amount") * 2))
    )
    assert per_region.to_json()["input"]["op"] == "join"
    made = client.create_view("o_per_customer", per_customer)
    assert made["query"] == per_customer.to_json()
    assert made["columns"] == [
        {"name": "customer", "type": "int"},
        {"name": "n", "type": "int"},
        {"name": "total", "type": "int"},
    ]
    made = client.create_view("o_per_region", per_region)
    assert made["columns"] == [
        {"name": "region", "type": "string"},
        {"name": "n", "type": "int"},
        {"name": "total", "type": "int"},
    ]
    assert sorted(made["inputs"]) == ["o_customers", "o_orders"]

    orders: dict[int, tuple[int, int]] = {}
    customers: dict[int, str] = {}

    def model() -> dict[str, Rows]:
        by_customer: dict[int, list[int]] = {}
        by_region: dict[str, list[int]] = {}
        for customer, amount in orders.values():
            by_customer.setdefault(customer, []).append(amount)
            if amount >= 5 and customer in customers:
                by_region.setdefault(customers[customer], []).append(2 * amount)
        return {
            "o_per_customer": {
                key({"customer": c, "n": len(a), "total": sum(a)}): 1
                for c, a in by_customer.items()
            },
            "o_per_region": {
                key({"region": r, "n": len(a), "total": sum(a)}): 1 for r, a in by_region.items()
            },
        }

    readers = {"o_orders": {"o_per_customer", "o_per_region"}, "o_customers": {"o_per_region"}}
    steps: list[tuple[str, list[dict[str, Any]]]] = [
        (
            "o_customers",
            [
                {"insert": {"customer": c, "region": r}}
                for c, r in ((1, "north"), (2, "south"), (3, "north"))
            ],
        ),
        (
            "o_orders",
            [
                {"insert": {"id": i, "customer": c, "amount": a}}
                for i, c, a in ((10, 1, 5), (11, 1, 7), (12, 2, 3), (13, 4, 100), (14, 3, 9))
            ],
        ),
        ("o_orders", [{"upsert": {"id": 11, "customer": 2, "amount": 8}}]),
        (
            "o_orders",
            [
                {"delete": {"id": 10, "customer": 1, "amount": 5}},
                {"insert": {"id": 15, "customer": 1, "amount": 1}},
            ],
        ),
        (
            "o_customers",
            [
                {"upsert": {"customer": 2, "region": "east"}},
                {"insert": {"customer": 4, "region": "west"}},
            ],
        ),
        ("o_orders", [{"weight": 1, "data": {"id": 16, "customer": 3, "amount": 6}}]),
    ]
    previous = model()
    last_time = -1
    for name, updates in steps:
        for u in updates:
            if "customer" in name:
                row = next(iter(u.values()))
                if "delete" in u:
                    del customers[row["customer"]]
                else:
                    customers[row["customer"]] = row["region"]
            else:
                row = u.get("data") or next(iter(u.values()))
                if "delete" in u:
                    del orders[row["id"]]
                else:
                    orders[row["id"]] = (row["customer"], row["amount"])
        answer = client.write(name, updates)
        assert answer["status"] == "done"
        (t,) = answer["times"]
        assert t > last_time and answer["frontier"] == [t + 1]
        last_time = t
        current = model()
        assert set(answer["outputs"]) <= readers[name]
        for view in readers[name]:
            outputs = answer["outputs"].get(view, [])
            assert all(o["time"] == t for o in outputs)
            assert consolidate(outputs) == difference(previous[view], current[view]), (name, view)
        for view, expected in current.items():
            assert rows_of(client.rows(view)) == expected, view
        previous = current

    # the columnar form: two new orders, then the same two retracted with diff -1
    columns = {"id": [20, 21], "customer": [1, 3], "amount": [50, 60]}
    answer = client.write("o_orders", columns=columns)
    added = consolidate(answer["outputs"]["o_per_region"])
    assert added == {
        key({"region": "north", "n": 2, "total": 2 * (9 + 6)}): -1,
        key({"region": "north", "n": 4, "total": 2 * (9 + 6 + 50 + 60)}): 1,
    }
    answer = client.write("o_orders", columns=columns, diff=[-1, -1])
    assert consolidate(answer["outputs"]["o_per_region"]) == {k: -d for k, d in added.items()}
    for view, expected in model().items():
        assert rows_of(client.rows(view)) == expected
    assert client.view("o_per_region")["rows"] == len(model()["o_per_region"])


def test_reachability_iterate_from_the_builder(client: Client) -> None:
    plan = reach_plan("g_roots", "g_edges")
    assert plan.to_json() == reach_plan_json("g_roots", "g_edges")
    client.create_table("g_edges", {"src": "int", "dst": "int"})
    client.create_table("g_roots", {"node": "int"})
    edges = {(i, i + 1) for i in range(12)} | {(5, 2), (20, 21), (21, 20), (12, 0)}
    roots = {0, 20}
    # data first: a view registered on tables that hold data starts with their contents
    client.write("g_edges", [{"insert": {"src": s, "dst": d}} for s, d in sorted(edges)])
    client.write("g_roots", [{"insert": {"node": n}} for n in sorted(roots)])
    made = client.create_view("g_reach", plan)
    assert made["query"] == reach_plan_json("g_roots", "g_edges")
    assert rows_of(client.rows("g_reach")) == reachable(roots, edges)
    assert made["rows"] == len(reachable(roots, edges))

    before = reachable(roots, edges)
    answer = client.write(
        "g_edges", [{"delete": {"src": 6, "dst": 7}}, {"insert": {"src": 21, "dst": 9}}]
    )
    edges = (edges - {(6, 7)}) | {(21, 9)}
    (t,) = answer["times"]
    outputs = answer["outputs"]["g_reach"]
    assert {o["time"] for o in outputs} == {t}
    assert consolidate(outputs) == difference(before, reachable(roots, edges))
    assert rows_of(client.rows("g_reach")) == reachable(roots, edges)
    roots.add(7)
    client.write("g_roots", [{"insert": {"node": 7}}])
    assert rows_of(client.rows("g_reach")) == reachable(roots, edges)
    # the contents at the earlier time are still there
    assert rows_of(client.rows("g_reach", as_of=t - 1)) == before


def test_client_timed_writes_pending_then_completed(client: Client) -> None:
    client.create_table("c_t", {"k": "int"}, timing="client")
    client.create_view("c_n", table("c_t").reduce(n=count()))

    pending = client.write("c_t", [{"insert": {"k": 1}}, {"insert": {"k": 2}, "time": 4}], time=3)
    assert pending["status"] == "pending" and pending["token"]
    assert sorted(pending["times"]) == [3, 4]
    assert client.completion(pending["token"])["status"] == "pending"
    queued = client.write("c_t", [{"insert": {"k": 3}}], time=5, wait=False)
    assert queued["token"] and queued["token"] != pending["token"]
    assert client.rows("c_n")["time"] is None

    moved = client.write("c_t", advance_to=5)
    assert (moved["status"], moved["frontier"], moved["times"]) == ("done", [5], [])
    done = client.completion(pending["token"])
    assert (done["status"], done["token"], sorted(done["times"])) == (
        "done",
        pending["token"],
        [3, 4],
    )
    assert sorted((o["time"], o["data"]["n"], o["diff"]) for o in done["outputs"]["c_n"]) == [
        (3, 1, 1),
        (4, 1, -1),
        (4, 2, 1),
    ]
    assert isinstance(done["latency_ms"], float | int)
    assert client.completion(queued["token"])["status"] == "pending"
    assert rows_of(client.rows("c_n")) == {key({"n": 2}): 1}
    assert rows_of(client.rows("c_n", as_of=3)) == {key({"n": 1}): 1}

    client.write("c_t", advance_to=[6])
    done = client.completion(queued["token"])
    assert done["status"] == "done"
    assert sorted((o["time"], o["data"]["n"], o["diff"]) for o in done["outputs"]["c_n"]) == [
        (5, 2, -1),
        (5, 3, 1),
    ]
    # a write whose times are all final already at arrival is answered done at once
    now = client.write("c_t", [{"insert": {"k": 4}}], time=6, advance_to=7)
    assert now["status"] == "done"
    assert consolidate(now["outputs"]["c_n"]) == {key({"n": 3}): -1, key({"n": 4}): 1}


def test_two_dimensional_times(client: Client) -> None:
    client.create_table("p_t", {"k": "int"}, timing="client", time_dims=2)
    client.create_view("p_n", table("p_t").reduce(n=count()))
    client.write(
        "p_t", [{"insert": {"k": 1}, "time": [0, 1]}, {"insert": {"k": 2}, "time": [1, 0]}]
    )
    answer = client.write("p_t", advance_to=[[2, 2]])
    assert answer["frontier"] == [[2, 2]]
    assert rows_of(client.rows("p_n", as_of=[0, 1])) == {key({"n": 1}): 1}
    assert rows_of(client.rows("p_n", as_of=[1, 0])) == {key({"n": 1}): 1}
    assert rows_of(client.rows("p_n", as_of=[1, 1])) == {key({"n": 2}): 1}
    assert rows_of(client.rows("p_n", as_of=[0, 0])) == {}


# --- WebSocket: subscriptions and the table writer ----------------------------------------------


def test_subscribe_while_another_thread_writes(server: Server, client: Client) -> None:
    client.create_table("sub_t", {"k": "int", "g": "int"})
    client.create_view("sub_v", table("sub_t").reduce(by=["g"], n=count(), total=sum_("k")))
    client.write("sub_t", [{"insert": {"k": k, "g": k % 3}} for k in range(6)])
    start = client.rows("sub_v")

    answers: list[dict[str, Any]] = []
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            with Client(server.url) as own:
                for k in range(6, 26):
                    updates = [{"insert": {"k": k, "g": k % 3}}]
                    if k % 4 == 0:
                        updates.append({"delete": {"k": k - 6, "g": (k - 6) % 3}})
                    answers.append(own.write("sub_t", updates))
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    with client.subscribe("sub_v") as frames:
        snapshot = next(frames)
        assert (snapshot["type"], snapshot["seq"], snapshot["time"]) == (
            "snapshot",
            0,
            start["time"],
        )
        assert consolidate(snapshot["updates"]) == rows_of(start)
        assert all(u["diff"] > 0 for u in snapshot["updates"])
        progress = next(frames)
        assert progress == {"type": "progress", "seq": 1, "frontier": start["frontier"]}

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            # each of the 20 writes changes the view: read until 20 diffs have come and a
            # progress frame has passed the last of them
            seen = [snapshot, progress]
            contents = Counter(consolidate(snapshot["updates"]))
            diffs: list[dict[str, Any]] = []
            for frame in frames:
                seen.append(frame)
                assert frame["type"] in ("diff", "progress"), frame
                if frame["type"] == "diff":
                    diffs.append(frame)
                    contents.update(consolidate(frame["updates"]))
                    assert len(diffs) <= 20, frame
                elif (
                    frame["type"] == "progress"
                    and len(diffs) == 20
                    and frame["frontier"][0] > diffs[-1]["time"]
                ):
                    break
        finally:
            thread.join()
    assert failures == []
    assert len(answers) == 20
    assert seen[-1]["frontier"][0] >= answers[-1]["frontier"][0]

    assert [f["seq"] for f in seen] == list(range(len(seen)))
    assert [f["time"] for f in diffs] == [a["times"][0] for a in answers]
    for frame, answer in zip(diffs, answers, strict=True):
        assert consolidate(frame["updates"]) == consolidate(answer["outputs"]["sub_v"])
    frontiers = [f["frontier"][0] for f in seen if f["type"] == "progress"]
    assert frontiers == sorted(frontiers)
    # every diff comes before the progress frame that passes its time
    for i, frame in enumerate(seen):
        if frame["type"] == "diff":
            later = [f["frontier"][0] for f in seen[i + 1 :] if f["type"] == "progress"]
            assert later and later[0] > frame["time"]
        if frame["type"] == "progress":
            assert all(
                f["time"] >= frame["frontier"][0] for f in seen[i + 1 :] if f["type"] == "diff"
            )
    assert {k: v for k, v in contents.items() if v} == rows_of(client.rows("sub_v"))


def test_subscription_ends_with_closed_when_the_view_is_dropped(client: Client) -> None:
    client.create_table("sc_t", {"k": "int"})
    client.create_view("sc_v", table("sc_t").distinct())
    with client.subscribe("sc_v", snapshot=False, progress=False) as frames:
        client.write("sc_t", [{"insert": {"k": 1}}])
        first = next(frames)
        assert (first["type"], first["seq"], first["updates"]) == (
            "diff",
            0,
            [{"data": {"k": 1}, "diff": 1}],
        )
        client.drop_view("sc_v")
        closed = next(frames)
        assert (closed["type"], closed["seq"]) == ("closed", 1) and closed["reason"]
        assert list(frames) == []


def test_ws_writer_pipelines_500_writes_with_acks_in_order(client: Client) -> None:
    client.create_table("w_t", {"k": "int"}, primary_key=["k"])
    client.create_view("w_n", table("w_t").reduce(n=count()))
    with client.ws_writer("w_t") as writer:
        for i in range(500):
            # frame 250 is bad: its error comes back in its place, and the socket stays open
            row = {"k": "bad"} if i == 250 else {"k": i}
            writer.send(write_body([{"insert": row}]), id=i)
        assert writer.pending == 500
        acks: list[dict[str, Any]] = []
        errors: list[DifflowError] = []
        while writer.pending:
            try:
                acks.append(writer.recv())
            except DifflowError as exc:
                errors.append(exc)
                assert len(acks) == 250  # in order: right after the ack of frame 249
        writer.send({"updates": [{"insert": {"k": 1000}}]}, id="last")
        (last,) = list(writer)
    assert [a["id"] for a in acks] == [i for i in range(500) if i != 250]
    assert all(a["type"] == "ack" and a["status"] == "done" for a in acks)
    times = [a["times"][0] for a in acks]
    assert times == sorted(times) and len(set(times)) == 499  # each frame its own time
    counts = [consolidate(a["outputs"]["w_n"]) for a in acks]
    assert counts[0] == {key({"n": 1}): 1}
    for n, diff in enumerate(counts[1:], start=2):
        assert diff == {key({"n": n - 1}): -1, key({"n": n}): 1}
    (error,) = errors
    assert isinstance(error, InvalidError)
    assert (error.status, error.code, error.frame_id) == (422, "wrong_type", 250)
    assert error.detail["path"] == "updates[0].insert.k"
    assert (last["id"], last["times"][0] > times[-1]) == ("last", True)
    assert rows_of(client.rows("w_n")) == {key({"n": 500}): 1}


def test_async_client_mirrors_the_sync_one(server: Server) -> None:
    async def scenario() -> None:
        async with AsyncClient(server.url) as client:
            assert await client.health() == {"status": "ok"}
            assert await client.loads() == {"loads": []}
            await client.create_table("a_t", {"k": "int", "g": "string"})
            view = table("a_t").reduce(by=["g"], n=count(), total=sum_("k"))
            await client.create_view("a_v", view)
            assert (await client.view("a_v"))["query"] == view.to_json()
            async with client.subscribe("a_v") as frames:
                snapshot = await anext(frames)
                assert (snapshot["type"], snapshot["updates"]) == ("snapshot", [])
                async with client.ws_writer("a_t") as writer:
                    for i in range(50):
                        await writer.send(
                            {"updates": [{"insert": {"k": i, "g": "ab"[i % 2]}}]}, id=i
                        )
                    acks = [ack async for ack in writer]
                assert [a["id"] for a in acks] == list(range(50))
                last_time = acks[-1]["times"][0]
                contents: Counter[tuple] = Counter()
                async for frame in frames:
                    if frame["type"] == "diff":
                        contents.update(consolidate(frame["updates"]))
                    if frame["type"] == "progress" and frame["frontier"][0] > last_time:
                        break
            expected = {
                key({"g": "a", "n": 25, "total": sum(range(0, 50, 2))}): 1,
                key({"g": "b", "n": 25, "total": sum(range(1, 50, 2))}): 1,
            }
            assert {k: v for k, v in contents.items() if v} == expected
            assert rows_of(await client.rows("a_v")) == expected
            assert [t["name"] for t in await client.tables() if t["name"] == "a_t"] == ["a_t"]
            assert "a_v" in {v["name"] for v in await client.views()}
            answer = await client.write("a_t", [{"delete": {"k": 0, "g": "a"}}])
            assert (
                consolidate(answer["outputs"]["a_v"])[key({"g": "a", "n": 24, "total": 600})] == 1
            )
            with pytest.raises(ConflictError) as caught:
                await client.drop_table("a_t")
            assert (caught.value.status, caught.value.code) == (409, "in_use")
            with pytest.raises(NotFoundError):
                await client.rows("a_nope")
            await client.drop_view("a_v")
            await client.drop_table("a_t")
            with pytest.raises(NotFoundError) as caught_table:
                await client.table("a_t")
            assert caught_table.value.code == "not_found"

    asyncio.run(scenario())


# --- typed errors ---------------------------------------------------------------------------------


def test_errors_are_typed_and_carry_the_server_code(client: Client) -> None:
    client.create_table("e_t", {"k": "int"}, primary_key=["k"])
    client.create_table("e_c", {"k": "int"}, timing="client")
    client.create_view("e_v", table("e_t").distinct())
    client.write("e_t", [{"insert": {"k": 1}}])
    client.write("e_c", [{"insert": {"k": 1}}], time=2, advance_to=5)

    def caught(error: type[DifflowError], call: Any, *args: Any, **kwargs: Any) -> DifflowError:
        with pytest.raises(error) as info:
            call(*args, **kwargs)
        assert info.value.message and str(info.value).startswith(f"{info.value.code}: ")
        return info.value

    # 404
    for call, args in (
        (client.table, ("e_nope",)),
        (client.rows, ("e_nope",)),
        (client.drop_view, ("e_nope",)),
        (client.completion, ("w-999999",)),
    ):
        error = caught(NotFoundError, call, *args)
        assert (error.status, error.code) == (404, "not_found")
    error = caught(NotFoundError, client.write, "e_nope", [{"insert": {"k": 1}}])
    assert error.detail == {"name": "e_nope"}
    with client.subscribe("e_nope") as frames, pytest.raises(NotFoundError) as subscribed:
        next(frames)
    assert subscribed.value.code == "not_found"

    # 409, each with its own code
    conflicts = [
        ("name_taken", client.create_table, ("e_t", {"k": "int"})),
        ("name_taken", client.create_view, ("e_v", table("e_t"))),
        ("in_use", client.drop_table, ("e_t",)),
        (
            "time_before_frontier",
            client.write,
            (
                "e_c",
                [{"insert": {"k": 2}}],
            ),
        ),
        ("frontier_backwards", client.write, ("e_c",)),
        ("time_unavailable", client.rows, ("e_v",)),
    ]
    kwargs: list[dict[str, Any]] = [{}, {}, {}, {"time": 4}, {"advance_to": 3}, {"as_of": 10**6}]
    for (code, call, args), extra in zip(conflicts, kwargs, strict=True):
        error = caught(ConflictError, call, *args, **extra)
        assert (error.status, error.code) == (409, code), error
    assert client.table("e_c")["frontier"] == [5]

    # 422, saying where
    client.create_table("e_roots", {"node": "int"})
    client.create_table("e_edges", {"src": "int", "dst": "int"})
    bad_body = reach_plan("e_roots", "e_edges").to_json()
    bad_body["body"]["reach"]["input"]["inputs"][1]["on"] = [["node", "nope"]]
    error = caught(InvalidError, client.create_view, "e_bad", bad_body)
    assert error.status == 422
    # the join's "on" inside the iterate body (the server writes list indices as .1)
    path = error.detail["path"]
    assert path.startswith("query.body.reach.input.inputs") and ".on" in path, path
    error = caught(
        InvalidError, client.create_view, "e_bad", table("e_t").select(z=col("k") + "nope")
    )
    assert error.detail["path"] == "query.columns.z.args.1"
    error = caught(
        InvalidError, client.write, "e_t", [{"insert": {"k": 2}}, {"insert": {"k": 1.5}}]
    )
    assert (error.code, error.detail["path"]) == ("wrong_type", "updates[1].insert.k")
    error = caught(InvalidError, client.write, "e_t", [{"insert": {"k": 1}}])
    assert error.code == "key_present"
    error = caught(InvalidError, client.create_table, "e bad", {"k": "int"})
    assert (error.code, error.detail["path"]) == ("bad_name", "name")
    assert rows_of(client.rows("e_v")) == {key({"k": 1}): 1}  # nothing of a rejected write
    assert "e_bad" not in {v["name"] for v in client.views()}


def _blocks_sigint(thread_id: int) -> bool:
    """Whether the thread (its native id) has SIGINT blocked (``/proc``, Linux)."""
    with open(f"/proc/self/task/{thread_id}/status") as status:
        mask = next(line for line in status if line.startswith("SigBlk:"))
    return bool(int(mask.split()[1], 16) & (1 << (signal.SIGINT - 1)))


def test_sync_connections_leave_ctrl_c_to_the_caller(client: Client) -> None:
    """A sync connection's reader thread never takes SIGINT (Ctrl-C must wake the thread
    waiting in ``recv``), and opening it leaves the caller's own signal mask as it was."""
    client.create_table("sig_t", {"k": "int"})
    client.create_view("sig_v", {"op": "table", "name": "sig_t"})
    before = {t.native_id for t in threading.enumerate()}
    with client.subscribe("sig_v") as frames:
        assert next(frames)["type"] == "snapshot"
        readers = [t for t in threading.enumerate() if t.native_id not in before]
        assert readers and all(_blocks_sigint(t.native_id) for t in readers if t.native_id)
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        assert not _blocks_sigint(threading.get_native_id())
