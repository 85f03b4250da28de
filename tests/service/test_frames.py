"""Frame sizes of subscriptions (``service.subscriptions.encoded_parts``), without a server."""

from __future__ import annotations

import orjson

from service.subscriptions import FRAME_BYTES, encoded_parts


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
