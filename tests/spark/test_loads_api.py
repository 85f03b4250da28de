"""Spark loads through the wire: a real server subprocess with a real local Spark inside it.

One server for the module (small Spark chunks so that progress and cancellation can be seen
on a few hundred thousand rows); each test uses fresh table names.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner
from websockets.sync.client import ClientConnection, connect

from clients.cli import app as cli_app
from tests.service.conftest import assert_error, make_table, row_counts, write
from tests.service.server import Server, running_server

pytestmark = pytest.mark.spark

BIG_ROWS = 600_000
FINAL = ("done", "failed", "cancelled")
_names = itertools.count()


# -- fixtures and helpers ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("loads-server"),
        load_chunk_rows=1_000,
        spark_master="local[2]",
        spark_conf="spark.sql.shuffle.partitions=2",
    ) as s:
        yield s


@pytest.fixture()
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client(timeout=120) as c:
        yield c


@pytest.fixture()
def name() -> str:
    return f"ld{next(_names)}"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("load-sources")


@pytest.fixture(scope="module")
def big_parquet(data_dir: Path) -> str:
    """(k int, v string): BIG_ROWS rows in one row group (one Spark partition)."""
    path = data_dir / "big.parquet"
    keys = np.arange(BIG_ROWS, dtype=np.int64)
    pool = pa.array([f"v{i}" for i in range(1_000)])
    pq.write_table(pa.table({"k": keys, "v": pool.take(pa.array(keys % 1_000))}), path)
    return str(path)


def parquet(data_dir: Path, columns: dict[str, Any]) -> str:
    path = data_dir / f"src{next(_names)}.parquet"
    pq.write_table(pa.table(columns), path)
    return str(path)


def start_load(c: httpx.Client, table: str, body: dict[str, Any]) -> str:
    r = c.post(f"/v1/tables/{table}/loads", json=body)
    assert r.status_code == 202, r.text
    answer = r.json()
    assert answer["state"] == "queued" and answer["id"].startswith("l-"), answer
    return answer["id"]


def wait_load(c: httpx.Client, load_id: str, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = c.get(f"/v1/loads/{load_id}")
        assert r.status_code == 200, r.text
        status = r.json()
        if status["state"] in FINAL:
            return status
        time.sleep(0.05)
    raise AssertionError(f"load {load_id} did not finish in {timeout} s: {status}")


def load(c: httpx.Client, table: str, body: dict[str, Any]) -> dict[str, Any]:
    return wait_load(c, start_load(c, table, body))


def wait_running_with_rows(c: httpx.Client, load_id: str) -> dict[str, Any]:
    """Polls until the load has read some rows and is still running."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        status = c.get(f"/v1/loads/{load_id}").json()
        assert status["state"] in ("queued", "running"), status
        if status["state"] == "running" and status["rows"] > 0:
            return status
        time.sleep(0.002)
    raise AssertionError(f"load {load_id} never showed progress")


def table_rows(c: httpx.Client, table: str) -> int:
    return c.get(f"/v1/tables/{table}").json()["rows"]


def make_view(c: httpx.Client, name: str, query: dict[str, Any]) -> None:
    r = c.post("/v1/views", json={"name": name, "query": query})
    assert r.status_code == 201, r.text


def subscribe(server: Server, view: str) -> ClientConnection:
    return connect(f"{server.ws_url}/v1/views/{view}/subscribe?snapshot=false&progress=false")


def diff_frame(ws: ClientConnection) -> dict[str, Any]:
    while True:
        frame = json.loads(ws.recv(timeout=60))
        if frame["type"] == "diff":
            return frame
        assert frame["type"] == "heartbeat", frame


def as_multiset(updates: list[dict[str, Any]]) -> dict[tuple, int]:
    return {tuple(sorted(u["data"].items())): u["diff"] for u in updates}


def key(**row: Any) -> tuple:
    return tuple(sorted(row.items()))


