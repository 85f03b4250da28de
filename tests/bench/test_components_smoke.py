"""Smoke test of the components benchmark: both engines run the sliding window and end with
the labels a union-find gives (weak components) or the edges whose ends reach each other
(strong ones); ``--report`` writes a section with the ratios.

No timing assertions: speed is measured by ``python -m bench.components``, never in tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import components, report
from bench.components import least_labels, run, strong_edges
from bench.workload import Workload


def _union_find(nodes: int, edges: np.ndarray) -> list[int]:
    parent = list(range(nodes))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges.tolist():
        ra, rb = find(a), find(b)
        parent[max(ra, rb)] = min(ra, rb)
    return [find(x) for x in range(nodes)]


def test_least_labels_are_the_least_member_of_each_component() -> None:
    w = Workload(60, 40, seed=5)
    for u in (0, 7, 33):
        edges = w.window(u)
        assert least_labels(60, edges).tolist() == _union_find(60, edges)


def _reaches(nodes: int, edges: np.ndarray) -> np.ndarray:
    """``r[a, b]``: a path leads from ``a`` to ``b`` (every node reaches itself)."""
    r = np.eye(nodes, dtype=bool)
    r[edges[:, 0], edges[:, 1]] = True
    for k in range(nodes):  # Warshall
        r |= r[:, k : k + 1] & r[k : k + 1, :]
    return r


def test_strong_edges_are_those_whose_ends_reach_each_other() -> None:
    w = Workload(30, 45, seed=3)
    for u in (0, 9, 40):
        edges = w.window(u)
        r = _reaches(30, edges)
        both = r[edges[:, 0], edges[:, 1]] & r[edges[:, 1], edges[:, 0]]
        assert strong_edges(30, edges).tolist() == both.tolist()
        assert 0 < both.sum() < len(edges)


@pytest.mark.parametrize("kind", ["wcc", "scc"])
@pytest.mark.parametrize("engine", ["difflow", "recompute"])
def test_both_engines_end_with_the_right_answer(engine: str, kind: str) -> None:
    nodes, edges = (40, 30) if kind == "wcc" else (30, 45)
    result = run(engine, nodes, edges, 25, 4, seed=1, verify=True, kind=kind)
    assert result["verified"] is True
    assert result["updates"] == 25 and result["output_changes"] > 0
    assert set(result["latency_ms"]) == {"p50", "p99", "max"}


def test_report_writes_a_section_with_ratios(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "BENCHMARKS.md"
    monkeypatch.setattr(report, "default_path", lambda: target)
    argv = ["--nodes", "30", "--edges", "20", "--updates", "12", "--batch", "3"]
    assert components.main([*argv, "--report", "cc smoke"]) == 0
    text = target.read_text()
    assert "## cc smoke" in text and "python -m bench.components --nodes 30" in text
    assert "| throughput ↑ |" in text and "verified against it: difflow yes" in text
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(last["results"]) == {"difflow", "recompute"}
    assert components.main([*argv, "--kind", "scc", "--report", "scc smoke"]) == 0
    text = target.read_text()
    assert "## scc smoke" in text and "Strong components" in text and "--kind scc" in text
