"""What every ``difflow`` command shares: the server URL, the timeout and one lazily opened
``Client``.

The root command stores a ``CliState`` as the typer context object. A caller (a test, an
embedding program) may pass its own as ``obj=`` when invoking the app, to route the client
through another httpx transport or WebSocket connect function; the ``--url`` option still
sets its URL. Commands that never talk to a server (``serve``) never open a client.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
import typer

from clients.client import DEFAULT_TIMEOUT, Client
from clients.websocket import SyncConnect, connect_sync
from clients.wire import DEFAULT_URL

__all__ = ["CliState", "client_of"]


@dataclass
class CliState:
    """The server URL and the transports the commands' client uses."""

    url: str = DEFAULT_URL
    timeout: float | None = None  # seconds to wait for each answer (None: no limit)
    transport: httpx.BaseTransport | None = None
    ws_connect: SyncConnect = connect_sync
    _client: Client | None = field(default=None, init=False, repr=False)

    @property
    def client(self) -> Client:
        """The client of this invocation, opened on first use."""
        if self._client is None:
            timeout = DEFAULT_TIMEOUT
            if self.timeout is not None:
                timeout = httpx.Timeout(DEFAULT_TIMEOUT.connect, read=self.timeout)
            self._client = Client(
                self.url, timeout=timeout, transport=self.transport, ws_connect=self.ws_connect
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def client_of(ctx: typer.Context) -> Client:
    """The client of the invocation ``ctx`` belongs to."""
    state = ctx.find_object(CliState)
    if state is None:
        raise RuntimeError("difflow commands run under the root app, which sets a CliState")
    return state.client
