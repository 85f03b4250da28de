"""WebSocket plumbing shared by subscriptions and table writers: connections, frames, errors.

A connection is anything with websockets' ``send(text)``, ``recv()`` and ``close()`` (awaitable
for the async side); ``connect_sync`` / ``connect_async`` open real ones and are the defaults
of ``Client`` / ``AsyncClient``, which accept any other connect function (tests pass
in-memory connections). Frames are JSON text. Failures from websockets or the socket are
translated here: a refused handshake becomes the typed error of its HTTP status, anything
else ``ConnectionFailed``.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, Self, TypeAlias

import orjson
from websockets.asyncio.client import connect as _connect_async
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import connect as _connect_sync

from clients.errors import ConnectionFailed, DifflowError, error_from_body, error_from_frame
from clients.wire import dumps, loads

__all__ = [
    "TRANSPORT_ERRORS",
    "AsyncConnect",
    "AsyncConnection",
    "AsyncLazySocket",
    "LazySocket",
    "SyncConnect",
    "SyncConnection",
    "closed_error",
    "connect_async",
    "connect_async_writer",
    "connect_sync",
    "connect_sync_writer",
    "decode_frame",
    "encode_frame",
    "lost_error",
    "open_error",
    "unsent_error",
]

TRANSPORT_ERRORS = (OSError, WebSocketException)
"""What a socket or websockets may raise (``TimeoutError`` is an ``OSError``)."""


class SyncConnection(Protocol):
    def send(self, message: str) -> None: ...

    def recv(self) -> str | bytes: ...

    def close(self) -> None: ...


class AsyncConnection(Protocol):
    async def send(self, message: str) -> None: ...

    async def recv(self) -> str | bytes: ...

    async def close(self) -> None: ...


SyncConnect: TypeAlias = Callable[[str], SyncConnection]
AsyncConnect: TypeAlias = Callable[[str], Awaitable[AsyncConnection]]


def connect_sync(url: str) -> SyncConnection:
    """A websockets connection to ``url`` (frames unbounded: the server bounds its own),
    whose reader stops taking frames while 16 wait unread (so a subscriber that stops
    reading holds the server back, which then tells it it is too slow).

    Entered as a context manager (the caller closes it with ``close()``): websockets 17.1+
    warns on the first use of a sync connection that was not, and its announced future
    ``connect()`` returns a context manager rather than a connection. ``__enter__`` gives
    the open connection in every version.

    The connection reads on a thread of its own, started here with SIGINT blocked, so that
    Ctrl-C always reaches the thread that waits in ``recv()``: a signal that the kernel
    hands to the reader thread instead does not wake the waiting thread, and Ctrl-C would
    go unnoticed until the next frame (a ``difflow subscribe`` could hang on it).

    It sends no keepalive pings (the server pings): with its reader stopped, the pongs
    went unread, and websockets closed the connection 40 s into a reader's pause, the
    frames waiting lost (audit 109), where the server's bounds are to decide."""
    return _open_sync(url, 16, ping_interval=None)


def connect_sync_writer(url: str) -> SyncConnection:
    """:func:`connect_sync` for a table writer, whose reader takes every frame as it comes:
    a writer sends while its answers wait, and with the reader stopped behind 16 of them
    it never saw the server close (a stop), so a send blocked on the full socket waited
    out websockets' 10 s close timeout (audit 98). The answers waiting are bounded by the
    frames the writer keeps unanswered."""
    return _open_sync(url, None, ping_interval=20.0)


def _open_sync(url: str, max_queue: int | None, ping_interval: float | None) -> SyncConnection:
    def open_() -> SyncConnection:
        return _connect_sync(
            url, max_size=None, max_queue=max_queue, ping_interval=ping_interval
        ).__enter__()

    if not hasattr(signal, "pthread_sigmask"):  # no POSIX signal masks (Windows)
        return open_()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return open_()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def connect_async(url: str) -> Awaitable[AsyncConnection]:
    """An awaitable websockets connection to ``url`` (frames unbounded, as above; its reader
    stops taking frames while 16 wait unread, and it sends no keepalive pings, as
    ``connect_sync``'s)."""
    return _connect_async(url, max_size=None, ping_interval=None)


def connect_async_writer(url: str) -> Awaitable[AsyncConnection]:
    """:func:`connect_async` for a table writer, whose reader takes every frame as it comes
    (as ``connect_sync_writer``'s): with it stopped behind 16 unread answers, a writer still
    sending when the server stopped never saw its 1012 close, and the server dropped the
    connection after its flush, 1.0-1.1 s later, where the 1012 now arrives in 0.03-0.14 s."""
    return _connect_async(url, max_size=None, max_queue=None)


