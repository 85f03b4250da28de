"""Subscriptions and table writers over WebSocket, sync and async, on stub connections."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.frames import Close
from websockets.http11 import Response

from clients import (
    AsyncClient,
    Client,
    ConnectionFailed,
    DifflowError,
    InvalidError,
    NotFoundError,
)
from clients import table_writer as table_writer_module
from clients import websocket as websocket_module
from tests.clients.doubles import Connector, StubAsyncConnection, StubConnection, connector

SNAPSHOT = {"type": "snapshot", "seq": 0, "time": 3, "updates": [{"data": {"a": 1}, "diff": 1}]}
DIFF = {"type": "diff", "seq": 1, "time": 4, "updates": [{"data": {"a": 1}, "diff": -1}]}
PROGRESS = {"type": "progress", "seq": 2, "frontier": [5]}
CLOSED = {"type": "closed", "seq": 3, "reason": "view dropped"}


def sync_client(connect: Connector, url: str = "http://difflow.test:9000") -> Client:
    return Client(url, ws_connect=connect)


def async_client(connect: Connector) -> AsyncClient:
    return AsyncClient("http://difflow.test:9000", ws_connect=connect.connect_async)


def test_subscription_yields_frames_in_order_and_ends_after_closed() -> None:
    connect = connector([SNAPSHOT, DIFF, PROGRESS, CLOSED, {"type": "heartbeat", "seq": 4}])
    with sync_client(connect) as client, client.subscribe("reach", snapshot=False) as frames:
        received = list(frames)
    assert received == [SNAPSHOT, DIFF, PROGRESS, CLOSED]
    assert connect.urls == [
        "ws://difflow.test:9000/v1/views/reach/subscribe?snapshot=false&progress=true"
    ]
    assert connect.connection.closed


def test_subscription_ends_when_the_server_closes_cleanly() -> None:
    connect = connector([SNAPSHOT])
    with sync_client(connect, "https://secure.test/base/") as client:
        frames = client.subscribe("v", progress=False)
        assert list(frames) == [SNAPSHOT]
    assert connect.urls == [
        "wss://secure.test/base/v1/views/v/subscribe?snapshot=true&progress=false"
    ]
    assert connect.connection.closed


def test_subscription_error_frame_and_dropped_connection() -> None:
    error = {"type": "error", "id": None, "error": {"code": "invalid", "message": "bad"}}
    dropped = ConnectionClosedError(Close(1011, "boom"), None)
    connect = connector([error, DIFF, dropped])
    with sync_client(connect) as client, client.subscribe("v") as frames:
        with pytest.raises(InvalidError, match="bad"):
            next(frames)
        assert next(frames) == DIFF
        with pytest.raises(ConnectionFailed) as caught:
            next(frames)
    assert caught.value.__cause__ is dropped
    assert connect.connection.closed


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (
            InvalidStatus(
                Response(
                    404,
                    "Not Found",
                    Headers(),
                    b'{"error": {"code": "not_found", '
                    b'"message": "no view named v", "detail": null}}',
                )
            ),
            NotFoundError,
        ),
        (ConnectionRefusedError(111, "Connection refused"), ConnectionFailed),
        (TimeoutError("timed out during opening handshake"), ConnectionFailed),
    ],
)
def test_refused_handshakes_become_typed_errors(
    raised: Exception, expected: type[DifflowError]
) -> None:
    def connect(url: str) -> Any:
        raise raised

    client = Client("http://difflow.test", ws_connect=connect)
    with client, pytest.raises(expected) as caught:
        next(client.subscribe("v"))
    assert caught.value.__cause__ is raised
    if expected is NotFoundError:
        assert caught.value.message == "no view named v"


def test_writer_pipelines_frames_and_drains_acks() -> None:
    acks = [{"type": "ack", "id": i, "status": "done", "latency_ms": 1.0} for i in range(3)]
    connect = connector(acks)
    with sync_client(connect) as client, client.ws_writer("edges") as writer:
        for i in range(3):
            writer.send({"updates": [{"insert": {"a": i}}]}, id=i)
        assert writer.pending == 3
        first = writer.recv()
        rest = list(writer)
        assert writer.pending == 0
        with pytest.raises(RuntimeError, match="nothing to receive"):
            writer.recv()
    assert [first, *rest] == acks
    assert connect.urls == ["ws://difflow.test:9000/v1/tables/edges/updates"]
    assert connect.connection.sent == [
        {"updates": [{"insert": {"a": i}}], "id": i} for i in range(3)
    ]
    assert connect.connection.closed


# five frames sent with at most two in flight: each send past two takes an answer first
TAKEN_AHEAD = ["send", "send", "recv", "send", "recv", "send", "recv", "send"]


def test_a_writer_takes_answers_off_the_wire_beyond_its_frames_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A send beyond ``IN_FLIGHT_MAX`` unanswered frames first takes the answers that came,
    kept in order for ``recv()``: a stream sent whole before reading does not stall, and
    keepalive pings wait behind a bounded number of frames (audit 100: behind 100k, a ping
    went unanswered for its 20 s and the connection was dropped). The async writer alike."""
    monkeypatch.setattr(table_writer_module, "IN_FLIGHT_MAX", 2)
    acks = [{"type": "ack", "id": i} for i in range(5)]
    connect = connector(acks)
    with sync_client(connect) as client, client.ws_writer("t") as writer:
        for i in range(5):
            writer.send({"updates": []}, id=i)
        assert writer.pending == 5
        assert connect.connection.log == TAKEN_AHEAD
        assert list(writer) == acks
    # the connection lost while answers are taken: that send fails, the answers that came
    # are received, then the loss
    connect = connector([acks[0]])
    with sync_client(connect) as client, client.ws_writer("t") as writer:
        writer.send({"updates": []}, id=0)
        writer.send({"updates": []}, id=1)
        writer.send({"updates": []}, id=2)  # takes ack 0 first
        with pytest.raises(ConnectionFailed, match="of the 3 sent before it and not yet received"):
            writer.send({"updates": []}, id=3)
        assert writer.recv() == acks[0]
        with pytest.raises(ConnectionFailed, match=r"2 frame\(s\) sent got no answer"):
            writer.recv()
        assert writer.pending == 0

    async def run() -> list[dict[str, Any]]:
        async with async_client(connect) as client, client.ws_writer("t") as writer:
            for i in range(5):
                await writer.send({"updates": []}, id=i)
            return [ack async for ack in writer]

    connect = connector(acks)
    assert asyncio.run(run()) == acks
    assert connect.connection.log == [*TAKEN_AHEAD, "recv", "recv"]


