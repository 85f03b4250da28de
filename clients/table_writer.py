"""Pipelined table writes over ``WS /v1/tables/{name}/updates``.

``TableWriter`` (sync) and ``AsyncTableWriter`` are mirrors. ``send(body, id)`` puts one write
body on the wire and returns at once; the server answers every frame, in order, with an ack
(the write answer plus ``"type": "ack"`` and the frame's ``id``) or an error frame, which
``recv()`` raises as its typed ``DifflowError`` (``frame_id`` set; the socket stays open).
``pending`` counts frames not yet answered, and iterating a writer yields the answers of every
frame sent so far, then stops. A ``send`` that fails because the connection closed leaves
``pending`` as it was: the answers that came before it closed are still read by ``recv()``,
which raises the lost connection once none is left. The connection opens on entering the
context manager or on the first send; keep the number of unanswered frames bounded on long
streams: the server reads at most 16,384 frames ahead of the answers taken (a writer's
connection takes them as they come, and holds them until ``recv()``), so a stream sent whole
before any answer is read stalls past that. Once a connection is lost, ``pending`` is 0 and
every ``recv()`` raises the loss again.
"""

from __future__ import annotations

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

__all__ = ["AsyncTableWriter", "TableWriter"]

_NOTHING_PENDING = "every frame sent has been answered: nothing to receive"


class TableWriter(LazySocket):
    """Pipelined writes to one table; use as a context manager. ``close()`` loses the
    answers not yet received."""

    kind = "writer"

    def __init__(self, url: str, connect: SyncConnect) -> None:
        super().__init__(url, connect)
        self._pending = 0
        self._gone: ConnectionFailed | None = None  # the loss, raised by every later recv()

    @property
    def pending(self) -> int:
        """Frames sent whose answer has not been received yet (0 once ``recv()`` finds the
        connection lost: those answers never come)."""
        return self._pending

    def _lost(self, exc: BaseException) -> ConnectionFailed:
        lost, self._pending = self._pending, 0
        self._gone = lost_error(self.url, exc, lost)
        return self._gone

    def send(self, body: Mapping[str, Any], id: Any = None) -> None:
        """Send one write body (see ``write_body``), tagged with ``id``; do not wait."""
        connection = self._open()
        try:
            connection.send(encode_frame(body, id))
        except TRANSPORT_ERRORS as exc:
            raise unsent_error(self.url, exc, self._pending) from exc
        self._pending += 1

    def recv(self) -> dict[str, Any]:
        """The next answer: an ack dict, or the typed error of an error frame."""
        if not self._pending:
            if self._gone is not None:  # not "all answered": those answers never came
                raise self._gone
            raise RuntimeError(_NOTHING_PENDING)
        connection = self._open()
        try:
            message = connection.recv()
        except TRANSPORT_ERRORS as exc:
            raise self._lost(exc) from exc
        self._pending -= 1
        return decode_frame(message)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while self._pending:
            yield self.recv()


class AsyncTableWriter(AsyncLazySocket):
    """The async mirror of ``TableWriter``; use with ``async with``."""

    kind = "writer"

    def __init__(self, url: str, connect: AsyncConnect) -> None:
        super().__init__(url, connect)
        self._pending = 0
        self._gone: ConnectionFailed | None = None  # the loss, raised by every later recv()

    @property
    def pending(self) -> int:
        """Frames sent whose answer has not been received yet (0 once ``recv()`` finds the
        connection lost: those answers never come)."""
        return self._pending

    def _lost(self, exc: BaseException) -> ConnectionFailed:
        lost, self._pending = self._pending, 0
        self._gone = lost_error(self.url, exc, lost)
        return self._gone

    async def send(self, body: Mapping[str, Any], id: Any = None) -> None:
        """Send one write body tagged with ``id``; do not wait for its ack."""
        connection = await self._open()
        try:
            await connection.send(encode_frame(body, id))
        except TRANSPORT_ERRORS as exc:
            raise unsent_error(self.url, exc, self._pending) from exc
        self._pending += 1

    async def recv(self) -> dict[str, Any]:
        """The next answer: an ack dict, or the typed error of an error frame."""
        if not self._pending:
            if self._gone is not None:  # not "all answered": those answers never came
                raise self._gone
            raise RuntimeError(_NOTHING_PENDING)
        connection = await self._open()
        try:
            message = await connection.recv()
        except TRANSPORT_ERRORS as exc:
            raise self._lost(exc) from exc
        self._pending -= 1
        return decode_frame(message)

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        while self._pending:
            yield await self.recv()
