"""How HTTP requests are served: on the event loop, without a hop to a worker thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest

from api.app import create_app
from service.settings import Settings
from tests.service.conftest import make_table, write
from tests.service.server import serving_in_thread


def test_requests_are_served_without_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI runs a plain function (an endpoint or a dependency) on one of anyio's worker
    threads: a hand-over there and back for every request, two thread wake-ups of tens of
    microseconds each on the machines measured. A real server (uvicorn in a thread) serves
    writes, reads and the catalog's routes, with and without query parameters, and no call
    is handed to a worker thread."""
    handed: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        handed.append(getattr(func, "__qualname__", repr(func)))
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    app = create_app(Settings(data_dir=tmp_path))
    with (
        serving_in_thread(app) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c,
    ):
        make_table(c, "t", [("x", "int")])
        r = c.post("/v1/views", json={"name": "v", "query": {"op": "table", "name": "t"}})
        assert r.status_code == 201, r.text
        write(c, "t", {"updates": [{"insert": {"x": 1}}]})
        r = c.post("/v1/tables/t/updates", params={"wait": "true"}, json={"updates": []})
        assert r.status_code == 200, r.text
        assert c.get("/v1/views/v/rows").status_code == 200
        assert c.get("/v1/tables").status_code == 200
        assert c.get("/v1/tables/t").status_code == 200
        r = c.get("/v1/tables", params={"nope": "1"})
        assert r.status_code == 422 and r.json()["error"]["detail"] == {"path": "nope"}
    assert handed == []
