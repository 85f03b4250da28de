"""Running the server: uvicorn with difflow's settings; prints its URL once it listens.

``--port 0`` picks a free port; the printed line (``difflow listening on http://...``) is how
tests and scripts learn it. SIGTERM and Ctrl-C shut down gracefully (subscribers get a
``closed`` frame).
"""

from __future__ import annotations

import logging
import sys

import uvicorn

from api.app import create_app
from service.settings import Settings

__all__ = ["main"]


class _Server(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[no-untyped-def]
        await super().startup(sockets)
        if self.should_exit:
            return
        host, port = self.config.host, self.config.port
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                port = sock.getsockname()[1]
                break
        print(f"difflow listening on http://{host}:{port}", flush=True)


def main(
    host: str | None = None,
    port: int | None = None,
    data_dir: str | None = None,
    max_body_mb: int | None = None,
    max_batch: int | None = None,
    subscriber_buffer: int | None = None,
    heartbeat_s: float | None = None,
    history: int | None = None,
) -> None:
    settings = Settings.from_env(
        host=host,
        port=port,
        data_dir=data_dir,
        max_body_mb=max_body_mb,
        max_batch=max_batch,
        subscriber_buffer=subscriber_buffer,
        heartbeat_s=heartbeat_s,
        history=history,
    )
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        ws_max_size=settings.max_body_bytes,
        log_level="warning",
        timeout_graceful_shutdown=10,
    )
    _Server(config).run()


if __name__ == "__main__":
    main()
