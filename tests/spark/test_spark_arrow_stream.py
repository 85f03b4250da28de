"""Streaming a load: bounded chunks, numpy columns, interning, nulls, progress, cancellation."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from service.errors import LoadError
from service.spark import intern_strings, stream_chunks
from service.spark.arrow_stream import _Watchdog

pytestmark = pytest.mark.spark

SCHEMA = [("src", "int"), ("w", "float"), ("ok", "bool"), ("label", "string")]
N = 10_000


@pytest.fixture
def frame(write_parquet: Any, plan: Any) -> Any:
    src = np.arange(N)
    path = write_parquet(
        {"src": src, "w": src / 2, "ok": src % 2 == 0, "label": [f"k{i % 7}" for i in range(N)]}
    )
    return plan({"source": {"path": path}}, SCHEMA)


def test_chunks_are_bounded_and_complete(frame: Any) -> None:
    chunks = list(stream_chunks(frame, chunk_rows=1000))
    assert len(chunks) >= N // 1000
    assert all(0 < len(chunk["src"]) <= 1000 for chunk in chunks)
    src = np.concatenate([chunk["src"] for chunk in chunks])
    assert src.tolist() == list(range(N))
    first = chunks[0]
    assert set(first) == {"src", "w", "ok", "label"}
    assert first["src"].dtype == np.int64 and first["src"].flags.writeable
    assert first["w"].dtype == np.float64 and first["w"].flags.writeable
    assert first["ok"].dtype == np.bool_
    assert isinstance(first["label"], pa.Array) and first["label"].type == pa.string()
    assert first["label"][:3].to_pylist() == ["k0", "k1", "k2"]


def test_chunks_arrive_before_the_whole_set_is_read(frame: Any) -> None:
    seen: list[int] = []
    stream = stream_chunks(frame, chunk_rows=500, progress=seen.append)
    next(stream)
    assert seen == [500]  # one chunk on this side, the rest not yet transferred
    stream.close()
    list(stream_chunks(frame, chunk_rows=4000, progress=seen.append))
    assert seen[1:] == [4000, 8000, N]


def test_interning_sees_each_distinct_string_once_per_chunk(frame: Any) -> None:
    ids: dict[str, int] = {}
    calls: list[list[str]] = []

    def intern(strings: list[str]) -> list[int]:
        calls.append(strings)
        return [ids.setdefault(s, len(ids)) for s in strings]

    chunks = list(stream_chunks(frame, chunk_rows=3000, intern=intern))
    assert len(calls) == len(chunks) == 4
    assert all(len(call) == len(set(call)) == 7 for call in calls)
    labels = np.concatenate([chunk["label"] for chunk in chunks])
    assert labels.dtype == np.int64
    names = {v: k for k, v in ids.items()}
    assert [names[i] for i in labels[:8]] == [f"k{i % 7}" for i in range(8)]


def test_intern_strings_helper() -> None:
    got = intern_strings(pa.array(["b", "a", "b", "c"]), lambda s: [ord(x[0]) for x in s])
    assert got.tolist() == [98, 97, 98, 99]
    assert intern_strings(["x", "x"], lambda s: np.arange(len(s)) + 5).tolist() == [5, 5]
    with pytest.raises(ValueError, match=r"ids for 2 strings"):
        intern_strings(["x", "y"], lambda s: [1])
    with pytest.raises(ValueError, match="nulls"):
        intern_strings(pa.array(["x", None]), lambda s: [0] * len(s))


def test_null_value_names_the_column(write_parquet: Any, plan: Any, load: Any) -> None:
    path = write_parquet({"from_id": [1, 2, 3], "to_id": [4, None, 6]})
    spec = {"source": {"path": path}, "columns": {"src": "from_id", "dst": "to_id"}}
    with pytest.raises(LoadError) as info:
        list(stream_chunks(plan(spec, [("src", "int"), ("dst", "int")])))
    assert info.value.code == "null_value"
    assert "'dst' (source column 'to_id')" in info.value.message
    assert '"to_id IS NOT NULL"' in info.value.message
    assert info.value.detail == {"column": "dst", "source_column": "to_id", "row": 1}
    fixed = load({**spec, "where": "to_id IS NOT NULL"}, [("src", "int"), ("dst", "int")])
    assert fixed["dst"].tolist() == [4, 6]


def test_null_string(write_parquet: Any, plan: Any) -> None:
    path = write_parquet({"label": ["a", None]})
    with pytest.raises(LoadError, match="null") as info:
        list(
            stream_chunks(
                plan({"source": {"path": path}}, [("label", "string")]),
                intern=lambda s: [0] * len(s),
            )
        )
    assert info.value.code == "null_value"


def test_cancel_mid_stream_releases_spark(frame: Any) -> None:
    cancel = threading.Event()
    got = 0
    with pytest.raises(LoadError) as info:
        for chunk in stream_chunks(frame, chunk_rows=1000, cancel=cancel):
            got += len(chunk["src"])
            cancel.set()
    assert info.value.code == "cancelled"
    assert got == 1000 and info.value.detail == {"rows": 1000}
    # The session is free again: the next load streams everything.
    assert sum(len(c["src"]) for c in stream_chunks(frame, chunk_rows=2500)) == N


def test_cancel_callable_and_before_start(frame: Any) -> None:
    with pytest.raises(LoadError, match="cancelled after 0 rows"):
        next(stream_chunks(frame, cancel=lambda: True))
    flags = iter([False, False, True])
    with pytest.raises(LoadError) as info:
        list(stream_chunks(frame, chunk_rows=2000, cancel=lambda: next(flags)))
    assert info.value.detail == {"rows": 2000}


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.5])
def test_a_cancel_before_the_job_starts_stops_it_when_it_does(plan: Any, delay: float) -> None:
    """Audit 51: a cancel made while the stream was still setting up its Spark job cancelled
    nothing, and the job, submitted just after, ran on for good (a cross join of 4e10 rows),
    holding Spark's cores and every later load of the table. Cancels are repeated until the
    stream stops; each delay here lands the cancel at a different point of the setup."""
    slow = plan(
        {
            "source": {"sql": "SELECT id AS src FROM range(0, 10000000000000, 1, 2)"},
            "where": "src < 0",
        },
        [("src", "int")],
    )
    cancel = threading.Event()
    threading.Timer(delay, cancel.set).start()
    with pytest.raises(LoadError) as info:
        list(stream_chunks(slow, cancel=cancel))  # without the repeats: until the timeout
    assert info.value.code == "cancelled"
    assert list(stream_chunks(plan({"source": {"sql": "SELECT 1 AS src"}}, [("src", "int")])))


def test_a_cancel_reaches_the_shuffle_spark_runs_while_planning_the_stream(plan: Any) -> None:
    """Under adaptive execution, making the stream's RDD runs a shuffle's map stage itself,
    before any partition is served; those jobs went untagged, so a cancel reached nothing and
    the load (here: 10^13 rows redistributed) ran until the test's timeout, whose interrupt
    left py4j's connection answering the wrong calls for every later test."""
    slow = plan(
        {
            "source": {
                "sql": "SELECT id AS src FROM range(0, 10000000000000, 1, 2) DISTRIBUTE BY id"
            },
            "where": "src < 0",
        },
        [("src", "int")],
    )
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    with pytest.raises(LoadError) as info:
        list(stream_chunks(slow, cancel=cancel))
    assert info.value.code == "cancelled"
    assert list(stream_chunks(plan({"source": {"sql": "SELECT 1 AS src"}}, [("src", "int")])))


