"""Test doubles for the client's two transports, shared by the client and CLI tests.

``Exchange`` is an ``httpx.MockTransport`` handler with canned answers keyed by method and
path; it records every request. ``StubConnection`` / ``StubAsyncConnection`` stand in for a
websockets connection: they record what is sent and hand out canned incoming frames, then
report a clean close. Neither models the server: answers are exactly what a test scripts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from websockets.exceptions import ConnectionClosedOK
from websockets.frames import Close

Answer = httpx.Response | Exception | list[httpx.Response | Exception]


def answer(status: int = 200, body: Any = None) -> httpx.Response:
    """A JSON answer (no body when ``body`` is None)."""
    if body is None:
        return httpx.Response(status)
    return httpx.Response(status, content=orjson.dumps(body))


def body_of(request: httpx.Request) -> Any:
    return orjson.loads(request.content)


@dataclass
class Exchange:
    """Canned answers by ``(method, path)``: a response, or an exception to raise as the
    transport would; several answer successive requests in turn, the last one repeating."""

    answers: dict[tuple[str, str], Answer] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)

    def on(self, method: str, path: str, *answers: httpx.Response | Exception) -> Exchange:
        self.answers[(method, path)] = answers[0] if len(answers) == 1 else list(answers)
        return self

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        canned = self.answers[(request.method, request.url.path)]
        if isinstance(canned, list):
            canned = canned.pop(0) if len(canned) > 1 else canned[0]
        if isinstance(canned, Exception):
            raise canned
        return canned

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def _closed() -> ConnectionClosedOK:
    return ConnectionClosedOK(Close(1000, ""), Close(1000, ""), rcvd_then_sent=True)


@dataclass
class StubConnection:
    """A websockets connection stand-in: incoming items are frames (dicts, sent as JSON
    text) or exceptions (raised); after the last one, a clean close. ``log`` records the
    order of sends and receives. With ``send_fails``, sends after the first ``sends`` raise
    it (the peer closed: what it answered before can still be received)."""

    incoming: list[Any]
    sent: list[Any] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    closed: bool = False
    send_fails: BaseException | None = None
    sends: int = 0

    def send(self, message: str) -> None:
        assert isinstance(message, str), "frames go out as text"
        self.log.append("send")
        if self.send_fails is not None and len(self.sent) >= self.sends:
            raise self.send_fails
        self.sent.append(orjson.loads(message))

    def recv(self) -> str | bytes:
        self.log.append("recv")
        if not self.incoming:
            raise _closed()
        item = self.incoming.pop(0)
        if isinstance(item, BaseException):
            raise item
        return orjson.dumps(item).decode()

    def close(self) -> None:
        self.closed = True


@dataclass
class StubAsyncConnection:
    """The async face of ``StubConnection``."""

    stub: StubConnection

    async def send(self, message: str) -> None:
        self.stub.send(message)

    async def recv(self) -> str | bytes:
        return self.stub.recv()

    async def close(self) -> None:
        self.stub.close()


@dataclass
class Connector:
    """A connect function handing out one stub connection; records the URLs asked for."""

    connection: StubConnection
    urls: list[str] = field(default_factory=list)

    def __call__(self, url: str) -> StubConnection:
        self.urls.append(url)
        return self.connection

    async def connect_async(self, url: str) -> StubAsyncConnection:
        self.urls.append(url)
        return StubAsyncConnection(self.connection)


def connector(frames: Iterable[Any]) -> Connector:
    return Connector(StubConnection(list(frames)))
