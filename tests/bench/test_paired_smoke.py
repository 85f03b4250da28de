"""Smoke test of the paired A/B harness: a tiny graph, a few windows, real forks. No
timing assertions; the setting is put back afterwards."""

from __future__ import annotations

import pytest

from bench import paired
from engine.trace import spine


def test_pairs_run_in_children_and_the_setting_is_restored() -> None:
    before = spine.LAZY_BATCHES
    r = paired.run("engine.trace.spine:LAZY_BATCHES", 1, 32, 60, 120, batch=5, pairs=4, warm=1)
    assert before == spine.LAZY_BATCHES
    assert (r["a"], r["b"], r["pairs"], r["steps"]) == (1, 32, 4, 1)
    assert r["window_ms"]["a"]["median"] > 0 and r["window_ms"]["b"]["median"] > 0
    q = r["ratio_b_over_a"]
    assert 0 < q["q25"] <= q["median"] <= q["q75"] and q["of_sums"] > 0
    # each child times its batches: a window's p99 is at most the window itself
    tail, window = r["batch_p99_ms"], r["window_ms"]
    assert 0 < tail["a"]["median"] <= window["a"]["median"]
    assert 0 < tail["b"]["median"] <= window["b"]["median"]
    t = r["p99_ratio_b_over_a"]
    assert 0 < t["q25"] <= t["median"] <= t["q75"]


def test_a_setting_that_does_not_exist_is_refused() -> None:
    with pytest.raises(SystemExit, match="module:ATTRIBUTE"):
        paired.run("engine.trace.spine:NO_SUCH_SETTING", 1, 2, 60, 120, batch=5, pairs=1)
