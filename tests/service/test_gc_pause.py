"""The collector pause around bulk result building: it nests across threads and restores
the collector's state, also when the section raises."""

from __future__ import annotations

import contextlib
import gc
import threading

import pytest

from api.body import parse_json
from service.errors import BadRequest, Invalid
from service.gc_pause import collector_paused


@pytest.fixture(autouse=True)
def _collector_on() -> object:
    was = gc.isenabled()
    gc.enable()
    yield None
    if was:
        gc.enable()
    else:
        gc.disable()


def test_paused_inside_and_resumed_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_resumed_after_an_exception() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_stays_off_when_it_was_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_sections_on_two_threads() -> None:
    entered, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other() -> None:
        with collector_paused():
            entered.set()
            release.wait(10)
            seen.append(gc.isenabled())

    t = threading.Thread(target=other)
    t.start()
    assert entered.wait(10)
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's section is still open
    release.set()
    t.join(10)
    assert seen == [False]
    assert gc.isenabled()


@pytest.mark.parametrize("raw", [b'{"updates": [1, 2]}', b'{"a": ', b"[" * 2000 + b"]" * 2000])
def test_a_parsed_body_resumes_the_collector(raw: bytes) -> None:
    """Request bodies parse with the collector paused (their values hold no cycles), and
    it runs again after, also after a body that is not JSON or nests too deep."""
    with contextlib.suppress(BadRequest, Invalid):
        parse_json(raw)
    assert gc.isenabled()
