"""Smoke test of the interning benchmark: unique ids, one per present string, equal to a
from-scratch evaluation, also under forced collisions (a hash of a few bits).

No timing assertions: speed is measured by ``python -m bench.intern``, never in tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import intern
from bench.intern import Interning, random_strings, reference_ids, run
from engine.expr import stable_hash
from engine.interning import StringInterner
from engine.schema import ColumnType

FIELDS = {
    "strings", "changes", "bits", "seed", "load_s", "load_ns_per_record", "changes_per_s",
    "change_latency_ms", "state_bytes", "bytes_per_record", "load_bytes_per_record",
    "interner_bytes_per_record", "rss_mib", "verified", "promoted", "max_round", "seed002_rust",
}  # fmt: skip


def test_reference_hash_is_the_engines() -> None:
    """The reference's hash (written from README's definition) equals the engine's."""
    strings = ["", "a", "hello", "ü", *random_strings(50, np.random.default_rng(1))]
    rounds = np.arange(len(strings), dtype=np.int64) % 5
    interner = StringInterner()
    ids = interner.intern_many(strings)
    engine_h = stable_hash([rounds, ids], [ColumnType.INT, ColumnType.STRING], interner, len(ids))
    sbits = intern.string_hashes(strings)
    np.testing.assert_array_equal(intern.stable_hash_reference(rounds, sbits), engine_h)


def test_reference_ids_are_unique_under_collisions() -> None:
    strings = random_strings(400, np.random.default_rng(2))
    ids, rounds = reference_ids(strings, bits=9)
    assert np.unique(ids).shape[0] == len(strings)
    assert (ids >= 0).all() and (ids < 512).all()
    assert rounds.max() >= 2, "400 strings in 512 slots must collide"


def test_random_strings_are_distinct_and_seeded() -> None:
    a = random_strings(1000, np.random.default_rng(3))
    assert len(set(a)) == 1000 and all(len(s) == 16 for s in a)
    assert a == random_strings(1000, np.random.default_rng(3))


@pytest.mark.parametrize("bits", [None, 8])
def test_every_change_keeps_ids_unique(bits: int | None) -> None:
    """Collisions at 8 bits (150 strings in 256 slots) exercise the promotion rounds; the
    output is checked against the from-scratch fixed point after the load and every change."""
    r = run(150, 25, bits=bits, seed=4, verify_each=True, progress=False)
    assert r["verified"] is True
    if bits:
        assert r["promoted"] > 0 and r["max_round"] >= 1


def test_removing_a_collision_winner_reassigns_its_losers() -> None:
    """Remove, ten times, a round-0 winner whose slot a promoted string also hashed to:
    the cascade (the loser may move back to round 0) keeps the ids unique and right."""
    eng = Interning(bits=6)
    present = random_strings(40, np.random.default_rng(5))
    eng.load(present)
    for i in range(10):
        _, rounds = reference_ids(present, 6)
        zero = np.zeros(len(present), dtype=np.int64)
        h0 = intern.stable_hash_reference(zero, intern.string_hashes(present)) & 63
        contested = {int(h) for h, r in zip(h0, rounds, strict=True) if r > 0}
        victims = [j for j, r in enumerate(rounds) if r == 0 and int(h0[j]) in contested]
        assert victims, "40 strings in 64 slots collide"
        j = victims[0]
        eng.change(present[j], f"new-{i}")
        present[j] = f"new-{i}"
        problem, _ = intern.check(eng, present, 6)
        assert problem is None, problem


def test_bits_too_few_for_the_strings_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot have unique ids"):
        run(100, 1, bits=6, progress=False)


def test_cli_json_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert intern.main(["--strings", "120", "--changes", "5", "--bits", "8", "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(r) >= FIELDS and r["verified"] is True and r["bits"] == 8
    assert set(r["change_latency_ms"]) == {"p50", "p99", "max"} and r["bytes_per_record"] > 0

    path = tmp_path / "BENCHMARKS.md"
    argv = ["--strings", "120", "--changes", "5", "--report", "tiny", "--report-file", str(path)]
    for _ in range(2):  # writing twice replaces the section
        assert intern.main(argv, runner=lambda child: run(120, 5, progress=False)) == 0
    text = path.read_text()
    assert text.count("<!-- section: tiny -->") == 1
    assert "Rust DD (seed 002)" in text and "ns/record" in text and "python -m bench.intern" in text