def test_the_watchdog_cancels_until_the_stream_stops() -> None:
    cancel = threading.Event()
    calls: list[float] = []
    dog = _Watchdog(cancel, lambda: calls.append(time.monotonic()))
    time.sleep(0.3)
    assert calls == []  # nothing before the cancel
    cancel.set()
    while len(calls) < 3:  # again and again, not once
        time.sleep(0.05)
    dog.stop()
    stopped = len(calls)
    time.sleep(0.5)
    assert len(calls) <= stopped + 1  # one in flight at most, then no more


def test_empty_result(frame: Any, plan: Any) -> None:
    seen: list[int] = []
    assert list(stream_chunks(frame, progress=seen.append)) and seen[-1] == N
    empty = plan(
        {
            "source": {"sql": "SELECT 1 AS src, 0.5 AS w, true AS ok, 'x' AS label"},
            "where": "src > 1",
        },
        SCHEMA,
    )
    seen.clear()
    assert list(stream_chunks(empty, progress=seen.append)) == []
    assert seen == []


def test_cancel_event_interrupts_a_long_spark_job(plan: Any) -> None:
    # 10^13 rows filtered to none: the first partition job alone would run for many minutes.
    slow = plan(
        {
            "source": {"sql": "SELECT id AS src FROM range(0, 10000000000000, 1, 2)"},
            "where": "src < 0",
        },
        [("src", "int")],
    )
    cancel = threading.Event()
    timer = threading.Timer(1.0, cancel.set)
    timer.start()
    started = time.monotonic()
    with pytest.raises(LoadError) as info:
        list(stream_chunks(slow, cancel=cancel))
    assert info.value.code == "cancelled"
    assert info.value.detail == {"rows": 0}
    assert time.monotonic() - started < 30  # not minutes: the job was cancelled
    assert list(stream_chunks(plan({"source": {"sql": "SELECT 1 AS src"}}, [("src", "int")])))
