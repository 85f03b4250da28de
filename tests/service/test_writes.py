"""Writes over real HTTP: outputs and latency, client times and frontiers, completions,
primary keys, the columnar form, and bad input that must leave no trace."""

from __future__ import annotations

import gzip
import json
import socket
from time import sleep
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.service.conftest import (
    assert_error,
    make_count_view,
    make_table,
    make_view,
    row_counts,
    rows,
    write,
)
from tests.service.server import running_server


def test_server_timed_write_returns_outputs_and_latency(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("k", "string"), ("v", "int")])
    make_count_view(client, f"{name}_n", name, ("k",))
    body = write(
        client, name, {"updates": [{"insert": {"k": "a", "v": 1}}, {"insert": {"k": "a", "v": 2}}]}
    )
    assert body["status"] == "done" and len(body["times"]) == 1
    (t,) = body["times"]
    assert body["frontier"] == [t + 1]
    assert body["latency_ms"] >= 0
    assert body["outputs"] == {f"{name}_n": [{"data": {"k": "a", "n": 2}, "time": t, "diff": 1}]}
    body = write(client, name, {"updates": [{"delete": {"k": "a", "v": 1}}]})
    (t2,) = body["times"]
    assert t2 > t
    assert sorted(body["outputs"][f"{name}_n"], key=lambda u: u["diff"]) == [
        {"data": {"k": "a", "n": 2}, "time": t2, "diff": -1},
        {"data": {"k": "a", "n": 1}, "time": t2, "diff": 1},
    ]


def test_client_timed_pending_then_done(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("k", "string"), ("v", "int")], timing="client")
    make_count_view(client, f"{name}_n", name, ("k",))
    r = client.post(
        f"/v1/tables/{name}/updates", json={"updates": [{"insert": {"k": "x", "v": 1}, "time": 5}]}
    )
    assert r.status_code == 202, r.text
    pending = r.json()
    assert pending["status"] == "pending"
    token = pending["token"]
    assert client.get(f"/v1/completions/{token}").status_code == 202
    done = write(client, name, {"updates": [], "advance_to": 6})
    assert done["frontier"] == [6]
    r = client.get(f"/v1/completions/{token}")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "done" and body["times"] == [5]
    assert body["outputs"][f"{name}_n"] == [{"data": {"k": "x", "n": 1}, "time": 5, "diff": 1}]
    assert_error(client.get("/v1/completions/w-does-not-exist"), 404)


