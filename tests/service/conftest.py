"""Fixtures: one real server per test module (tests use distinct names), plus helpers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import httpx
import pytest

from tests.service.server import Server, running_server

_names = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("server")) as s:
        yield s


@pytest.fixture()
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


@pytest.fixture()
def name() -> str:
    """A fresh table or view name."""
    return f"t{next(_names)}"


def make_table(c: httpx.Client, name: str, columns: list[tuple[str, str]], **extra: object) -> dict:
    r = c.post(
        "/v1/tables",
        json={"name": name, "columns": [{"name": n, "type": t} for n, t in columns], **extra},
    )
    assert r.status_code == 201, r.text
    return r.json()


def make_view(c: httpx.Client, view: str, query: dict) -> dict:
    r = c.post("/v1/views", json={"name": view, "query": query})
    assert r.status_code == 201, r.text
    return r.json()


def make_count_view(c: httpx.Client, view: str, table: str, by: tuple[str, ...] = ()) -> None:
    """``view``: the rows of ``table`` counted (``n``) per ``by``."""
    plan = {
        "op": "reduce",
        "input": {"op": "table", "name": table},
        "by": list(by),
        "aggregates": {"n": {"fn": "count"}},
    }
    r = c.post("/v1/views", json={"name": view, "query": plan})
    assert r.status_code == 201, r.text


def write(c: httpx.Client, table: str, body: dict, status: int = 200, **params: object) -> dict:
    r = c.post(f"/v1/tables/{table}/updates", json=body, params=params)
    assert r.status_code == status, r.text
    return r.json()


def rows(c: httpx.Client, view: str, **params: object) -> dict:
    r = c.get(f"/v1/views/{view}/rows", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def row_counts(c: httpx.Client, view: str, **params: object) -> dict[tuple, int]:
    return {tuple(sorted(r["data"].items())): r["count"] for r in rows(c, view, **params)["rows"]}


def assert_error(r: httpx.Response, status: int, code: str | None = None) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and {"code", "message", "detail"} <= set(body["error"]), body
    assert body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]
