"""A real difflow server for tests: ``python -m api.server`` on a free port, in a subprocess
(``running_server``), or an app served by uvicorn in a thread of the test's process
(``serving_in_thread``), where the test can patch what the server runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.service.contract import Contract

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    stderr: list[str]
    contract: Contract | None = None

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://")

    def client(self, timeout: float = 60.0) -> httpx.Client:
        """A client whose every answer is checked against ``/openapi.json``."""
        if self.contract is None:
            self.contract = Contract(self.url)
        return httpx.Client(
            base_url=self.url, timeout=timeout, event_hooks={"response": [self.contract.hook()]}
        )


@contextmanager
def running_server(tmp: Path, **settings: object) -> Iterator[Server]:
    # no kernel warm-up child (tests/service/test_warmup.py covers it): tests share one cache
    env = {**os.environ, "DIFFLOW_PORT": "0", "DIFFLOW_DATA_DIR": str(tmp), "DIFFLOW_WARMUP": "0"}
    for k, v in settings.items():
        env[f"DIFFLOW_{k.upper()}"] = str(v)
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.server"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    match = re.search(r"(http://\S+)", line)
    if match is None:
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r} {proc.stderr.read()}")
    stderr: list[str] = []
    drain = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    try:
        yield Server(match.group(1), proc, stderr)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        drain.join(timeout=5)
        proc.stdout.close()
        proc.stderr.close()


@contextmanager
def serving_in_thread(app: Any, **config: Any) -> Iterator[int]:
    """``app`` served by uvicorn on a free port, in a thread of this process (``config``: more
    of ``uvicorn.Config``'s settings); yields the port. The server stops on exit."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", **config)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if server.started:
                break
            time.sleep(0.05)
        assert server.started, "the server started"
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30)