def test_completions_keep_a_bounded_number_of_output_rows(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Finished writes' outputs are remembered up to ``COMPLETION_ROWS_KEPT`` rows in all,
    oldest forgotten first, the latest step's always kept: a server taking big writes does not
    hold every output it ever answered (audit 22: 2.3 GB after three 1M-row writes to
    views since dropped)."""
    with (
        running_server(tmp_path_factory.mktemp("server"), completion_rows_kept=25) as s,
        s.client() as c,
    ):
        make_table(c, "t", [("x", "int")])
        r = c.post("/v1/views", json={"name": "v", "query": {"op": "table", "name": "t"}})
        assert r.status_code == 201, r.text

        def rows_write(lo: int, hi: int) -> str:
            body = write(c, "t", {"columns": {"x": list(range(lo, hi))}})
            assert len(body["outputs"]["v"]) == hi - lo
            return body["token"]

        w1, w2, w3 = rows_write(0, 10), rows_write(10, 20), rows_write(20, 30)
        err = assert_error(c.get(f"/v1/completions/{w1}"), 404)
        assert "25 output rows" in err["message"], err
        for token, lo in ((w2, 10), (w3, 20)):
            r = c.get(f"/v1/completions/{token}")
            assert r.status_code == 200, r.text
            assert sorted(u["data"]["x"] for u in r.json()["outputs"]["v"]) == list(
                range(lo, lo + 10)
            )
        w4 = rows_write(30, 70)  # alone more than the bound: kept, the others forgotten
        assert [c.get(f"/v1/completions/{t}").status_code for t in (w2, w3, w4)] == [
            404,
            404,
            200,
        ]
        assert len(c.get(f"/v1/completions/{w4}").json()["outputs"]["v"]) == 40

        # audit 37: a write answered pending, made final by a small write in the same step,
        # is kept with it, past the bound, until later steps' writes push it out
        make_table(c, "a", [("x", "int")], timing="client")
        make_table(c, "b", [("x", "int")], timing="client")
        both = {"op": "concat", "inputs": [{"op": "table", "name": n} for n in ("a", "b")]}
        assert c.post("/v1/views", json={"name": "ab", "query": both}).status_code == 201
        big = write(c, "a", {"columns": {"x": list(range(40))}, "time": 0, "advance_to": 1}, 202)
        assert big["status"] == "pending"
        write(c, "b", {"updates": [], "advance_to": 1})
        r = c.get(f"/v1/completions/{big['token']}")
        assert r.status_code == 200, r.text
        assert sorted(u["data"]["x"] for u in r.json()["outputs"]["ab"]) == list(range(40))
        rows_write(70, 71)
        assert_error(c.get(f"/v1/completions/{big['token']}"), 404)

        # audit 57: writes at one time each list all of that time's changes; those count
        # once, however many writes list them, so the writes outlive the next step
        make_table(c, "s", [("x", "int")], timing="client")
        r = c.post("/v1/views", json={"name": "sv", "query": {"op": "table", "name": "s"}})
        assert r.status_code == 201, r.text
        shared = [
            write(c, "s", {"columns": {"x": [i, 100 + i]}, "time": 0}, 202)["token"]
            for i in range(5)
        ]
        write(c, "s", {"updates": [], "advance_to": 1})  # 10 changes, listed by 5 writes
        rows_write(71, 72)  # a later step
        at_0 = sorted([*range(5), *range(100, 105)])
        for token in shared:
            r = c.get(f"/v1/completions/{token}")
            assert r.status_code == 200, r.text
            assert sorted(u["data"]["x"] for u in r.json()["outputs"]["sv"]) == at_0
        rows_write(72, 88)  # 10 + 1 + 16 rows: past the bound, the oldest forgotten
        assert [c.get(f"/v1/completions/{t}").status_code for t in shared] == [404] * 5


def test_write_that_advances_its_own_frontier_is_done(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("k", "string"), ("v", "int")], timing="client")
    make_count_view(client, f"{name}_n", name, ("k",))
    body = write(
        client,
        name,
        {
            "updates": [{"insert": {"k": "x", "v": 1}}, {"insert": {"k": "y", "v": 1}, "time": 3}],
            "time": 2,
            "advance_to": 4,
        },
    )
    assert body["times"] == [2, 3] and body["frontier"] == [4]
    outs = sorted((u["data"]["k"], u["time"]) for u in body["outputs"][f"{name}_n"])
    assert outs == [("x", 2), ("y", 3)]


def test_wait_false_answers_202_at_once(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("x", "int")])
    r = client.post(
        f"/v1/tables/{name}/updates",
        params={"wait": "false"},
        json={"updates": [{"insert": {"x": 1}}]},
    )
    assert r.status_code == 202
    token = r.json()["token"]
    for _ in range(100):
        r = client.get(f"/v1/completions/{token}")
        if r.status_code == 200:
            break
    assert r.status_code == 200 and r.json()["status"] == "done"


def test_wait_given_twice_is_422_and_writes_nothing(client: httpx.Client, name: str) -> None:
    """Not the last value taken silently (FastAPI's way): which one was meant is unknown."""
    make_table(client, name, [("x", "int")])
    r = client.post(
        f"/v1/tables/{name}/updates",
        params=[("wait", "false"), ("wait", "true")],
        json={"updates": [{"insert": {"x": 1}}]},
    )
    err = assert_error(r, 422, "invalid")
    assert err["detail"] == {"path": "wait"} and "given 2 times" in err["message"]
    r = client.post(
        f"/v1/tables/{name}/updates",
        params={"wait": "maybe"},
        json={"updates": [{"insert": {"x": 1}}]},
    )
    err = assert_error(r, 422, "invalid")
    assert err["detail"] == {"path": "wait"}, "named as any other query parameter is"
    assert err["message"].startswith("wait: Input should be a valid boolean"), err
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 0


def test_a_query_parameter_an_endpoint_does_not_take_is_refused(
    server: Any, client: httpx.Client, name: str
) -> None:
    """A typo was ignored (audits 90 and 93): ``?waits=false`` waited, ``?asof=0`` read the
    latest contents. Unknown parameters are a 422 naming them; nothing is written."""
    make_table(client, name, [("x", "int")])
    make_view(client, f"{name}_v", {"op": "table", "name": name})
    refused = [
        client.post(
            f"/v1/tables/{name}/updates",
            params={"waits": "false"},
            json={"updates": [{"insert": {"x": 1}}]},
        ),
        client.get(f"/v1/views/{name}_v/rows", params={"asof": "0"}),
        client.get(f"/v1/tables/{name}", params={"verbose": "1"}),
        client.get("/healthz", params={"x": ""}),
    ]
    for r, bad in zip(refused, ["waits", "asof", "verbose", "x"], strict=True):
        err = assert_error(r, 422, "invalid")
        assert (
            err["detail"] == {"path": bad} and f"unknown query parameter {bad!r}" in err["message"]
        )
    assert "takes wait" in assert_error(refused[0], 422)["message"]
    document = client.get("/openapi.json").json()
    for path, operations in document["paths"].items():  # every route may answer so
        for method, operation in operations.items():
            assert "422" in operation["responses"], (method, path)
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 0
    assert client.get(f"/v1/views/{name}_v/rows", params={"as_of": "0"}).status_code in (200, 409)
    with connect(f"{server.ws_url}/v1/tables/{name}/updates?wait=false") as ws:
        frame = json.loads(ws.recv(timeout=30))
    assert frame["type"] == "error" and frame["error"]["detail"] == {"path": "wait"}
    url = f"{server.ws_url}/v1/views/{name}_v/subscribe?snapshot=true&snapshots=false"
    with connect(url) as ws:
        frame = json.loads(ws.recv(timeout=30))
    assert frame["type"] == "error" and frame["error"]["detail"] == {"path": "snapshots"}


def test_time_before_frontier_and_backwards_frontier_are_409(
    client: httpx.Client, name: str
) -> None:
    make_table(client, name, [("x", "int")], timing="client")
    write(client, name, {"updates": [], "advance_to": 10})
    assert_error(
        client.post(
            f"/v1/tables/{name}/updates", json={"updates": [{"insert": {"x": 1}, "time": 9}]}
        ),
        409,
        "time_before_frontier",
    )
    # the columnar form names the time where it was given: per row, or the one for all
    for time, path in (([12, 9], "time[1]"), (9, "time")):
        err = assert_error(
            client.post(
                f"/v1/tables/{name}/updates", json={"columns": {"x": [1, 2]}, "time": time}
            ),
            409,
            "time_before_frontier",
        )
        assert err["detail"]["path"] == path
    assert_error(
        client.post(f"/v1/tables/{name}/updates", json={"updates": [], "advance_to": 3}),
        409,
        "frontier_backwards",
    )
    assert client.get(f"/v1/tables/{name}").json()["frontier"] == [10]
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 0


def test_one_bad_row_rejects_the_whole_batch(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("k", "string"), ("v", "int")])
    make_count_view(client, f"{name}_n", name, ("k",))
    write(client, name, {"updates": [{"insert": {"k": "a", "v": 1}}]})
    before_table = client.get(f"/v1/tables/{name}").json()
    before_view = row_counts(client, f"{name}_n")
    bad_batches = [
        {"updates": [{"insert": {"k": "b", "v": 1}}, {"insert": {"k": "c", "v": "two"}}]},
        {"updates": [{"insert": {"k": "b", "v": 1}}, {"insert": {"k": "c", "v": 2, "extra": 1}}]},
        {"updates": [{"insert": {"k": "b", "v": 1}}, {"insert": {"k": "c"}}]},
        {"updates": [{"insert": {"k": "b", "v": 1}}, {"insert": {"k": "c", "v": 1.5}}]},
        {"updates": [{"insert": {"k": "b", "v": 1}}, {"insert": {"k": "c", "v": True}}]},
        {"updates": [{"insert": {"k": "b", "v": 1}}, {"upsert": {"k": "c", "v": 1}}]},
        {"updates": [{"insert": {"k": "b", "v": 1}}, {"bogus": {"k": "c", "v": 1}}]},
        {"updates": [{"insert": {"k": "b", "v": 1}, "time": 3}]},
        {"updates": [], "advance_to": 99},
        {"updates": "nope"},
        {"rows": []},
    ]
    for body in bad_batches:
        err = assert_error(client.post(f"/v1/tables/{name}/updates", json=body), 422)
        assert "path" in (err["detail"] or {}), err
    # integers beyond 64 bits, however the JSON parser reads them, say so
    for big in (2**63, 2**64, 10**20, -(2**64), -(2**63) - 1):  # the last reads as -2.0**63
        body = {"updates": [{"insert": {"k": "b", "v": 1}}, {"insert": {"k": "c", "v": big}}]}
        err = assert_error(client.post(f"/v1/tables/{name}/updates", json=body), 422)
        assert err["detail"]["path"] == "updates[1].insert.v", err
        assert "64 bits" in err["message"], err
    for body, path in (
        ({"updates": [{"weight": 2**62, "data": {"k": "c", "v": 1}}]}, "updates[0].weight"),
        ({"columns": {"k": ["c"], "v": [1]}, "diff": [-(2**62)]}, "diff[0]"),
    ):
        err = assert_error(client.post(f"/v1/tables/{name}/updates", json=body), 422)
        assert err["detail"]["path"] == path, err
        assert "2**62" in err["message"], err
    assert client.get(f"/v1/tables/{name}").json()["rows"] == before_table["rows"]
    assert row_counts(client, f"{name}_n") == before_view


def test_primary_key_semantics(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("id", "int"), ("v", "string")], primary_key=["id"])
    view = f"{name}_all"
    make_view(client, view, {"op": "table", "name": name})
    write(client, name, {"updates": [{"insert": {"id": 1, "v": "a"}}]})
    assert_error(
        client.post(
            f"/v1/tables/{name}/updates", json={"updates": [{"insert": {"id": 1, "v": "b"}}]}
        ),
        422,
        "key_present",
    )
    assert_error(
        client.post(
            f"/v1/tables/{name}/updates", json={"updates": [{"delete": {"id": 2, "v": "a"}}]}
        ),
        422,
        "row_absent",
    )
    assert_error(
        client.post(
            f"/v1/tables/{name}/updates", json={"updates": [{"delete": {"id": 1, "v": "zzz"}}]}
        ),
        422,
        "row_absent",
    )
    body = write(
        client,
        name,
        {"updates": [{"upsert": {"id": 1, "v": "b"}}, {"upsert": {"id": 2, "v": "c"}}]},
    )
    (t,) = body["times"]
    assert all(u["time"] == t for u in body["outputs"][view])
    assert sorted((u["data"]["id"], u["data"]["v"], u["diff"]) for u in body["outputs"][view]) == [
        (1, "a", -1),
        (1, "b", 1),
        (2, "c", 1),
    ]
    assert row_counts(client, view) == {(("id", 1), ("v", "b")): 1, (("id", 2), ("v", "c")): 1}
    # insert then delete of the same key in one write is fine; a failing write changes nothing
    write(
        client,
        name,
        {"updates": [{"insert": {"id": 3, "v": "x"}}, {"delete": {"id": 3, "v": "x"}}]},
    )
    assert_error(
        client.post(
            f"/v1/tables/{name}/updates",
            json={"updates": [{"insert": {"id": 4, "v": "x"}}, {"insert": {"id": 4, "v": "y"}}]},
        ),
        422,
    )
    # the error names where the offending update was given, in either form
    refused: list[tuple[dict[str, Any], str, str]] = [
        (
            {"updates": [{"upsert": {"id": 5, "v": "x"}}, {"insert": {"id": 1, "v": "y"}}]},
            "key_present",
            "updates[1]",
        ),
        ({"columns": {"id": [5, 1], "v": ["x", "y"]}}, "key_present", "columns.id[1]"),
        (
            {"columns": {"id": [5, 6], "v": ["x", "y"]}, "diff": [1, -1]},
            "row_absent",
            "columns.id[1]",
        ),
        ({"columns": {"id": [5], "v": ["x"]}, "diff": [2]}, "bad_weight", "diff[0]"),
        (
            {"updates": [{"weight": 2, "data": {"id": 5, "v": "x"}}]},
            "bad_weight",
            "updates[0].weight",
        ),
        # a column unknown or missing in a row is named (audit 103: the row)
        (
            {"updates": [{"insert": {"id": 5, "v": "x", "z": 1}}]},
            "wrong_columns",
            "updates[0].insert.z",
        ),
        ({"updates": [{"insert": {"id": 5}}]}, "wrong_columns", "updates[0].insert.v"),
        # a misspelt field is named (audit 100: the update)
        ({"updates": [{"inserts": {"id": 5, "v": "x"}}]}, "invalid_update", "updates[0].inserts"),
        (
            {"updates": [{"insert": {"id": 5, "v": "x"}, "tme": 3}]},
            "invalid_update",
            "updates[0].tme",
        ),
        (
            {"updates": [{"insert": {"id": 5, "v": "x"}, "delete": {"id": 5, "v": "x"}}]},
            "invalid_update",
            "updates[0]",
        ),
    ]
    for body, code, path in refused:
        err = assert_error(client.post(f"/v1/tables/{name}/updates", json=body), 422, code)
        assert err["detail"]["path"] == path and err["message"].startswith(path), err
        if code == "bad_weight":  # audit 48: it said 1 or -1, though 0 is taken too
            assert "1, -1 or 0" in err["message"]
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 2


