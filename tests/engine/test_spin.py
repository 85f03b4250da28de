"""Spin waits on shared flags: a value published on one thread is seen by a wait on another,
and a wait for a value that never comes gives up after its looks."""

from __future__ import annotations

import threading
import time

import numpy as np

from engine import spin


def test_a_wait_sees_a_value_already_there_and_gives_up_on_one_that_is_not() -> None:
    flags = np.zeros(3, dtype=np.int64)
    spin.publish(flags, 1, 7)
    assert flags.tolist() == [0, 7, 0]
    assert spin.wait_until(flags, 1, 7, 1)
    assert not spin.wait_until(flags, 1, 8, 1000)
    assert not spin.wait_until(flags, 0, 7, 1000)


def test_a_value_published_on_another_thread_is_seen_by_a_waiting_thread() -> None:
    flags = np.zeros(2, dtype=np.int64)
    box: list[int] = []

    def later() -> None:
        time.sleep(0.02)
        box.append(42)  # written before the flag: seen by whoever sees the flag
        spin.publish(flags, 0, 1)

    t = threading.Thread(target=later)
    t.start()
    try:
        # about 10 s of looks: the wait ends when the flag changes, not when they run out
        seen = spin.wait_until(flags, 0, 1, 10_000 * spin.looks_per_ms())
    finally:
        t.join(10)
    assert seen and box == [42]


def test_publish_and_wait_publishes_first_then_waits_for_the_answer_and_lingers() -> None:
    flags = np.zeros(2, dtype=np.int64)

    def answer() -> None:  # answers 2 on flag 1 once it sees 1 on flag 0
        if spin.wait_until(flags, 0, 1, 10_000 * spin.looks_per_ms()):
            spin.publish(flags, 1, 2)

    t = threading.Thread(target=answer)
    t.start()
    try:
        assert spin.publish_and_wait(flags, 0, 1, 1, 2, 10_000 * spin.looks_per_ms(), 1000)
    finally:
        t.join(10)
    assert flags.tolist() == [1, 2]
    assert not spin.publish_and_wait(flags, 0, 3, 1, 4, 100, 1000)
    assert flags.tolist() == [3, 2]


def test_looks_per_ms_is_a_positive_count() -> None:
    assert spin.looks_per_ms() >= 1
