"""The window spread of ``bench.windows``: exact on made-up latencies, and the same
checkpoint p99 as ``bench.reach`` reports for a run it saved."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import reach, windows


def test_spread_of_made_up_latencies() -> None:
    lat = np.ones(1000)
    lat[950:952] = 10.0  # two heavy updates in the last window only
    lat[100:101] = 4.0  # one in the second: the second-largest of that window stays 1
    s = windows.window_spread(lat, batch=1, window=100, span=10)
    assert s == {"1000": {"p99": 10.0, "min": 1.0, "median": 1.0, "max": 10.0}}
    assert windows.window_spread(lat, span=11) == {}  # not enough windows before it
    assert windows.window_spread(lat[:999]) == {}  # the run stopped short of it
    halves = windows.window_spread(lat, batch=2, window=50, span=10)  # 500 batches of 2
    assert list(halves) == ["1000"] and halves["1000"]["p99"] == 1.0
    with pytest.raises(ValueError, match="at least 1"):
        windows.window_spread(lat, window=0)


def test_saved_latencies_give_the_checkpoint_p99(tmp_path: Path) -> None:
    path = tmp_path / "lat.npy"
    r = reach.run("difflow", 50, 100, 1000, 1, progress=False, latencies_path=path)
    lat = np.load(path)
    assert lat.shape == (1000,) and (lat > 0).all()
    assert r["latency_ms"]["max"] == pytest.approx(lat.max(), abs=1e-3)
    spread = windows.window_spread(lat, span=5)
    assert spread["1000"]["p99"] == pytest.approx(r["checkpoints"]["1000"]["p99"], abs=1e-3)
    assert spread["1000"]["min"] <= spread["1000"]["median"] <= spread["1000"]["max"]


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lat.npy"
    np.save(path, np.arange(1.0, 2001.0))
    assert windows.main([str(path), "--batch", "2", "--span", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert " ".join(out[0].split()) == (
        "1000 updates: p99 499.01 ms; the 5 windows of 100 before it: "
        "p99 min 99.01, median 299.01, max 499.01 ms"
    )
    got = json.loads(out[-1])
    assert got["window"] == 100 and got["span"] == 5 and list(got["checkpoints"]) == ["1000"]
    with pytest.raises(SystemExit):
        windows.main([str(path), "--span", "1000"])  # no checkpoint has that many windows
    with pytest.raises(SystemExit):
        windows.main([str(tmp_path / "missing.npy")])
    with pytest.raises(SystemExit):  # one engine's latencies, not two
        reach.main(["--nodes", "5", "--edges", "5", "--updates", "1", "--report", "x",
                    "--latencies", str(path)])  # fmt: skip