def test_a_gzipped_body_is_inflated_and_other_encodings_refused(
    client: httpx.Client, name: str
) -> None:
    """``Content-Encoding: gzip`` is taken (audit 49: it was read as JSON, a 400 about
    surrogates); any other encoding is a 400 naming it, and nothing is written."""
    make_table(client, name, [("x", "int")])
    body = json.dumps({"columns": {"x": list(range(1000))}}).encode()
    url = f"/v1/tables/{name}/updates"
    zipped = {"content-encoding": "gzip", "content-type": "application/json"}
    done = client.post(url, content=gzip.compress(body), headers=zipped)
    assert done.status_code == 200 and done.json()["times"], done.text
    for encoding, content, code in [
        ("br", body, "unsupported_encoding"),
        ("gzip", body, "invalid_json"),  # not gzip data
        ("gzip", gzip.compress(body)[:-4], "invalid_json"),  # cut short
    ]:
        headers = {"content-encoding": encoding}
        err = assert_error(client.post(url, content=content, headers=headers), 400, code)
        assert encoding in err["message"] or "gzip" in err["message"], err
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 1000
    r = client.post(url, content=b'{"updates": [\xff]}')
    assert "not UTF-8" in assert_error(r, 400, "invalid_json")["message"]


def test_columnar_form(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("k", "string"), ("v", "float")], timing="client")
    view = f"{name}_s"
    plan = {
        "op": "reduce",
        "input": {"op": "table", "name": name},
        "by": ["k"],
        "aggregates": {"s": {"fn": "sum", "of": "v"}},
    }
    assert client.post("/v1/views", json={"name": view, "query": plan}).status_code == 201
    body = write(
        client,
        name,
        {
            "columns": {"k": ["a", "a", "b"], "v": [1.5, 2, 4.0]},
            "diff": [1, 2, 1],
            "time": [0, 1, 1],
            "advance_to": 2,
        },
    )
    assert body["times"] == [0, 1]
    assert row_counts(client, view) == {(("k", "a"), ("s", 5.5)): 1, (("k", "b"), ("s", 4.0)): 1}
    assert row_counts(client, view, as_of=1) == row_counts(client, view)
    assert row_counts(client, view, as_of=0) == {(("k", "a"), ("s", 1.5)): 1}
    err = assert_error(
        client.get(f"/v1/views/{view}/rows", params={"as_of": 2}), 409, "time_unavailable"
    )
    assert err["detail"] == {"valid_from": [0], "frontier": [2]}
    assert_error(
        client.post(
            f"/v1/tables/{name}/updates", json={"columns": {"k": ["a"], "v": [1.0, 2.0]}, "time": 2}
        ),
        422,
    )
    assert_error(
        client.post(f"/v1/tables/{name}/updates", json={"columns": {"k": ["a"]}, "time": 2}),
        422,
        "wrong_columns",
    )
    # a time of one dimension is an integer; a list of times has one per row
    bad_times: list[tuple[dict[str, Any], str]] = [
        ({"updates": [{"insert": {"k": "a", "v": 1.0}, "time": [4]}]}, "updates[0].time"),
        ({"updates": [{"insert": {"k": "a", "v": 1.0}}], "time": [4]}, "time"),
        ({"columns": {"k": ["a", "b"], "v": [1.0, 2.0]}, "time": [4]}, "time"),
        ({"columns": {"k": ["a"], "v": [1.0]}, "time": [[4]]}, "time[0]"),
        ({"updates": [], "advance_to": [[9]]}, "advance_to[0]"),
    ]
    for body, path in bad_times:
        err = assert_error(client.post(f"/v1/tables/{name}/updates", json=body), 422, "bad_time")
        assert err["detail"]["path"] == path, (body, err)


