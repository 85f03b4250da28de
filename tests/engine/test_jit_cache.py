"""The compiled kernels' cache is per version of the engine's code (``engine.jit_cache``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import engine
from engine.jit_cache import cache_dir, source_digest

ENGINE = Path(engine.__file__).resolve().parent


def test_any_change_to_any_engine_file_changes_the_digest(tmp_path: Path) -> None:
    copy = tmp_path / "engine"
    shutil.copytree(ENGINE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    first = source_digest(copy)
    assert source_digest(copy) == first
    callee = copy / "lattice.py"  # inlined into kernels of other modules
    callee.write_text(callee.read_text() + "\n# changed\n")
    second = source_digest(copy)
    assert second != first
    (copy / "trace" / "extra.py").write_text("X = 1\n")
    assert source_digest(copy) not in (first, second)


def test_the_cache_directory_honours_the_environment(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir("abc") == tmp_path / "mine" / "numba-abc"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("abc") == tmp_path / "xdg" / "difflow" / "numba-abc"


def test_kernels_are_cached_under_the_digest_and_old_versions_are_dropped(tmp_path: Path) -> None:
    """In a fresh process: a kernel called once leaves its cache files under
    ``difflow/numba-<digest>``; another version's directory unused for two days is removed,
    one used an hour ago is kept."""
    base = tmp_path / "difflow"
    old, recent = base / "numba-0000000000000000", base / "numba-1111111111111111"
    for d in (old, recent):
        d.mkdir(parents=True)
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    os.utime(recent, (time.time() - 3600,) * 2)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    code = (
        "import numpy as np, numba\n"
        "from engine import UpdateBatch, consolidate\n"
        "b = UpdateBatch(np.array([[2, 1, 2]]), np.zeros((1, 3), np.int64), np.ones(3, np.int64))\n"
        "assert consolidate(b).diffs.tolist() == [1, 2]\n"
        "print(numba.config.CACHE_DIR)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    used = base / f"numba-{source_digest()}"
    assert out.stdout.strip() == str(used)
    assert any(used.rglob("*.nbi")) and any(used.rglob("*.nbc"))
    assert not old.exists() and recent.exists()
