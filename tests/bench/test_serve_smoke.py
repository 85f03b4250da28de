"""Smoke test of the service benchmark: a real server per run, tiny workloads, every mode;
the view's rows verified (BFS / recount), every JSON field present, the report written.

No timing assertions: speed is measured by ``python -m bench.serve``, never in tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import serve
from bench.workload import Workload

FIELDS = {
    "view", "mode", "nodes", "edges", "updates", "updates_per_s", "latency_ms",
    "server_latency_ms", "engine_updates_per_s", "service_over_engine", "load_s", "rss_mib",
    "verified",
}  # fmt: skip
SIZES = {"reach": (30, 60), "count": (20, 80)}
U = 15


def _run(view: str, mode: str, engine: bool = True) -> dict[str, Any]:
    n, m = SIZES[view]
    return serve.run(view, n, m, U, mode, pipeline=4, seed=1, engine=engine, progress=False)


@pytest.mark.parametrize("mode", serve.MODES)
@pytest.mark.parametrize("view", serve.VIEWS)
def test_each_view_and_mode_verifies(view: str, mode: str) -> None:
    r = _run(view, mode, engine=(mode == "http"))
    assert r["verified"] is True, r
    assert set(r) >= FIELDS and r["view"] == view and r["mode"] == mode and r["updates"] == U
    for key in ("latency_ms", "server_latency_ms"):
        assert set(r[key]) >= {"p50", "p99"}
        assert all(v is not None and v >= 0 for v in r[key].values())
    if mode == "http":
        assert r["engine_updates_per_s"] > 0 and r["service_over_engine"] > 0
    assert r["rss_mib"] is None or r["rss_mib"] > 0
    json.dumps(r)


def test_verify_rows_catches_wrong_answers() -> None:
    w = Workload(20, 40, seed=0)
    good = _count_rows(w, U)
    assert serve.verify_rows("count", good, w, U) is None
    bad = {"rows": [dict(r) for r in good["rows"]]}
    bad["rows"][0] = {"data": {**bad["rows"][0]["data"], "n": 99}, "count": 1}
    assert serve.verify_rows("count", bad, w, U) is not None
    assert serve.verify_rows("count", {"rows": good["rows"][1:]}, w, U) is not None
    doubled = {"rows": [{**good["rows"][0], "count": 2}, *good["rows"][1:]]}
    assert "count" in (serve.verify_rows("count", doubled, w, U) or "")
    roots = w.roots().tolist()
    reach = {"rows": [{"data": {"root": r, "node": r}, "count": 1} for r in roots]}
    assert serve.verify_rows("reach", reach, w, 0) is not None  # roots reach more than themselves


def _count_rows(w: Workload, updates: int) -> dict[str, Any]:
    window = w.window(updates)
    agg: dict[int, list[int]] = {}
    for k, v in window.tolist():
        a = agg.setdefault(k, [0, 0])
        a[0] += 1
        a[1] += v
    return {"rows": [{"data": {"key": k, "n": n, "s": s}, "count": 1} for k, (n, s) in agg.items()]}


def test_update_bodies_slide_the_window() -> None:
    w = Workload(20, 40, seed=2)
    bodies = serve.update_bodies(serve.SPECS["reach"], w, 5)
    assert len(bodies) == 5
    for k, b in enumerate(bodies):
        assert b["diff"] == [-1, 1]
        (gone,), (new,) = w.removed_edges(k, k + 1).tolist(), w.update_edges(k, k + 1).tolist()
        assert [b["columns"]["src"][0], b["columns"]["dst"][0]] == gone
        assert [b["columns"]["src"][1], b["columns"]["dst"][1]] == new


def test_report_writes_one_section_for_all_modes(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    calls: list[list[str]] = []

    def runner(argv: list[str]) -> dict[str, Any]:
        calls.append(argv)
        mode = argv[argv.index("--mode") + 1]
        return _run("count", mode, engine="--no-engine" not in argv)

    argv = ["--view", "count", "--nodes", "20", "--edges", "80", "--updates", str(U)]
    argv += ["--report", "tiny", "--report-file", str(path)]
    assert serve.main(argv, runner=runner) == 0
    assert [c[c.index("--mode") + 1] for c in calls] == list(serve.MODES)
    assert all("--report" not in c for c in calls)
    assert "--no-engine" not in calls[0] and all("--no-engine" in c for c in calls[1:])
    text = path.read_text()
    assert text.count("<!-- section: tiny -->") == 1 and "python -m bench.serve" in text
    for mode in serve.MODES:
        assert f"| {mode}: throughput" in text
    assert "bare engine" in text