def test_two_dimensional_times(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("k", "int")], timing="client", time_dims=2)
    view = f"{name}_n"
    make_count_view(client, view, name)
    write(
        client,
        name,
        {
            "updates": [{"insert": {"k": 1}, "time": [0, 1]}, {"insert": {"k": 2}, "time": [1, 0]}],
            "advance_to": [[2, 2]],
        },
    )
    assert row_counts(client, view, as_of="1,1") == {(("n", 2),): 1}
    assert row_counts(client, view, as_of="0,1") == {(("n", 1),): 1}
    assert row_counts(client, view, as_of="1,0") == {(("n", 1),): 1}
    assert_error(
        client.get(f"/v1/views/{view}/rows", params={"as_of": "5,5"}), 409, "time_unavailable"
    )
    assert_error(
        client.post(
            f"/v1/tables/{name}/updates", json={"updates": [{"insert": {"k": 1}, "time": 3}]}
        ),
        422,
        "bad_time",
    )


def test_default_read_on_an_antichain_frontier(client: httpx.Client, name: str) -> None:
    """Without ``as_of`` a read names the latest complete time: below the frontier
    ``[[0, 2], [2, 0]]`` that is ``[1, 1]`` (one below the frontier's meet, ``[-1, -1]``,
    is no time); where several are latest, the lexicographically greatest."""
    make_table(client, name, [("k", "int")], timing="client", time_dims=2)
    view = f"{name}_n"
    make_count_view(client, view, name)
    ups = [{"insert": {"k": 1}, "time": [0, 1]}, {"insert": {"k": 2}, "time": [1, 0]}]
    write(client, name, {"updates": ups, "advance_to": [[0, 2], [2, 0]]})
    body = rows(client, view)
    assert body["time"] == [1, 1] and body["frontier"] == [[0, 2], [2, 0]]
    assert body["rows"] == [{"data": {"n": 2}, "count": 1}]
    # complete now: everything below [3, 3] but [1, 2] and [2, 2]; latest: [0, 2] and [2, 1]
    ups = [{"insert": {"k": 3}, "time": [2, 1]}, {"insert": {"k": 4}, "time": [0, 2]}]
    write(client, name, {"updates": ups, "advance_to": [[0, 3], [1, 2], [3, 0]]})
    body = rows(client, view)
    assert body["time"] == [2, 1] and body["rows"] == [{"data": {"n": 3}, "count": 1}]
    assert rows(client, view, as_of="0,2")["rows"] == [{"data": {"n": 2}, "count": 1}]
    # one frontier element: one below it
    write(client, name, {"updates": [], "advance_to": [[4, 5]]})
    assert rows(client, view)["time"] == [3, 4]


