"""A load's status while the engine applies its write, in process: the step is held so the
window can be seen (a real server's shows it for as long as the step takes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from service.loads import LoadManager
from service.runtime import Runtime
from service.settings import Settings
from service.spark import SparkSettings

pytestmark = pytest.mark.spark


def test_the_write_shows_while_the_engine_applies_it(
    tmp_path: Path,
    spark: Any,
    write_parquet: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Applying millions of rows under a chain of views took minutes, and the status looked
    like a load still reading its source until it was done (audit 65)."""
    rt = Runtime(Settings(data_dir=tmp_path))
    rt.start()
    loads = LoadManager(rt, SparkSettings(master="local[2]", data_dir=tmp_path))
    held, entered = threading.Event(), threading.Event()
    step = rt.step

    def held_step(written: str | None = None) -> None:
        entered.set()
        held.wait(120)
        step(written)

    try:
        spec = {"name": "t", "columns": [{"name": "k", "type": "int"}]}
        rt.submit(lambda: rt.catalog.create_table(spec)).result(timeout=60)
        path = write_parquet({"k": list(range(100))})
        monkeypatch.setattr(rt, "step", held_step)
        job = rt.submit(lambda: loads.create("t", {"source": {"path": path}})).result(timeout=60)
        assert entered.wait(300)
        status = loads.get(job.id)
        assert status["state"] == "running" and status["updates"] == 100, status
        assert status["write"].startswith("w-"), status
        late = loads.cancel(job.id)  # too late: the state unchanged
        assert {k: v for k, v in late.items() if k != "rows_per_s"} == {
            k: v for k, v in status.items() if k != "rows_per_s"
        }
        held.set()
        deadline = time.monotonic() + 120
        while loads.get(job.id)["state"] == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        done = loads.get(job.id)
        assert done["state"] == "done" and done["write"] == status["write"], done
        assert (
            rt.submit(lambda: rt.catalog.describe_table(rt.catalog.table("t"))).result(60)["rows"]
            == 100
        )
    finally:
        held.set()
        rt.stop()
