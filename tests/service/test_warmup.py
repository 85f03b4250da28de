"""The kernel warm-up: what it compiles is what real workloads need, and a fresh server runs
it in a child process that it stops on shutdown.

Each test points ``NUMBA_CACHE_DIR`` at its own empty directory, so it starts from a fresh
install's empty cache."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0

# Runs the reachability benchmark's engine (the library, not the service) at single updates
# and at batches of 1,000, and a server-timed view the warm-up does not define, counting the
# engine kernels numba compiles (a cache miss) rather than loads from disk.
CHECK = textwrap.dedent(
    """
    import sys
    from numba.core import event

    compiled = []

    class Count(event.Listener):
        def on_start(self, e):
            f = e.data["dispatcher"].py_func
            compiled.append(f.__module__ + "." + f.__qualname__)

        def on_end(self, e):
            pass

    event.register("numba:compile", Count())

    from numba import njit

    @njit
    def probe(x):
        return x + 1

    probe(1)
    assert compiled == ["__main__.probe"], compiled  # the listener sees compiles

    from bench.reach import run

    run("difflow", 1000, 2000, 20, 1, progress=False)
    run("difflow", 1000, 2000, 50000, 1000, progress=False)  # spans outgrow the packed sorts
    engine = sorted({name for name in compiled if name.startswith("engine.")})
    print("compiled:", ",".join(engine))
    """
)


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIFFLOW_")}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1", **extra)
    return env


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(c) for c in text)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


@pytest.mark.slow
@pytest.mark.timeout(1800)  # compiles every kernel from nothing: about 2 min on a slow machine
def test_warmup_compiles_what_the_reach_benchmark_needs(tmp_path: Path) -> None:
    cache = tmp_path / "cache"

    def python(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=ROOT,
            env=_env(cache),
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    done = python("-m", "clients.cli", "warmup")
    assert re.fullmatch(r"engine kernels compiled and cached in \d+\.\d s\n", done.stdout)
    assert list(cache.glob("numba-*/warm-*")), "the finished warm-up leaves its marker"
    check = python("-c", CHECK)
    assert check.stdout.splitlines()[-1] == "compiled: ", check.stdout[-3000:]


def _serve(cache: Path, data: Path, *flags: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "clients.cli",
            "serve",
            "--port",
            "0",
            "--data-dir",
            str(data),
            *flags,
        ],
        cwd=ROOT,
        env=_env(cache),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _url(served: subprocess.Popen) -> str:
    assert served.stdout is not None
    match = re.search(r"(http://\S+)", served.stdout.readline())
    assert match is not None
    return match.group(1)


def _warmers(pid: int) -> list[int]:
    return [c for c in _children(pid) if "service.warmup" in _cmdline(c)]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_a_fresh_server_warms_up_in_a_child_that_ends_with_it(tmp_path: Path, how: str) -> None:
    served = _serve(tmp_path / "cache", tmp_path / "data")
    try:
        url = _url(served)
        assert httpx.get(f"{url}/healthz", timeout=WAIT_S).json() == {"status": "ok"}
        warmers = _warmers(served.pid)
        assert len(warmers) == 1
        if how == "sigterm":  # a clean stop: the server stops the child
            served.send_signal(signal.SIGTERM)
            assert served.wait(timeout=WAIT_S) == 0
        else:  # no chance to: the child's parent-death signal ends it
            served.kill()
            assert served.wait(timeout=WAIT_S) == -signal.SIGKILL
        deadline = time.monotonic() + WAIT_S
        while _cmdline(warmers[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _cmdline(warmers[0]) == "", "the warm-up child outlived its server"
    finally:
        served.kill()
        served.wait()
        assert served.stdout is not None
        served.stdout.close()


def _marker(cache: Path) -> Path:
    """The warm-up's marker file for the numba cache ``cache`` (as a server there sees it)."""
    return Path(
        subprocess.run(
            [sys.executable, "-c", "from service.warmup import marker_path; print(marker_path())"],
            cwd=ROOT,
            env=_env(cache),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )


def _state(pid: int) -> str:
    """A process's state letter (``Z``: ended, not reaped), or "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return ""


def test_a_warmup_child_that_ends_is_reaped_at_once(tmp_path: Path) -> None:
    """The lock held here (another server warming up, say) ends the child at once; the
    server reaps it then, not when it stops (audit 22 saw a zombie for the server's life)."""
    cache = tmp_path / "cache"
    lock = _marker(cache).with_name("warmup.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        served = _serve(cache, tmp_path / "data")
        try:
            url = _url(served)
            assert httpx.get(f"{url}/healthz", timeout=WAIT_S).json() == {"status": "ok"}
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                states = [_state(c) for c in _children(served.pid)]
                if not states:
                    break
                time.sleep(0.05)
            assert states == [], f"children of the server after the warm-up ended: {states}"
        finally:
            served.send_signal(signal.SIGTERM)
            served.wait(timeout=WAIT_S)
            assert served.stdout is not None
            served.stdout.close()


@pytest.mark.parametrize("how", ["flag", "marker"])
def test_no_warmup_child_when_disabled_or_already_warm(tmp_path: Path, how: str) -> None:
    cache = tmp_path / "cache"
    flags: tuple[str, ...] = ("--no-warmup",)
    if how == "marker":
        flags = ()
        marker = _marker(cache)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("done\n")
    served = _serve(cache, tmp_path / "data", *flags)
    try:
        url = _url(served)
        assert httpx.get(f"{url}/healthz", timeout=WAIT_S).json() == {"status": "ok"}
        assert _warmers(served.pid) == []
    finally:
        served.send_signal(signal.SIGTERM)
        served.wait(timeout=WAIT_S)
        assert served.stdout is not None
        served.stdout.close()
