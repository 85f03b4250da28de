"""Smoke test of the reachability benchmark: the workload definition, and the difflow engine
and the recompute baseline agreeing with each other and with BFS after every batch.

No timing assertions: speed is measured by ``python -m bench.reach``, never in tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import report
from bench.reach import Changes, DifflowReach, ReachEngine, RecomputeReach, reachable, run
from bench.workload import BLOCK, NUM_ROOTS, Workload

N, M, U = 50, 100, 30


def _gen(seed: int, stream: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64([seed, stream]))


# -- the workload -------------------------------------------------------------------------
def test_workload_matches_definition() -> None:
    w = Workload(N, M, seed=3)
    roots = w.roots()
    assert roots.tolist() == sorted(_gen(3, 0).choice(N, size=10, replace=False).tolist())
    assert roots.shape == (NUM_ROOTS,) and len(set(roots.tolist())) == NUM_ROOTS
    expected = _gen(3, 1).integers(0, N, size=(M, 2), dtype=np.int64)
    np.testing.assert_array_equal(w.initial_edges(), expected)
    assert w.initial_edges().dtype == np.int64
    block0 = _gen(3, 2).integers(0, N, size=(BLOCK, 2), dtype=np.int64)
    np.testing.assert_array_equal(w.update_edges(0, 5), block0[:5])


def test_block_boundaries_at_65536() -> None:
    assert BLOCK == 65_536
    w = Workload(1000, 10, seed=0, cache_blocks=1)
    b0 = _gen(0, 2).integers(0, 1000, size=(BLOCK, 2), dtype=np.int64)
    b1 = _gen(0, 3).integers(0, 1000, size=(BLOCK, 2), dtype=np.int64)
    b2 = _gen(0, 4).integers(0, 1000, size=(BLOCK, 2), dtype=np.int64)
    np.testing.assert_array_equal(
        w.update_edges(BLOCK - 3, BLOCK + 4), np.concatenate([b0[-3:], b1[:4]])
    )
    np.testing.assert_array_equal(w.update_edges(BLOCK, BLOCK + 1), b1[:1])
    np.testing.assert_array_equal(w.update_edges(BLOCK - 1, BLOCK), b0[-1:])
    # spanning three blocks, with the cache holding a single block
    whole = w.update_edges(BLOCK - 2, 2 * BLOCK + 2)
    np.testing.assert_array_equal(whole, np.concatenate([b0[-2:], b1, b2[:2]]))
    assert w.update_edges(7, 7).shape == (0, 2)


def test_workload_is_deterministic_and_seeded() -> None:
    a, b, c = Workload(N, M, seed=1), Workload(N, M, seed=1), Workload(N, M, seed=2)
    np.testing.assert_array_equal(a.roots(), b.roots())
    np.testing.assert_array_equal(a.initial_edges(), b.initial_edges())
    np.testing.assert_array_equal(a.update_edges(10, 500), b.update_edges(10, 500))
    assert not np.array_equal(a.initial_edges(), c.initial_edges())
    # piecewise generation equals generation at once
    np.testing.assert_array_equal(
        np.concatenate([a.update_edges(0, 13), a.update_edges(13, 40)]), b.update_edges(0, 40)
    )


def test_window_slides_over_eids() -> None:
    w = Workload(N, M, seed=0)
    init, upd = w.initial_edges(), w.update_edges(0, 2 * M)
    np.testing.assert_array_equal(w.window(0), init)
    np.testing.assert_array_equal(w.window(7), np.concatenate([init[7:], upd[:7]]))
    np.testing.assert_array_equal(w.window(M), upd[:M])
    np.testing.assert_array_equal(w.window(M + 5), upd[5 : M + 5])
    # update k removes eid k and inserts eid M + k
    np.testing.assert_array_equal(w.removed_edges(3, 9), init[3:9])
    np.testing.assert_array_equal(w.removed_edges(M + 1, M + 4), upd[1:4])


# -- the engines --------------------------------------------------------------------------
def _all_changes(parts: list[Changes]) -> Changes:
    return Changes.build(
        *(np.concatenate([getattr(p, f) for p in parts]) for f in Changes.__slots__)
    )


def _drive(engine: ReachEngine, w: Workload, batch: int) -> tuple[list[np.ndarray], Changes]:
    """Load and run U updates; the reachable set after every batch and all output changes."""
    engine.load()
    engine.after_apply()
    assert engine.last_changes is not None
    sets, parts = [engine.reachable()], [engine.last_changes]
    done = 0
    while done < U:
        k1 = min(done + batch, U)
        engine.apply(done, k1)
        engine.after_apply()
        assert engine.last_changes is not None
        t = engine.last_changes.times
        assert ((t > done) & (t <= k1)).all(), "output outside the batch's times"
        sets.append(engine.reachable())
        parts.append(engine.last_changes)
        done = k1
    return sets, _all_changes(parts)


@pytest.mark.parametrize("batch", [1, 7])
def test_difflow_and_recompute_agree_after_every_batch(batch: int) -> None:
    w = Workload(N, M, seed=0)
    d_sets, d_changes = _drive(DifflowReach(w, track=True), w, batch)
    r_sets, r_changes = _drive(RecomputeReach(w, track=True), w, batch)
    ends = [0, *range(batch, U, batch), U]
    assert len(d_sets) == len(r_sets) == len(ends)
    for done, d, r in zip(ends, d_sets, r_sets, strict=True):
        truth = reachable(N, w.window(done), w.roots())
        assert truth[np.arange(NUM_ROOTS), w.roots()].all(), "a root reaches itself"
        np.testing.assert_array_equal(r, truth, err_msg=f"recompute after {done} updates")
        np.testing.assert_array_equal(d, truth, err_msg=f"difflow after {done} updates")
    # the same output changes at the same times (high resolution, whatever the batch)
    assert d_changes.equals(r_changes)
    assert len(d_changes) > 0 and (np.abs(d_changes.diffs) == 1).all()


def test_batching_does_not_change_output() -> None:
    w = Workload(N, M, seed=0)
    _, one = _drive(DifflowReach(w, track=True), w, 1)
    _, seven = _drive(DifflowReach(w, track=True), w, 7)
    assert one.equals(seven)


def test_run_reports_figures(tmp_path: Path) -> None:
    res = {
        e: run(e, N, M, U, 4, verify_each=True, progress=False) for e in ("difflow", "recompute")
    }
    for e, r in res.items():
        assert r["engine"] == e and r["verified"] is True and r["updates"] == U
        assert set(r) >= {
            "engine", "nodes", "edges", "updates", "batch", "seconds", "updates_per_s",
            "latency_ms", "checkpoints", "rss_mib", "verified", "load_s", "state_bytes",
        }  # fmt: skip
        assert set(r["latency_ms"]) == {"p50", "p99", "max"}
        json.dumps(r)
    assert res["difflow"]["state_bytes"] > 0
    assert res["difflow"]["output_changes"] == res["recompute"]["output_changes"]

    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\n<!-- section: other -->\nkeep me\n<!-- /section: other -->\n")
    for _ in range(2):  # writing twice replaces, never duplicates
        report.write_reach_section("tiny", res["difflow"], res["recompute"], "python -m x", path)
    text = path.read_text()
    assert text.count("<!-- section: tiny -->") == 1 and "keep me" in text
    assert "python -m x" in text and "| throughput" in text and "numpy" in text


def test_checkpoints_summarise_recent_batches(tmp_path: Path) -> None:
    r = run("difflow", N, M, 1000, 250, progress=False)
    assert list(r["checkpoints"]) == ["1000"]
    cp = r["checkpoints"]["1000"]
    assert set(cp) == {"p50", "p99", "state_bytes", "reachable_pairs", "state_bytes_per_pair"}
    assert cp["state_bytes"] > 0
    assert cp["p50"] <= cp["p99"] <= r["latency_ms"]["max"]
    # the answer's size there is the engine's own answer's, after the same 1,000 updates
    engine = DifflowReach(Workload(N, M), track=True)
    engine.load()
    engine.after_apply()
    engine.apply(0, 1000)
    engine.after_apply()
    assert cp["reachable_pairs"] == int(engine.reachable().sum())
    assert cp["state_bytes_per_pair"] == pytest.approx(
        cp["state_bytes"] / cp["reachable_pairs"], abs=0.1
    )

    path = tmp_path / "BENCHMARKS.md"
    report.write_reach_section("cp", r, r, "python -m x", path)
    text = path.read_text()
    assert (
        f"reachable pairs, by BFS at each checkpoint): {cp['reachable_pairs']} after 1,000" in text
    )
    assert "| state per reachable pair at 1,000 updates ↓ |" in text


def test_profile_covers_the_update_phase_only(tmp_path: Path) -> None:
    out = tmp_path / "profile.txt"
    r = run("difflow", N, M, U, 3, seed=2, progress=False, profile=out)
    assert r["updates"] == U
    tree = out.read_text()
    assert "DifflowReach.apply" in tree and "Graph.step" in tree
    assert "DifflowReach.load" not in tree


def test_report_commands_carry_the_engine_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DIFFLOW_THREADS", raising=False)
    monkeypatch.delenv("DIFFLOW_MALLOC", raising=False)
    assert report.command("bench.reach", ["--batch", "1"]) == "python -m bench.reach --batch 1"
    monkeypatch.setenv("DIFFLOW_THREADS", "1")
    assert report.command("bench.reach", ["--batch", "1"]) == (
        "DIFFLOW_THREADS=1 python -m bench.reach --batch 1"
    )
    monkeypatch.setenv("DIFFLOW_MALLOC", "system")
    assert report.command("bench.reach", ["--batch", "1"]) == (
        "DIFFLOW_THREADS=1 DIFFLOW_MALLOC=system python -m bench.reach --batch 1"
    )
    notes = report.machine_notes()
    assert notes["engine threads"] in ("1", "2") and notes["allocator"]