def test_writer_raises_error_frames_and_keeps_going() -> None:
    error = {"type": "error", "id": 0, "error": {"code": "not_found", "message": "no table t"}}
    ack = {"type": "ack", "id": 1}
    connect = connector([error, ack])
    with sync_client(connect) as client, client.ws_writer("t") as writer:
        writer.send({"updates": []}, id=0)
        writer.send({"updates": []})
        with pytest.raises(NotFoundError) as caught:
            writer.recv()
        assert caught.value.frame_id == 0
        assert list(writer) == [ack]
    assert connect.connection.sent == [{"updates": [], "id": 0}, {"updates": []}]


def test_writer_reports_a_connection_lost_with_acks_pending() -> None:
    """The answers of a lost connection never come: nothing is pending any more, so a loop
    draining the writer ends (audit 46: it spun on the same error)."""
    connect = connector([])
    with sync_client(connect) as client, client.ws_writer("t") as writer:
        writer.send({"updates": []})
        writer.send({"updates": []})
        with pytest.raises(ConnectionFailed, match=r"lost.*2 frame\(s\) sent got no answer"):
            writer.recv()
        assert writer.pending == 0 and list(writer) == []
        # and so is every later recv(): it said that every frame had been answered (audit 100)
        with pytest.raises(ConnectionFailed, match=r"lost.*2 frame\(s\) sent got no answer"):
            writer.recv()


