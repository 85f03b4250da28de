"""View subscriptions: the frames of ``WS /v1/views/{name}/subscribe``, in order.

``Subscription`` (sync) and ``AsyncSubscription`` are mirror iterators. The connection opens
on entering the context manager or on the first frame asked for, and closes on ``close()``,
on leaving the context, or after the server's ``closed`` frame (which is still yielded, so the
caller sees the reason). Iteration ends when the server closes the socket cleanly; a dropped
connection raises ``ConnectionFailed``, an error frame its typed ``DifflowError``.
"""

from __future__ import annotations

from typing import Any

from websockets.exceptions import ConnectionClosedOK

from clients.errors import ConnectionFailed
from clients.websocket import (
    TRANSPORT_ERRORS,
    AsyncConnect,
    AsyncConnection,
    SyncConnect,
    SyncConnection,
    closed_error,
    decode_frame,
    open_error,
)

__all__ = ["AsyncSubscription", "Subscription"]


class Subscription:
    """Frames (dicts) of one view subscription; iterate it, and close it or use ``with``."""

    def __init__(self, url: str, connect: SyncConnect) -> None:
        self.url = url
        self._connect = connect
        self._connection: SyncConnection | None = None
        self._finished = False

    def __enter__(self) -> Subscription:
        self._open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __iter__(self) -> Subscription:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._finished:
            raise StopIteration
        connection = self._open()
        try:
            message = connection.recv()
        except ConnectionClosedOK:
            self.close()
            raise StopIteration from None
        except TRANSPORT_ERRORS as exc:
            self.close()
            raise closed_error(self.url, exc) from exc
        frame = decode_frame(message)
        if frame.get("type") == "closed":
            self.close()
        return frame

    def close(self) -> None:
        """Stop the subscription and close its connection (if open)."""
        self._finished = True
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _open(self) -> SyncConnection:
        if self._connection is None:
            if self._finished:
                raise ConnectionFailed(f"subscription {self.url} is closed")
            try:
                self._connection = self._connect(self.url)
            except TRANSPORT_ERRORS as exc:
                self._finished = True
                raise open_error(self.url, exc) from exc
        return self._connection


class AsyncSubscription:
    """The async mirror of ``Subscription``: ``async for`` it, ``async with`` it."""

    def __init__(self, url: str, connect: AsyncConnect) -> None:
        self.url = url
        self._connect = connect
        self._connection: AsyncConnection | None = None
        self._finished = False

    async def __aenter__(self) -> AsyncSubscription:
        await self._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._finished:
            raise StopAsyncIteration
        connection = await self._open()
        try:
            message = await connection.recv()
        except ConnectionClosedOK:
            await self.aclose()
            raise StopAsyncIteration from None
        except TRANSPORT_ERRORS as exc:
            await self.aclose()
            raise closed_error(self.url, exc) from exc
        frame = decode_frame(message)
        if frame.get("type") == "closed":
            await self.aclose()
        return frame

    async def aclose(self) -> None:
        """Stop the subscription and close its connection (if open)."""
        self._finished = True
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _open(self) -> AsyncConnection:
        if self._connection is None:
            if self._finished:
                raise ConnectionFailed(f"subscription {self.url} is closed")
            try:
                self._connection = await self._connect(self.url)
            except TRANSPORT_ERRORS as exc:
                self._finished = True
                raise open_error(self.url, exc) from exc
        return self._connection
