"""The two-thread helper: its setting, and that both halves run, each once, on two threads,
with the caller's half failing only after the helper's half is done."""

from __future__ import annotations

import threading
import time

import pytest

from engine import parallel
from engine.errors import EngineError


def test_thread_setting() -> None:
    assert parallel.configured(None, 2) == 2
    assert parallel.configured(None, 1) == 1
    assert parallel.configured("", 8) == 2
    assert parallel.configured("1", 8) == 1
    assert parallel.configured(" 2 ", 1) == 2
    with pytest.raises(EngineError, match="DIFFLOW_THREADS must be 1 or 2"):
        parallel.configured("3", 2)


def test_both_halves_run_on_two_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "_THREADS", 2)
    here, there = parallel.both(threading.get_ident, threading.get_ident)
    assert here == threading.get_ident() != there
    monkeypatch.setattr(parallel, "_THREADS", 1)
    here, there = parallel.both(threading.get_ident, threading.get_ident)
    assert here == there == threading.get_ident()


def test_a_failing_half_waits_for_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "_THREADS", 2)
    finished = []

    def slow() -> int:
        time.sleep(0.05)
        finished.append(True)
        return 1

    def fail() -> int:
        raise EngineError("boom")

    with pytest.raises(EngineError, match="boom"):
        parallel.both(fail, slow)
    assert finished == [True]
    with pytest.raises(EngineError, match="boom"):
        parallel.both(slow, fail)


def test_a_forked_child_gets_its_own_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    monkeypatch.setattr(parallel, "_THREADS", 2)
    parallel.both(int, int)  # the parent's helper thread exists
    pid = os.fork()
    if pid == 0:  # the child: the helper must run here too, not hang
        signal.alarm(20)  # a hung child dies of the alarm: a non-zero exit
        code = 0 if parallel.both(lambda: 1, lambda: 2) == (1, 2) else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_call_from_the_helper_runs_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """A split inside a half on the helper does not wait for the (busy) helper."""
    monkeypatch.setattr(parallel, "_THREADS", 2)

    def nested() -> tuple[int, int]:
        return parallel.both(threading.get_ident, threading.get_ident)

    _, (a, b) = parallel.both(int, nested)
    assert a == b != threading.get_ident()


def test_a_second_caller_runs_both_halves_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """While one thread's split has the helper, another thread's split does not wait for
    it: it runs both halves on its own thread."""
    monkeypatch.setattr(parallel, "_THREADS", 2)
    started, release = threading.Event(), threading.Event()
    seen: list[tuple[int, int]] = []

    def hold() -> int:  # the first caller's helper half: busy until released
        started.set()
        release.wait(10)
        return 0

    first = threading.Thread(target=lambda: parallel.both(int, hold))
    first.start()
    try:
        assert started.wait(10)

        def second() -> None:
            seen.append(parallel.both(threading.get_ident, threading.get_ident))

        other = threading.Thread(target=second)
        other.start()
        other.join(10)
        assert not other.is_alive()
        assert len(seen) == 1 and seen[0][0] == seen[0][1] == other.ident
    finally:
        release.set()
        first.join(10)
    assert parallel.both(threading.get_ident, threading.get_ident)[1] != threading.get_ident()


def test_a_helper_that_stops_watching_still_takes_every_half(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no time to watch its flag (one look), each side sleeps on its lock: the halves
    still run once each, in order, on two threads, failures included."""
    monkeypatch.setattr(parallel, "SPIN_MS", 0.0)
    helper = parallel._Helper()
    assert helper.looks == 1
    me = threading.get_ident()
    for i in range(50):
        if i % 10 == 0:
            time.sleep(0.01)  # the helper has long stopped watching: it sleeps on its lock
        here, there = helper.run(
            lambda i=i: (i, threading.get_ident()), lambda i=i: (-i, threading.get_ident())
        )
        assert here == (i, me) and there[0] == -i and there[1] != me

    def fail() -> int:
        raise EngineError("late")

    with pytest.raises(EngineError, match="late"):
        helper.run(int, fail)
    assert helper.run(lambda: 1, lambda: 2) == (1, 2)