def test_a_writer_stopped_by_the_server_says_its_unanswered_frames_were_not_applied() -> None:
    """A stopping server answers every frame it read before it closes a write socket with
    1012: the frames still unanswered then were never read, so none was applied (the error
    said they may or may not have been, audit 100)."""
    stopped = ConnectionClosedError(Close(1012, "server shutting down"), None)
    connect = connector([{"type": "ack", "id": 0}, stopped])
    with sync_client(connect) as client, client.ws_writer("t") as writer:
        for i in range(3):
            writer.send({"updates": []}, id=i)
        assert writer.recv() == {"type": "ack", "id": 0}
        with pytest.raises(ConnectionFailed, match=r"last 2 frame\(s\) .*none of them was applied"):
            writer.recv()


def test_a_failed_send_leaves_the_answers_that_came_readable() -> None:
    """The server closed (a 1012 at its shutdown, say) after answering two frames: the third
    send fails, and the two answers on the socket are still read, where they were counted
    as lost before (a push told its user that acknowledged writes may not have been
    applied)."""
    closing = ConnectionClosedError(Close(1012, "server shutting down"), None)
    acks = [{"type": "ack", "id": i} for i in range(2)]
    stub = StubConnection([*acks, closing], send_fails=closing, sends=2)
    with sync_client(Connector(stub)) as client, client.ws_writer("t") as writer:
        writer.send({"updates": []}, id=0)
        writer.send({"updates": []}, id=1)
        with pytest.raises(ConnectionFailed) as caught:
            writer.send({"updates": []}, id=2)
        assert "a frame could not be sent, and of the 2 sent before it and not yet received" in (
            caught.value.message
        )
        assert caught.value.__cause__ is closing
        assert writer.pending == 2
        assert [writer.recv(), writer.recv()] == acks
        assert writer.pending == 0 and list(writer) == []
        # every answer received: a recv() raises the loss (audit 109: a RuntimeError saying
        # that every frame had been answered)
        with pytest.raises(ConnectionFailed, match="lost"):
            writer.recv()
    # nothing pending: the failed send is the lost connection, as before, and so is a recv()
    stub = StubConnection([], send_fails=closing, sends=0)
    lost = r"lost: received 1012 [^;]*; no close frame sent$"
    with sync_client(Connector(stub)) as client, client.ws_writer("t") as writer:
        with pytest.raises(ConnectionFailed, match=lost):
            writer.send({"updates": []})
        with pytest.raises(ConnectionFailed, match="lost"):
            writer.recv()


def test_async_failed_send_leaves_the_answers_that_came_readable() -> None:
    closing = ConnectionClosedError(Close(1012, "server shutting down"), None)
    stub = StubConnection([{"type": "ack", "id": 0}, closing], send_fails=closing, sends=1)

    async def run() -> tuple[int, list[dict[str, Any]]]:
        async with async_client(Connector(stub)) as client, client.ws_writer("t") as writer:
            await writer.send({"updates": []}, id=0)
            with pytest.raises(
                ConnectionFailed, match="of the 1 sent before it and not yet received"
            ):
                await writer.send({"updates": []}, id=1)
            pending = writer.pending
            return pending, [ack async for ack in writer]

    assert asyncio.run(run()) == (1, [{"type": "ack", "id": 0}])


def test_a_closed_client_opens_no_socket() -> None:
    client = sync_client(connector([SNAPSHOT]))
    client.close()
    for opening in (lambda: client.subscribe("v"), lambda: client.ws_writer("t")):
        with pytest.raises(ConnectionFailed, match="is closed"):
            opening()
    with pytest.raises(ConnectionFailed, match="names no host"):
        Client("http://")


