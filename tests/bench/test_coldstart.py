"""The cold-start benchmark's report: its figures beside the cold baseline, as ratios.

Running it compiles every kernel twice from an empty cache (minutes), so the test renders a
result; ``tests/service/test_warmup.py`` checks what the warm-up compiles."""

from __future__ import annotations

from pathlib import Path

from bench.coldstart import write_report


def test_report_puts_each_figure_beside_the_cold_baseline(tmp_path: Path) -> None:
    result = {
        "nodes": 1000,
        "edges": 2000,
        "cold": {"process_s": 104.0, "load_s": 95.0, "p99_ms": 1800.0},
        "warmup_s": 135.0,
        "warm": {"process_s": 4.0, "load_s": 0.5, "p99_ms": 9.0},
    }
    path = write_report("cold start", result, "python -m bench.coldstart", tmp_path / "B.md")
    text = path.read_text()
    assert "<!-- section: cold start -->" in text and "<!-- /section: cold start -->" in text
    assert "| first answer (reach load) ↓ | 0.5 s | 95.0 s | 0.00526 | 190x better |" in text
    assert "| the warm-up itself (difflow warmup) ↓ | 135.0 s | n/a |" in text
    assert "python -m bench.coldstart" in text
