"""A view whose iterate finds no fixed point: rejected at registration, or failed after a
write while the server, the write and every other view go on."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from api.models import ViewPublic, WriteDone
from tests.oracle.plans import reach_plan
from tests.service.conftest import assert_error, make_table, make_view, row_counts, write
from tests.service.server import Server, running_server

COUNT_UP = {  # n, n+1, ... up to the bound in table lim
    "op": "iterate",
    "result": "n",
    "vars": {"n": {"op": "select", "input": {"op": "table", "name": "lim"}, "columns": {"n": 0}}},
    "body": {
        "n": {
            "op": "distinct",
            "input": {
                "op": "concat",
                "inputs": [
                    {"op": "var", "name": "n"},
                    {
                        "op": "join",
                        "left": {"op": "var", "name": "n"},
                        "right": {"op": "table", "name": "lim"},
                        "on": [],
                        "columns": {
                            "n": {
                                "fn": "if",
                                "args": [
                                    {"fn": "lt", "args": ["left.n", "right.max"]},
                                    {"fn": "add", "args": ["left.n", 1]},
                                    "left.n",
                                ],
                            }
                        },
                    },
                ],
            },
        }
    },
}


def _swapping(source: dict) -> dict:
    """A loop that never settles: it swaps x and y of ``source``'s rows, round after round."""
    body = {"op": "select", "input": {"op": "var", "name": "v"}, "columns": {"x": "y", "y": "x"}}
    return {"op": "iterate", "vars": {"v": source}, "body": {"v": body}, "result": "v"}


