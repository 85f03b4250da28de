"""Frames of subscriptions without a server: their sizes (``encoded_parts``), and the bound
on the bytes a subscriber may leave unsent (``Subscriber``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from service.codec import kept_json
from service.subscriptions import FRAME_BYTES, Subscriber, encoded_parts


def test_a_big_time_is_cut_in_order_into_frames_under_the_bound() -> None:
    updates = [
        {"data": {"k": i, "s": f"row {i:08d}"}, "diff": 1 - 2 * (i % 2)} for i in range(90_000)
    ]
    parts = encoded_parts({"time": [3, 4]}, updates)
    assert len(parts) > 1 and all(len(p) <= FRAME_BYTES for p in parts)
    bodies = [orjson.loads(p) for p in parts]
    assert all(b["time"] == [3, 4] for b in bodies)
    assert [u for b in bodies for u in b["updates"]] == updates


def test_a_small_time_is_one_frame_and_one_huge_update_stands_alone() -> None:
    small = [{"data": {"k": 1}, "diff": 1}]
    assert encoded_parts({"time": 7}, small) == [orjson.dumps({"time": 7, "updates": small})]
    huge = {"data": {"s": "x" * (FRAME_BYTES + 10)}, "diff": 1}
    parts = encoded_parts({"time": 7}, [small[0], huge, small[0]])
    assert [orjson.loads(p)["updates"] for p in parts] == [[small[0]], [huge], [small[0]]]


def test_a_subscriber_behind_by_more_bytes_than_its_bound_is_closed() -> None:
    loop = asyncio.new_event_loop()
    try:
        sub = Subscriber("v", progress=False, limit=10_000, loop=loop, limit_mb=1)
        big = {"type": "diff", "time": 1, "updates": [{"data": {"s": "x" * 300_000}, "diff": 1}]}
        sub.mark_step()
        for _ in range(4):  # 1.2 MB in one step: its own frames do not count
            assert sub.push(big)
        assert sub.pop() is not None and sub.pop() is not None  # 0.6 MB sent
        sub.mark_step()
        assert sub.push(big)  # 0.6 MB left from earlier steps
        sub.mark_step()
        assert sub.push(big)  # 0.9 MB
        sub.mark_step()
        assert not sub.push(big)  # 1.2 MB: too slow, whatever the bound in frames
        frames = []
        while (frame := sub.pop()) is not None:
            frames.append(orjson.loads(frame))
        assert frames == [
            {
                "type": "closed",
                "seq": 2,  # in the place of the unsent ones
                "reason": "subscriber too slow: more than 1 MB unsent "
                "(DIFFLOW_SUBSCRIBER_BUFFER_MB)",
            }
        ]
        assert not sub.push(big)
    finally:
        loop.close()


def test_json_kept_for_long_holds_its_own_size() -> None:
    """Audit 116: orjson's result keeps about 4 KB whatever its length, and the server kept
    100,000 completions of 1-row writes that way (440 MB above its data). ``kept_json``
    copies short results to their size: 20,000 of them grow the process by far less than
    the 80 MB orjson's own would hold."""

    def rss_kib() -> int:
        status = Path("/proc/self/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0])

    values = [{"token": f"w-{i}", "times": [i], "status": "done"} for i in range(20_000)]
    assert all(kept_json(v) == orjson.dumps(v) for v in values[:100])
    before = rss_kib()
    kept = [kept_json(v) for v in values]
    grown_mib = (rss_kib() - before) / 1024
    assert len(kept) == 20_000 and grown_mib < 30, grown_mib
    big = {"rows": list(range(20_000))}  # long: orjson's own result, no copy
    assert kept_json(big) == orjson.dumps(big)
