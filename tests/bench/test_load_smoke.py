"""Smoke test of the load benchmark through a real server (real local Spark): a tiny
parquet file loaded end to end, every figure present, the report section written.

No timing assertions: speed is measured by ``python -m bench.load``, never in tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import load


def test_server_load_reports_next_to_pyarrow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "BENCH.md"
    argv = ["--rows", "3000", "--distinct", "40", "--chunk-rows", "1000", "--repeat", "1"]
    argv += ["--workdir", str(tmp_path / "work"), "--server"]
    load.main([*argv, "--report", "load smoke", "--report-file", str(report)])
    results = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert results["rows"] == 3000
    assert results["pyarrow"]["rows"] == 3000 and results["server"]["rows"] == 3000
    assert results["pyarrow"]["max_chunk_rows"] <= 1000
    assert results["server_vs_pyarrow"] > 0
    text = report.read_text()
    assert "<!-- section: load smoke -->" in text and "<!-- /section: load smoke -->" in text
    assert "| rows per second ↑ |" in text and "pyarrow (baseline)" in text
    assert "python -m bench.load --rows 3000" in text
