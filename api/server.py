"""Running the server: uvicorn with difflow's settings; prints its URL once it listens.

``--port 0`` picks a free port; the printed line (``difflow listening on http://...``) is how
tests and scripts learn it. SIGTERM and Ctrl-C shut down gracefully (subscribers get a
``closed`` frame).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from api.app import create_app
from api.ws import ABORT, WS_FRAME_BOUND, Unanswered
from service.errors import LoadError, SettingsError
from service.settings import Settings
from service.spark.session import SparkSettings
from service.warmup import start_background

__all__ = ["main"]

SUBSCRIBER_FLUSH_S = 3.0  # most time for closed frames, and write sockets' answers, at shutdown
WRITER_CLOSE_S = 1.0  # most time for write sockets' peers to answer their close at shutdown
_BAD_UTF8 = "Invalid UTF-8 sequence received from client."  # uvicorn's message (sans-io)


class _ClientFaults(logging.Filter):
    """A text frame that is not UTF-8 is the client's fault: uvicorn closes the socket with
    1007 (invalid frame payload data), as it should, but logs an error with the decoder's
    traceback; this makes it one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() == _BAD_UTF8:
            record.msg, record.args = "closed a WebSocket (1007): a text frame was not UTF-8", ()
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


async def _within(timeout: float, waits: list[Coroutine[Any, Any, None]]) -> None:
    """Wait for all of ``waits``, or ``timeout`` s (a peer that does not read can hold its
    socket); those still waiting are cancelled."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        for t in pending:
            t.cancel()


class _WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, whose ASGI scope also carries ``difflow.abort``: drops
    the connection at once, unsent data and all. Closing it otherwise waits for its unsent
    data to go out, which a peer that reads nothing never lets (``api.ws.ws_subscribe``)."""

    async def run_asgi(self) -> None:
        extensions = self.scope.get("extensions") or {}
        self.scope["extensions"] = {**extensions, ABORT: {"abort": self.abort}}
        await super().run_asgi()

    def abort(self) -> None:
        if not self.transport.is_closing():
            self.transport.abort()


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self.app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # the port closes at once, as uvicorn's own shutdown would close it after ours: new
        # connections were taken, and answered 503, for seconds meanwhile (audit 100)
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        runtime = getattr(self.app.state, "runtime", None)
        if runtime is not None:  # the engine finishes its step (up to 5 s), requests still
            runtime.begin_shutdown()  # waiting on it get their 503, and subscribers hear
            await runtime.wind_down()  # why before their connections go
            closed = runtime.close_subscribers("server shutting down")
            # their last frames go out before the sockets close: the subscriptions' closed
            # frames, and each write socket's answers to the frames it read, that socket
            # then closing (1012) at once: a peer that reads nothing holds only its own
            flushed = asyncio.get_running_loop().time() + SUBSCRIBER_FLUSH_S
            await asyncio.gather(
                _within(SUBSCRIBER_FLUSH_S, [s.until_ended() for s in closed]),
                *(_close_writer(w, flushed) for w in list(self.app.state.writers)),
            )
            for s in closed:  # peers that read nothing: their sockets would hold the exit
                s.drop()  # for uvicorn's graceful 10 s, then its cancellations (audit 67)
            await self._closes_answered()
        await super().shutdown(sockets)

    async def _closes_answered(self) -> None:
        """Wait, up to ``WRITER_CLOSE_S``, for the closing frames of the write sockets'
        peers. uvicorn's own shutdown closes a socket right after its close frame: frames a
        pipelining peer sent meanwhile lie unread, so the kernel resets the connection, and
        a peer that had not yet read the close frame loses it, seeing an abnormal closure
        (1006) instead of 1012 (audit 90: 2 shutdowns of 7). Closed this way, uvicorn reads
        on, discarding, until the peer's close frame comes."""
        loop = asyncio.get_running_loop()
        until = loop.time() + WRITER_CLOSE_S
        while loop.time() < until and any(
            isinstance(c, WebSocketsSansIOProtocol)
            and c.close_sent
            and not c.transport.is_closing()
            for c in self.server_state.connections
        ):
            await asyncio.sleep(0.01)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        host, port = self.config.host, self.config.port
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                port = sock.getsockname()[1]
                break
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address, as URLs write it
        print(f"difflow listening on http://{shown}:{port}", flush=True)


