"""``Client`` (sync, httpx.Client) and ``AsyncClient`` (httpx.AsyncClient): mirror classes.

Both speak only the wire format of API.md: each method builds its request in
``clients.endpoints`` and returns the decoded answer (a dict, a list for ``tables()`` /
``views()``, ``None`` for 204s, text for ``metrics()``) or raises a ``DifflowError``.
Transports are swappable: ``transport=`` takes any httpx transport (``httpx.MockTransport``
in tests) and ``ws_connect=`` any function opening a WebSocket connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import httpx

from clients import endpoints
from clients.endpoints import Call, ColumnSpec, write_body
from clients.errors import ConnectionFailed
from clients.plan import Plan
from clients.subscription import AsyncSubscription, Subscription
from clients.table_writer import AsyncTableWriter, TableWriter
from clients.websocket import (
    AsyncConnect,
    SyncConnect,
    connect_async,
    connect_async_writer,
    connect_sync,
    connect_sync_writer,
)
from clients.wire import Time, dumps, resolve_url, segment, ws_url

__all__ = ["DEFAULT_TIMEOUT", "AsyncClient", "Client"]

Update = Mapping[str, Any]
Frontier = Time | Sequence[Time]
_JSON_HEADERS = {"content-type": "application/json"}


def _request_args(call: Call) -> dict[str, Any]:
    args: dict[str, Any] = {"params": call.params}
    if call.body is not None:
        args.update(content=dumps(call.body), headers=_JSON_HEADERS)
    return args


# connecting, sending and waiting for a free connection are bounded; the answer is not: a
# view's registration or a write's outputs may take minutes, and a request given up on may
# still be carried out
DEFAULT_TIMEOUT = httpx.Timeout(60.0, read=None)


def _transport_error(url: str, call: Call, exc: Exception) -> ConnectionFailed:
    where = f"{call.method} {url}{call.path}"
    if isinstance(exc, httpx.ReadTimeout):
        return ConnectionFailed(
            f"{where}: no answer within the timeout; the server may still carry out the request",
            code="timed_out",
        )
    return ConnectionFailed(f"{where}: {exc or type(exc).__name__}")


@contextmanager
def _valid_url(url: str) -> Iterator[None]:
    """A server URL httpx cannot parse (a bad port, say) is a ``ConnectionFailed``."""
    try:
        yield
    except httpx.InvalidURL as exc:
        raise ConnectionFailed(f"bad URL {url!r}: {exc}") from exc


def _closed_client(url: str) -> ConnectionFailed:
    return ConnectionFailed(f"the client of {url} is closed: make a new one")


def _subscribe_path(view: str, snapshot: bool, progress: bool) -> tuple[str, dict[str, str]]:
    flags = {"snapshot": snapshot, "progress": progress}
    return f"/v1/views/{segment(view)}/subscribe", {k: str(v).lower() for k, v in flags.items()}


class Client:
    """A synchronous difflow client; ``url`` defaults to ``$DIFFLOW_URL`` or localhost:8000.

    ``timeout`` bounds the HTTP requests (``DEFAULT_TIMEOUT``: no limit on waiting for an
    answer); WebSockets open within websockets' own 10 s and then wait for frames without
    limit."""

    def __init__(
        self,
        url: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        ws_connect: SyncConnect = connect_sync,
    ) -> None:
        self.url = resolve_url(url)
        with _valid_url(self.url):
            self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport)
        self._ws_connect = ws_connect
        # the default's writers read every answer as it comes (``connect_sync_writer``)
        self._writer_connect = connect_sync_writer if ws_connect is connect_sync else ws_connect

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections; later calls raise ``ConnectionFailed``."""
        self._http.close()

    def _send(self, call: Call) -> Any:
        if self._http.is_closed:
            raise _closed_client(self.url)
        try:
            response = self._http.request(call.method, call.path, **_request_args(call))
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _transport_error(self.url, call, exc) from exc
        return endpoints.decode(
            call, response.status_code, response.content, response.reason_phrase
        )

    def _ws_url(self, path: str, params: dict[str, str] | None = None) -> str:
        if self._http.is_closed:
            raise _closed_client(self.url)
        return ws_url(self.url, path, params)

    def health(self) -> dict[str, Any]:
        """``{"status": "ok"}`` once the server accepts requests."""
        return self._send(endpoints.health())

    def create_table(
        self,
        name: str,
        columns: ColumnSpec,
        primary_key: Sequence[str] | None = None,
        timing: str = "server",
        time_dims: int = 1,
    ) -> dict[str, Any]:
        """Create a table; ``columns`` as ``{"src": "int"}``, ``[("src", "int")]`` or dicts."""
        return self._send(endpoints.create_table(name, columns, primary_key, timing, time_dims))

    def tables(self) -> list[dict[str, Any]]:
        """Every table's description (name, columns, timing, frontier, rows, readers)."""
        return self._send(endpoints.tables())

    def table(self, name: str) -> dict[str, Any]:
        """Table ``name``'s description."""
        return self._send(endpoints.table(name))

    def drop_table(self, name: str) -> None:
        """Drop table ``name`` (a ``ConflictError`` while a view reads it)."""
        self._send(endpoints.drop_table(name))

    def write(
        self,
        table: str,
        updates: Iterable[Update] | None = None,
        *,
        columns: Mapping[str, Any] | None = None,
        diff: Any = None,
        time: Time | Sequence[Time] | None = None,
        advance_to: Frontier | None = None,
        wait: bool = True,
    ) -> dict[str, Any]:
        """Write update objects or ``columns`` (columnar); the answer of 200 or 202."""
        body = write_body(updates, columns=columns, diff=diff, time=time, advance_to=advance_to)
        return self._send(endpoints.write(table, body, wait))

    def completion(self, token: str) -> dict[str, Any]:
        """The answer of the write ``token`` (a write answered pending): pending or done."""
        return self._send(endpoints.completion(token))

    def create_view(self, name: str, query: Plan | Mapping[str, Any]) -> dict[str, Any]:
        """Register view ``name`` of ``query`` (a ``Plan`` or its JSON); its description."""
        return self._send(endpoints.create_view(name, query))

    def views(self) -> list[dict[str, Any]]:
        """Every view's description."""
        return self._send(endpoints.views())

    def view(self, name: str) -> dict[str, Any]:
        """View ``name``'s description."""
        return self._send(endpoints.view(name))

    def drop_view(self, name: str) -> None:
        """Drop view ``name`` (a ``ConflictError`` while another view reads it)."""
        self._send(endpoints.drop_view(name))

    def rows(self, view: str, as_of: Time | None = None) -> dict[str, Any]:
        """``{"time", "frontier", "rows"}``: the view's contents at ``as_of`` (default latest)."""
        return self._send(endpoints.rows(view, as_of))

    def create_load(
        self,
        table: str,
        source: Mapping[str, Any],
        columns: Mapping[str, str] | None = None,
        where: str | None = None,
        mode: str = "append",
        time: Time | None = None,
    ) -> dict[str, Any]:
        """Start a Spark load into ``table``; ``{"id", "state": "queued"}``."""
        return self._send(endpoints.create_load(table, source, columns, where, mode, time))

    def loads(self) -> dict[str, Any]:
        """Every load the server remembers: ``{"loads": [status, ...]}``."""
        return self._send(endpoints.list_loads())

    def load(self, load_id: str | int) -> dict[str, Any]:
        """The status of Spark load ``load_id``."""
        return self._send(endpoints.load(load_id))

    def cancel_load(self, load_id: str | int) -> dict[str, Any]:
        """The load as it then is: ``cancelled``, or its state unchanged when it was too late."""
        return self._send(endpoints.cancel_load(load_id))

    def metrics(self) -> str:
        """The server's Prometheus metrics, as text."""
        return self._send(endpoints.metrics())

    def subscribe(self, view: str, snapshot: bool = True, progress: bool = True) -> Subscription:
        """The frames of ``view`` as they come; iterate it inside ``with``."""
        path, params = _subscribe_path(view, snapshot, progress)
        return Subscription(self._ws_url(path, params), self._ws_connect)

    def ws_writer(self, table: str) -> TableWriter:
        """A pipelined WebSocket writer to ``table``; use as a context manager."""
        url = self._ws_url(f"/v1/tables/{segment(table)}/updates")
        return TableWriter(url, self._writer_connect)


