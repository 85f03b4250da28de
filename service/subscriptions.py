"""Subscribers: per-subscriber bounded frame queues filled by the engine thread.

Invariants: ``seq`` counts from 0 without gaps in the order frames are sent; frames are
assigned their ``seq`` and queued under one lock (the engine thread queues diffs and
progress, the socket task queues heartbeats). A subscriber with more than ``limit`` frames
unsent from earlier engine steps (``mark_step``) is closed: its unsent frames are dropped and
a ``closed`` frame, numbered right after the last frame it was sent, tells it why (a view
dropped or failed sends its unsent frames first). A step's
own frames do not count against it, however many: a step that took 12,000 pipelined writes
queues 12,000 diffs at once, which no subscriber could have been sent yet. The engine never
waits for a subscriber.

A snapshot is captured by the engine thread but decoded and encoded on another
(:meth:`Subscriber.prepare`): frames queued meanwhile are held, without their ``seq``, and
follow it once it is queued (:meth:`Subscriber.release`); nothing goes out before it, not
even a heartbeat.

A diff or snapshot frame holds at most ``FRAME_BYTES`` (``encoded_parts``): the changes of a
time that would make a bigger one go out in several frames of that time, in order, since a
websockets client refuses a message over 1 MiB unless told otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from enum import Enum
from typing import Any

from service.codec import kept_json

__all__ = [
    "FRAME_BYTES",
    "Frames",
    "SharedFrames",
    "Subscriber",
    "SubscriberState",
    "encoded_parts",
]

logger = logging.getLogger("difflow.subscriptions")

Frames = list[tuple[str, bytes]]  # (type, the JSON object of its other fields)

FRAME_BYTES = 1_000_000  # under 2**20 with the frame's type and seq


def encoded_parts(head: dict[str, Any], updates: list[Any]) -> list[bytes]:
    """``{**head, "updates": updates}`` as JSON objects of at most ``FRAME_BYTES`` each, the
    updates split in order between them (one update alone may be bigger); encoded once for
    every subscriber (``Subscriber.push_encoded``)."""
    body = kept_json({**head, "updates": updates})
    if len(body) <= FRAME_BYTES or len(updates) <= 1:
        return [body]
    parts = min(len(updates), len(body) // (FRAME_BYTES * 9 // 10) + 1)  # ~90% full each
    size = -(-len(updates) // parts)
    return [
        part
        for i in range(0, len(updates), size)
        for part in encoded_parts(head, updates[i : i + size])
    ]


class SharedFrames:
    """First frames built once, by the first subscriber to ask, for every subscriber that
    asks (they wait for a build under way): four subscribers of one view in one engine step
    get the same snapshot, and decoding and encoding it four times over, the engine's
    writes waiting for the interpreter meanwhile, held a write for 2.5 s (audit 62)."""

    def __init__(self, build: Callable[[], Frames]) -> None:
        self._build: Callable[[], Frames] | None = build
        self._frames: Frames | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Frames:
        with self._lock:
            if self._frames is None:
                assert self._build is not None
                self._frames = self._build()
                self._build = None  # what it captured is freed
            return self._frames


class SubscriberState(Enum):
    OPEN = "open"
    CLOSING = "closing"  # a closed frame is queued; the socket closes after sending it
    CLOSED = "closed"  # its socket is closed


class Subscriber:
    def __init__(
        self,
        view: str,
        progress: bool,
        limit: int,
        loop: asyncio.AbstractEventLoop,
        limit_mb: int = 256,
    ) -> None:
        self.view = view
        self.progress = progress
        self.limit = limit  # frames unsent from earlier steps (--subscriber-buffer)
        self.limit_bytes = limit_mb * 1024 * 1024  # their bytes (DIFFLOW_SUBSCRIBER_BUFFER_MB)
        self.loop = loop
        self.state = SubscriberState.OPEN
        self._frames: deque[bytes] = deque()
        # the bytes queued before each of ``_frames`` (ever, counted from the first), and
        # after all of them
        self._before: deque[int] = deque()
        self._bytes = 0
        self._lock = threading.Lock()
        self._next_seq = 0
        self._sent_seq = -1
        self._step_seq = 0  # the first frame the engine's current step queued
        self._first_end = 0  # the first frame after its first ones (``release``)
        self._wake = asyncio.Event()
        self._gone = asyncio.Event()  # its socket is closed (``ended``)
        self._first: Callable[[], Frames] | None = None  # builds its snapshot (``hold``)
        self.abort: Callable[[], None] | None = None  # drops its connection (the socket task)
        self._held: Frames | None = None  # queued while the snapshot is built

    # -- producer side (engine thread and heartbeat task) ----------------------------------
    def push(self, frame: dict[str, Any]) -> bool:
        """Queue a frame; returns False (and closes the subscriber) when it is too far behind."""
        body = kept_json({k: v for k, v in frame.items() if k != "type"})
        return self.push_encoded(frame["type"], body)

    def push_encoded(self, kind: str, body: bytes) -> bool:
        """:meth:`push` of a frame of type ``kind`` whose other fields are the JSON object
        ``body``."""
        with self._lock:
            if self.state is not SubscriberState.OPEN:
                return False
            # unsent from earlier steps, its snapshot aside: a reader of a 1M-row view's
            # 1,000 frames was closed as too slow under writes (audit 62)
            start = max(self._sent_seq + 1, self._first_end)
            if self._step_seq - start >= self.limit:
                self._close_locked(
                    f"subscriber too slow: more than {self.limit} frames unsent "
                    "(--subscriber-buffer)"
                )
                return False
            # frames are up to 1 MB each: a bound in frames alone let one stalled peer
            # hold gigabytes
            if self._unsent_bytes(start, self._step_seq) > self.limit_bytes:
                self._close_locked(
                    f"subscriber too slow: more than {self.limit_bytes // (1024 * 1024)} MB "
                    "unsent (DIFFLOW_SUBSCRIBER_BUFFER_MB)"
                )
                return False
            self._append_locked(kind, body)
        self._notify()
        return True

    def hold(self, first: Callable[[], Frames]) -> None:
        """(engine thread, before the subscriber is registered) Its first frames are built
        by ``first``, on another thread (:meth:`prepare`); frames queued until then wait
        behind them."""
        with self._lock:
            self._first, self._held = first, []

    async def prepare(self) -> None:
        """(a task of the socket's, beside the one that sends) Build the first frames
        :meth:`hold` named, on another thread, and :meth:`release` them; a failure closes
        the subscriber. A close meanwhile that drops unsent frames (a server shutting down)
        goes out at once, without waiting for them."""
        first, self._first = self._first, None
        if first is None:
            return
        try:
            frames = await asyncio.to_thread(first)
        except Exception:
            logger.exception("building a snapshot of view %r failed", self.view)
            with self._lock:  # whatever was held or closed meanwhile: this frame alone
                self._close_locked("internal error: the snapshot could not be built")
            self._notify()
            return
        self.release(frames)

    def release(self, first: Frames) -> None:
        """Queue ``first``, then the frames held behind it (unless it was closed meanwhile
        without its unsent frames: then nothing of it goes out)."""
        with self._lock:
            held, self._held = self._held, None
            if held is None:
                return
            for kind, body in first:
                self._append_locked(kind, body)
            self._first_end = self._next_seq
            for kind, body in held:
                self._append_locked(kind, body)
        self._notify()

    def mark_step(self) -> None:
        """(engine thread) A step begins: the frames queued from now on are its own."""
        with self._lock:
            self._step_seq = self._next_seq

    def close(self, reason: str, keep_unsent: bool = False) -> None:
        """Queue the ``closed`` frame: after the frames still unsent if ``keep_unsent`` (a
        view dropped or failed: the subscriber gets every time it was owed in full), else
        in their place (shutdown, where only the ``closed`` frame is waited for)."""
        with self._lock:
            if self.state is SubscriberState.OPEN:
                self._close_locked(reason, keep_unsent)
        self._notify()

    def _close_locked(self, reason: str, keep_unsent: bool = False) -> None:
        if not keep_unsent:
            self._frames.clear()
            self._before.clear()
            self._held = None
            self._next_seq = self._sent_seq + 1
        self._append_locked("closed", kept_json({"reason": reason}))
        self.state = SubscriberState.CLOSING

    def _unsent_bytes(self, start: int, end: int) -> int:
        """The bytes of the queued frames numbered ``start`` up to ``end`` (not included;
        both at least the first one unsent)."""
        if end <= start:
            return 0
        first = self._sent_seq + 1
        stop = self._before[end - first] if end - first < len(self._before) else self._bytes
        return stop - self._before[start - first]

    def _append_locked(self, kind: str, body: bytes) -> None:
        """The frame ``{"type": kind, "seq": next, **body}``, or held until the snapshot is
        queued (:meth:`release`)."""
        if self._held is not None:
            self._held.append((kind, body))
            return
        head = b'{"type":"%s","seq":%d' % (kind.encode(), self._next_seq)
        self._next_seq += 1
        frame = head + (b"," + body[1:] if len(body) > 2 else b"}")
        self._frames.append(frame)
        self._before.append(self._bytes)
        self._bytes += len(frame)

    def _notify(self) -> None:
        with contextlib.suppress(RuntimeError):  # the event loop is gone (shutting down)
            self.loop.call_soon_threadsafe(self._wake.set)

    # -- consumer side (the socket task) ---------------------------------------------------
    @property
    def unsent(self) -> int:
        return len(self._frames)

    @property
    def sent(self) -> int:
        """How many frames the socket task has taken."""
        return self._sent_seq + 1

    def pop(self) -> bytes | None:
        with self._lock:
            if not self._frames:
                return None
            frame = self._frames.popleft()
            self._before.popleft()
            self._sent_seq += 1
            return frame

    async def wait(self, timeout: float) -> bool:
        """Wait until frames are queued; False on timeout."""
        if self._frames:
            return True
        self._wake.clear()
        if self._frames:
            return True
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def heartbeat(self) -> None:
        with self._lock:
            if self.state is SubscriberState.OPEN and not self._frames and self._held is None:
                self._append_locked("heartbeat", b"{}")
        self._notify()

    @property
    def building(self) -> bool:
        """Its first frames are still being built (:meth:`hold`)."""
        return self._held is not None

    def drop(self) -> None:
        """Drop its connection now, unsent frames and all, if it is still open."""
        if self.abort is not None and not self._gone.is_set():
            self.abort()

    @property
    def finished(self) -> bool:
        return self.state is not SubscriberState.OPEN and not self._frames and self._held is None

    def ended(self) -> None:
        """(the socket task) Its socket is closed: whatever it was sent has gone out."""
        with self._lock:
            self.state = SubscriberState.CLOSED
        self._gone.set()

    async def until_ended(self) -> None:
        await self._gone.wait()
