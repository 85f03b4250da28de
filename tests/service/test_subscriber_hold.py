"""A subscriber whose snapshot is built off the engine thread (``Subscriber.hold`` and
``prepare``): what the engine queues meanwhile goes out after the snapshot, numbered in the
order sent, and a close meanwhile keeps or drops it as a close otherwise would."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from websockets.sync.client import connect

from api.app import create_app
from service import runtime as runtime_module
from service.settings import Settings
from service.subscriptions import Frames, Subscriber
from tests.service.conftest import make_table
from tests.service.server import serving_in_thread


def _drain(sub: Subscriber) -> list[dict]:
    frames = []
    while (frame := sub.pop()) is not None:
        frames.append(orjson.loads(frame))
    return frames


async def _held_while(
    during: list[str], close: str | None = None, keep_unsent: bool = False
) -> tuple[Subscriber, list[dict], list[dict]]:
    """Subscribe with a snapshot built on another thread; while it is built, push a diff
    for each of ``during``, ask for a heartbeat, and close if told. Returns the subscriber,
    what could be sent while it was built, and everything sent after."""
    sub = Subscriber("v", progress=True, limit=10, loop=asyncio.get_running_loop())
    building, go = threading.Event(), threading.Event()

    def first() -> Frames:
        building.set()
        go.wait(10)
        return [("snapshot", b'{"time":[3],"updates":[]}')]

    sub.hold(first)
    prepared = asyncio.create_task(sub.prepare())
    await asyncio.to_thread(building.wait, 10)
    for t in during:
        assert sub.push({"type": "diff", "time": t, "updates": []})
    sub.heartbeat()
    if close is not None:
        sub.close(close, keep_unsent=keep_unsent)
    early = _drain(sub)
    go.set()
    await prepared
    return sub, early, _drain(sub)


def test_frames_queued_while_the_snapshot_is_built_follow_it_in_order() -> None:
    async def run() -> None:
        sub, early, later = await _held_while(["4", "5"])
        assert early == [] and not sub.finished  # no heartbeat went ahead of it
        assert [(f["type"], f["seq"], f.get("time")) for f in later] == [
            ("snapshot", 0, [3]),
            ("diff", 1, "4"),
            ("diff", 2, "5"),
        ]
        assert sub.push({"type": "diff", "time": "6", "updates": []})
        assert [(f["seq"], f["time"]) for f in _drain(sub)] == [(3, "6")]

    asyncio.run(run())


def test_a_view_dropped_while_the_snapshot_is_built_sends_it_then_closes() -> None:
    async def run() -> None:
        sub, early, later = await _held_while(["4"], close="view 'v' was dropped", keep_unsent=True)
        assert early == [] and sub.finished
        assert [(f["type"], f["seq"]) for f in later] == [
            ("snapshot", 0),
            ("diff", 1),
            ("closed", 2),
        ]
        assert later[-1]["reason"] == "view 'v' was dropped"
        assert not sub.push({"type": "diff", "time": "5", "updates": []})

    asyncio.run(run())


def test_a_shutdown_while_the_snapshot_is_built_sends_only_the_closed_frame() -> None:
    async def run() -> None:
        sub, early, later = await _held_while(["4"], close="the server is shutting down")
        assert [(f["type"], f["seq"]) for f in early] == [("closed", 0)]
        assert later == [] and sub.finished

    asyncio.run(run())


def test_a_snapshot_that_cannot_be_built_closes_the_subscriber() -> None:
    async def run() -> None:
        sub = Subscriber("v", progress=False, limit=10, loop=asyncio.get_running_loop())

        def first() -> Frames:
            raise ValueError("no")

        sub.hold(first)
        assert sub.push({"type": "diff", "time": "4", "updates": []})
        await sub.prepare()
        frames = _drain(sub)
        assert [(f["type"], f["seq"]) for f in frames] == [("closed", 0)]
        assert "snapshot could not be built" in frames[0]["reason"] and sub.finished

    asyncio.run(run())


@contextmanager
def _server_with_a_held_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: bool = True, **settings: Any
) -> Iterator[tuple[Any, int, threading.Event, threading.Event]]:
    """A real server (uvicorn in a thread, with the protocol ``api.server`` serves with, or
    uvicorn's own) whose snapshot builds wait: yields its app, its port, an event set when
    a build has begun, and one that lets the builds go on."""
    from api.server import _WebSocketProtocol

    building, go = threading.Event(), threading.Event()
    build = runtime_module._snapshot_frames

    def held(*args: Any) -> Frames:
        building.set()
        go.wait(30)
        return build(*args)

    monkeypatch.setattr(runtime_module, "_snapshot_frames", held)
    app = create_app(Settings(data_dir=tmp_path, **settings))
    protocol = _WebSocketProtocol if ours else "auto"
    with serving_in_thread(app, ws=protocol) as port:
        try:
            yield app, port, building, go
        finally:
            go.set()  # before the server stops: a build held now would hold its shutdown


@pytest.mark.parametrize("ours", [True, False])
def test_a_shutdown_while_a_snapshot_is_built_closes_the_socket_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: bool
) -> None:
    """A real server, its snapshot build held: the ``closed`` frame of a server shutting
    down goes out at once, not after the build (audit 60: a 1M-row snapshot's subscribers
    got no frame before the sockets closed). Under uvicorn's own protocol too, which cannot
    drop a silent peer: the subscription ended as soon as it began."""
    held = _server_with_a_held_build(tmp_path, monkeypatch, ours)
    with held as (app, port, building, _):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
            make_table(c, "t", [("x", "int")])
            r = c.post("/v1/views", json={"name": "v", "query": {"op": "table", "name": "t"}})
            assert r.status_code == 201, r.text
        with connect(f"ws://127.0.0.1:{port}/v1/views/v/subscribe?snapshot=true") as ws:
            assert building.wait(10)
            app.state.runtime.close_subscribers("the server is shutting down")
            frame = orjson.loads(ws.recv(timeout=10))
            assert (frame["type"], frame["seq"]) == ("closed", 0), frame


def test_a_view_dropped_while_a_slow_snapshot_is_built_still_sends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A closed subscriber whose socket takes nothing for two heartbeat intervals is
    dropped, but not while its snapshot is built: nothing can go out then, and readers of
    a view dropped meanwhile got no frame at all (audit 67)."""
    held = _server_with_a_held_build(tmp_path, monkeypatch, heartbeat_s=0.2)
    with held as (_, port, building, go), httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
        make_table(c, "t", [("x", "int")])
        r = c.post("/v1/views", json={"name": "v", "query": {"op": "table", "name": "t"}})
        assert r.status_code == 201, r.text
        r = c.post("/v1/tables/t/updates", json={"updates": [{"insert": {"x": 1}}]})
        assert r.status_code == 200, r.text
        with connect(f"ws://127.0.0.1:{port}/v1/views/v/subscribe?progress=false") as ws:
            assert building.wait(10)
            assert c.delete("/v1/views/v").status_code == 204
            time.sleep(1.0)  # five heartbeat intervals
            go.set()
            frames = [orjson.loads(ws.recv(timeout=10)) for _ in range(2)]
    assert [f["type"] for f in frames] == ["snapshot", "closed"], frames
    assert frames[0]["updates"] == [{"data": {"x": 1}, "diff": 1}]


def test_subscribers_of_one_step_share_one_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Subscribers of a view that come before the engine's next step get the one snapshot,
    captured and built once (four built apart held a write for 2.5 s: audit 62); after a
    step, a new one."""
    from service.runtime import Runtime

    builds = []
    build = runtime_module._snapshot_frames

    def counted(*args: Any) -> Frames:
        builds.append(args[1])
        return build(*args)

    monkeypatch.setattr(runtime_module, "_snapshot_frames", counted)
    rt = Runtime(Settings(data_dir=tmp_path))
    rt.start()
    try:
        on_engine = lambda fn: rt.submit(fn).result(timeout=60)  # noqa: E731
        spec = {"name": "t", "columns": [{"name": "k", "type": "int"}]}
        on_engine(lambda: rt.catalog.create_table(spec))
        v = on_engine(
            lambda: rt.catalog.create_view({"name": "v", "query": {"op": "table", "name": "t"}})
        )
        on_engine(lambda: rt.adopt_view(v))
        on_engine(rt.step)
        loop = asyncio.new_event_loop()
        subs = [on_engine(lambda: rt.subscribe("v", True, False, loop)) for _ in range(4)]
        firsts = [sub._first for sub in subs]
        assert firsts[0] is not None and all(f is firsts[0] for f in firsts)
        frames = [f() for f in firsts if f is not None]
        assert len(builds) == 1 and all(f is frames[0] for f in frames)
        on_engine(rt.step)
        later = on_engine(lambda: rt.subscribe("v", True, False, loop))
        assert later._first is not firsts[0]
        loop.close()
    finally:
        rt.stop()
