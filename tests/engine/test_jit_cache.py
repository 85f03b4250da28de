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


def test_two_checkouts_of_the_same_sources_share_their_kernels(tmp_path: Path) -> None:
    """A kernel compiled in one checkout is loaded, not compiled again, in another checkout
    of the same sources at another path (a fresh clone after a CI run, say); both file it
    under its path inside the repository."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    code = (
        "import numpy as np\n"
        "from engine import UpdateBatch, consolidate, sort_kernels\n"
        "b = UpdateBatch(np.array([[2, 1, 2]]), np.zeros((1, 3), np.int64), np.ones(3, np.int64))\n"
        "assert consolidate(b).diffs.tolist() == [1, 2]\n"
        "s = sort_kernels.consolidate_columns.stats\n"
        "print(sum(s.cache_hits.values()), sum(s.cache_misses.values()))\n"
    )
    seen = []
    for checkout in ("one", "two"):
        root = tmp_path / checkout
        shutil.copytree(ENGINE, root / "engine", ignore=shutil.ignore_patterns("__pycache__"))
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=root,
            env={**env, "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            check=True,
        )
        seen.append(tuple(int(x) for x in out.stdout.split()))
    assert seen[0][0] == 0 and seen[0][1] >= 1  # compiled in the first
    assert seen[1][0] >= 1 and seen[1][1] == 0  # loaded in the second
    digest_dir = tmp_path / "cache" / "difflow" / f"numba-{source_digest()}"
    assert any((digest_dir / "engine").glob("sort_kernels.consolidate_columns-*.nbi"))
