"""Client and AsyncClient put API.md's requests on the wire and map answers and errors.

Every test runs against both mirrors through the ``call`` fixture, over one MockTransport.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from clients import (
    AsyncClient,
    BadRequestError,
    Client,
    ConflictError,
    ConnectionFailed,
    DifflowError,
    InvalidError,
    NotFoundError,
    ServerError,
    TooLargeError,
    col,
    table,
)
from clients.websocket import encode_frame
from tests.clients.doubles import Exchange, answer, body_of

URL = "http://difflow.test:9000"
Call = Callable[..., Any]


@pytest.fixture(params=["sync", "async"])
def call(request: pytest.FixtureRequest, exchange: Exchange) -> Call:
    """``call(method, *args)`` runs one client method on a fresh sync or async client."""

    def run_sync(method: str, *args: Any, **kwargs: Any) -> Any:
        with Client(URL, transport=exchange.transport) as client:
            return getattr(client, method)(*args, **kwargs)

    def run_async(method: str, *args: Any, **kwargs: Any) -> Any:
        async def run() -> Any:
            async with AsyncClient(URL, transport=exchange.transport) as client:
                return await getattr(client, method)(*args, **kwargs)

        return asyncio.run(run())

    return run_sync if request.param == "sync" else run_async


TABLE = {"name": "edges", "columns": [{"name": "src", "type": "int"}], "frontier": [3]}


def test_health(exchange: Exchange, call: Call) -> None:
    exchange.on("GET", "/healthz", answer(200, {"status": "ok"}))
    assert call("health") == {"status": "ok"}
    assert str(exchange.last.url) == f"{URL}/healthz"


@pytest.mark.parametrize(
    "columns",
    [
        [("src", "int"), ("dst", "int")],
        [{"name": "src", "type": "int"}, {"name": "dst", "type": "int"}],
        {"src": "int", "dst": "int"},
    ],
)
def test_create_table(exchange: Exchange, call: Call, columns: Any) -> None:
    exchange.on("POST", "/v1/tables", answer(201, TABLE))
    assert call("create_table", "edges", columns, primary_key=["src", "dst"]) == TABLE
    assert exchange.last.headers["content-type"] == "application/json"
    assert body_of(exchange.last) == {
        "name": "edges",
        "columns": [{"name": "src", "type": "int"}, {"name": "dst", "type": "int"}],
        "primary_key": ["src", "dst"],
        "timing": "server",
        "time_dims": 1,
    }


def test_create_table_without_key_client_timed(exchange: Exchange, call: Call) -> None:
    exchange.on("POST", "/v1/tables", answer(201, TABLE))
    call("create_table", "t", [("x", "float")], timing="client", time_dims=2)
    assert body_of(exchange.last) == {
        "name": "t",
        "columns": [{"name": "x", "type": "float"}],
        "timing": "client",
        "time_dims": 2,
    }


def test_listing_unwraps_and_describing_and_dropping(exchange: Exchange, call: Call) -> None:
    exchange.on("GET", "/v1/tables", answer(200, {"tables": [TABLE]}))
    exchange.on("GET", "/v1/views", answer(200, {"views": [{"name": "v"}]}))
    exchange.on("GET", "/v1/tables/edges", answer(200, TABLE))
    exchange.on("GET", "/v1/views/v", answer(200, {"name": "v"}))
    exchange.on("DELETE", "/v1/tables/edges", answer(204))
    exchange.on("DELETE", "/v1/views/v", answer(204))
    assert call("tables") == [TABLE]
    assert call("views") == [{"name": "v"}]
    assert call("table", "edges") == TABLE
    assert call("view", "v") == {"name": "v"}
    assert call("drop_table", "edges") is None
    assert call("drop_view", "v") is None
    assert [(r.method, r.url.path) for r in exchange.requests[-2:]] == [
        ("DELETE", "/v1/tables/edges"),
        ("DELETE", "/v1/views/v"),
    ]


def test_write_updates_waits_by_default(exchange: Exchange, call: Call) -> None:
    done = {"token": "w-1", "times": [7], "frontier": [8], "status": "done", "latency_ms": 0.8}
    exchange.on("POST", "/v1/tables/edges/updates", answer(200, done))
    updates = [{"insert": {"src": 1}}, {"weight": 3, "data": {"src": 5}, "time": 7}]
    assert call("write", "edges", updates, advance_to=8) == done
    assert exchange.last.url.params["wait"] == "true"
    assert body_of(exchange.last) == {"updates": updates, "advance_to": 8}


def test_write_without_waiting_returns_the_202_body(exchange: Exchange, call: Call) -> None:
    pending = {"token": "w-2", "status": "pending"}
    exchange.on("POST", "/v1/tables/edges/updates", answer(202, pending))
    assert call("write", "edges", [{"delete": {"src": 1}}], time=[1, 2], wait=False) == pending
    assert exchange.last.url.params["wait"] == "false"
    assert body_of(exchange.last) == {"updates": [{"delete": {"src": 1}}], "time": [1, 2]}


def test_write_columnar_with_numpy(exchange: Exchange, call: Call) -> None:
    exchange.on("POST", "/v1/tables/edges/updates", answer(200, {"status": "done"}))
    columns = {"src": np.array([1, 2], dtype=np.int64), "w": np.array([0.5, 1.5])}
    call("write", "edges", columns=columns, diff=[1, -1], time=[4, 5])
    assert body_of(exchange.last) == {
        "columns": {"src": [1, 2], "w": [0.5, 1.5]},
        "diff": [1, -1],
        "time": [4, 5],
    }


def test_write_that_only_moves_the_frontier(exchange: Exchange, call: Call) -> None:
    exchange.on("POST", "/v1/tables/t/updates", answer(200, {"status": "done"}))
    call("write", "t", advance_to=[[3, 0], [0, 3]])
    assert body_of(exchange.last) == {"updates": [], "advance_to": [[3, 0], [0, 3]]}


def test_write_refuses_mixed_forms(call: Call) -> None:
    with pytest.raises(ValueError, match="not both"):
        call("write", "t", [{"insert": {"a": 1}}], columns={"a": [1]})
    with pytest.raises(ValueError, match=r"write \[update\] for one"):  # audit 109
        call("write", "edges", {"insert": {"src": 1}})
    with pytest.raises(ValueError, match="columnar"):
        call("write", "t", [{"insert": {"a": 1}}], diff=[1])


def test_completion(exchange: Exchange, call: Call) -> None:
    exchange.on("GET", "/v1/completions/w-42", answer(202, {"token": "w-42", "status": "pending"}))
    assert call("completion", "w-42") == {"token": "w-42", "status": "pending"}


def test_create_view_from_a_plan_or_a_dict(exchange: Exchange, call: Call) -> None:
    exchange.on("POST", "/v1/views", answer(201, {"name": "big"}))
    plan = table("edges").filter(col("src") > 3)
    call("create_view", "big", plan)
    assert body_of(exchange.last) == {"name": "big", "query": plan.to_json()}
    call("create_view", "all", {"op": "table", "name": "edges"})
    assert body_of(exchange.last) == {"name": "all", "query": {"op": "table", "name": "edges"}}


@pytest.mark.parametrize(("as_of", "query"), [(None, ""), (7, "as_of=7"), ([1, 2], "as_of=1%2C2")])
def test_rows(exchange: Exchange, call: Call, as_of: Any, query: str) -> None:
    rows = {"time": 7, "frontier": [8], "rows": [{"data": {"a": 1}, "count": 2}]}
    exchange.on("GET", "/v1/views/v/rows", answer(200, rows))
    assert call("rows", "v", as_of) == rows
    assert exchange.last.url.query.decode() == query


@pytest.mark.parametrize("as_of", [0.9, 1.99, True, [1, 2.5]])
def test_rows_as_of_a_time_that_is_no_integer_is_refused(
    exchange: Exchange, call: Call, as_of: Any
) -> None:
    """Audit 109: ``int()`` made 0.9 time 0 and True time 1."""
    with pytest.raises(InvalidError, match="a time is a non-negative integer") as caught:
        call("rows", "v", as_of)
    assert caught.value.code == "bad_time"
    assert exchange.requests == []


def test_loads(exchange: Exchange, call: Call) -> None:
    exchange.on("POST", "/v1/tables/edges/loads", answer(202, {"id": "L1", "state": "queued"}))
    exchange.on("GET", "/v1/loads/L1", answer(200, {"id": "L1", "state": "running", "rows": 5}))
    exchange.on("DELETE", "/v1/loads/L1", answer(200, {"id": "L1", "state": "cancelled"}))
    source = {"path": "/data/e.parquet", "format": "parquet", "options": {}}
    created = call("create_load", "edges", source, {"src": "from_id"}, "w > 0", "replace", 0)
    assert created == {"id": "L1", "state": "queued"}
    assert body_of(exchange.requests[0]) == {
        "source": source,
        "columns": {"src": "from_id"},
        "where": "w > 0",
        "mode": "replace",
        "time": 0,
    }
    call("create_load", "edges", {"sql": "SELECT 1 AS src"})
    assert body_of(exchange.last) == {"source": {"sql": "SELECT 1 AS src"}, "mode": "append"}
    assert call("load", "L1")["rows"] == 5
    assert call("cancel_load", "L1") == {"id": "L1", "state": "cancelled"}
    assert exchange.last.method == "DELETE"


def test_metrics_are_text(exchange: Exchange, call: Call) -> None:
    text = "# TYPE difflow_writes_total counter\ndifflow_writes_total 3\n"
    exchange.on("GET", "/metrics", httpx.Response(200, text=text))
    assert call("metrics") == text


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (400, BadRequestError),
        (404, NotFoundError),
        (409, ConflictError),
        (413, TooLargeError),
        (422, InvalidError),
        (500, ServerError),
        (503, ServerError),
        (418, DifflowError),
    ],
)
def test_error_answers_become_typed_errors(
    exchange: Exchange, call: Call, status: int, error_class: type[DifflowError]
) -> None:
    detail = {"path": "query.body.reach.left"}
    error = {"error": {"code": "some_code", "message": "what went wrong", "detail": detail}}
    exchange.on("POST", "/v1/views", answer(status, error))
    with pytest.raises(error_class) as caught:
        call("create_view", "v", table("t"))
    assert type(caught.value) is error_class
    assert (caught.value.status, caught.value.code) == (status, "some_code")
    assert (caught.value.message, caught.value.detail) == ("what went wrong", detail)
    assert str(caught.value) == "some_code: what went wrong"


def test_an_error_answer_that_is_not_json(exchange: Exchange, call: Call) -> None:
    exchange.on("GET", "/v1/tables", httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(ServerError) as caught:
        call("tables")
    assert caught.value.code == "http_502"
    assert caught.value.message == "Bad Gateway"
    assert caught.value.detail == "<html>bad gateway</html>"


def test_a_success_answer_that_is_not_json(exchange: Exchange, call: Call) -> None:
    exchange.on("GET", "/v1/tables", httpx.Response(200, text="oops"))
    with pytest.raises(DifflowError) as caught:
        call("tables")
    assert caught.value.code == "bad_response"


def test_transport_errors_become_connection_failed(exchange: Exchange, call: Call) -> None:
    refused = httpx.ConnectError("connection refused")
    exchange.on("GET", "/healthz", refused)
    with pytest.raises(ConnectionFailed) as caught:
        call("health")
    assert caught.value.__cause__ is refused
    assert caught.value.status is None
    assert caught.value.code == "connection_failed"
    assert f"GET {URL}/healthz" in caught.value.message


def test_what_cannot_be_sent_is_a_difflow_error(exchange: Exchange, call: Call) -> None:
    """The client's errors are its own hierarchy, raised before anything is sent, with the
    status the server would have answered (they had none)."""
    with pytest.raises(InvalidError) as caught:
        call("write", "edges", [{"insert": {"src": 2**64}}])
    assert caught.value.code == "invalid_value" and "64-bit" in caught.value.message
    assert caught.value.status == 422
    with pytest.raises(InvalidError) as caught:
        call("create_view", "v", [1])
    assert caught.value.code == "invalid_plan" and caught.value.status == 422
    with pytest.raises(ConnectionFailed) as caught:
        Client("http://[::1")
    assert caught.value.message.startswith("bad URL 'http://[::1'")
    assert exchange.requests == []


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"updates": [{"insert": {"src": 1, "w": float("nan")}}]}, "updates[0].insert.w"),
        ({"updates": [{"insert": [3, -float("inf")]}, {"delete": [1, 2]}]}, "updates[0].insert[1]"),
        ({"columns": {"src": np.array([1, 2]), "w": np.array([0.5, np.inf])}}, "columns.w[1]"),
    ],
)
def test_a_nan_or_infinity_is_refused_before_it_is_sent(
    exchange: Exchange, call: Call, body: Any, path: str
) -> None:
    """orjson writes NaN and infinities as null, which the server took for a null (audit
    109); the client now refuses them, naming where."""
    with pytest.raises(InvalidError) as caught:
        call("write", "t", **body)
    assert caught.value.code == "not_finite" and caught.value.detail == {"path": path}
    assert caught.value.message.startswith(f"{path}: a NaN or infinity cannot be sent")
    assert exchange.requests == []
    exchange.on("POST", "/v1/tables/t/updates", answer(200, {"write": "w-1", "outputs": {}}))
    call("write", "t", [{"insert": {"src": 1, "w": None}}])  # a null is sent as one
    assert body_of(exchange.requests[0])["updates"] == [{"insert": {"src": 1, "w": None}}]


def test_the_nan_check_copes_with_values_only_orjson_encodes(
    exchange: Exchange, call: Call
) -> None:
    """The NaN check encodes again with the standard library, which refuses what orjson
    sends (a datetime): it raised a bare TypeError where a write held a null (review of
    session 56). A long double is sent as a float (it was refused)."""
    when = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)
    with pytest.raises(InvalidError) as caught:
        call("write", "t", [{"insert": {"a": None, "b": when, "c": float("nan")}}])
    assert caught.value.detail == {"path": "updates[0].insert.c"}
    exchange.on("POST", "/v1/tables/t/updates", answer(200, {"write": "w-1", "outputs": {}}))
    call("write", "t", [{"insert": {"a": None, "b": when, "c": np.longdouble(0.5)}}])
    inserted = body_of(exchange.requests[0])["updates"][0]["insert"]
    assert inserted == {"a": None, "b": "2026-12-01T00:00:00+00:00", "c": 0.5}


def test_a_websocket_frame_with_a_nan_is_refused() -> None:
    with pytest.raises(InvalidError) as caught:
        encode_frame({"updates": [{"insert": [float("nan")]}]}, 1)
    assert caught.value.detail == {"path": "updates[0].insert[0]"}


def test_a_closed_client_says_so(exchange: Exchange) -> None:
    client = Client(URL, transport=exchange.transport)
    client.close()
    with pytest.raises(ConnectionFailed, match="is closed"):
        client.health()

    async def closed_async() -> None:
        async_client = AsyncClient(URL, transport=exchange.transport)
        await async_client.aclose()
        await async_client.health()

    with pytest.raises(ConnectionFailed, match="is closed"):
        asyncio.run(closed_async())


def test_url_comes_from_the_environment_or_defaults_to_localhost(
    exchange: Exchange, monkeypatch: pytest.MonkeyPatch
) -> None:
    exchange.on("GET", "/healthz", answer(200, {"status": "ok"}))
    monkeypatch.delenv("DIFFLOW_URL", raising=False)
    with Client(transport=exchange.transport) as client:
        client.health()
    assert str(exchange.last.url) == "http://127.0.0.1:8000/healthz"
    monkeypatch.setenv("DIFFLOW_URL", "http://elsewhere:1234/")
    with Client(transport=exchange.transport) as client:
        assert client.url == "http://elsewhere:1234"
        client.health()
    assert str(exchange.last.url) == "http://elsewhere:1234/healthz"


def test_the_mirrors_offer_the_same_methods() -> None:
    def public(cls: type) -> set[str]:
        return {name for name in vars(cls) if not name.startswith("_")}

    assert public(Client) - {"close"} == public(AsyncClient) - {"aclose"}
