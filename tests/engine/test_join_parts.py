"""A join whose record pairs are many makes them in parts (``Join._in_parts``), each one
consolidated before the next: the pairs of two histories that change at many times can be
far more than what they sum to. A self-join of a count and max per key, over one write at
300 distinct 2-D times, pairs every change of a max with every other change of it; the
server used to make all of those pairs in one array (about 100M of them for 1,000 times:
gigabytes, and the process was killed)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from engine import Graph, col
from engine.operators import join as join_mod

TIMES = 300


def _updates() -> list[tuple[int, int, tuple[int, int], int]]:
    rnd = random.Random(5)
    ups = []
    for step in range(TIMES):
        for _ in range(rnd.randint(1, 3)):
            k, v = rnd.randint(0, 15), rnd.randint(0, 9)
            ups.append((k, v, (step, rnd.randint(0, 6)), rnd.choice([1, 1, -1])))
    return ups


def _run(ups: list) -> Counter:
    """The self-join's output, accumulated over every time (all of them complete)."""
    g = Graph()
    h, d = g.new_input([("k", "int"), ("v", "int")], dims=2, name="d")
    r = d.reduce(["k"], {"n": ("count", None), "mx": ("max", col("v"))})
    cap = r.join(r, on=[("mx", "mx")], columns={"a": "left.k", "b": "right.k"}).capture()
    for k, v, t, w in ups:
        h.send_rows([(k, v)], list(t), w)
    h.advance_to([[TIMES, 0]])
    g.step()
    out = cap.drain()
    return Counter(
        {
            (int(a), int(b), *map(int, t)): int(w)
            for a, b, t, w in zip(out.data[0], out.data[1], out.times.T, out.diffs, strict=True)
        }
    )


def test_many_pairs_are_made_in_consolidated_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    ups = _updates()
    whole = _run(ups)  # every pair at once (fewer than the default part)
    made: list[int] = []
    real = join_mod.join_spine

    def counting(*args: Any) -> tuple:
        out = real(*args)
        made.append(out[2].shape[0])
        return out

    monkeypatch.setattr(join_mod, "join_spine", counting)
    monkeypatch.setattr(join_mod, "PAIRS_PER_PART", 5_000)
    parts = _run(ups)
    assert max(made) <= 5_000 and sum(made) > 20 * 5_000  # many parts, none bigger
    assert parts == whole and len(whole) > 0
    # the changes of the self-join, summed at (TIMES - 1, 6), are its rows then: pairs of
    # keys with the same current max
    final: Counter = Counter()
    for (a, b, *_), w in whole.items():
        final[(a, b)] += w
    live: Counter = Counter()
    for k, v, _, w in ups:
        live[(k, v)] += w
    mx = {
        k: max(v for (kk, v), c in live.items() if kk == k and c > 0)
        for k in {k for (k, _), c in live.items() if c > 0}
    }
    expect = Counter({(a, b): 1 for a in mx for b in mx if mx[a] == mx[b]})
    assert +final == expect
    assert np.all(np.array(list(final.values())) >= 0)