def test_writers_read_every_answer_as_it_comes_and_subscriptions_hold_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer's connection takes every frame as it comes; a subscription's stops reading
    while 16 wait, so that a reader that stops holds the server back (which closes it as
    too slow). A writer's stopped too: sending while its answers waited, it never saw a
    stopping server close, and its blocked send waited out websockets' 10 s close timeout
    (audit 98: ``difflow push --ws`` took 10 s to report a stop in 14 runs of 22); the
    async writer's send failed only when the server dropped it, without the 1012, after
    about a second. Both clients alike."""
    opened: list[tuple[str, str, Any]] = []
    pings: list[Any] = []

    class Opening:
        def __init__(self, url: str, **options: Any) -> None:
            opened.append(("sync", url, options.get("max_queue", "default")))
            pings.append(options.get("ping_interval", "default"))

        def __enter__(self) -> StubConnection:
            return StubConnection([])

    async def opening_async(url: str, **options: Any) -> StubAsyncConnection:
        opened.append(("async", url, options.get("max_queue", "default")))
        pings.append(options.get("ping_interval", "default"))
        return StubAsyncConnection(StubConnection([]))

    monkeypatch.setattr(websocket_module, "_connect_sync", Opening)
    monkeypatch.setattr(websocket_module, "_connect_async", opening_async)
    with Client("http://difflow.test:9000") as client:
        with client.ws_writer("t") as writer:
            writer.send({"updates": []})
        with client.subscribe("v") as subscription:
            list(subscription)

    async def run() -> None:
        async with AsyncClient("http://difflow.test:9000") as client:
            async with client.ws_writer("t") as writer:
                await writer.send({"updates": []})
            async with client.subscribe("v") as subscription:
                [frame async for frame in subscription]

    asyncio.run(run())
    writer_url = "ws://difflow.test:9000/v1/tables/t/updates"
    subscribe_url = "ws://difflow.test:9000/v1/views/v/subscribe?snapshot=true&progress=true"
    assert opened == [
        ("sync", writer_url, None),
        ("sync", subscribe_url, 16),
        ("async", writer_url, None),
        ("async", subscribe_url, "default"),
    ]
    # a subscription sends no keepalive pings: its reader stopped, their pongs went unread,
    # and websockets dropped it 40 s into a pause, the frames waiting lost (audit 109)
    assert pings == [20.0, None, "default", None]


def test_a_url_the_sockets_cannot_use_is_a_connection_failure() -> None:
    with Client("ftp://h:1") as client:
        for opening in (lambda: client.subscribe("v"), lambda: client.ws_writer("t")):
            with pytest.raises(ConnectionFailed, match="bad URL"):
                opening()
    with Client("http://127.0.0.1:99999") as client, pytest.raises(ConnectionFailed):
        client.ws_writer("t").send({"updates": []})


def test_async_subscription_and_writer() -> None:
    frames_connect = connector([SNAPSHOT, CLOSED, DIFF])
    writer_connect = connector([{"type": "ack", "id": "a"}, {"type": "ack", "id": "b"}])

    async def run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with async_client(frames_connect) as client, client.subscribe("v") as subscription:
            frames = [frame async for frame in subscription]
        async with async_client(writer_connect) as client, client.ws_writer("t") as writer:
            await writer.send({"updates": []}, id="a")
            await writer.send({"updates": [], "advance_to": 3}, id="b")
            assert writer.pending == 2
            acks = [ack async for ack in writer]
        return frames, acks

    frames, acks = asyncio.run(run())
    assert frames == [SNAPSHOT, CLOSED]
    assert acks == [{"type": "ack", "id": "a"}, {"type": "ack", "id": "b"}]
    assert writer_connect.connection.sent[1] == {"updates": [], "advance_to": 3, "id": "b"}
    assert frames_connect.connection.closed and writer_connect.connection.closed


def test_async_subscription_typed_errors() -> None:
    error = {"type": "error", "id": None, "error": {"code": "invalid", "message": "bad"}}
    connect = connector([error])

    async def run() -> None:
        async with async_client(connect) as client:
            async for _frame in client.subscribe("v"):
                pass

    with pytest.raises(InvalidError):
        asyncio.run(run())


def test_real_connections_to_a_closed_port_fail_cleanly() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with Client(url) as client:
        with pytest.raises(ConnectionFailed) as subscribe_failed:
            next(client.subscribe("v"))
        with pytest.raises(ConnectionFailed) as write_failed:
            client.ws_writer("t").send({"updates": []})
    assert isinstance(subscribe_failed.value.__cause__, OSError)
    assert isinstance(write_failed.value.__cause__, OSError)

    async def run() -> None:
        async with AsyncClient(url) as client, client.ws_writer("t") as writer:
            await writer.send({"updates": []})

    with pytest.raises(ConnectionFailed):
        asyncio.run(run())
