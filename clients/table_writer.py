"""Pipelined table writes over ``WS /v1/tables/{name}/updates``.

``TableWriter`` (sync) and ``AsyncTableWriter`` are mirrors. ``send(body, id)`` puts one write
body on the wire and returns at once; the server answers every frame, in order, with an ack
(the write answer plus ``"type": "ack"`` and the frame's ``id``) or an error frame, which
``recv()`` raises as its typed ``DifflowError`` (``frame_id`` set; the socket stays open).
``pending`` counts frames not yet answered, and iterating a writer yields the answers of every
frame sent so far, then stops. A ``send`` that fails because the connection closed leaves
``pending`` as it was: the answers that came before it closed are still read by ``recv()``,
which raises the lost connection once none is left. The connection opens on entering the
context manager or on the first send. At most ``IN_FLIGHT_MAX`` frames are on the wire
unanswered: a ``send`` beyond them first takes the answers that came (kept, in order, for
``recv()``), waiting for them if need be. So a stream sent whole before any answer is read
does not stall (the server reads at most 16,384 frames ahead of the answers taken), and the
connection's keepalive pings wait behind at most that many frames (audit 100: behind a
hundred thousand, the server's pong came after the ping's 20 s, and the connection was
dropped with writes applied but unanswered). Once a connection is lost, ``pending`` is 0
and every ``recv()`` raises the loss again.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from clients.errors import ConnectionFailed
from clients.websocket import (
    TRANSPORT_ERRORS,
    AsyncConnect,
    AsyncLazySocket,
    LazySocket,
    SyncConnect,
    decode_frame,
    encode_frame,
    lost_error,
    unsent_error,
)

__all__ = ["IN_FLIGHT_MAX", "AsyncTableWriter", "TableWriter"]

IN_FLIGHT_MAX = 1024  # frames sent whose answers have not come off the wire

_NOTHING_PENDING = "every frame sent has been answered: nothing to receive"


class _Answers:
    """What both writers keep: frames sent and not yet received (``pending``), the answers
    taken off the wire ahead of ``recv()``, and the connection's loss."""

    url: str  # the socket's (``LazySocket`` / ``AsyncLazySocket`` sets it)

    def __init__(self) -> None:
        self._pending = 0
        self._answers: deque[str | bytes] = deque()  # taken off the wire, not yet recv()'d
        self._broken: BaseException | None = None  # the connection's loss, met while sending
        self._gone: ConnectionFailed | None = None  # the loss, raised by every later recv()
        self._send_lost: BaseException | None = None  # the loss, met by a send that failed

    @property
    def pending(self) -> int:
        """Frames sent whose answer has not been received yet (0 once ``recv()`` finds the
        connection lost: those answers never come)."""
        return self._pending

    def _lost(self, exc: BaseException) -> ConnectionFailed:
        lost, self._pending = self._pending, 0
        self._gone = lost_error(self.url, exc, lost)
        return self._gone

    def _full(self) -> bool:
        """Whether ``IN_FLIGHT_MAX`` frames await their answers on the wire."""
        return self._broken is None and self._pending - len(self._answers) >= IN_FLIGHT_MAX

    def _check_sendable(self) -> None:
        if self._broken is not None:
            raise unsent_error(self.url, self._broken, self._pending) from self._broken

    def _check_receivable(self) -> None:
        if not self._pending:
            if self._gone is None and self._send_lost is not None:
                self._gone = lost_error(self.url, self._send_lost, 0)
            if self._gone is not None:  # not "all answered": those answers never came
                raise self._gone
            raise RuntimeError(_NOTHING_PENDING)

    def _taken(self) -> str | bytes | None:
        """The next answer taken off the wire ahead, if any; the loss met while taking
        them once they are all received."""
        if self._answers:
            return self._answers.popleft()
        if self._broken is not None:
            raise self._lost(self._broken) from self._broken
        return None


class TableWriter(_Answers, LazySocket):
    """Pipelined writes to one table; use as a context manager. ``close()`` loses the
    answers not yet received. One thread may send while another receives."""

    kind = "writer"

    def __init__(self, url: str, connect: SyncConnect) -> None:
        _Answers.__init__(self)
        LazySocket.__init__(self, url, connect)
        self._reading = threading.Lock()  # one reader of the connection at a time

    def send(self, body: Mapping[str, Any], id: Any = None) -> None:
        """Send one write body (see ``write_body``), tagged with ``id``; do not wait, but
        for answers to come off the wire while ``IN_FLIGHT_MAX`` frames await theirs."""
        connection = self._open()
        while self._full():
            with self._reading:
                if self._full():  # else another thread received meanwhile
                    try:
                        self._answers.append(connection.recv())
                    except TRANSPORT_ERRORS as exc:
                        self._broken = exc
        self._check_sendable()
        try:
            connection.send(encode_frame(body, id))
        except TRANSPORT_ERRORS as exc:
            self._send_lost = exc
            raise unsent_error(self.url, exc, self._pending) from exc
        self._pending += 1

    def recv(self) -> dict[str, Any]:
        """The next answer: an ack dict, or the typed error of an error frame."""
        self._check_receivable()
        connection = self._open()
        with self._reading:
            message = self._taken()
            if message is None:
                try:
                    message = connection.recv()
                except TRANSPORT_ERRORS as exc:
                    raise self._lost(exc) from exc
            self._pending -= 1
        return decode_frame(message)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while self._pending:
            yield self.recv()


class AsyncTableWriter(_Answers, AsyncLazySocket):
    """The async mirror of ``TableWriter``; use with ``async with``. One task may send
    while another receives."""

    kind = "writer"

    def __init__(self, url: str, connect: AsyncConnect) -> None:
        _Answers.__init__(self)
        AsyncLazySocket.__init__(self, url, connect)
        self._reading = asyncio.Lock()  # one reader of the connection at a time

    async def send(self, body: Mapping[str, Any], id: Any = None) -> None:
        """Send one write body tagged with ``id``; do not wait for its ack, but for answers
        to come off the wire while ``IN_FLIGHT_MAX`` frames await theirs."""
        connection = await self._open()
        while self._full():
            async with self._reading:
                if self._full():  # else another task received meanwhile
                    try:
                        self._answers.append(await connection.recv())
                    except TRANSPORT_ERRORS as exc:
                        self._broken = exc
        self._check_sendable()
        try:
            await connection.send(encode_frame(body, id))
        except TRANSPORT_ERRORS as exc:
            self._send_lost = exc
            raise unsent_error(self.url, exc, self._pending) from exc
        self._pending += 1

    async def recv(self) -> dict[str, Any]:
        """The next answer: an ack dict, or the typed error of an error frame."""
        self._check_receivable()
        connection = await self._open()
        async with self._reading:
            message = self._taken()
            if message is None:
                try:
                    message = await connection.recv()
                except TRANSPORT_ERRORS as exc:
                    raise self._lost(exc) from exc
            self._pending -= 1
        return decode_frame(message)

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        while self._pending:
            yield await self.recv()
