"""WebSocket endpoints.

``/v1/tables/{name}/updates``: each client frame is a write body plus an optional ``id``;
frames are parsed and queued as they arrive (a client may pipeline without waiting), and
acks go back in frame order. A bad frame gets an error frame with its ``id``; the socket
stays open. A socket writes to the table under its name when it opened: once that is
dropped, its frames are 404s (a table made since under the name is another table).

``/v1/views/{name}/subscribe``: snapshot, diffs, progress and heartbeats from the view's
:class:`~service.subscriptions.Subscriber`, in ``seq`` order.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from api.body import exact_json, has_long_number, parse_json
from api.query import query_value, refuse_unknown
from api.routes.tables import submit_write
from service.codec import nests_deeper
from service.errors import Invalid, NotFound, ServiceError, TooLarge
from service.ingest import TableShape
from service.runtime import Runtime
from service.subscriptions import SubscriberState
from service.writes import WriteCommand

router = APIRouter()


_ID_DEPTH = 32  # levels of objects and lists a frame's id may nest (it is echoed back)
WS_FRAME_BOUND = 4  # frames up to this many times the body limit are read (and refused)
# a socket's task lets the others run after this many frames: sending to a socket that takes
# them at once, and awaiting answers ready already, never suspends it (60,000 refused frames
# kept every subscriber from its ``closed`` frame at shutdown, audit 41)
YIELD_EVERY = 64
# frames a write socket reads ahead of its answers: a peer that reads none of its answers
# then stops being read (TCP holds it back), where the server kept every answer it could
# not send (audit 98: 122k of them, 1.1 GB, from 5 s of frames). A peer that sends all
# its frames before it reads any answer is held back once this many, and as many answers
# as the sockets' buffers hold besides (tens of thousands of small ones), wait.
UNANSWERED_MAX = 16384
ABORT = "difflow.abort"  # an ASGI extension: its "abort" drops the connection (api.server)


def _check_size(raw: str | bytes, limit: int) -> None:
    """A frame is a write body: over ``--max-body-mb`` it is refused as a body would be."""
    # a text frame's bytes are counted only when its characters (up to 4 bytes each in
    # UTF-8) might exceed the limit
    size = len(raw) if isinstance(raw, bytes) or 4 * len(raw) <= limit else len(raw.encode())
    if size > limit:
        raise TooLarge(
            f"the frame has {size} bytes; the limit is {limit} (--max-body-mb)",
            {"limit": limit},
            "body_too_large",
        )


def _frame_id(frame: dict[str, Any], raw: str | bytes) -> Any:
    """The frame's ``id``, taken out of it; refused if it nests deeper than ``_ID_DEPTH``
    or holds an integer beyond 64 bits (an ack echoes it: orjson read such an integer as a
    float, which the ack would have echoed instead)."""
    frame_id = frame.pop("id", None)
    if nests_deeper(frame_id, _ID_DEPTH):
        raise Invalid(
            f"id nests more than {_ID_DEPTH} levels of objects and lists",
            {"path": "id"},
            "invalid_id",
        )
    read = list(_leaves(frame_id))
    if any(isinstance(x, float) for x in read) and has_long_number(raw):
        exact = _leaves(exact_json(raw, "invalid_id").get("id"))
        pairs = zip(read, exact, strict=True)  # one value, read twice
        if any(isinstance(x, float) and isinstance(y, int) for x, y in pairs):
            raise Invalid(
                "id holds an integer beyond 64 bits, which an ack cannot echo",
                {"path": "id"},
                "invalid_id",
            )
    return frame_id


def _leaves(value: Any) -> Iterator[Any]:
    """The scalars in ``value`` (JSON), depth first."""
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list):
        yield value
        return
    for v in value:
        yield from _leaves(v)


def _error_frame(frame_id: Any, exc: ServiceError) -> dict[str, Any]:
    return {
        "type": "error",
        "id": frame_id,
        "error": {"code": exc.code, "message": exc.message, "detail": exc.detail},
    }


class Unanswered:
    """A write socket's frames read and not yet answered (its ack or error frame sent), and
    how to close that socket when the server stops (``close``; ``abort`` drops it, where
    its peer reads nothing and the close would wait behind its answers for good)."""

    def __init__(
        self, close: Callable[[], Awaitable[None]], abort: Callable[[], None] | None
    ) -> None:
        self.count = 0
        self.close = close
        self.abort = abort
        self._none = asyncio.Event()
        self._none.set()
        self._room = asyncio.Event()  # fewer than UNANSWERED_MAX, or gone
        self._room.set()
        self._gone = False

    def add(self) -> None:
        self.count += 1
        self._none.clear()
        if self.count >= UNANSWERED_MAX and not self._gone:
            self._room.clear()

    def answered(self) -> None:
        self.count -= 1
        if self.count == 0:
            self._none.set()
        if self.count < UNANSWERED_MAX:
            self._room.set()

    def gone(self) -> None:
        """Its socket is closed, or its answers stopped: nothing more can be answered."""
        self._gone = True
        self._none.set()
        self._room.set()

    async def until_none(self) -> None:
        await self._none.wait()

    async def until_room(self) -> None:
        """Until fewer than ``UNANSWERED_MAX`` frames read wait for their answers."""
        await self._room.wait()


@router.websocket("/v1/tables/{name}/updates")
async def ws_updates(ws: WebSocket, name: str) -> None:
    await ws.accept()
    try:
        refuse_unknown(ws.query_params, ())
    except ServiceError as exc:
        await _refuse(ws, exc)
        return
    rt: Runtime = ws.app.state.runtime
    acks: asyncio.Queue[tuple[Any, WriteCommand | ServiceError] | None] = asyncio.Queue()
    unanswered = Unanswered(
        lambda: ws.close(1012, "server shutting down"),
        (ws.scope.get("extensions") or {}).get(ABORT, {}).get("abort"),
    )
    writers: set[Unanswered] = ws.app.state.writers
    writers.add(unanswered)

    async def send_acks() -> None:
        sent = 0
        try:
            while True:
                sent += 1
                if sent % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                item = await acks.get()
                if item is None:
                    return
                try:
                    await send_ack(*item)
                finally:
                    unanswered.answered()
        finally:  # the socket is gone: the reader must not wait for room
            unanswered.gone()

    async def send_ack(frame_id: Any, work: WriteCommand | ServiceError) -> None:
        try:
            if isinstance(work, ServiceError):
                raise work
            body = await rt.settled(work.stepped, work)
            text = orjson.dumps({"type": "ack", "id": frame_id, **body}).decode()
        except ServiceError as exc:
            text = orjson.dumps(_error_frame(frame_id, exc)).decode()
        except Exception as exc:  # a bug: the frame says so, and later frames are acked
            text = orjson.dumps(_error_frame(None, ServiceError.internal(exc))).decode()
        await ws.send_text(text)

    sender = asyncio.create_task(send_acks())
    # the table it writes to: the one under its name when it opened (or at its first write)
    opened_on = rt.catalog.tables.get(name)
    bound: TableShape | None = opened_on.shape if opened_on is not None else None
    read = 0
    try:
        while True:
            read += 1
            if read % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            if unanswered.count >= UNANSWERED_MAX:  # its peer reads no answer: wait
                await unanswered.until_room()
            msg = await ws.receive()
            if msg["type"] == "websocket.disconnect":
                break
            if rt.stopping:  # not read: no answer, nothing applied; the socket closes with
                continue  # 1012 once the frames read before are answered (``api.server``)
            text, data = msg.get("text"), msg.get("bytes")
            raw: str | bytes = text if text is not None else data if data is not None else b""
            arrival = time.perf_counter()
            frame_id = None
            unanswered.add()
            try:
                _check_size(raw, rt.settings.max_body_bytes)
                frame = parse_json(raw)
                if not isinstance(frame, dict):
                    raise Invalid(
                        "a frame must be a JSON object (a write body plus an optional id)",
                        {"path": "frame"},
                        "not_an_object",
                    )
                frame_id = _frame_id(frame, raw)
                cmd = await submit_write(rt, name, frame, arrival, len(raw) > 256 * 1024, bound)
                bound = cmd.shape or bound  # parsed by the engine: as it was
                await acks.put((frame_id, cmd))
            except ServiceError as exc:
                await acks.put((frame_id, exc))
    except WebSocketDisconnect:
        pass
    finally:
        await acks.put(None)
        with contextlib.suppress(Exception):
            await sender  # it marks the socket gone as it ends
        writers.discard(unanswered)


_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}


def _flag(ws: WebSocket, name: str) -> bool:
    """A true/false query parameter (true when absent), read here rather than by FastAPI,
    which refuses a bad one with a bare 403 at the handshake instead of an error frame."""
    value = query_value(ws.query_params, name, "invalid", name)
    if value is None or value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise Invalid(
        f"query parameter {name!r} must be true or false (1/0, yes/no, on/off), not {value!r}",
        {"path": name},
        "invalid",
    )


@router.websocket("/v1/views/{name}/subscribe")
async def ws_subscribe(ws: WebSocket, name: str) -> None:
    await ws.accept()
    rt: Runtime = ws.app.state.runtime
    loop = asyncio.get_running_loop()
    try:
        refuse_unknown(ws.query_params, ("snapshot", "progress"))
        snapshot, progress = _flag(ws, "snapshot"), _flag(ws, "progress")
        sub = await rt.read(lambda: rt.subscribe(name, snapshot, progress, loop), ("view", name))
    except ServiceError as exc:
        await _refuse(ws, exc)
        return
    heartbeat = rt.settings.heartbeat_s
    sub.abort = (ws.scope.get("extensions") or {}).get(ABORT, {}).get("abort")

    async def pump() -> None:
        sent = 0
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            while True:
                sent += 1
                if sent % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                frame = sub.pop()
                if frame is None:
                    if sub.finished:
                        return
                    if not await sub.wait(heartbeat):
                        sub.heartbeat()
                    continue
                await ws.send_text(frame.decode())

    async def until_gone() -> None:
        """A client that leaves ends the subscription at once, not at the next frame sent
        (a heartbeat's, up to ``--heartbeat-s`` later); what it sends is ignored."""
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            while (await ws.receive())["type"] != "websocket.disconnect":
                pass

    async def give_up() -> None:
        """A subscriber closed (too slow, its view dropped) whose socket takes no frame for
        two heartbeat intervals is dropped: its peer reads nothing, and the closed frame
        would wait behind its unsent frames for as long as the server runs (audit 62). Not
        while its snapshot is built: nothing can go out then (audit 67)."""
        assert sub.abort is not None
        while sub.state is SubscriberState.OPEN or sub.building:
            await asyncio.sleep(min(heartbeat, 1.0))
        sent = -1
        while sub.sent != sent:
            sent = sub.sent
            await asyncio.sleep(2 * heartbeat)
        sub.drop()

    # its snapshot, built off the engine thread; meanwhile the pump sends nothing but a
    # ``closed`` frame that drops it (a server shutting down)
    preparing = asyncio.create_task(sub.prepare())
    tasks = {asyncio.create_task(pump()), asyncio.create_task(until_gone())}
    if sub.abort is not None:  # served by our protocol (api.server), not another's
        tasks.add(asyncio.create_task(give_up()))
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (*tasks, preparing):
            task.cancel()
        await asyncio.gather(*tasks, preparing, return_exceptions=True)
        with contextlib.suppress(ServiceError):
            # it changes who hears of the view, not what reads see: it may run at once
            rt.submit(lambda: rt.unsubscribe(sub), reads=True, subject=("subscriber", name))
        with contextlib.suppress(Exception):
            await ws.close()
        sub.ended()


@router.websocket("/{path:path}")
async def ws_unknown(ws: WebSocket, path: str) -> None:
    """Any other path: one error frame, as an unknown view gets, then the socket closes (the
    handshake was refused with a bare 403)."""
    await ws.accept()
    error = NotFound(
        f"no WebSocket endpoint at /{path}: the WebSocket paths are "
        "/v1/tables/{name}/updates and /v1/views/{name}/subscribe",
        {"path": f"/{path}"},
    )
    await _refuse(ws, error)


async def _refuse(ws: WebSocket, error: ServiceError) -> None:
    """One error frame, then the socket closes (1000)."""
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):  # peer gone
        await ws.send_text(orjson.dumps(_error_frame(None, error)).decode())
        await ws.close()