class AsyncClient:
    """The asynchronous mirror of ``Client``: the same methods, awaited, but for
    ``subscribe`` and ``ws_writer``, which return their socket unopened: ``async with`` it
    (and ``async for`` a subscription's frames)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        ws_connect: AsyncConnect = connect_async,
    ) -> None:
        self.url = resolve_url(url)
        with _valid_url(self.url):
            self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, transport=transport)
        self._ws_connect = ws_connect
        # the default's writers read every answer as it comes (``connect_async_writer``)
        self._writer_connect = connect_async_writer if ws_connect is connect_async else ws_connect

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call) -> Any:
        if self._http.is_closed:
            raise _closed_client(self.url)
        try:
            response = await self._http.request(call.method, call.path, **_request_args(call))
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _transport_error(self.url, call, exc) from exc
        return endpoints.decode(
            call, response.status_code, response.content, response.reason_phrase
        )

    def _ws_url(self, path: str, params: dict[str, str] | None = None) -> str:
        if self._http.is_closed:
            raise _closed_client(self.url)
        return ws_url(self.url, path, params)

    async def health(self) -> dict[str, Any]:
        return await self._send(endpoints.health())

    async def create_table(
        self,
        name: str,
        columns: ColumnSpec,
        primary_key: Sequence[str] | None = None,
        timing: str = "server",
        time_dims: int = 1,
    ) -> dict[str, Any]:
        call = endpoints.create_table(name, columns, primary_key, timing, time_dims)
        return await self._send(call)

    async def tables(self) -> list[dict[str, Any]]:
        return await self._send(endpoints.tables())

    async def table(self, name: str) -> dict[str, Any]:
        return await self._send(endpoints.table(name))

    async def drop_table(self, name: str) -> None:
        await self._send(endpoints.drop_table(name))

    async def write(
        self,
        table: str,
        updates: Iterable[Update] | None = None,
        *,
        columns: Mapping[str, Any] | None = None,
        diff: Any = None,
        time: Time | Sequence[Time] | None = None,
        advance_to: Frontier | None = None,
        wait: bool = True,
    ) -> dict[str, Any]:
        body = write_body(updates, columns=columns, diff=diff, time=time, advance_to=advance_to)
        return await self._send(endpoints.write(table, body, wait))

    async def completion(self, token: str) -> dict[str, Any]:
        return await self._send(endpoints.completion(token))

    async def create_view(self, name: str, query: Plan | Mapping[str, Any]) -> dict[str, Any]:
        return await self._send(endpoints.create_view(name, query))

    async def views(self) -> list[dict[str, Any]]:
        return await self._send(endpoints.views())

    async def view(self, name: str) -> dict[str, Any]:
        return await self._send(endpoints.view(name))

    async def drop_view(self, name: str) -> None:
        await self._send(endpoints.drop_view(name))

    async def rows(self, view: str, as_of: Time | None = None) -> dict[str, Any]:
        return await self._send(endpoints.rows(view, as_of))

    async def create_load(
        self,
        table: str,
        source: Mapping[str, Any],
        columns: Mapping[str, str] | None = None,
        where: str | None = None,
        mode: str = "append",
        time: Time | None = None,
    ) -> dict[str, Any]:
        call = endpoints.create_load(table, source, columns, where, mode, time)
        return await self._send(call)

    async def loads(self) -> dict[str, Any]:
        return await self._send(endpoints.list_loads())

    async def load(self, load_id: str | int) -> dict[str, Any]:
        return await self._send(endpoints.load(load_id))

    async def cancel_load(self, load_id: str | int) -> dict[str, Any]:
        return await self._send(endpoints.cancel_load(load_id))

    async def metrics(self) -> str:
        return await self._send(endpoints.metrics())

    def subscribe(
        self, view: str, snapshot: bool = True, progress: bool = True
    ) -> AsyncSubscription:
        """The frames of ``view``; ``async for`` it inside ``async with``."""
        path, params = _subscribe_path(view, snapshot, progress)
        return AsyncSubscription(self._ws_url(path, params), self._ws_connect)

    def ws_writer(self, table: str) -> AsyncTableWriter:
        """A pipelined WebSocket writer to ``table``; use with ``async with``."""
        url = self._ws_url(f"/v1/tables/{segment(table)}/updates")
        return AsyncTableWriter(url, self._writer_connect)


def _share_docstrings() -> None:
    """The async mirror's methods say what the sync ones do."""
    for name, method in vars(AsyncClient).items():
        twin = getattr(Client, "close" if name == "aclose" else name, None)
        if callable(method) and not method.__doc__ and twin is not None:
            method.__doc__ = twin.__doc__


_share_docstrings()
