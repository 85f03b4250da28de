"""Smoke test of the bulk write benchmark: a real server, a few hundred rows, every form; the
views' rows checked inside the run, the report written. No timing assertions."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench import ingest


def test_every_form_runs_and_reports(tmp_path: Path) -> None:
    r = ingest.run(300, repeat=1)  # raises if a view's rows are not the expected ones
    assert list(r["forms"]) == list(ingest.FORMS)
    for form, f in r["forms"].items():
        assert f["rows"] == (150 if form == "upserts, keyed" else 300)
        assert f["rows_per_s"] > 0 and f["engine_rows_per_s"] > 0 and f["server_s"] >= 0
    out = tmp_path / "B.md"
    ingest.write_report("ingest smoke", r, "python -m bench.ingest --rows 300", out)
    text = out.read_text()
    assert "<!-- section: ingest smoke -->" in text and "python -m bench.ingest --rows 300" in text
    for form in ingest.FORMS:
        assert f"| {form}: " in text


def test_expected_counts_match_a_row_by_row_count() -> None:
    n = 2500
    for upserted in (False, True):
        counts: Counter[str] = Counter()
        sums: Counter[str] = Counter()
        for i in range(n):
            s = f"s{i % 1000}"
            counts[s] += 1
            sums[s] += (7 * i + (1 if upserted and i % 2 == 0 else 0)) % 1000
        assert ingest.expected(n, upserted) == sorted((s, counts[s], sums[s]) for s in counts)