async def _close_writer(writer: Unanswered, flushed: float) -> None:
    """Wait, until loop time ``flushed``, for a write socket's answers to the frames it
    read, then close it (1012), within ``WRITER_CLOSE_S``. A peer that reads nothing holds
    both, its answers filling the socket: its connection is dropped (its close waited
    behind them for ever, and the stop with it)."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(writer.until_none(), max(0.0, flushed - loop.time()))
    try:
        await asyncio.wait_for(writer.close(), WRITER_CLOSE_S)
    except Exception:  # held (TimeoutError), or its peer gone meanwhile
        if writer.abort is not None:
            writer.abort()


def configure_logging() -> None:
    """Our loggers at INFO to stderr, everyone else's at WARNING: py4j logs each failed call
    to a dead Spark driver at INFO with its whole traceback chain (audit 51: 350,000 lines in
    2 s when the JVM died)."""
    logging.basicConfig(
        level=logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    for ours in ("difflow", "service", "api", "engine"):
        logging.getLogger(ours).setLevel(logging.INFO)


def _make_data_dir(path: Path) -> None:
    """The data directory, made now: one the server cannot use stops it before it starts,
    rather than failing the first load."""
    try:
        if path.is_symlink() and not path.exists():
            raise FileNotFoundError(2, "it is a symbolic link to a path that does not exist")
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(20, "it is a file, not a directory")
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.mkdtemp(prefix=".difflow-probe-", dir=path)
        os.rmdir(probe)
    except OSError as exc:
        raise SettingsError(
            f"--data-dir / DIFFLOW_DATA_DIR: cannot use {str(path)!r} as a directory: "
            f"{exc.strerror or exc}",
            {"setting": "data_dir"},
        ) from None


def _check_listen(host: str, port: int) -> None:
    """Whether the server can listen there, tried before it starts: a port in use or a host
    that does not resolve stops it with one line, as a bad setting does, not uvicorn's
    ``ERROR:`` line and status 3 (a port taken between the two is still uvicorn's)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except OSError as exc:
        raise SettingsError(
            f"--host / --port: cannot listen on {host} port {port}: {exc.strerror or exc}",
            {"setting": "port"},
        ) from None


def main(
    host: str | None = None,
    port: int | str | None = None,
    data_dir: str | None = None,
    max_body_mb: int | str | None = None,
    max_batch: int | str | None = None,
    subscriber_buffer: int | str | None = None,
    heartbeat_s: float | str | None = None,
    history: int | str | None = None,
    warmup: bool | None = None,
) -> None:
    """Serve with these settings (None: the ``DIFFLOW_*`` variable or the default; a text,
    as ``difflow serve`` passes its options, is parsed as the variable would be). A setting
    the server cannot use ends it before it starts: one line, exit status 2."""
    try:
        settings = Settings.from_env(
            host=host,
            port=port,
            data_dir=data_dir,
            max_body_mb=max_body_mb,
            max_batch=max_batch,
            subscriber_buffer=subscriber_buffer,
            heartbeat_s=heartbeat_s,
            history=history,
            warmup=warmup,
        )
        SparkSettings.from_env()  # its variables are checked now, not at the first load
        _make_data_dir(settings.data_dir)
        _check_listen(settings.host, settings.port)
    except (SettingsError, LoadError) as exc:
        print(f"difflow: {exc.message}", file=sys.stderr)
        raise SystemExit(2) from None
    configure_logging()
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        # a frame over the body limit gets an error frame (api.ws); only one over this
        # bound is refused by the protocol layer, closing the socket (code 1009)
        ws_max_size=WS_FRAME_BOUND * settings.max_body_bytes,
        # no permessage-deflate: compressing every small ack took a tenth of the server's
        # time under pipelined writes (BENCHMARKS, "session 21")
        ws_per_message_deflate=False,
        # keepalive pings, but no peer is dropped for a pong that is late: a subscriber that
        # pauses is closed only as too slow (--subscriber-buffer), with its ``closed`` frame
        ws_ping_timeout=None,
        ws=_WebSocketProtocol,
        log_level="warning",
        timeout_graceful_shutdown=10,
    )
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal under the handler
    # it found; Python's default one would end the process with status 143. A requested stop
    # is a clean exit.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_cleanly)
    # a fresh install compiles the engine's kernels in a child process while this one serves
    warmer = start_background() if settings.warmup else None
    client_faults = _ClientFaults()
    logging.getLogger("uvicorn.error").addFilter(client_faults)
    # everything made so far (modules, the engine's types, the app) lives as long as the
    # process: out of the collector's sight, a full pass (a dropped view's, service.runtime)
    # costs what was made since, not 0.15 s more
    gc.freeze()
    try:
        _Server(config, app).run()
    finally:
        logging.getLogger("uvicorn.error").removeFilter(client_faults)
        if warmer is not None and warmer.poll() is None:
            warmer.terminate()
            warmer.wait()
        # the interpreter's last collection at exit walks every object left: out of its
        # sight, as the rest are, a stop no longer waits seconds after the server is done
        # (audit 100: 3 s of it, after a stop under pipelining writers)
        gc.freeze()


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    # the same options as ``difflow serve`` (and --help), not environment variables alone
    import typer

    from clients.cli import app as cli

    serve = typer.main.get_group(cli).commands["serve"]
    serve.main(args=sys.argv[1:], prog_name="python -m api.server")
