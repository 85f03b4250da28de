"""The window spread of ``bench.windows``: exact on made-up latencies, the same checkpoint
p99 as ``bench.reach`` reports for a run it saved, and its report section."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import reach, windows


def _save(path: Path, latencies: np.ndarray, command: str = "python -m x") -> Path:
    with path.open("wb") as f:
        np.savez(f, latencies=latencies, command=np.array(command))
    return path


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
    path = tmp_path / "lat.npz"
    r = reach.run("difflow", 50, 100, 1000, 1, progress=False, latencies_path=path, command="cmd x")
    lat, command = windows.load(path)
    assert lat.shape == (1000,) and (lat > 0).all() and command == "cmd x"
    assert r["latency_ms"]["max"] == pytest.approx(lat.max(), abs=1e-3)
    spread = windows.window_spread(lat, span=5)
    assert spread["1000"]["p99"] == pytest.approx(r["checkpoints"]["1000"]["p99"], abs=1e-3)
    assert spread["1000"]["min"] <= spread["1000"]["median"] <= spread["1000"]["max"]


def test_command_line_saves_its_command(tmp_path: Path) -> None:
    path = tmp_path / "lat.npz"
    argv = ["--nodes", "20", "--edges", "40", "--updates", "5", "--quiet"]
    assert reach.main([*argv, "--latencies", str(path)]) == 0
    lat, command = windows.load(path)
    assert lat.shape == (5,)
    assert command == "python -m bench.reach " + " ".join([*argv, "--latencies", str(path)])
    with pytest.raises(SystemExit):  # one engine's latencies, not two
        reach.main([*argv, "--report", "x", "--latencies", str(path)])


def test_summary_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ours = _save(tmp_path / "a.npz", np.arange(1.0, 2001.0), "python -m bench.reach A")
    base = _save(tmp_path / "b.npz", np.full(2000, 0.5), "python -m bench.reach B")
    assert windows.main([str(ours), "--batch", "2", "--span", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert " ".join(out[0].split()) == (
        "1000 updates: p99 499.01 ms; the 5 windows of 100 before it: "
        "p99 min 99.01, median 299.01, max 499.01 ms"
    )
    got = json.loads(out[-1])
    assert got["window"] == 100 and got["span"] == 5 and list(got["checkpoints"]) == ["1000"]

    md = tmp_path / "BENCHMARKS.md"
    argv = [str(ours), "--baseline", str(base), "--span", "5", "--report", "spread"]
    assert windows.main([*argv, "--report-file", str(md)]) == 0
    text = md.read_text()
    assert "<!-- section: spread -->" in text and "python -m bench.reach A" in text
    assert "python -m bench.reach B" in text and "python -m bench.windows" in text
    assert "| median p99 of the 5 windows of 100 before 1,000 updates ↓ | 799.0 ms | 0.5 ms" in text
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["baseline"]["1000"]["max"] == 0.5

    for bad in (
        [str(ours), "--span", "1000"],  # no checkpoint has that many windows
        [str(tmp_path / "missing.npz")],
        [str(ours), "--report", "x"],  # a report needs the baseline
    ):
        with pytest.raises(SystemExit):
            windows.main(bad)
