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


def test_several_settings_change_together_and_are_restored() -> None:
    before = (spine.BACKGROUND_STEP, spine.BACKGROUND_FROM)
    seen: list[tuple[int, int]] = []
    real = paired._window

    def window(engine: object, k: int, batch: int, steps: int) -> list[float]:
        seen.append((spine.BACKGROUND_STEP, spine.BACKGROUND_FROM))
        return real(engine, k, batch, steps)  # type: ignore[arg-type]

    paired._window = window  # type: ignore[assignment]
    try:
        r = paired.run(
            "engine.trace.spine:BACKGROUND_STEP,engine.trace.spine:BACKGROUND_FROM",
            [1024, 8192],
            [16384, 2048],
            60,
            120,
            batch=5,
            pairs=2,
            warm=1,
        )
    finally:
        paired._window = real  # type: ignore[assignment]
    assert before == (spine.BACKGROUND_STEP, spine.BACKGROUND_FROM)
    assert r["a"] == [1024, 8192] and r["b"] == [16384, 2048]
    # the parent's own windows follow arm a (children run in forks: their values are theirs)
    assert seen == [(1024, 8192), (1024, 8192)]


def test_several_settings_need_a_value_each() -> None:
    with pytest.raises(SystemExit, match="a list of 2 values"):
        paired.run(
            "engine.trace.spine:BACKGROUND_STEP,engine.trace.spine:BACKGROUND_FROM",
            [1024, 8192],
            16384,
            60,
            120,
            batch=5,
            pairs=1,
        )


def test_settings_set_each_attribute_in_order() -> None:
    settings = paired._Settings(
        "engine.trace.spine:BACKGROUND_STEP, engine.trace.spine:SMALL_BATCHES"
    )
    before = settings.get()
    try:
        settings.set([7, 9])
        assert (spine.BACKGROUND_STEP, spine.SMALL_BATCHES) == (7, 9)
        assert settings.get() == [7, 9]
    finally:
        settings.set(before)
    assert settings.get() == before