# -- loads that succeed ------------------------------------------------------------------------
def test_parquet_load_reaches_views_before_and_after(
    server: Server, client: httpx.Client, data_dir: Path, name: str
) -> None:
    cols = [("a", "int"), ("b", "int"), ("x", "float"), ("s", "string"), ("ok", "bool")]
    make_table(client, name, cols)
    before = f"{name}_before"
    make_view(
        client,
        before,
        {
            "op": "filter",
            "input": {"op": "table", "name": name},
            "where": {"fn": "gt", "args": ["b", 15]},
        },
    )
    path = parquet(
        data_dir,
        {
            "a": [1, 2, 3],
            "b": [10, 20, 30],
            "x": [0.5, -0.0, 2.25],
            "s": ["p", "q", "p"],
            "ok": [True, False, True],
        },
    )
    with subscribe(server, before) as ws:
        status = load(client, name, {"source": {"path": path, "format": "parquet"}})
        frame = diff_frame(ws)
    assert status["state"] == "done", status
    assert status["rows"] == 3 and status["updates"] == 3 and "error" not in status
    assert status["table"] == name and status["mode"] == "append" and status["rows_per_s"] > 0
    assert status["created"] <= status["started"] <= status["finished"]
    rows = {
        key(a=1, b=10, x=0.5, s="p", ok=True): 1,
        key(a=2, b=20, x=0.0, s="q", ok=False): 1,
        key(a=3, b=30, x=2.25, s="p", ok=True): 1,
    }
    # the one write of the load reached the view registered before it, at one time
    assert as_multiset(frame["updates"]) == {k: 1 for k in rows if dict(k)["b"] > 15}
    done = client.get(f"/v1/completions/{status['write']}").json()
    assert done["status"] == "done" and done["times"] == [frame["time"]]
    assert row_counts(client, before) == {k: 1 for k in rows if dict(k)["b"] > 15}
    after = f"{name}_after"
    make_view(client, after, {"op": "table", "name": name})  # hydrates from the table
    assert row_counts(client, after) == rows
    assert table_rows(client, name) == 3