def test_default_read_where_the_frontier_bounds_one_coordinate(
    client: httpx.Client, name: str
) -> None:
    """Below ``[[0, 2]]`` every ``(x, 1)`` is complete: a read without ``as_of`` names the
    data's greatest ``x`` (it named no time and no rows)."""
    make_table(client, name, [("k", "int")], timing="client", time_dims=2)
    view = f"{name}_n"
    make_count_view(client, view, name)
    ups = [{"insert": {"k": 1}, "time": [0, 0]}, {"insert": {"k": 2}, "time": [3, 1]}]
    write(client, name, {"updates": ups, "advance_to": [[0, 2]]})
    body = rows(client, view)
    assert body["time"] == [3, 1] and body["rows"] == [{"data": {"n": 2}, "count": 1}]


def test_default_read_reaches_the_data_past_the_frontiers_maximum(
    client: httpx.Client, name: str
) -> None:
    """Below ``[[1, 7]]`` every ``(x, 6)`` is complete: moving there from ``[[0, 7], [3, 0]]``
    keeps the row at ``[1, 1]`` in the default read (``(1, 6)``; it read ``(0, 6)``)."""
    make_table(client, name, [("k", "int")], timing="client", time_dims=2)
    view = f"{name}_n"
    make_count_view(client, view, name)
    ups = [{"insert": {"k": k}, "time": t} for k, t in ((1, [0, 0]), (2, [1, 1]), (3, [0, 5]))]
    write(client, name, {"updates": ups, "advance_to": [[0, 7], [3, 0]]})
    assert rows(client, view) == {
        "time": [2, 6],
        "frontier": [[0, 7], [3, 0]],
        "rows": [{"data": {"n": 3}, "count": 1}],
    }
    write(client, name, {"updates": [], "advance_to": [[1, 7]]})
    assert rows(client, view) == {
        "time": [1, 6],
        "frontier": [[1, 7]],
        "rows": [{"data": {"n": 3}, "count": 1}],
    }