def open_error(url: str, exc: BaseException) -> DifflowError:
    """The error for a failed handshake: the server's own error answer if it sent one."""
    if isinstance(exc, InvalidStatus):
        response = exc.response
        try:
            body: Any = loads(bytes(response.body))
        except orjson.JSONDecodeError:
            body = bytes(response.body).decode(errors="replace")
        return error_from_body(response.status_code, body, response.reason_phrase)
    return ConnectionFailed(f"cannot open {url}: {exc}")


def closed_error(url: str, exc: BaseException) -> ConnectionFailed:
    """The error for a connection lost (or closed by the server) while still in use."""
    return ConnectionFailed(f"connection to {url} lost: {exc}")


def lost_error(url: str, exc: BaseException, unanswered: int) -> ConnectionFailed:
    """A writer's connection lost with ``unanswered`` frames sent and not answered. Closed
    by a stopping server (1012), which answers every frame it read before it closes a
    write socket, those were never read, so none was applied."""
    if not unanswered:
        return closed_error(url, exc)
    if isinstance(exc, ConnectionClosed) and exc.rcvd is not None and exc.rcvd.code == 1012:
        return ConnectionFailed(
            f"connection to {url} closed: {exc}; the server stopped before reading the last "
            f"{unanswered} frame(s) sent, so none of them was applied"
        )
    return ConnectionFailed(
        f"connection to {url} lost: {exc}; {unanswered} frame(s) sent got no answer (each may "
        "or may not have been applied)"
    )


def unsent_error(url: str, exc: BaseException, unanswered: int) -> ConnectionFailed:
    """A writer's frame not sent, its connection lost, with ``unanswered`` frames sent
    before it and not yet received, whose answers may have arrived (``recv()`` reads
    those: some may be taken off the wire already, audit 103)."""
    if not unanswered:
        return closed_error(url, exc)
    return ConnectionFailed(
        f"connection to {url} lost: {exc}; a frame could not be sent, and of the {unanswered} "
        "sent before it and not yet received, recv() reads the answers that came before it "
        "closed"
    )


def encode_frame(body: Mapping[str, Any], frame_id: Any = None) -> str:
    """``body`` as a text frame, tagged with ``"id": frame_id`` unless that is None."""
    frame = dict(body)
    if frame_id is not None:
        frame["id"] = frame_id
    return dumps(frame).decode()


def decode_frame(message: str | bytes) -> dict[str, Any]:
    """A frame from the server; error frames raise their typed error."""
    try:
        frame = loads(message)
    except orjson.JSONDecodeError:
        frame = None
    if not isinstance(frame, dict):
        raise DifflowError(f"frame is not a JSON object: {message!r:.200}", code="bad_response")
    if frame.get("type") == "error":
        raise error_from_frame(frame)
    return frame


class LazySocket:
    """A WebSocket opened on first use (or on entering ``with``) and, once closed, closed
    for good: what a subscription and a table writer share. ``kind`` names it in errors."""

    kind = "socket"

    def __init__(self, url: str, connect: SyncConnect) -> None:
        self.url = url
        self._connect = connect
        self._connection: SyncConnection | None = None
        self._closed = False

    def __enter__(self) -> Self:
        self._open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (if open); nothing more is sent or received."""
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _open(self) -> SyncConnection:
        if self._connection is None:
            if self._closed:
                raise ConnectionFailed(f"{self.kind} {self.url} is closed")
            try:
                self._connection = self._connect(self.url)
            except (*TRANSPORT_ERRORS, ValueError) as exc:  # ValueError: a port out of range
                self._closed = True
                raise open_error(self.url, exc) from exc
        return self._connection


class AsyncLazySocket:
    """The async mirror of :class:`LazySocket`."""

    kind = "socket"

    def __init__(self, url: str, connect: AsyncConnect) -> None:
        self.url = url
        self._connect = connect
        self._connection: AsyncConnection | None = None
        self._closed = False

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection (if open); nothing more is sent or received."""
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _open(self) -> AsyncConnection:
        if self._connection is None:
            if self._closed:
                raise ConnectionFailed(f"{self.kind} {self.url} is closed")
            try:
                self._connection = await self._connect(self.url)
            except (*TRANSPORT_ERRORS, ValueError) as exc:  # ValueError: a port out of range
                self._closed = True
                raise open_error(self.url, exc) from exc
        return self._connection