def test_csv_load_with_column_mapping_and_where(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    make_table(
        client, name, [("id", "int"), ("who", "string"), ("score", "float"), ("vip", "bool")]
    )
    path = data_dir / f"people{next(_names)}.csv"
    path.write_text("id,person,score,vip\n1,ann,1.5,true\n2,bob,0.5,false\n3,cy,7,false\n")
    status = load(
        client,
        name,
        {
            "source": {"path": str(path), "format": "csv"},
            "columns": {"who": "person"},
            "where": "person <> 'bob'",
        },
    )
    assert status["state"] == "done" and status["rows"] == 2, status
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    assert row_counts(client, view) == {
        key(id=1, who="ann", score=1.5, vip=True): 1,
        key(id=3, who="cy", score=7.0, vip=False): 1,
    }


def test_progress_grows_while_a_load_runs(
    client: httpx.Client, big_parquet: str, name: str
) -> None:
    make_table(client, name, [("k", "int"), ("v", "string")])
    load_id = start_load(client, name, {"source": {"path": big_parquet}})
    seen = [wait_running_with_rows(client, load_id)["rows"]]
    while True:
        stored = table_rows(client, name)  # read before the status: if the load had not
        status = client.get(f"/v1/loads/{load_id}").json()  # read everything then, nothing
        if status["state"] != "running":  # of it may be visible (all or nothing)
            break
        seen.append(status["rows"])
        if status["rows"] < BIG_ROWS:
            assert stored == 0, (stored, status)
        time.sleep(0.005)
    status = wait_load(client, load_id)
    assert status["state"] == "done" and status["rows"] == BIG_ROWS, status
    assert seen == sorted(seen) and any(0 < rows < BIG_ROWS for rows in seen), seen
    assert table_rows(client, name) == BIG_ROWS


def test_api_examples_load_with_time_0_into_a_server_timed_table(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    """API.md's load example, its ``"time": 0`` included, on API.md's server-timed, keyed
    ``edges`` table: it was a 422 (the server stamps the time). The time is a bound the
    server's clock has passed; one it has not reached is refused, and nothing is loaded."""
    client.post(
        "/v1/tables",
        json={
            "name": name,
            "columns": [{"name": "src", "type": "int"}, {"name": "dst", "type": "int"}],
            "primary_key": ["src", "dst"],
            "timing": "server",
            "time_dims": 1,
        },
    ).raise_for_status()
    path = parquet(data_dir, {"from_id": [1, 2, 3], "to_id": [2, 3, 4], "weight": [1.0, 0.0, 2.0]})
    example = {
        "source": {"path": path, "format": "parquet", "options": {}},
        "columns": {"src": "from_id", "dst": "to_id"},
        "where": "weight > 0",
        "mode": "append",
    }
    clock = client.get(f"/v1/tables/{name}").json()["frontier"][0]
    err = assert_error(
        client.post(f"/v1/tables/{name}/loads", json={**example, "time": clock + 1000}),
        422,
        "bad_time",
    )
    assert err["detail"] == {"path": "time"} and "leave out time" in err["message"], err
    status = load(client, name, {**example, "time": 0})
    assert status["state"] == "done" and status["updates"] == 2, status
    written = client.get(f"/v1/completions/{status['write']}").json()["times"]
    assert written[0] >= clock, (written, clock)
    assert table_rows(client, name) == 2


def test_load_into_client_timed_table_at_a_time(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    make_table(client, name, [("k", "int")], timing="client")
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    path = parquet(data_dir, {"k": [1, 2, 3]})
    status = load(client, name, {"source": {"path": path}, "time": 5})
    assert status["state"] == "done" and status["time"] == 5, status
    assert client.get(f"/v1/tables/{name}").json()["frontier"] == [0]  # the writer moves it
    write(client, name, {"updates": [], "advance_to": 6})
    assert row_counts(client, view, as_of=4) == {}
    assert row_counts(client, view, as_of=5) == {key(k=k): 1 for k in (1, 2, 3)}
    r = client.post(f"/v1/tables/{name}/loads", json={"source": {"path": path}, "time": 3})
    assert_error(r, 409, "time_before_frontier")

    two = f"{name}_2d"
    make_table(client, two, [("k", "int")], timing="client", time_dims=2)
    status = load(client, two, {"source": {"path": path}, "time": [1, 2]})
    assert status["state"] == "done" and status["time"] == [1, 2], status
    assert table_rows(client, two) == 3


# -- replace ----------------------------------------------------------------------------------------
def test_replace_writes_only_the_difference(
    server: Server, client: httpx.Client, data_dir: Path, name: str
) -> None:
    make_table(client, name, [("k", "int"), ("v", "string")])
    write(
        client,
        name,
        {
            "updates": [
                {"weight": 2, "data": {"k": 1, "v": "a"}},
                {"insert": {"k": 2, "v": "b"}},
                {"insert": {"k": 3, "v": "c"}},
            ]
        },
    )
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    path = parquet(data_dir, {"k": [1, 2, 4, 4, 5], "v": ["a", "B", "d", "d", "e"]})
    with subscribe(server, view) as ws:
        status = load(client, name, {"source": {"path": path}, "mode": "replace"})
        frame = diff_frame(ws)
    assert status["state"] == "done" and status["mode"] == "replace", status
    assert status["rows"] == 5 and status["updates"] == 6, status
    # (1, a) stays once: one retraction of its second copy, no retract-and-reinsert of the rest
    assert as_multiset(frame["updates"]) == {
        key(k=1, v="a"): -1,
        key(k=2, v="b"): -1,
        key(k=3, v="c"): -1,
        key(k=2, v="B"): 1,
        key(k=4, v="d"): 2,
        key(k=5, v="e"): 1,
    }
    assert row_counts(client, view) == {
        key(k=1, v="a"): 1,
        key(k=2, v="B"): 1,
        key(k=4, v="d"): 2,
        key(k=5, v="e"): 1,
    }
    assert table_rows(client, name) == 5

    again = load(client, name, {"source": {"path": path}, "mode": "replace"})
    assert again["state"] == "done" and again["updates"] == 0, again  # nothing differs
    assert table_rows(client, name) == 5


def test_replace_on_a_primary_key_table_swaps_rows(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    make_table(client, name, [("k", "int"), ("v", "string")], primary_key=["k"])
    write(
        client, name, {"updates": [{"insert": {"k": 1, "v": "a"}}, {"insert": {"k": 2, "v": "b"}}]}
    )
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    path = parquet(data_dir, {"k": [1, 2, 3], "v": ["a", "c", "d"]})
    status = load(client, name, {"source": {"path": path}, "mode": "replace"})
    assert status["state"] == "done" and status["updates"] == 3, status  # -(2,b) +(2,c) +(3,d)
    assert row_counts(client, view) == {key(k=1, v="a"): 1, key(k=2, v="c"): 1, key(k=3, v="d"): 1}
    # the key index follows: upserting key 2 retracts the loaded row
    done = write(client, name, {"updates": [{"upsert": {"k": 2, "v": "z"}}]})
    assert as_multiset(done["outputs"][view]) == {key(k=2, v="c"): -1, key(k=2, v="z"): 1}
    # and after a replace that removes keys: those are absent, the one kept present
    status = load(client, name, {"source": {"path": parquet(data_dir, {"k": [3], "v": ["d"]})},
                                 "mode": "replace"})  # fmt: skip
    assert status["state"] == "done" and status["updates"] == 2, status
    write(client, name, {"updates": [{"insert": {"k": 1, "v": "n"}}]})
    present = client.post(
        f"/v1/tables/{name}/updates", json={"updates": [{"insert": {"k": 3, "v": "e"}}]}
    )
    assert_error(present, 422, "key_present")
    assert row_counts(client, view) == {key(k=1, v="n"): 1, key(k=3, v="d"): 1}


def test_an_append_into_an_empty_keyed_table_keys_its_rows(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    """The rows of a load into a table with no rows are indexed by key off the engine
    thread and swapped in: later writes find every loaded key."""
    make_table(client, name, [("k", "int"), ("v", "string")], primary_key=["k"])
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    path = parquet(data_dir, {"k": [1, 2, 3], "v": ["a", "b", "c"]})
    status = load(client, name, {"source": {"path": path}})
    assert status["state"] == "done" and status["rows"] == 3, status
    done = write(client, name, {"updates": [{"upsert": {"k": 2, "v": "z"}}]})
    assert as_multiset(done["outputs"][view]) == {key(k=2, v="b"): -1, key(k=2, v="z"): 1}
    present = client.post(
        f"/v1/tables/{name}/updates", json={"updates": [{"insert": {"k": 3, "v": "y"}}]}
    )
    assert_error(present, 422, "key_present")
    write(client, name, {"updates": [{"delete": {"k": 1, "v": "a"}}]})
    again = load(
        client, name, {"source": {"path": parquet(data_dir, {"k": [4, 3], "v": ["d", "e"]})}}
    )
    assert again["state"] == "failed" and again["error"]["code"] == "key_present", again
    status = load(
        client, name, {"source": {"path": parquet(data_dir, {"k": [1, 4], "v": ["f", "g"]})}}
    )
    assert status["state"] == "done", status
    assert row_counts(client, view) == {
        key(k=1, v="f"): 1, key(k=2, v="z"): 1, key(k=3, v="c"): 1, key(k=4, v="g"): 1
    }  # fmt: skip


# -- loads that fail, leaving the table as it was ----------------------------------------------
def test_missing_path_fails_and_changes_nothing(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    make_table(client, name, [("k", "int")])
    write(client, name, {"updates": [{"insert": {"k": 7}}]})
    status = load(client, name, {"source": {"path": str(data_dir / "nope.parquet")}})
    assert status["state"] == "failed", status
    assert (
        status["error"]["code"] == "source_not_found"
        and "nope.parquet" in status["error"]["message"]
    )
    assert table_rows(client, name) == 1


def test_schema_mismatch_fails_and_changes_nothing(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    make_table(client, name, [("k", "int"), ("v", "string")])
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    typed = parquet(data_dir, {"k": ["1", "2"], "v": ["a", "b"]})
    status = load(client, name, {"source": {"path": typed}})
    assert status["state"] == "failed" and status["error"]["code"] == "column_type", status
    assert "'k'" in status["error"]["message"]
    missing = parquet(data_dir, {"key": [1, 2], "v": ["a", "b"]})
    status = load(client, name, {"source": {"path": missing}})
    assert status["state"] == "failed" and status["error"]["code"] == "column_missing", status
    assert status["error"]["detail"]["column"] == "k"
    assert table_rows(client, name) == 0 and row_counts(client, view) == {}


def test_non_finite_floats_fail_the_load(client: httpx.Client, data_dir: Path, name: str) -> None:
    """JSON has no NaN or infinity, and writes refuse them: so do loads, naming the row."""
    make_table(client, name, [("k", "int"), ("x", "float")])
    for bad in (float("nan"), float("inf"), -float("inf")):
        path = parquet(data_dir, {"k": [1, 2, 3], "x": [0.5, 1.5, bad]})
        status = load(client, name, {"source": {"path": path}})
        assert status["state"] == "failed", status
        error = status["error"]
        assert error["code"] == "not_finite", status
        assert error["detail"] == {"column": "x", "source_column": "x", "row": 2}, status
    assert table_rows(client, name) == 0
    path = parquet(data_dir, {"k": [1, 2, 3], "x": [0.5, 1.5, float("nan")]})
    where = "x BETWEEN -1.7976931348623157E308 AND 1.7976931348623157E308"
    status = load(client, name, {"source": {"path": path}, "where": where})
    assert status["state"] == "done" and status["rows"] == 2, status


def test_primary_key_violations_fail_the_load(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    make_table(client, name, [("k", "int"), ("v", "string")], primary_key=["k"])
    write(client, name, {"updates": [{"insert": {"k": 1, "v": "a"}}]})
    repeated = parquet(data_dir, {"k": [2, 3, 2], "v": ["x", "y", "z"]})
    for mode in ("append", "replace"):
        status = load(client, name, {"source": {"path": repeated}, "mode": mode})
        assert status["state"] == "failed", status
        assert status["error"]["code"] == "duplicate_key" and "k=2" in status["error"]["message"], (
            status
        )
    present = parquet(data_dir, {"k": [5, 1], "v": ["e", "b"]})
    status = load(client, name, {"source": {"path": present}})
    assert status["state"] == "failed", status
    assert status["error"]["code"] == "key_present" and "not applied" in status["error"]["message"]
    # the row is named by its place in the source, not in a write the client never sent
    assert status["error"]["detail"] == {"path": "source row 1"}, status
    assert status["error"]["message"].startswith("the load was not applied (the table is "
                                                 "unchanged): source row 1: key (k=1)"), status  # fmt: skip
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    assert row_counts(client, view) == {key(k=1, v="a"): 1}


def test_requests_checked_before_queueing(client: httpx.Client, data_dir: Path, name: str) -> None:
    make_table(client, name, [("k", "int")])
    source = {"path": parquet(data_dir, {"k": [1]})}
    post = lambda table, body: client.post(f"/v1/tables/{table}/loads", json=body)  # noqa: E731
    assert_error(post(f"{name}_nope", {"source": source}), 404, "not_found")
    assert_error(post(name, {}), 422, "invalid")
    assert (
        assert_error(post(name, {"source": source, "columns": {"zz": "k"}}), 422)["detail"]["path"]
        == "columns.zz"
    )
    assert (
        assert_error(post(name, {"source": {"path": "x", "format": "xls"}}), 422)["detail"]["path"]
        == "source.format"
    )
    assert (
        assert_error(post(name, {"source": source, "mode": "merge"}), 422)["detail"]["path"]
        == "mode"
    )
    assert (
        assert_error(post(name, {"source": source, "extra": 1}), 422)["detail"]["path"] == "extra"
    )
    # server-timed: a time its clock has not reached
    assert_error(post(name, {"source": source, "time": 1 << 62}), 422, "bad_time")
    assert_error(post(name, {"source": source, "time": [0]}), 422, "bad_time")
    client_timed = f"{name}_c"
    make_table(client, client_timed, [("k", "int")], timing="client")
    assert_error(post(client_timed, {"source": source}), 422, "bad_time")
    r = client.post(
        f"/v1/tables/{name}/loads", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert_error(r, 400, "invalid_json")
    assert_error(client.get("/v1/loads/l-999999"), 404, "not_found")
    assert_error(client.delete("/v1/loads/l-999999"), 404, "not_found")
    assert table_rows(client, name) == 0


# -- cancellation and the frontier moving under a running load ---------------------------------------
def _cancel_while_reading(
    client: httpx.Client, big_parquet: str, name: str
) -> tuple[str, dict[str, Any]] | None:
    """A load of ``big_parquet`` into a new table ``name`` (with a count view), cancelled
    once it has read some rows, and a second one queued behind it, cancelled first:
    ``(the first load's id, its DELETE answer)``, or None when that DELETE came too late
    (the load had read everything and its write was in the engine: its state unchanged)."""
    make_table(client, name, [("k", "int"), ("v", "string")])
    make_view(
        client,
        f"{name}_v",
        {
            "op": "reduce",
            "input": {"op": "table", "name": name},
            "by": [],
            "aggregates": {"n": {"fn": "count"}},
        },
    )
    running = start_load(client, name, {"source": {"path": big_parquet}})
    queued = start_load(
        client, name, {"source": {"path": big_parquet}}
    )  # waits: one load per table
    wait_running_with_rows(client, running)
    r = client.delete(f"/v1/loads/{queued}")
    assert (
        r.status_code == 200 and r.json()["state"] == "cancelled" and r.json()["started"] is None
    ), r.text
    r = client.delete(f"/v1/loads/{running}")
    assert r.status_code == 200, r.text
    if r.json()["state"] != "cancelled":
        assert r.json()["state"] in ("running", "done") and "error" not in r.json(), r.json()
        return None
    return running, r.json()


def test_cancel_leaves_nothing_behind(
    client: httpx.Client, big_parquet: str, data_dir: Path, name: str
) -> None:
    base = name
    for attempt in range(3):  # a slow moment can let the read finish before the DELETE
        name = f"{base}{attempt}"
        outcome = _cancel_while_reading(client, big_parquet, name)
        if outcome is not None:
            break
    else:
        raise AssertionError("three loads of 600,000 rows each finished before their DELETE")
    running, cancelled = outcome
    view = f"{name}_v"
    assert cancelled["error"]["code"] == "cancelled", cancelled
    assert cancelled["error"]["detail"]["rows"] == cancelled["rows"]
    time.sleep(1.0)  # give a wrongly committed write the time to show
    # a final state never changes: the rows read stop counting when the load is cancelled
    assert wait_load(client, running) == cancelled
    assert table_rows(client, name) == 0 and row_counts(client, view) == {}
    # the table is free again, and a finished load stays as it is when cancelled
    status = load(
        client, name, {"source": {"path": parquet(data_dir, {"k": [1, 2], "v": ["a", "b"]})}}
    )
    assert status["state"] == "done", status
    r = client.delete(f"/v1/loads/{status['id']}")
    assert r.status_code == 200 and r.json()["state"] == "done"
    assert row_counts(client, view) == {key(n=2): 1}


def test_frontier_passing_the_load_time_fails_the_load(
    client: httpx.Client, big_parquet: str, name: str
) -> None:
    make_table(client, name, [("k", "int"), ("v", "string")], timing="client")
    load_id = start_load(client, name, {"source": {"path": big_parquet}, "time": 10})
    wait_running_with_rows(client, load_id)
    write(client, name, {"updates": [], "advance_to": 20})
    status = wait_load(client, load_id)
    assert status["state"] == "failed", status
    assert (
        status["error"]["code"] == "time_before_frontier"
        and "not applied" in status["error"]["message"]
    )
    assert table_rows(client, name) == 0


@pytest.mark.parametrize("columns", ["same", "other"])
def test_table_recreated_under_a_running_load_fails_it(
    client: httpx.Client, big_parquet: str, name: str, columns: str
) -> None:
    """A table made again under the name is another table, whatever its columns (as for a
    write that arrived before the drop): the load into the dropped one fails, not_found, as
    the drop answers (audit 105: it read on to the source's end first)."""
    cols = [("k", "int"), ("v", "string")]
    make_table(client, name, cols)
    load_id = start_load(client, name, {"source": {"path": big_parquet}})
    wait_running_with_rows(client, load_id)
    assert client.delete(f"/v1/tables/{name}").status_code == 204
    assert client.get(f"/v1/loads/{load_id}").json()["state"] == "failed"
    make_table(client, name, cols if columns == "same" else [*cols, ("w", "int")])
    status = wait_load(client, load_id)
    assert status["state"] == "failed" and status["error"]["code"] == "not_found", status
    assert "dropped" in status["error"]["message"]
    assert table_rows(client, name) == 0


def test_a_load_queued_for_a_dropped_table_reads_nothing(
    client: httpx.Client, big_parquet: str, name: str
) -> None:
    """A load still queued when its table is dropped fails with the drop, before Spark
    reads a row (audit 85: it read the whole source first, then said the table was dropped
    while it ran); so does the one running then."""
    cols = [("k", "int"), ("v", "string")]
    make_table(client, name, cols)
    first = start_load(client, name, {"source": {"path": big_parquet}})
    wait_running_with_rows(client, first)
    second = start_load(client, name, {"source": {"path": big_parquet}})
    assert client.get(f"/v1/loads/{second}").json()["state"] == "queued"
    assert client.delete(f"/v1/tables/{name}").status_code == 204
    assert [client.get(f"/v1/loads/{i}").json()["state"] for i in (first, second)] == [
        "failed",
        "failed",
    ]
    make_table(client, name, cols)
    for load_id, when in ((first, "while the load ran"), (second, "before the load began")):
        status = wait_load(client, load_id)
        assert status["state"] == "failed" and status["error"]["code"] == "not_found", status
        assert when in status["error"]["message"], status
    assert wait_load(client, second)["rows"] == 0
    assert table_rows(client, name) == 0


def test_csv_failfast_refuses_extra_fields_whatever_columns_are_mapped(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    """A row with more fields than the header: dropped by default, refused with FAILFAST,
    also when the load maps only some of the columns (audit 85: Spark's CSV column pruning
    parsed only those, and the row loaded)."""
    path = data_dir / f"extra{next(_names)}.csv"
    path.write_text("a,b,c\n1,2,3\n4,5,6,7\n")
    make_table(client, name, [("a", "int"), ("b", "int")])
    csv = {"path": str(path), "format": "csv"}
    status = load(client, name, {"source": csv})
    assert status["state"] == "done" and status["rows"] == 2, status
    strict = {**csv, "options": {"mode": "FAILFAST"}}
    status = load(client, name, {"source": strict})
    assert status["state"] == "failed", status
    assert status["error"]["code"] == "source_unreadable", status
    assert "Malformed records" in status["error"]["message"], status  # not just the file
    make_table(client, f"{name}_all", [("a", "int"), ("b", "int"), ("c", "int")])
    status = load(client, f"{name}_all", {"source": strict})
    assert status["state"] == "failed", status
    assert status["error"]["code"] == "source_unreadable", status
    assert table_rows(client, name) == 2 and table_rows(client, f"{name}_all") == 0


def test_a_source_spark_cannot_read_logs_short_java_traces(
    server: Server, client: httpx.Client, data_dir: Path, name: str
) -> None:
    """Spark logs a failed task at ERROR with its whole Java stack: 46-81 lines in the
    server's log for each such load (audit 105), whose error the load already gives. At the
    default level each exception's stack is cut to its first 3 lines."""
    path = data_dir / f"garbage{next(_names)}.parquet"
    path.write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"PAR1")
    make_table(client, name, [("a", "int")])
    seen = len(server.stderr)
    status = load(client, name, {"source": {"path": str(path), "format": "parquet"}})
    assert status["error"]["code"] == "source_unreadable", status
    deadline = time.monotonic() + 60
    while not any(" ERROR " in line for line in server.stderr[seen:]):
        assert time.monotonic() < deadline, "Spark logged no ERROR line"
        time.sleep(0.2)
    time.sleep(1)  # the rest of the block
    run = longest = 0
    for line in server.stderr[seen:]:
        run = run + 1 if line.startswith("\tat ") else 0
        longest = max(longest, run)
    assert 1 <= longest <= 3, server.stderr[seen:]


def test_a_value_the_where_cannot_convert_is_not_a_column_type_error(
    client: httpx.Client, data_dir: Path, name: str
) -> None:
    """CSV columns are text: a where comparing one with a number converts it in Spark, and a
    value that does not convert fails the load as the query's own failure (audit 85: it was
    reported as column_type, which names a conversion to the table's types)."""
    path = data_dir / f"weights{next(_names)}.csv"
    path.write_text("id,weight\n1,1.5\n2,2\n")
    make_table(client, name, [("id", "int")])
    status = load(client, name, {"source": {"path": str(path)}, "where": "weight > 0"})
    assert status["state"] == "failed", status
    assert status["error"]["code"] == "source_unreadable", status
    message = status["error"]["message"]
    assert "the load's where 'weight > 0'" in message and "1.5" in message, status
    status = load(client, name, {"source": {"path": str(path)}, "where": "id / 0 > 1"})
    assert status["state"] == "failed", status
    assert status["error"]["code"] == "source_unreadable", status
    assert "the load's where 'id / 0 > 1'" in status["error"]["message"], status
    # converting to the table's types is a column_type error, as before
    make_table(client, f"{name}_w", [("id", "int"), ("weight", "int")])
    status = load(client, f"{name}_w", {"source": {"path": str(path)}})
    assert status["state"] == "failed", status
    assert status["error"]["code"] == "column_type", status
    assert status["error"]["detail"] == {"condition": "CAST_INVALID_INPUT", "column": "weight"}
    status = load(client, name, {"source": {"path": str(path)}, "where": "weight > 1.6"})
    assert status["state"] == "done" and status["rows"] == 1, status


def test_sql_source_runs_nothing_but_a_query(
    client: httpx.Client, tmp_path: Path, name: str
) -> None:
    """A statement that starts like a query but writes (WITH ... INSERT, FROM ... INSERT)
    fails the load without running; a query in any of its forms loads."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    make_table(client, name, [("a", "int")])
    for sql in (
        f"WITH q AS (SELECT 1 AS a) INSERT OVERWRITE DIRECTORY '{victim}' USING csv "
        "SELECT * FROM q",
        f"FROM (SELECT 7 AS a) t INSERT OVERWRITE DIRECTORY '{victim}' USING csv SELECT a",
    ):
        status = load(client, name, {"source": {"sql": sql}})
        assert status["state"] == "failed", status
        assert status["error"]["code"] == "invalid_source", status
        assert status["error"]["detail"]["path"] == "source.sql", status
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"]
    assert table_rows(client, name) == 0
    for sql in (
        "WITH q AS (SELECT 1 AS a) SELECT * FROM q",
        "FROM (SELECT 2 AS a) t SELECT a",
        "VALUES (3) AS v(a)",
        "SELECT 4 AS a; ",
        "SELECT 5 AS a -- a comment at the end",
    ):
        status = load(client, name, {"source": {"sql": sql}})
        assert status["state"] == "done", (sql, status)
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    assert row_counts(client, view) == {key(a=a): 1 for a in (1, 2, 3, 4, 5)}


# -- the CLI and the OpenAPI document ------------------------------------------------------------
def test_cli_load_end_to_end(
    server: Server, client: httpx.Client, data_dir: Path, name: str
) -> None:
    make_table(client, name, [("k", "int"), ("v", "string")])
    path = parquet(data_dir, {"k": [1, 2, 3], "v": ["a", "b", "c"]})
    runner = CliRunner()
    args = [
        "--url",
        server.url,
        "load",
        name,
        "--path",
        path,
        "--format",
        "parquet",
        "--poll-s",
        "0.05",
    ]
    result = runner.invoke(cli_app, args)
    assert result.exit_code == 0, result.output
    assert f"done: 3 rows into {name}" in result.stdout
    assert table_rows(client, name) == 3

    missing = str(data_dir / "missing.parquet")
    result = runner.invoke(
        cli_app, ["--url", server.url, "load", name, "--path", missing, "--poll-s", "0.05"]
    )
    assert result.exit_code == 1, result.output
    assert "error: source_not_found" in result.stderr and "missing.parquet" in result.stderr
    assert table_rows(client, name) == 3


def test_openapi_documents_loads(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    post = doc["paths"]["/v1/tables/{name}/loads"]["post"]
    assert "202" in post["responses"] and "422" in post["responses"]
    assert "source" in post["requestBody"]["content"]["application/json"]["schema"]["properties"]
    get = doc["paths"]["/v1/loads/{id}"]["get"]  # API.md's name (it was {load_id}: audit 95)
    assert [p["name"] for p in get["parameters"]] == ["id"]
    assert get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "LoadPublic"
    )
    assert "delete" in doc["paths"]["/v1/loads/{id}"]


def _java_children(pid: int) -> list[int]:
    """The java processes under ``pid`` (the driver JVM Spark launched)."""
    found = []
    for child in Path(f"/proc/{pid}/task").glob("*/children"):
        for text in child.read_text().split():
            cmdline = Path(f"/proc/{text}/cmdline").read_bytes()
            if b"java" in cmdline.split(b"\0")[0]:
                found.append(int(text))
            found += _java_children(int(text))
    return found


def test_loads_go_on_after_the_spark_driver_dies(tmp_path: Path, data_dir: Path) -> None:
    """A long-running server whose Spark driver JVM exits (killed, out of memory) starts a
    new session on the next load, instead of failing every load until it is restarted."""
    import os
    import signal

    with (
        running_server(tmp_path, spark_master="local[1]") as server,
        server.client(timeout=120) as client,
    ):
        make_table(client, "dies", [("k", "int")])
        first = load(client, "dies", {"source": {"path": parquet(data_dir, {"k": [1, 2]})}})
        assert first["state"] == "done", first
        jvms = _java_children(server.process.pid)
        assert len(jvms) == 1, jvms
        os.kill(jvms[0], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{jvms[0]}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        again = load(client, "dies", {"source": {"path": parquet(data_dir, {"k": [3]})}})
        assert again["state"] == "done", again
        assert table_rows(client, "dies") == 3
        assert len(_java_children(server.process.pid)) == 1
