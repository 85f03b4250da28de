"""Where numba keeps the engine's compiled kernels: a directory per version of the engine's code.

numba checks a cached kernel against its own source file only. A kernel that calls (and
inlines) one from another module keeps the old callee's code after that module changes,
and can then compute with it, or crash on arrays it no longer understands. So the cache
lives under a digest of every engine source file: any change to the engine starts a fresh
cache. This runs before any kernel is defined (``engine/__init__.py`` imports it first).

The directory is ``$NUMBA_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/difflow`` (by default
``~/.cache/difflow``), then ``numba-<digest>``. Directories of other digests not used for a
day are removed.

Inside it, numba would file each module's kernels under a hash of its directory's absolute
path, so another checkout of the same sources (a fresh clone, a CI run's) would compile
everything again. This repository's kernels are filed under their path inside it instead
(``engine/trace``), so every checkout shares them: numba still checks each kernel against
the content of its source file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

from numba.core import caching
from numba.core import config as numba_config

__all__ = ["cache_dir", "source_digest"]

_PACKAGE = Path(__file__).resolve().parent
_REPOSITORY = _PACKAGE.parent  # engine/ and service/ hold kernels
_STALE_AFTER_S = 24 * 3600


def source_digest(package: Path = _PACKAGE) -> str:
    """A digest of the names and contents of every ``.py`` file under ``package``."""
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def cache_dir(digest: str) -> Path:
    """The directory for the kernels of engine code with this digest."""
    base = os.environ.get("NUMBA_CACHE_DIR")
    if not base:
        base = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "difflow")
    return Path(base) / f"numba-{digest}"


def _drop_stale(current: Path) -> None:
    """Remove the other digests' directories that have not been used for a day."""
    now = time.time()
    for other in current.parent.glob("numba-*"):
        if other != current and now - other.stat().st_mtime > _STALE_AFTER_S:
            shutil.rmtree(other, ignore_errors=True)


class _RepositoryLocator(caching.UserProvidedCacheLocator):
    """numba's locator for ``numba.config.CACHE_DIR``, for this repository's modules, with
    their directory inside the repository in place of a hash of its absolute path."""

    def __init__(self, py_func: object, py_file: str) -> None:
        super().__init__(py_func, py_file)
        inside = Path(py_file).resolve().parent.relative_to(_REPOSITORY)
        self._cache_path = str(Path(numba_config.CACHE_DIR, *inside.parts))  # type: ignore[attr-defined]

    @classmethod
    def from_function(cls, py_func: object, py_file: str) -> caching._CacheLocator | None:
        if not Path(py_file).resolve().is_relative_to(_REPOSITORY):
            return None
        return super().from_function(py_func, py_file)


def _configure() -> None:
    path = cache_dir(source_digest())
    try:
        path.mkdir(parents=True, exist_ok=True)
        os.utime(path)  # marks it used, for _drop_stale in other versions
        _drop_stale(path)
    except OSError:  # no writable cache: numba compiles every kernel on first use instead
        return
    numba_config.CACHE_DIR = str(path)  # type: ignore[attr-defined]  # set at runtime by numba
    locators = getattr(caching.CacheImpl, "_locator_classes", None)  # numba's own, if it has it
    if isinstance(locators, list) and _RepositoryLocator not in locators:
        locators.insert(0, _RepositoryLocator)


_configure()