def test_a_capped_loop_never_runs_a_loop_in_its_body_past_the_cap(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """API.md: vars are replaced "until nothing changes (or after max_iterations
    replacements)": the body is not computed on the value at the cap, so a loop in it that
    would not converge there is no error (audit 69), whether it reads the capped var or
    only a table."""
    e = {"op": "table", "name": "e"}
    o = {"op": "var", "name": "o"}

    def capped(body: dict, cap: int) -> dict:
        return {"op": "iterate", "vars": {"o": e}, "body": {"o": body}, "result": "o",
                "max_iterations": cap}  # fmt: skip

    negative = {"op": "filter", "input": o, "where": {"fn": "lt", "args": ["x", 0]}}
    shifted = {"op": "select", "input": o, "columns": {"x": {"fn": "sub", "args": ["x", 10]},
                                                      "y": "y"}}  # fmt: skip
    # o1 = o0 - 10 in x (no negative x in o0, so no swapping); o1 has negative x, and the
    # swapping loop over them would never settle: it is computed on o1 only, past the cap
    after_one = {"op": "concat", "inputs": [negative, _swapping(negative), shifted]}
    with running_server(tmp_path, iterate_round_limit=40) as s, s.client() as c:
        make_table(c, "e", [("x", "int"), ("y", "int")])
        write(c, "e", {"updates": [{"insert": {"x": 1, "y": 2}}]})
        for name, plan, want in [
            ("over_o", capped(_swapping(o), 0), (1, 2)),
            ("over_e", capped(_swapping(e), 0), (1, 2)),
            ("after_one", capped(after_one, 1), (-9, 2)),
        ]:
            assert c.post("/v1/views", json={"name": name, "query": plan}).status_code == 201
            assert row_counts(c, name) == {(("x", want[0]), ("y", want[1])): 1}, name
        # a write the capped loops take in: still no error, and the new row
        write(c, "e", {"updates": [{"insert": {"x": 5, "y": 6}}]})
        assert row_counts(c, "over_e") == {(("x", 1), ("y", 2)): 1, (("x", 5), ("y", 6)): 1}
        assert row_counts(c, "after_one") == {(("x", -9), ("y", 2)): 1, (("x", -5), ("y", 6)): 1}
        # uncapped, or capped one round later, the swapping does not converge
        for plan in (capped(_swapping(o), 1), capped(after_one, 2)):
            err = assert_error(
                c.post("/v1/views", json={"name": "x", "query": plan}), 422, "no_fixed_point"
            )
            assert "within 40 rounds" in err["message"], err


def test_divergence_is_contained(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running_server(tmp_path, iterate_round_limit=40) as s, s.client() as c:
        make_table(c, "lim", [("id", "int"), ("max", "int")], primary_key=["id"])
        write(c, "lim", {"updates": [{"insert": {"id": 1, "max": 500}}]})
        err = assert_error(
            c.post("/v1/views", json={"name": "up", "query": COUNT_UP}), 422, "no_fixed_point"
        )
        assert (
            "the iterate at query did not reach a fixed point within 40 rounds" in err["message"]
        ), err
        # nested: the loop that does not converge is named (audit 64)
        nested = {"op": "iterate", "result": "n", "vars": COUNT_UP["vars"], "body": {"n": COUNT_UP}}
        err = assert_error(
            c.post("/v1/views", json={"name": "up", "query": nested}), 422, "no_fixed_point"
        )
        assert "the iterate at query.body.n did not" in err["message"], err
        assert_error(c.get("/v1/views/up"), 404)
        assert c.get("/v1/tables/lim").json()["readers"] == []
        # a bound the plan gives is kept, beyond the limit too: not a failure to converge
        bounded = {"name": "up60", "query": {**COUNT_UP, "max_iterations": 60}}
        assert c.post("/v1/views", json=bounded).status_code == 201
        assert row_counts(c, "up60") == {(("n", n),): 1 for n in range(61)}
        assert c.delete("/v1/views/up60").status_code == 204

        write(c, "lim", {"updates": [{"upsert": {"id": 1, "max": 3}}]})
        assert c.post("/v1/views", json={"name": "up", "query": COUNT_UP}).status_code == 201
        assert (
            c.post(
                "/v1/views", json={"name": "plain", "query": {"op": "table", "name": "lim"}}
            ).status_code
            == 201
        )
        assert row_counts(c, "up") == {(("n", n),): 1 for n in range(4)}

        ViewPublic.model_validate(c.get("/v1/views/up").json())  # as /openapi.json says
        body = write(c, "lim", {"updates": [{"upsert": {"id": 1, "max": 500}}]})
        assert body["status"] == "done"
        assert "up" in body["failed_views"] and "up" not in body["outputs"]
        assert sorted(u["diff"] for u in body["outputs"]["plain"]) == [-1, 1]
        WriteDone.model_validate(body)
        desc = c.get("/v1/views/up").json()
        assert desc["state"] == "failed" and "IterationLimitError" in desc["error"]
        ViewPublic.model_validate(desc)
        assert_error(c.get("/v1/views/up/rows"), 409, "view_failed")
        write(c, "lim", {"updates": [{"insert": {"id": 2, "max": 1}}]})  # the server goes on
        assert len(row_counts(c, "plain")) == 2
        assert c.delete("/v1/views/up").status_code == 204
        assert c.get("/healthz").json() == {"status": "ok"}


def _chain(c: httpx.Client, lo: int, hi: int, op: str = "insert") -> dict[str, Any]:
    """Write (or delete) the edges ``i -> i + 1`` for ``lo <= i < hi`` to table ``edges``."""
    updates = [{op: {"src": i, "dst": i + 1}} for i in range(lo, hi)]
    return write(c, "edges", {"updates": updates})


def test_the_round_limit_does_not_depend_on_how_the_input_arrived(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A loop fails when its changes reach round ``limit``, that is when a from-scratch run
    at some time would need more rounds, however many rounds the step itself ran (audit 84:
    a chain grown in two writes each within the limit held a result its registration would
    have been refused over, and a later delete of its first edge failed the view)."""
    reach = reach_plan("roots", "edges")
    with running_server(tmp_path, iterate_round_limit=40) as s, s.client() as c:
        make_table(c, "roots", [("node", "int")])
        make_table(c, "edges", [("src", "int"), ("dst", "int")])
        write(c, "roots", {"updates": [{"insert": {"node": 0}}]})
        _chain(c, 0, 25)
        make_view(c, "reach", reach)
        # 25 more edges: this step runs 26 rounds, but they reach round 50
        body = _chain(c, 25, 50)
        assert list(body["failed_views"]) == ["reach"], body
        assert c.get("/v1/views/reach").json()["state"] == "failed"
        err = assert_error(
            c.post("/v1/views", json={"name": "again", "query": reach}), 422, "no_fixed_point"
        )
        assert "within 40 rounds" in err["message"], err
        assert c.delete("/v1/views/reach").status_code == 204
        # a chain of 35 edges, then its first edge cut: the step's changes reach round 36
        # (every node but the root is taken back at the round that reached it), within the
        # limit, so the view goes on
        _chain(c, 35, 50, "delete")
        make_view(c, "reach", reach)
        assert len(row_counts(c, "reach")) == 36
        body = _chain(c, 0, 1, "delete")
        assert not body.get("failed_views"), body
        assert len(body["outputs"]["reach"]) == 35
        assert row_counts(c, "reach") == {(("node", 0), ("root", 0)): 1}


WAIT_S = 300  # for the server to reach a state (kernels may compile first)
SHIFT = {  # never converges: every round moves each row up by one
    "op": "iterate",
    "result": "x",
    "vars": {"x": {"op": "table", "name": "start"}},
    "body": {
        "x": {
            "op": "select",
            "input": {"op": "var", "name": "x"},
            "columns": {"x": {"fn": "add", "args": ["x", 1]}},
        }
    },
}


def _until(check: Callable[[], bool], what: str) -> None:
    """Call ``check`` every 50 ms until it is true; fail after ``WAIT_S`` (the server may
    compile kernels first) naming ``what`` was awaited."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {WAIT_S} s")
        time.sleep(0.05)


def _cancel(c: httpx.Client, name: str) -> None:
    """DELETE ``name`` until it answers 204: until the registration running in another
    thread has reached the server (before, the DELETE finds no such view: 404)."""

    def cancelled() -> bool:
        r = c.delete(f"/v1/views/{name}")
        if r.status_code != 204:
            assert_error(r, 404, "not_found")
        return r.status_code == 204

    _until(cancelled, f"a registration of {name!r} to cancel")


def test_a_registration_that_does_not_converge_is_cancelled_by_a_delete(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a round limit that would take days to reach: only the DELETE ends the registration
    with (
        running_server(tmp_path, iterate_round_limit=10**10) as s,
        s.client() as c,
        s.client(timeout=600) as other,  # a first request may wait for kernels to compile
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        make_table(c, "start", [("x", "int")])
        write(c, "start", {"updates": [{"insert": {"x": 0}}]})
        post = pool.submit(other.post, "/v1/views", json={"name": "shift", "query": SHIFT})
        _cancel(c, "shift")
        err = assert_error(post.result(timeout=60), 409, "cancelled")
        assert err["detail"] == {"name": "shift"} and "DELETE" in err["message"]
        assert_error(c.get("/v1/views/shift"), 404)
        assert c.get("/v1/tables/start").json()["readers"] == []
        # nothing is left: the name registers again, and the table's writes go on
        bounded = {"name": "shift", "query": {**SHIFT, "max_iterations": 3}}
        assert c.post("/v1/views", json=bounded).status_code == 201
        body = write(c, "start", {"updates": [{"insert": {"x": 10}}]})
        assert [(u["data"], u["diff"]) for u in body["outputs"]["shift"]] == [({"x": 13}, 1)]
        assert row_counts(c, "shift") == {(("x", 3),): 1, (("x", 13),): 1}
        # one queued behind a running one is answered at once, and so is its DELETE; the
        # running one goes on until cancelled in turn
        running = pool.submit(other.post, "/v1/views", json={"name": "ahead", "query": SHIFT})
        _wait_until_busy(c)
        with s.client(timeout=600) as third, concurrent.futures.ThreadPoolExecutor(1) as pool2:
            queued = pool2.submit(
                third.post,
                "/v1/views",
                json={"name": "behind", "query": {"op": "table", "name": "start"}},
            )
            _wait_for_queue(c, 2)  # the probe of _wait_until_busy, and this registration
            assert c.delete("/v1/views/behind").status_code == 204
            assert_error(queued.result(timeout=60), 409, "cancelled")
        assert not running.done()
        _cancel(c, "ahead")
        assert_error(running.result(timeout=60), 409, "cancelled")
        assert_error(c.get("/v1/views/behind"), 404)
        # a server shutting down stops a registration too: 503, not a wait for its rounds
        post = pool.submit(other.post, "/v1/views", json={"name": "again", "query": SHIFT})
        _wait_until_busy(c)
        s.process.terminate()
        assert_error(post.result(timeout=60), 503, "shutting_down")


def _wait_for_queue(c: httpx.Client, depth: int) -> None:
    """Return once ``depth`` commands wait for the engine (``/metrics`` needs no engine)."""

    def queued() -> bool:
        text = c.get("/metrics").text
        line = next(x for x in text.splitlines() if x.startswith("difflow_queue_depth "))
        return float(line.split()[1]) >= depth

    _until(queued, f"{depth} commands queued")


def _wait_until_busy(c: httpx.Client) -> None:
    """Return once the engine is busy: a request that needs it (a DELETE of no table; a
    read would be answered between a registration's rounds) gets no answer within 2 s."""

    def busy() -> bool:
        try:
            c.delete("/v1/tables/no_such_table", timeout=2)
        except httpx.ReadTimeout:
            return True
        return False

    _until(busy, "the engine busy")


def _wait_until_registering(c: httpx.Client, name: str) -> None:
    """Return once view ``name`` is computing its first contents: reads are answered
    between its rounds, which name it as being registered."""

    def registering() -> bool:
        err = assert_error(c.get(f"/v1/views/{name}"), 404, "not_found")
        return "being registered" in err["message"]

    _until(registering, f"view {name!r} seen registering")


def test_reads_are_answered_while_a_view_registers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # a registration that never ends on its own: every read below is answered during it
    with _long_steps(tmp_path, 2, 2, iterate_round_limit=10**10) as (s, c, (other, writer), pool):
        make_table(c, "start", [("x", "int")])
        write(c, "start", {"updates": [{"insert": {"x": 0}}]})
        make_view(c, "plain", {"op": "table", "name": "start"})
        post = pool.submit(other.post, "/v1/views", json={"name": "shift", "query": SHIFT})
        _wait_until_registering(c, "shift")
        # the catalog as before the registration: the view is in no list and reads nothing
        assert [v["name"] for v in c.get("/v1/views").json()["views"]] == ["plain"]
        assert c.get("/v1/tables/start").json()["readers"] == ["plain"]
        assert [t["readers"] for t in c.get("/v1/tables").json()["tables"]] == [["plain"]]
        assert c.get("/v1/views/plain").json()["rows"] == 1
        assert row_counts(c, "plain") == {(("x", 0),): 1}
        with connect(f"{s.ws_url}/v1/views/plain/subscribe") as ws:
            snap = json.loads(ws.recv(timeout=60))
        assert snap["type"] == "snapshot" and snap["updates"] == [{"data": {"x": 0}, "diff": 1}]
        # writes are accepted between the rounds (wait=false answers 202 at once), and
        # stepped once the registration is over; reads do not see them before that
        pending = pool.submit(
            writer.post, "/v1/tables/start/updates", json={"updates": [{"insert": {"x": 1}}]}
        )
        later = c.post(
            "/v1/tables/start/updates",
            params={"wait": "false"},
            json={"updates": [{"insert": {"x": 2}}]},
        )
        assert later.status_code == 202 and later.json()["status"] == "pending"
        token = later.json()["token"]
        assert c.get(f"/v1/completions/{token}").status_code == 202
        assert row_counts(c, "plain") == {(("x", 0),): 1}
        assert not post.done() and not pending.done()
        _cancel(c, "shift")
        assert_error(post.result(timeout=60), 409, "cancelled")
        assert pending.result(timeout=60).json()["status"] == "done"
        done = c.get(f"/v1/completions/{token}")
        assert done.status_code == 200 and done.json()["outputs"]["plain"] == [
            {"data": {"x": 2}, "time": later.json()["times"][0], "diff": 1}
        ]
        assert row_counts(c, "plain") == {(("x", 0),): 1, (("x", 1),): 1, (("x", 2),): 1}
        assert_error(c.get("/v1/views/shift"), 404)
        assert c.get("/v1/tables/start").json()["readers"] == ["plain"]


def test_a_write_accepted_during_a_registration_lists_the_new_view(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A ``wait=false`` write sent while a view registers is answered 202 at once, ahead of a
    registration queued behind (audit 43); once the registration is over, the write's step
    runs, and its outputs include the new view."""
    rounds = 100_000  # a few seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 2, 2, iterate_round_limit=10**10) as (_s, c, (other, third), pool):
        make_table(c, "start", [("x", "int")])
        write(c, "start", {"updates": [{"insert": {"x": 0}}]})
        bounded = {**SHIFT, "max_iterations": rounds}
        post = pool.submit(other.post, "/v1/views", json={"name": "shift", "query": bounded})
        _wait_until_registering(c, "shift")
        # a registration queued behind it: the write goes before that too
        plain = {"name": "plain", "query": {"op": "table", "name": "start"}}
        queued = pool.submit(third.post, "/v1/views", json=plain)
        _wait_for_queue(c, 1)
        r = c.post(
            "/v1/tables/start/updates",
            params={"wait": "false"},
            json={"updates": [{"insert": {"x": 10}}]},
        )
        assert r.status_code == 202 and not post.done() and not queued.done()
        # a server-timed table's frontier is the one its next step moves it to
        assert r.json()["frontier"] == [r.json()["times"][0] + 1]
        assert post.result(timeout=600).status_code == 201
        assert queued.result(timeout=600).status_code == 201
        completion = f"/v1/completions/{r.json()['token']}"
        _until(lambda: c.get(completion).status_code != 202, "the write done")
        done = c.get(completion)
        t = r.json()["times"][0]
        # the queued view came after the write: it holds the row from its first contents
        assert done.json()["outputs"] == {
            "shift": [{"data": {"x": 10 + rounds}, "time": t, "diff": 1}]
        }
        assert row_counts(c, "plain") == {(("x", 0),): 1, (("x", 10),): 1}
        assert row_counts(c, "shift") == {(("x", rounds),): 1, (("x", 10 + rounds),): 1}


def test_a_table_read_during_a_registration_counts_the_writes_accepted_meanwhile(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A server-timed table read between a registration's rounds shows the frontier its
    next step moves it to, as the write accepted meanwhile answered, not the one before that
    write (audit 75), as its ``rows`` count the write."""
    rounds = 100_000  # a few seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 1, 1) as (_s, c, (other,), pool):
        make_table(c, "start", [("x", "int")])
        make_table(c, "other", [("x", "int")])
        write(c, "start", {"updates": [{"insert": {"x": 0}}]})
        bounded = {**SHIFT, "max_iterations": rounds}
        post = pool.submit(other.post, "/v1/views", json={"name": "shift", "query": bounded})
        _wait_until_registering(c, "shift")
        r = _sent(c, "other", 1)
        table = c.get("/v1/tables/other").json()
        assert not post.done()
        assert table["rows"] == 1 and table["frontier"] == r.json()["frontier"]
        assert r.json()["frontier"] == [r.json()["times"][0] + 1]
        assert post.result(timeout=600).status_code == 201


def test_sigterm_answers_frames_accepted_during_a_registration(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """WebSocket frames accepted between a registration's rounds, whose step outlasts the
    5 s a stopping server waits for, are answered (503 ``shutting_down``: applied) before
    the socket closes (audit 43: no answer, and a 1012 close, which says "not applied")."""
    rounds = 250_000  # a view that takes seconds for each new row (about 50 us a round)
    with (
        running_server(tmp_path, iterate_round_limit=10**10) as s,
        s.client(timeout=600) as c,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        make_table(c, "start", [("x", "int")])
        make_table(c, "other", [("x", "int")])
        write(c, "other", {"updates": [{"insert": {"x": 0}}]})
        slow = {**SHIFT, "max_iterations": rounds}
        assert c.post("/v1/views", json={"name": "slow", "query": slow}).status_code == 201
        never = {**SHIFT, "vars": {"x": {"op": "table", "name": "other"}}}
        post = pool.submit(c.post, "/v1/views", json={"name": "never", "query": never})
        with s.client() as reader:
            _wait_until_registering(reader, "never")
            with connect(f"{s.ws_url}/v1/tables/start/updates") as ws:
                for i in range(3):
                    ws.send(json.dumps({"id": i, "updates": [{"insert": {"x": i}}]}))
                _until(
                    lambda: reader.get("/v1/tables/start").json()["rows"] >= 3,
                    "the frames accepted",
                )
                s.process.terminate()
                answers = [json.loads(ws.recv(timeout=60)) for _ in range(3)]
        assert_error(post.result(timeout=60), 503, "shutting_down")
        assert [a["id"] for a in answers] == [0, 1, 2]
        for a in answers:
            if a["type"] == "ack":  # a machine fast enough to finish the step in 5 s
                assert a["status"] == "done"
            else:
                assert a["error"]["code"] == "shutting_down"
                assert "had been applied" in a["error"]["message"]


def test_a_flat_map_over_a_huge_range_fails_its_view_clearly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    span = {
        "op": "flat_map",
        "input": {"op": "table", "name": "r"},
        "as": "i",
        "start": "a",
        "stop": "b",
    }
    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "r", [("a", "int"), ("b", "int")])
        assert c.post("/v1/views", json={"name": "span", "query": span}).status_code == 201
        assert (
            c.post(
                "/v1/views", json={"name": "plain", "query": {"op": "table", "name": "r"}}
            ).status_code
            == 201
        )
        body = write(c, "r", {"updates": [{"insert": {"a": 0, "b": 2**62}}]})
        reason = body["failed_views"]["span"]
        assert reason.startswith("LimitError: flat_map would make 4,611,686,018,427,387,904 rows")
        assert body["outputs"]["plain"] == [
            {"data": {"a": 0, "b": 2**62}, "time": body["times"][0], "diff": 1}
        ]
        assert c.get("/v1/views/span").json()["state"] == "failed"
        # registering it again over the stored row: refused, and nothing is kept
        err = assert_error(
            c.post("/v1/views", json={"name": "span2", "query": span}), 422, "view_failed"
        )
        assert "LimitError" in err["message"]
        assert_error(c.get("/v1/views/span2"), 404)
        assert row_counts(c, "plain") == {(("a", 0), ("b", 2**62)): 1}


def test_a_pending_write_says_which_views_it_made_fail(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A client-timed write's step makes a view fail long before the frontier lets the write
    finish: its pending answer, its pending completion and a pending WebSocket ack already
    name the view (audit 108: only the final completion did, which `push` never asked for
    once another push had moved the frontier, and it exited 0)."""
    span = {"op": "flat_map", "input": {"op": "table", "name": "ct"}, "as": "i"}
    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "ct", [("n", "int")], timing="client")
        make_view(c, "big", {**span, "start": 0, "stop": "n"})
        make_view(c, "ok", {"op": "table", "name": "ct"})
        r = c.post(
            "/v1/tables/ct/updates", json={"updates": [{"insert": {"n": 10**10}}], "time": 5}
        )
        assert r.status_code == 202, r.text
        pending = r.json()
        assert pending["status"] == "pending" and list(pending["failed_views"]) == ["big"]
        assert pending["failed_views"]["big"].startswith("LimitError: flat_map")
        again = c.get(f"/v1/completions/{pending['token']}")
        assert again.status_code == 202 and again.json() == pending
        with connect(f"{s.ws_url}/v1/tables/ct/updates", open_timeout=60) as ws:
            ws.send(json.dumps({"id": 1, "updates": [{"insert": {"n": 1}}], "time": 6}))
            ack = json.loads(ws.recv(timeout=60))
        assert ack["status"] == "pending" and "failed_views" not in ack, ack  # failed before
        r = c.post("/v1/tables/ct/updates", json={"updates": [], "advance_to": 7})
        assert r.status_code == 200 and "failed_views" not in r.json()
        done = c.get(f"/v1/completions/{pending['token']}").json()
        assert done["status"] == "done" and done["failed_views"] == pending["failed_views"]
        assert done["outputs"] == {"ok": [{"data": {"n": 10**10}, "time": 5, "diff": 1}]}


def test_a_plan_reading_a_failed_view_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A view over a failed view would never move (the failed dataflow left the engine), and
    every later write to the tables beneath would wait on it: it is refused, and writes go
    on being done."""
    span = {
        "op": "flat_map",
        "input": {"op": "table", "name": "r"},
        "as": "i",
        "start": 0,
        "stop": "b",
    }
    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "r", [("b", "int")])
        assert c.post("/v1/views", json={"name": "span", "query": span}).status_code == 201
        assert "span" in write(c, "r", {"updates": [{"insert": {"b": 2**62}}]})["failed_views"]
        on_span = {
            "op": "filter",
            "input": {"op": "view", "name": "span"},
            "where": {"fn": "ge", "args": ["i", 0]},
        }
        err = assert_error(
            c.post("/v1/views", json={"name": "over", "query": on_span}), 409, "view_failed"
        )
        assert err["detail"]["path"] == "query.input" and "LimitError" in err["message"]
        assert_error(c.get("/v1/views/over"), 404)
        assert c.get("/v1/tables/r").json()["readers"] == ["span"]
        body = write(c, "r", {"updates": [{"insert": {"b": 1}}]}, wait="true")
        assert body["status"] == "done" and body["outputs"] == {}


@contextlib.contextmanager
def _long_steps(
    tmp_path: Path, clients: int, workers: int, **settings: object
) -> Iterator[tuple[Server, httpx.Client, list[httpx.Client], ThreadPoolExecutor]]:
    """A server, a client for quick requests, ``clients`` clients whose requests may wait
    for long steps (600 s), and a pool of ``workers`` threads to send those from."""
    with (
        running_server(tmp_path, **settings) as s,
        s.client() as c,
        contextlib.ExitStack() as stack,
        ThreadPoolExecutor(workers) as pool,
    ):
        yield s, c, [stack.enter_context(s.client(timeout=600)) for _ in range(clients)], pool


def _pending_writes(c: httpx.Client) -> float:
    text = c.get("/metrics").text  # answered without the engine
    line = next(x for x in text.splitlines() if x.startswith("difflow_pending_writes "))
    return float(line.split()[1])


def _stepping(
    c: httpx.Client,
    pool: concurrent.futures.ThreadPoolExecutor,
    writer: httpx.Client,
    table: str,
    x: int,
) -> concurrent.futures.Future:
    """The answer to come of ``writer``'s write of row ``x`` to ``table``, once the write is
    accepted and its step runs (no other write pending)."""
    long = pool.submit(
        writer.post, f"/v1/tables/{table}/updates", json={"updates": [{"insert": {"x": x}}]}
    )
    _until(lambda: _pending_writes(c) >= 1, "the write accepted and stepping")
    return long


def _sent(client: httpx.Client, table: str, x: int) -> httpx.Response:
    """``client``'s ``wait=false`` write of row ``x`` to ``table``."""
    return client.post(
        f"/v1/tables/{table}/updates?wait=false", json={"updates": [{"insert": {"x": x}}]}
    )


def _making(
    pool: concurrent.futures.ThreadPoolExecutor, client: httpx.Client, table: str
) -> concurrent.futures.Future:
    """The answer to come of ``client``'s creation of ``table`` (one int column ``x``)."""
    columns = [{"name": "x", "type": "int"}]
    return pool.submit(client.post, "/v1/tables", json={"name": table, "columns": columns})


def test_reads_a_long_write_cannot_change_are_answered_during_its_step(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A write's step runs the rounds of the loops it reaches. Between them, reads of
    another table, and of a view that reads none of the tables written, are answered as of
    before the step (audit 70: they waited for all of it); a read of the table written or
    of a view that reads it waits for the step, and sees the write."""
    rounds = 200_000  # seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 3, 3) as (s, c, (writer, late, later), pool):
        make_table(c, "start", [("x", "int")])
        make_table(c, "other", [("x", "int")])
        write(c, "other", {"updates": [{"insert": {"x": 5}}]})
        make_view(c, "shift", {**SHIFT, "max_iterations": rounds})  # no rounds yet: no rows
        make_view(c, "plain", {"op": "table", "name": "other"})
        make_view(c, "mirror", {"op": "table", "name": "start"})
        long = _stepping(c, pool, writer, "start", 0)
        assert row_counts(c, "plain") == {(("x", 5),): 1}
        assert c.get("/v1/views/plain").json()["rows"] == 1
        assert c.get("/v1/tables/other").json()["rows"] == 1
        with connect(f"{s.ws_url}/v1/views/plain/subscribe") as ws:
            snap = json.loads(ws.recv(timeout=60))
        assert snap["type"] == "snapshot" and snap["updates"] == [{"data": {"x": 5}, "diff": 1}]
        assert_error(c.get("/v1/views/nothing/rows"), 404, "not_found")
        mirrored = pool.submit(late.get, "/v1/views/mirror/rows")
        table = pool.submit(later.get, "/v1/tables/start")
        _wait_for_queue(c, 2)  # the reads of what the write changes wait
        assert not long.done()
        body = long.result(timeout=600).json()
        t = body["times"][0]
        assert body["outputs"] == {
            "shift": [{"data": {"x": rounds}, "time": t, "diff": 1}],
            "mirror": [{"data": {"x": 0}, "time": t, "diff": 1}],
        }
        read = mirrored.result(timeout=600).json()
        assert read["time"] == t and read["rows"] == [{"data": {"x": 0}, "count": 1}]
        assert table.result(timeout=600).json()["frontier"] == [t + 1]


def test_writes_sent_during_a_long_write_step_are_accepted_in_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``wait=false`` is answered at once (API.md), also while another write's step runs
    (audit 72: it waited for the step): writes are accepted between the step's rounds and
    stepped after it, ahead of a change queued before them (the creation of another table).
    A read of what they change, queued after them, waits for them and sees them."""
    rounds = 200_000  # seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 3, 3) as (_s, c, (writer, late, maker), pool):
        make_table(c, "start", [("x", "int")])
        make_table(c, "other", [("x", "int")])
        make_table(c, "quiet", [("x", "int")])
        make_view(c, "shift", {**SHIFT, "max_iterations": rounds})  # no rounds yet: no rows
        make_view(c, "plain", {"op": "table", "name": "other"})
        make_view(c, "still", {"op": "table", "name": "quiet"})
        long = _stepping(c, pool, writer, "start", 0)
        sent = _sent(c, "other", 5)
        assert sent.status_code == 202 and not long.done()
        token = sent.json()["token"]
        assert c.get(f"/v1/completions/{token}").json()["status"] == "pending"
        plain = pool.submit(late.get, "/v1/views/plain/rows")  # changed by the write: waits
        _wait_for_queue(c, 1)
        assert c.get("/v1/views/still/rows").json()["rows"] == []  # changed by nothing
        made = _making(pool, maker, "made")
        _wait_for_queue(c, 2)
        passing = _sent(c, "quiet", 7)
        assert passing.status_code == 202 and not long.done() and not made.done()
        body = long.result(timeout=600).json()
        assert body["outputs"] == {
            "shift": [{"data": {"x": rounds}, "time": body["times"][0], "diff": 1}]
        }
        assert made.result(timeout=600).status_code == 201
        read = plain.result(timeout=600).json()
        assert read["rows"] == [{"data": {"x": 5}, "count": 1}]
        _until(lambda: c.get(f"/v1/completions/{token}").status_code == 200, "the write done")
        done = c.get(f"/v1/completions/{token}").json()
        t = body["times"][0] + 1  # the first write accepted during the step takes the next
        assert done["times"] == [t] and read["time"] >= t
        assert done["outputs"] == {"plain": [{"data": {"x": 5}, "time": t, "diff": 1}]}


def test_a_read_waiting_on_a_step_is_answered_before_the_writes_accepted_in_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A read of what a long step writes waits for the step, and is answered as soon as it
    ends, before the step of a write accepted during it but sent after the read (audit 73:
    under a stream of such writes the read waited through several steps, seeing each)."""
    rounds = 100_000  # seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 3, 3) as (_s, c, (writer, viewer, more), pool):
        make_table(c, "start", [("x", "int")])
        make_view(c, "shift", {**SHIFT, "max_iterations": rounds})  # no rounds yet: no rows
        make_view(c, "mirror", {"op": "table", "name": "start"})
        long = _stepping(c, pool, writer, "start", 0)
        mirrored = pool.submit(viewer.get, "/v1/views/mirror/rows")
        _wait_for_queue(c, 1)  # it waits for the step
        sent = _sent(c, "start", 1)
        assert sent.status_code == 202 and not long.done()
        # a read sent after the write accepted waits for its step, and sees it
        after = pool.submit(more.get, "/v1/views/mirror/rows")
        t = long.result(timeout=600).json()["times"][0]
        read = mirrored.result(timeout=600).json()
        assert read["time"] == t and read["rows"] == [{"data": {"x": 0}, "count": 1}]
        assert c.get(f"/v1/completions/{sent.json()['token']}").status_code == 202
        rows = after.result(timeout=600).json()["rows"]
        assert sorted(r["data"]["x"] for r in rows) == [0, 1]
        assert c.get(f"/v1/completions/{sent.json()['token']}").status_code == 200


def test_a_change_queued_during_a_step_is_passed_by_no_write_in_the_next(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A table's creation queued during a long step is passed by the writes accepted in it,
    but not by those sent during the next step, theirs: it runs once that step ends, before
    them (audit 77: a stream of ``wait=false`` writes, each step accepting the next, held it
    and everything queued behind it back until the stream stopped)."""
    rounds = 100_000  # seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 3, 3) as (_s, c, (writer, maker, late), pool):
        make_table(c, "start", [("x", "int")])
        make_table(c, "quiet", [("x", "int")])
        make_view(c, "shift", {**SHIFT, "max_iterations": rounds})  # no rounds yet: no rows
        long = _stepping(c, pool, writer, "start", 0)
        made = _making(pool, maker, "made")
        _wait_for_queue(c, 1)
        # accepted during this step, ahead of the creation; its own step is long too
        sent = _sent(c, "start", 1)
        assert sent.status_code == 202 and not made.done()
        token = sent.json()["token"]
        assert long.result(timeout=600).json()["status"] == "done"
        # the accepted write's step: a write sent now waits for it and for the creation
        assert c.get(f"/v1/completions/{token}").status_code == 202
        after = _sent(late, "quiet", 7)
        assert after.status_code == 202
        assert c.get(f"/v1/completions/{token}").status_code == 200
        assert made.result(timeout=600).status_code == 201


def test_a_write_behind_a_queued_table_change_is_checked_after_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A write sent while a table's creation, or its drop and creation again, wait behind a
    long step is checked against the tables once they have run (audit 73: it was checked on
    arrival, so a write to a table about to be created was a 404). One that does not fit the
    table as it is then is refused, and leaves no trace."""
    rounds = 200_000  # seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 7, 7) as (_s, c, (writer, *clients), pool):
        make_table(c, "start", [("x", "int")])
        make_table(c, "again", [("x", "int")])
        make_view(c, "shift", {**SHIFT, "max_iterations": rounds})  # no rounds yet: no rows
        long = _stepping(c, pool, writer, "start", 0)
        table = {"columns": [{"name": "s", "type": "string"}]}
        made = pool.submit(clients[0].post, "/v1/tables", json={"name": "new", **table})
        _wait_for_queue(c, 1)
        dropped = pool.submit(clients[1].delete, "/v1/tables/again")
        _wait_for_queue(c, 2)
        remade = pool.submit(clients[2].post, "/v1/tables", json={"name": "again", **table})
        _wait_for_queue(c, 3)
        rows = {"updates": [{"insert": {"s": "a"}}]}
        to_new = pool.submit(clients[3].post, "/v1/tables/new/updates?wait=false", json=rows)
        to_again = pool.submit(clients[4].post, "/v1/tables/again/updates", json=rows)
        old_rows = {"updates": [{"insert": {"x": 1}}]}  # the dropped table's columns
        misfit = pool.submit(clients[5].post, "/v1/tables/again/updates", json=old_rows)
        _wait_for_queue(c, 6)
        assert not long.done()
        changes = [f.result(timeout=600).status_code for f in (made, dropped, remade)]
        assert changes == [201, 204, 201]
        assert to_new.result(timeout=600).status_code == 202
        assert to_again.result(timeout=600).json()["status"] == "done"
        assert_error(misfit.result(timeout=600), 422)
        assert long.result(timeout=600).json()["status"] == "done"
        assert c.get("/v1/tables/new").json()["rows"] == 1
        assert c.get("/v1/tables/again").json()["rows"] == 1


def test_an_advance_accepted_during_a_step_is_done_with_the_writes_it_makes_final(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An ``advance_to`` accepted during a step is answered once its views' frontiers have
    moved, so the writes it makes final are done when it is (audit 74: it was answered done
    at the end of that step, while they stayed pending a step longer)."""
    rounds = 100_000  # seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 2, 1) as (_s, c, (writer, advancer), pool):
        # made first, its operators run before the loop's in a step
        make_table(c, "timed", [("x", "int")], timing="client")
        make_view(c, "mirror", {"op": "table", "name": "timed"})
        make_table(c, "start", [("x", "int")])
        make_view(c, "shift", {**SHIFT, "max_iterations": rounds})  # no rounds yet: no rows
        long = _stepping(c, pool, writer, "start", 0)
        time.sleep(0.5)  # into the loop's rounds, past the operators of "timed"
        rows = {"updates": [{"insert": {"x": 1}, "time": 3}]}
        sent = c.post("/v1/tables/timed/updates?wait=false", json=rows)
        assert sent.status_code == 202 and not long.done()
        # the next step runs long too: a write done too soon is seen pending meanwhile
        more = _sent(c, "start", 1)
        assert more.status_code == 202 and not long.done()
        advanced = advancer.post("/v1/tables/timed/updates", json={"updates": [], "advance_to": 4})
        assert advanced.json()["status"] == "done"
        done = c.get(f"/v1/completions/{sent.json()['token']}")
        assert done.status_code == 200, done.text
        assert done.json()["outputs"] == {"mirror": [{"data": {"x": 1}, "time": 3, "diff": 1}]}
        assert long.result(timeout=600).json()["status"] == "done"


def test_a_delete_waits_for_the_writes_accepted_during_a_step_before_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A write accepted during a step comes before a DELETE queued after it: the DELETE does
    not stop the view in that step, whose write sees the view; it stops it in the next, the
    accepted write's, which then lists the view nowhere (dropped, as if before it)."""
    rounds = 100_000  # seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 2, 2) as (_s, c, (writer, dropper), pool):
        make_table(c, "start", [("x", "int")])
        make_view(c, "shift", {**SHIFT, "max_iterations": rounds})  # no rows yet: no rounds
        long = _stepping(c, pool, writer, "start", 0)
        sent = _sent(c, "start", 1)
        assert sent.status_code == 202 and not long.done()
        dropped = pool.submit(dropper.delete, "/v1/views/shift")
        _wait_for_queue(c, 1)
        assert not long.done()
        body = long.result(timeout=600).json()
        assert body["status"] == "done" and "failed_views" not in body
        assert body["outputs"] == {
            "shift": [{"data": {"x": rounds}, "time": body["times"][0], "diff": 1}]
        }
        assert dropped.result(timeout=600).status_code == 204
        token = sent.json()["token"]
        _until(lambda: c.get(f"/v1/completions/{token}").status_code == 200, "the write done")
        done = c.get(f"/v1/completions/{token}").json()
        assert done["outputs"] == {} and "failed_views" not in done, done


def test_a_delete_stops_a_view_whose_loop_runs_in_a_write_step(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A write can start a loop that does not end (or not soon). A DELETE of its view waits
    for the step, and meanwhile stops the view's loops at their next round: the step ends,
    the write's answer lists the view nowhere (dropped, as if before the write: it did not
    fail, audit 83), and the view is gone. A view
    that another view reads is not stopped (its DELETE is a 409, once the step is over), nor
    one whose DELETE has something queued before it, which must see the view as it is."""
    with _long_steps(tmp_path, 3, 3, iterate_round_limit=10**10) as (
        _s,
        c,
        (writer, other, third),
        pool,
    ):
        make_table(c, "start", [("x", "int")])
        make_view(c, "shift", SHIFT)  # no rows yet: no rounds
        make_view(c, "mirror", {"op": "table", "name": "start"})
        long = _stepping(c, pool, writer, "start", 0)
        assert c.delete("/v1/views/shift").status_code == 204
        body = long.result(timeout=60).json()
        assert body["status"] == "done" and "failed_views" not in body, body
        assert body["outputs"] == {
            "mirror": [{"data": {"x": 0}, "time": body["times"][0], "diff": 1}]
        }
        assert_error(c.get("/v1/views/shift"), 404)
        assert c.get("/v1/tables/start").json()["readers"] == ["mirror"]
        # read by another view: not stopped; its DELETE answers 409 once the step is over
        rounds = 100_000  # a few seconds of rounds (about 50 us each)
        make_table(c, "second", [("x", "int")])
        from_second = {**SHIFT, "vars": {"x": {"op": "table", "name": "second"}}}
        make_view(c, "shift", {**from_second, "max_iterations": rounds})
        make_view(c, "above", {"op": "view", "name": "shift"})
        long = _stepping(c, pool, writer, "second", 2)
        assert_error(c.delete("/v1/views/shift"), 409, "in_use")
        body = long.result(timeout=60).json()
        t = body["times"][0]
        assert body["status"] == "done" and "failed_views" not in body
        assert body["outputs"] == {
            "shift": [{"data": {"x": 2 + rounds}, "time": t, "diff": 1}],
            "above": [{"data": {"x": 2 + rounds}, "time": t, "diff": 1}],
        }
        # a registration queued before the DELETE comes first (audit 71): it reads the view,
        # so the view is not stopped, and a read of the new view queued behind its
        # registration waits for it
        make_table(c, "third", [("x", "int")])
        make_view(
            c,
            "ctr",
            {**SHIFT, "vars": {"x": {"op": "table", "name": "third"}}, "max_iterations": rounds},
        )
        long = _stepping(c, pool, writer, "third", 3)
        reader = pool.submit(
            other.post, "/v1/views", json={"name": "rd", "query": {"op": "view", "name": "ctr"}}
        )
        _wait_for_queue(c, 1)
        dropped = pool.submit(third.delete, "/v1/views/ctr")
        _wait_for_queue(c, 2)
        assert c.get("/v1/views/rd").json()["name"] == "rd"
        assert reader.result(timeout=60).status_code == 201
        assert_error(dropped.result(timeout=60), 409, "in_use")
        body = long.result(timeout=60).json()
        assert "failed_views" not in body
        assert body["outputs"]["ctr"] == [
            {"data": {"x": 3 + rounds}, "time": body["times"][0], "diff": 1}
        ]


def test_what_is_queued_before_a_delete_behind_a_step_does_not_keep_the_view(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Audit 72: a closed subscription's unsubscribe, queued before a DELETE, kept the DELETE
    from stopping its view's loops; a DELETE that cancelled a queued duplicate registration
    of an existing view's name answered 204 and left the view. And the subscribers of a view
    stopped for its DELETE hear that it was dropped."""
    rounds = 100_000  # a few seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 2, 2, iterate_round_limit=10**10) as (s, c, (writer, other), pool):
        make_table(c, "start", [("x", "int")])
        make_table(c, "other", [("x", "int")])
        make_view(c, "shift", SHIFT)  # no rows yet: no rounds
        make_view(c, "mirror", {"op": "table", "name": "other"})
        with connect(f"{s.ws_url}/v1/views/shift/subscribe?progress=false") as sub:
            assert json.loads(sub.recv(timeout=60))["type"] == "snapshot"
            long = _stepping(c, pool, writer, "start", 0)
            with connect(f"{s.ws_url}/v1/views/mirror/subscribe?snapshot=false") as ws:
                assert json.loads(ws.recv(timeout=60))["type"] == "progress"  # mid-step
            assert c.delete("/v1/views/shift", timeout=60).status_code == 204
            closed = json.loads(sub.recv(timeout=60))
        assert closed["type"] == "closed" and "dropped" in closed["reason"], closed
        body = long.result(timeout=60).json()
        assert "failed_views" not in body and "shift" not in body["outputs"], body
        make_table(c, "second", [("x", "int")])
        from_second = {**SHIFT, "vars": {"x": {"op": "table", "name": "second"}}}
        make_view(c, "bounded", {**from_second, "max_iterations": rounds})
        long = _stepping(c, pool, writer, "second", 0)
        again = {"name": "mirror", "query": {"op": "table", "name": "second"}}
        duplicate = pool.submit(other.post, "/v1/views", json=again)
        _wait_for_queue(c, 1)
        assert c.delete("/v1/views/mirror").status_code == 204
        assert_error(duplicate.result(timeout=60), 409, "cancelled")
        assert_error(c.get("/v1/views/mirror"), 404)
        assert c.get("/v1/tables/other").json()["readers"] == []
        assert long.result(timeout=60).json()["status"] == "done"


def test_deletes_of_a_view_and_its_readers_next_in_line_stop_its_loops(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A view read by another view is stopped when the DELETEs next in line drop its readers
    first, then it: the step ends, both views are gone, and the reader's subscribers hear
    that it was dropped. In the other order the view's DELETE answers 409, so nothing
    stops: the loop runs to its bound."""
    rounds = 100_000  # a few seconds of rounds (about 50 us each)
    with _long_steps(tmp_path, 3, 3, iterate_round_limit=10**10) as (
        s,
        c,
        (writer, first, second),
        pool,
    ):
        make_table(c, "start", [("x", "int")])
        # no rows yet: no rounds; bounded, so that a DELETE that does not stop it fails in
        # minutes, not never
        make_view(c, "shift", {**SHIFT, "max_iterations": 1_000_000})
        make_view(c, "above", {"op": "view", "name": "shift"})
        make_view(c, "top", {"op": "view", "name": "above"})
        with connect(f"{s.ws_url}/v1/views/above/subscribe?progress=false") as sub:
            assert json.loads(sub.recv(timeout=60))["type"] == "snapshot"
            long = _stepping(c, pool, writer, "start", 0)
            drops = [pool.submit(first.delete, "/v1/views/top")]
            _wait_for_queue(c, 1)
            drops.append(pool.submit(second.delete, "/v1/views/above"))
            _wait_for_queue(c, 2)
            assert c.delete("/v1/views/shift", timeout=60).status_code == 204
            assert [d.result(timeout=60).status_code for d in drops] == [204, 204]
            closed = json.loads(sub.recv(timeout=60))
        assert closed["type"] == "closed" and "dropped" in closed["reason"], closed
        body = long.result(timeout=60).json()
        assert "failed_views" not in body and body["outputs"] == {}, body
        assert c.get("/v1/views").json()["views"] == []
        # the view first: its DELETE is a 409 (the reader is still there), so nothing stops
        make_view(c, "shift", {**SHIFT, "max_iterations": rounds})
        make_view(c, "above", {"op": "view", "name": "shift"})
        long = _stepping(c, pool, writer, "start", 1)
        drop = pool.submit(first.delete, "/v1/views/shift")
        _wait_for_queue(c, 1)
        assert c.delete("/v1/views/above", timeout=60).status_code == 204
        assert_error(drop.result(timeout=60), 409, "in_use")
        body = long.result(timeout=60).json()
        assert "failed_views" not in body
        assert body["outputs"]["shift"] == [
            {"data": {"x": 1 + rounds}, "time": body["times"][0], "diff": 1}
        ]


def test_a_read_queued_behind_a_registration_waits_for_it_during_another(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Reads answered between a registration's rounds pass writes queued before them, but
    never a change: a read of a view whose registration is queued waits for it (audit 72:
    it answered 404)."""
    with _long_steps(tmp_path, 3, 3, iterate_round_limit=10**10) as (
        _s,
        c,
        (other, third, fourth),
        pool,
    ):
        make_table(c, "start", [("x", "int")])
        write(c, "start", {"updates": [{"insert": {"x": 0}}]})
        post = pool.submit(other.post, "/v1/views", json={"name": "shift", "query": SHIFT})
        _wait_until_registering(c, "shift")
        plain = {"name": "plain", "query": {"op": "table", "name": "start"}}
        queued = pool.submit(third.post, "/v1/views", json=plain)
        _wait_for_queue(c, 1)
        read = pool.submit(fourth.get, "/v1/views/plain")
        _wait_for_queue(c, 2)
        _cancel(c, "shift")
        assert_error(post.result(timeout=60), 409, "cancelled")
        assert queued.result(timeout=60).status_code == 201
        assert read.result(timeout=60).json()["rows"] == 1


def test_a_stop_closes_the_port_at_once_and_health_says_it_is_stopping(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Audit 100: while a stop waited for the engine's step, the port still took new
    connections (each write on one answered 503) and ``/healthz`` answered ok, so a load
    balancer would have gone on sending work. The port now closes as the stop begins, and
    ``/healthz`` on a connection already open answers 503 ``shutting_down``."""
    with _long_steps(tmp_path, 1, 1, iterate_round_limit=10**10) as (s, c, (writer,), pool):
        make_table(c, "start", [("x", "int")])
        make_view(c, "shift", SHIFT)  # no rows yet: no rounds
        long = _stepping(c, pool, writer, "start", 0)  # its loop never ends
        assert c.get("/healthz").json() == {"status": "ok"}
        s.process.terminate()  # the stop waits up to 5 s for the step
        _until(lambda: c.get("/healthz").status_code == 503, "/healthz answering 503")
        assert_error(c.get("/healthz"), 503, "shutting_down")
        host, port = s.url.removeprefix("http://").rsplit(":", 1)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=5).close()
        assert s.process.poll() is None  # refused while the stop waits, not after it
        assert_error(long.result(timeout=60), 503, "shutting_down")
