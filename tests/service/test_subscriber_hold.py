"""A subscriber whose snapshot is built off the engine thread (``Subscriber.hold`` and
``prepare``): what the engine queues meanwhile goes out after the snapshot, numbered in the
order sent, and a close meanwhile keeps or drops it as a close otherwise would."""

from __future__ import annotations

import asyncio
import threading

import orjson

from service.subscriptions import Frames, Subscriber


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
