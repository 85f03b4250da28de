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

from clients.websocket import (
    TRANSPORT_ERRORS,
    AsyncLazySocket,
    LazySocket,
    closed_error,
    decode_frame,
)

__all__ = ["AsyncSubscription", "Subscription"]


class Subscription(LazySocket):
    """Frames (dicts) of one view subscription; iterate it, and close it or use ``with``."""

    kind = "subscription"

    def __iter__(self) -> Subscription:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._closed:
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


class AsyncSubscription(AsyncLazySocket):
    """The async mirror of ``Subscription``: ``async for`` it, ``async with`` it."""

    kind = "subscription"

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._closed:
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