def test_compacted_times_are_409_naming_the_range(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.service.server import running_server

    with running_server(tmp_path, history=2) as s, s.client() as c:
        make_table(c, "h", [("k", "string")], timing="client")
        plan = {"op": "table", "name": "h"}
        assert c.post("/v1/views", json={"name": "hv", "query": plan}).status_code == 201
        for t in range(6):
            write(c, "h", {"updates": [{"insert": {"k": f"k{t}"}, "time": t}], "advance_to": t + 1})
        assert len(row_counts(c, "hv", as_of=4)) == 5 and len(row_counts(c, "hv", as_of=5)) == 6
        err = assert_error(c.get("/v1/views/hv/rows", params={"as_of": 3}), 409, "time_unavailable")
        assert err["detail"] == {"valid_from": [4], "frontier": [6]}
        assert "[4]" in err["message"] and "[6]" in err["message"]


def test_limits(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.service.server import running_server

    with running_server(tmp_path, max_batch=3, max_body_mb=1) as s, s.client() as c:
        make_table(c, "lim", [("x", "int")])
        ups = [{"insert": {"x": i}} for i in range(4)]
        assert_error(
            c.post("/v1/tables/lim/updates", json={"updates": ups}), 413, "batch_too_large"
        )
        assert_error(c.post("/v1/tables/lim/updates", json={"columns": {"x": list(range(4))}}), 413)
        big = b'{"updates": [' + b" " * (2 * 1024 * 1024) + b"]}"
        assert_error(c.post("/v1/tables/lim/updates", content=big), 413, "body_too_large")
        bomb = gzip.compress(big)  # 2 KiB that inflate past the limit: refused as it inflates
        r = c.post("/v1/tables/lim/updates", content=bomb, headers={"content-encoding": "gzip"})
        assert "inflates" in assert_error(r, 413, "body_too_large")["message"]
        assert c.get("/v1/tables/lim").json()["rows"] == 0
        # over WebSocket a frame over the limit is refused by an error frame, as a body
        # would be, and the socket stays open for the next one
        with connect(f"{s.ws_url}/v1/tables/lim/updates") as ws:
            ws.send('{"id": "big", "updates": [' + " " * (2 * 1024 * 1024) + "]}")
            ws.send(b'{"id": "bytes", "updates": [' + b" " * (1024 * 1024) + b"]}")
            ws.send(json.dumps({"id": "ok", "updates": [{"insert": {"x": 1}}]}))
            refused, refused_bytes, ok = (json.loads(ws.recv(timeout=30)) for _ in range(3))
        for frame in (refused, refused_bytes):
            assert frame["type"] == "error" and frame["id"] is None
            assert frame["error"]["code"] == "body_too_large"
            assert frame["error"]["detail"] == {"limit": 1024 * 1024}
        assert ok["type"] == "ack" and ok["id"] == "ok" and ok["status"] == "done"
        assert c.get("/v1/tables/lim").json()["rows"] == 1


def test_a_client_gone_mid_body_changes_nothing_and_logs_no_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A client that closes before its declared body has all arrived: nothing is done, and
    the server logs no traceback (audit 101: 65 lines of one per such request, on every
    route with a body)."""
    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "gone", [("x", "int")])
        host, port = s.url.removeprefix("http://").split(":")
        body = b'{"updates": [{"insert": {"x": 1}}]}'
        for path in ("/v1/tables/gone/updates", "/v1/tables", "/v1/views", "/v1/tables/gone/loads"):
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                raw.sendall(
                    f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body) + 50}\r\n\r\n".encode()
                    + body
                )
                sleep(0.2)  # the server is reading the body when the client goes
        sleep(1.0)  # what the server logs after the last one
        assert c.get("/v1/tables/gone").json()["rows"] == 0
        assert [t["name"] for t in c.get("/v1/tables").json()["tables"]] == ["gone"]
        assert c.get("/v1/views").json()["views"] == []
        assert write(c, "gone", {"updates": [{"insert": {"x": 2}}]})["status"] == "done"
        log = "".join(s.stderr)
        assert "Traceback" not in log and "ClientDisconnect" not in log, log


def test_write_pending_across_view_registration_reports_the_view(
    client: httpx.Client, name: str
) -> None:
    make_table(client, name, [("x", "int")], timing="client")
    r = client.post(
        f"/v1/tables/{name}/updates", json={"updates": [{"insert": {"x": 1}, "time": 5}]}
    )
    assert r.status_code == 202
    token = r.json()["token"]
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    write(client, name, {"updates": [{"insert": {"x": 2}, "time": 5}], "advance_to": 6})
    done = client.get(f"/v1/completions/{token}").json()
    assert sorted(u["data"]["x"] for u in done["outputs"][view]) == [1, 2]


def test_a_pending_write_lists_a_new_view_only_where_the_view_has_its_times(
    client: httpx.Client, name: str
) -> None:
    """A 2-D write pending at ``[4, 4]`` whose ``[1, 1]`` is already complete: a view that
    starts later (``[2, 1]``, one below the frontier ``[[3, 2]]``) holds ``[1, 1]``'s row
    at its start, not at ``[1, 1]``, so the write does not list it (it listed part of it);
    a view the write already listed keeps its outputs at the write's times."""
    make_table(client, name, [("x", "int")], timing="client", time_dims=2)
    early = f"{name}_early"
    assert (
        client.post(
            "/v1/views", json={"name": early, "query": {"op": "table", "name": name}}
        ).status_code
        == 201
    )
    ups = [{"insert": {"x": 1}, "time": [1, 1]}, {"insert": {"x": 2}, "time": [4, 4]}]
    r = client.post(f"/v1/tables/{name}/updates", json={"updates": ups, "advance_to": [[3, 2]]})
    assert r.status_code == 202
    token = r.json()["token"]
    late = f"{name}_late"
    assert (
        client.post(
            "/v1/views", json={"name": late, "query": {"op": "table", "name": name}}
        ).status_code
        == 201
    )
    assert rows(client, late, as_of="2,1")["rows"] == [{"data": {"x": 1}, "count": 1}]
    write(client, name, {"updates": [], "advance_to": [[5, 5]]})
    done = client.get(f"/v1/completions/{token}").json()
    assert set(done["outputs"]) == {early}
    assert sorted((u["data"]["x"], tuple(u["time"])) for u in done["outputs"][early]) == [
        (1, (1, 1)),
        (2, (4, 4)),
    ]


def test_columnar_write_with_no_rows(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("x", "int")], timing="client")
    body = write(client, name, {"columns": {"x": []}, "time": [], "advance_to": 3})
    assert body["times"] == [] and body["frontier"] == [3]


def test_keyed_client_timed_updates_come_in_time_order(client: httpx.Client, name: str) -> None:
    """A primary key holds one row at every time only if its updates come in time order (the
    key index is the state after every update so far): an update at a time before one
    written by an earlier write, or to its key earlier in the write, is a 409, and changes
    nothing. Other keys' updates in the same write may come in any order (audit 97: a
    write of shuffled times was refused)."""
    make_table(client, name, [("a", "int"), ("b", "int")], primary_key=["a"], timing="client")
    view = f"{name}_all"
    assert (
        client.post("/v1/views", json={"name": view, "query": {"op": "table", "name": name}})
    ).status_code == 201
    write(client, name, {"updates": [{"insert": {"a": 1, "b": 1}, "time": 1}], "advance_to": 2})
    write(client, name, {"updates": [{"upsert": {"a": 1, "b": 5}, "time": 5}]}, status=202)
    refused: list[tuple[dict[str, Any], str, Any]] = [
        ({"updates": [{"upsert": {"a": 1, "b": 3}, "time": 3}]}, "updates[0].time", 5),
        ({"updates": [{"insert": {"a": 2, "b": 1}}], "time": 4}, "updates[0].time", 5),
        ({"columns": {"a": [2], "b": [1]}, "time": 2}, "time", 5),
        (  # in the write's own order: the delete at 8 comes after the insert at 10
            {
                "updates": [
                    {"insert": {"a": 2, "b": 1}, "time": 10},
                    {"delete": {"a": 2, "b": 1}, "time": 8},
                ]
            },
            "updates[1].time",
            10,
        ),
        ({"columns": {"a": [2, 3, 2], "b": [1, 1, 1]}, "diff": [1, 1, -1], "time": [9, 6, 7]},
         "time[2]", 9),
        (  # its key's time 9 before it, the earlier write's 5 too
            {"updates": [{"insert": {"a": 2, "b": 1}, "time": 9},
                         {"insert": {"a": 3, "b": 1}, "time": 6},
                         {"delete": {"a": 2, "b": 1}, "time": 7}]},
            "updates[2].time",
            9,
        ),
    ]  # fmt: skip
    for body, path, written in refused:
        err = assert_error(
            client.post(f"/v1/tables/{name}/updates", json=body), 409, "time_out_of_order"
        )
        assert err["detail"] == {"path": path, "written": written}, err
    # in time order, and at the time already written, keys behave as at one time
    write(client, name, {"updates": [{"upsert": {"a": 1, "b": 6}, "time": 5}]}, status=202)
    write(client, name, {"updates": [{"insert": {"a": 2, "b": 1}, "time": 8}], "advance_to": 9})
    assert row_counts(client, view, as_of=4) == {(("a", 1), ("b", 1)): 1}
    assert row_counts(client, view, as_of=5) == {(("a", 1), ("b", 6)): 1}
    assert row_counts(client, view, as_of=8) == {(("a", 1), ("b", 6)): 1, (("a", 2), ("b", 1)): 1}
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 2
    # keys of their own, at times in any order, each key's in order
    shuffled = {"a": [5, 3, 4, 3], "b": [1, 1, 1, 2], "time": [12, 10, 11, 12]}
    body = {
        "updates": [
            {"upsert": {"a": a, "b": b}, "time": t}
            for a, b, t in zip(shuffled["a"], shuffled["b"], shuffled["time"], strict=True)
        ]
    }
    assert write(client, name, body, status=202)["times"] == [10, 11, 12]
    err = assert_error(  # a later write still comes after every time written
        client.post(
            f"/v1/tables/{name}/updates",
            json={"updates": [{"insert": {"a": 6, "b": 1}, "time": 11}]},
        ),
        409,
        "time_out_of_order",
    )
    assert err["detail"] == {"path": "updates[0].time", "written": 12}, err
    write(client, name, {"updates": [], "advance_to": 13})
    assert row_counts(client, view, as_of=10) == {
        (("a", 1), ("b", 6)): 1, (("a", 2), ("b", 1)): 1, (("a", 3), ("b", 1)): 1
    }  # fmt: skip
    assert row_counts(client, view, as_of=12) == {
        (("a", 1), ("b", 6)): 1,
        (("a", 2), ("b", 1)): 1,
        (("a", 3), ("b", 2)): 1,
        (("a", 4), ("b", 1)): 1,
        (("a", 5), ("b", 1)): 1,
    }


def test_an_update_of_weight_zero_writes_no_time(client: httpx.Client, name: str) -> None:
    """A weight-0 update changes nothing and its write lists no time: on a keyed client-timed
    table it does not hold later writes to times after it (audit 14)."""
    make_table(client, name, [("k", "int"), ("v", "int")], primary_key=["k"], timing="client")
    for body in (
        {"updates": [{"weight": 0, "data": {"k": 1, "v": 1}, "time": 9}]},
        {"columns": {"k": [1], "v": [1]}, "diff": [0], "time": 9},
    ):
        done = write(client, name, body)
        assert done["times"] == [], done
    write(client, name, {"updates": [{"insert": {"k": 1, "v": 1}, "time": 5}]}, status=202)


def test_a_server_timed_write_of_no_updates_takes_no_time(client: httpx.Client, name: str) -> None:
    """An empty write, or one whose every update has weight 0, lists no time and leaves the
    server's clock where it was: the next write takes the time the table's frontier named
    (audit 44: each took a tick, so the next write skipped a time)."""
    make_table(client, name, [("x", "int")])
    clock = client.get(f"/v1/tables/{name}").json()["frontier"]
    for body in (
        {"updates": []},
        {"columns": {"x": []}},
        {"updates": [{"weight": 0, "data": {"x": 1}}]},
        {"columns": {"x": [1, 2]}, "diff": [0, 0]},
    ):
        done = write(client, name, body)
        assert done["times"] == [] and done["frontier"] == clock, (body, done)
    done = write(client, name, {"updates": [{"insert": {"x": 1}}, {"weight": 0, "data": {"x": 2}}]})
    assert done["times"] == clock, done
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 1


def test_key_present_names_the_key_as_written(client: httpx.Client, name: str) -> None:
    cols = [("s", "string"), ("f", "float"), ("b", "bool")]
    make_table(client, name, cols, primary_key=["s", "f", "b"])
    row = {"s": "hello", "f": 1.5, "b": True}
    write(client, name, {"updates": [{"insert": row}]})
    err = assert_error(
        client.post(f"/v1/tables/{name}/updates", json={"updates": [{"insert": row}]}),
        422,
        "key_present",
    )
    assert 'key (s="hello", f=1.5, b=true) is already present' in err["message"], err


def test_a_key_repeated_in_one_write_names_the_update_that_put_it(
    client: httpx.Client, name: str
) -> None:
    """A key inserted twice in one write is refused as present, naming the update of the
    write that put it there, not the table (audit 79); nothing of the write is applied."""
    make_table(client, name, [("id", "int"), ("v", "string")], primary_key=["id"])
    for body, path in (
        ({"updates": [{"insert": {"id": 70, "v": "a"}}, {"insert": {"id": 70, "v": "b"}}]}, 1),
        ({"columns": {"id": [3, 70, 70], "v": ["a", "b", "c"]}}, 2),
    ):
        err = assert_error(client.post(f"/v1/tables/{name}/updates", json=body), 422, "key_present")
        assert "key (id=70) is already present (this write's" in err["message"], err
        assert err["detail"]["path"].endswith(f"[{path}]"), err
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 0


def test_a_write_of_nothing_is_refused(client: httpx.Client, name: str) -> None:
    """A body with none of ``updates``, ``columns`` and ``advance_to`` writes nothing: most
    likely a field misspelt, it is refused (audit 79: ``{}`` was an empty write)."""
    make_table(client, name, [("x", "int")], timing="client")
    for body in ({}, {"time": 3}):
        err = assert_error(client.post(f"/v1/tables/{name}/updates", json=body), 422)
        assert err["detail"] == {"path": "updates"}, err
    assert write(client, name, {"advance_to": 2})["frontier"] == [2]


def test_the_latest_time_an_update_may_have_is_below_2_63_minus_1(
    client: httpx.Client, name: str
) -> None:
    """The engine keeps 2**63 - 1 for "no time": an update there is refused, in the row and
    the columnar form (audit 79: it was accepted, and reduces never saw it); a frontier may
    name it, and an update just below it reaches every view."""
    top = 2**63 - 1
    make_table(client, name, [("a", "int")], timing="client")
    make_count_view(client, f"{name}_n", name, ())
    make_view(client, f"{name}_d", {"op": "distinct", "input": {"op": "table", "name": name}})
    for body in (
        {"updates": [{"insert": {"a": 1}, "time": top}]},
        {"updates": [{"insert": {"a": 1}}], "time": top},
        {"columns": {"a": [1, 2]}, "time": [3, top]},
        {"columns": {"a": [1]}, "time": top},
    ):
        err = assert_error(client.post(f"/v1/tables/{name}/updates", json=body), 422, "bad_time")
        assert "below 2**63 - 1" in err["message"], err
    rows = {"updates": [{"insert": {"a": 1}, "time": 3}, {"insert": {"a": 2}, "time": top - 1}]}
    assert write(client, name, {**rows, "advance_to": top})["status"] == "done"
    assert row_counts(client, f"{name}_n") == {(("n", 2),): 1}
    assert row_counts(client, f"{name}_d") == {(("a", 1),): 1, (("a", 2),): 1}


def test_writes_pending_on_a_dropped_table_are_done(client: httpx.Client, name: str) -> None:
    """Dropping a table closes it: a write pending on it is done at once with the closed
    frontier, and a table made later under its name is another table."""
    make_table(client, name, [("k", "int")], timing="client")
    pending = write(client, name, {"updates": [{"insert": {"k": 1}, "time": 5}]}, status=202)
    assert client.delete(f"/v1/tables/{name}").status_code == 204
    r = client.get(f"/v1/completions/{pending['token']}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done" and body["frontier"] == [] and body["outputs"] == {}
    make_table(client, name, [("k", "int")], timing="client")
    write(client, name, {"updates": [], "advance_to": 3})
    assert client.get(f"/v1/completions/{pending['token']}").json()["frontier"] == []


def test_a_value_beyond_double_range_is_refused_where_it_is(
    server: Any, client: httpx.Client, name: str
) -> None:
    """A number no double holds (or a lone surrogate) is a 422 naming its update, over HTTP
    and over WebSocket, and nothing is written; it was ``body``, wherever it was."""
    make_table(client, name, [("k", "int"), ("x", "float"), ("s", "string")])
    good = '{"insert": {"k": 1, "x": 1.5, "s": "a"}}'
    for bad, where in (
        ('{"insert": {"k": 2, "x": 1e999, "s": "b"}}', "updates[1].insert.x"),
        ('{"insert": {"k": 2, "x": 2.5, "s": "\\ud800"}}', "updates[1].insert.s"),
    ):
        body = f'{{"updates": [{good}, {bad}]}}'.encode()
        r = client.post(f"/v1/tables/{name}/updates", content=body)
        err = assert_error(r, 422, "invalid_value")
        assert err["detail"] == {"path": where} and f"at {where}:" in err["message"]
        with connect(f"{server.ws_url}/v1/tables/{name}/updates") as ws:
            ws.send(body.decode())
            frame = json.loads(ws.recv(timeout=30))
        assert frame["type"] == "error" and frame["error"]["detail"] == {"path": where}
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 0
