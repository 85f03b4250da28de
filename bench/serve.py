"""Service benchmark: the sliding-window workloads through the real server, and the same
updates on the bare engine in process, to price what the service adds.

Starts ``python -m api.server`` on a free port (a subprocess with its own data directory),
creates the tables and loads the initial data with columnar writes, registers the view, then
applies ``U`` sliding-window updates, each one write (one server time) that removes the
oldest row and inserts a new one. Views:

* ``reach``: seed 000's workload (:mod:`bench.workload`): ``roots(node)`` and
  ``edges(src, dst)``, the API.md reachability plan; update ``k`` removes edge ``k`` and
  inserts edge ``M + k``;
* ``count``: ``events(key int, value int)`` holding ``M`` rows over ``N`` keys, the view
  ``reduce by key: n = count, s = sum(value)``; the rows are the same stream as the edges
  (``key = src``, ``value = dst``, both uniform in ``[0, N)``), so update ``k`` removes row
  ``k`` and inserts row ``M + k``.

Modes (all closed over one connection):

* ``http``: one ``POST /v1/tables/{t}/updates`` per update, waiting for its 200;
* ``ws``: one WebSocket frame per update, waiting for its ack before sending the next;
* ``ws-pipelined``: a writer keeps up to ``--pipeline`` frames in flight (a sender and a
  receiver task; the server folds frames that arrive while it is busy into one step, each
  at its own time).

Every write's latency is recorded twice: the server's ``latency_ms`` (arrival to outputs
final) and the round trip the client observed (send to answer; with pipelining this
includes the time a frame waits behind earlier ones). The bare engine then runs the same
update sequence in this process (one logical time per update, closed loop: reach through
:class:`bench.reach.DifflowReach`, count through the equivalent engine dataflow), and
``service_over_engine`` is the service's time per update over the engine's. At the end the
view's rows (``GET /v1/views/{v}/rows``) are checked against a BFS (reach) or a recount
(count) of the final window.

Usage::

    python -m bench.serve --view reach --nodes 1000 --edges 2000 --updates 1000 --mode ws
    python -m bench.serve --view count --nodes 1000 --edges 2000 --updates 1000 \\
        --mode ws-pipelined --pipeline 1000
    python -m bench.serve --view reach --nodes 1000 --edges 2000 --updates 10000 \\
        --report "service: reach 1k/2k"

Progress goes to stderr; the last stdout line is one JSON object with the figures.
``--report SECTION`` runs every mode (or only ``--mode`` if given), each in a fresh process,
and writes SECTION of BENCHMARKS.md through :mod:`bench.report`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.workload import NUM_ROOTS, Workload

__all__ = [
    "MODES",
    "VIEWS",
    "ServerProcess",
    "count_plan",
    "main",
    "reach_plan",
    "run",
    "running_server",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
MODES = ("http", "ws", "ws-pipelined")
VIEWS = ("reach", "count")
LOAD_CHUNK = 250_000  # rows per columnar write of the initial data (limits: 64 MiB, 1M rows)
SERVER_START_S = 120.0
Log = Callable[[str], None]


def reach_plan() -> dict[str, Any]:
    """The reachability plan of API.md: ``(root, node)`` for every node a root reaches."""
    start = {
        "op": "select",
        "input": {"op": "table", "name": "roots"},
        "columns": {"root": "node", "node": "node"},
    }
    step = {
        "op": "join",
        "left": {"op": "var", "name": "reach"},
        "right": {"op": "table", "name": "edges"},
        "on": [["node", "src"]],
        "columns": {"root": "left.root", "node": "right.dst"},
    }
    return {
        "op": "iterate",
        "result": "reach",
        "vars": {"reach": start},
        "body": {"reach": {"op": "distinct", "input": {"op": "concat", "inputs": [start, step]}}},
    }


def count_plan() -> dict[str, Any]:
    """Rows and value sum per key of ``events``."""
    return {
        "op": "reduce",
        "input": {"op": "table", "name": "events"},
        "by": ["key"],
        "aggregates": {"n": {"fn": "count"}, "s": {"fn": "sum", "of": "value"}},
    }


# -- the server ---------------------------------------------------------------------------
@dataclass
class ServerProcess:
    """A running ``python -m api.server``: its URL, process, and the tail of its stderr."""

    url: str
    process: subprocess.Popen[str]
    stderr: list[str] = field(default_factory=list)

    def peak_rss_mib(self) -> float | None:
        """The server's peak resident set size (``VmHWM``), while it runs."""
        try:
            text = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return None
        m = re.search(r"^VmHWM:\s+(\d+)\s+kB", text, re.MULTILINE)
        return round(int(m.group(1)) / 1024, 1) if m else None


@contextmanager
def running_server(data_dir: Path, **settings: object) -> Iterator[ServerProcess]:
    """Start the real server on a free port (``DIFFLOW_<SETTING>`` for each setting), yield
    it once it listens, terminate it (SIGTERM, then SIGKILL after 20 s) on exit."""
    # no kernel warm-up process beside the server: it would take a core from what is measured
    env = {
        **os.environ,
        "DIFFLOW_PORT": "0",
        "DIFFLOW_DATA_DIR": str(data_dir),
        "DIFFLOW_WARMUP": "0",
    }
    env.update({f"DIFFLOW_{k.upper()}": str(v) for k, v in settings.items()})
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.server"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    stderr: list[str] = []

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            stderr.append(line)
            del stderr[:-200]

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    url = None
    deadline = time.monotonic() + SERVER_START_S
    while url is None and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"(http://\S+)", line)
        url = m.group(1) if m else None
    try:
        if url is None:
            proc.kill()
            proc.wait()
            drainer.join(timeout=5)
            raise RuntimeError(f"the server did not start: {''.join(stderr[-20:])}")
        yield ServerProcess(url, proc, stderr)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        drainer.join(timeout=5)
        proc.stdout.close()
        proc.stderr.close()


# -- the workloads ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Spec:
    """What a view's benchmark writes: the updated table and its two columns."""

    view: str
    table: str
    columns: tuple[str, str]


SPECS = {
    "reach": Spec("reach", "edges", ("src", "dst")),
    "count": Spec("count", "events", ("key", "value")),
}


def update_bodies(spec: Spec, w: Workload, updates: int) -> list[dict[str, Any]]:
    """Write bodies of updates ``0 .. updates-1``: remove row ``k``, insert row ``M + k``."""
    gone, new = w.removed_edges(0, updates), w.update_edges(0, updates)
    a, b = spec.columns
    return [
        {"columns": {a: [g0, n0], b: [g1, n1]}, "diff": [-1, 1]}
        for (g0, g1), (n0, n1) in zip(gone.tolist(), new.tolist(), strict=True)
    ]


def create_and_load(client: Any, spec: Spec, w: Workload) -> None:
    """Create the tables and write the initial data (columnar writes of at most 250k rows)."""
    a, b = spec.columns
    if spec.view == "reach":
        client.create_table("roots", {"node": "int"})
        client.write("roots", columns={"node": w.roots()})
    client.create_table(spec.table, {a: "int", b: "int"})
    init = w.initial_edges()
    for lo in range(0, init.shape[0], LOAD_CHUNK):
        part = init[lo : lo + LOAD_CHUNK]
        columns = {a: np.ascontiguousarray(part[:, 0]), b: np.ascontiguousarray(part[:, 1])}
        client.write(spec.table, columns=columns)


# -- the three ways to write --------------------------------------------------------------
@dataclass
class Timings:
    """Per-write latencies (ms): the server's and the client's; wall time of the phase."""

    server_ms: np.ndarray
    client_ms: np.ndarray
    seconds: float
    last_time: int | None


def _check_answer(answer: Mapping[str, Any], k: int, frame_id: bool) -> None:
    if frame_id and answer.get("id") != k:
        raise RuntimeError(f"ack {answer.get('id')!r} arrived where ack {k} was expected")
    if answer.get("status") != "done":
        raise RuntimeError(f"write {k} answered {answer!r:.300}")


def _last_time(answer: Mapping[str, Any]) -> int | None:
    times = answer.get("times") or []
    return int(max(times)) if times else None


def run_http(url: str, table: str, bodies: list[dict[str, Any]], log: Log) -> Timings:
    """Closed loop over HTTP: one request per write, each waiting for its 200."""
    from clients import Client

    n = len(bodies)
    server, client = np.zeros(n), np.zeros(n)
    answer: dict[str, Any] = {}
    with Client(url, timeout=None) as c:
        t_start = time.perf_counter()
        progress = Progress(log, n)
        for k, body in enumerate(bodies):
            t0 = time.perf_counter()
            answer = c.write(table, columns=body["columns"], diff=body["diff"])
            client[k] = time.perf_counter() - t0
            _check_answer(answer, k, False)
            server[k] = answer["latency_ms"]
            progress(k + 1)
        seconds = time.perf_counter() - t_start
    return Timings(server, client * 1e3, seconds, _last_time(answer))


def run_ws(url: str, table: str, bodies: list[dict[str, Any]], log: Log) -> Timings:
    """Closed loop over one WebSocket: send a frame, wait for its ack, repeat."""
    from clients import Client

    n = len(bodies)
    server, client = np.zeros(n), np.zeros(n)
    answer: dict[str, Any] = {}
    with Client(url, timeout=None) as c, c.ws_writer(table) as writer:
        t_start = time.perf_counter()
        progress = Progress(log, n)
        for k, body in enumerate(bodies):
            t0 = time.perf_counter()
            writer.send(body, id=k)
            answer = writer.recv()
            client[k] = time.perf_counter() - t0
            _check_answer(answer, k, True)
            server[k] = answer["latency_ms"]
            progress(k + 1)
        seconds = time.perf_counter() - t_start
    return Timings(server, client * 1e3, seconds, _last_time(answer))


def run_ws_pipelined(
    url: str,
    table: str,
    bodies: list[dict[str, Any]],
    pipeline: int,
    log: Log,
) -> Timings:
    """Up to ``pipeline`` frames in flight on one WebSocket: a sender task that waits for
    room in the window, a receiver task that reads acks in order and makes room."""
    from clients import AsyncClient

    if pipeline < 1:
        raise ValueError("--pipeline must be at least 1")
    n = len(bodies)
    server, sent, acked = np.zeros(n), np.zeros(n), np.zeros(n)
    last: dict[str, Any] = {}
    progress = Progress(log, n)

    async def go() -> float:
        room = asyncio.Semaphore(pipeline)
        in_flight = asyncio.Semaphore(0)  # frames sent and not yet received
        async with AsyncClient(url, timeout=None) as c, c.ws_writer(table) as writer:

            async def sender() -> None:
                for k, body in enumerate(bodies):
                    await room.acquire()
                    sent[k] = time.perf_counter()
                    await writer.send(body, id=k)
                    in_flight.release()

            async def receiver() -> None:
                for k in range(n):
                    await in_flight.acquire()
                    answer = await writer.recv()
                    acked[k] = time.perf_counter()
                    room.release()
                    _check_answer(answer, k, True)
                    server[k] = answer["latency_ms"]
                    if k == n - 1:
                        last.update(answer)
                    progress(k + 1)

            t_start = time.perf_counter()
            progress.start = progress.last = t_start
            send_task = asyncio.create_task(sender())
            try:
                await receiver()
            finally:
                if not send_task.done():
                    send_task.cancel()
                await asyncio.gather(send_task, return_exceptions=True)
            return time.perf_counter() - t_start

    seconds = asyncio.run(go())
    return Timings(server, (acked - sent) * 1e3, seconds, _last_time(last))


class Progress:
    """Logs ``done/total writes`` at most every 2 s, and at the end."""

    def __init__(self, log: Callable[[str], None], total: int) -> None:
        self.log = log
        self.total = total
        self.start = time.perf_counter()
        self.last = self.start

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if now - self.last >= 2.0 or done == self.total:
            self.last = now
            elapsed = now - self.start
            if elapsed > 0:
                self.log(f"{done}/{self.total} writes, {done / elapsed:.1f} writes/s")


# -- verification -------------------------------------------------------------------------
def verify_rows(view: str, rows: dict[str, Any], w: Workload, updates: int) -> str | None:
    """None if the view's rows are right for the window after ``updates`` updates, else
    what is wrong."""
    from bench.reach import reachable

    data = rows["rows"]
    counts = [r["count"] for r in data]
    if any(c != 1 for c in counts):
        return f"a row with count other than 1: {next(r for r in data if r['count'] != 1)}"
    window = w.window(updates)
    if view == "reach":
        roots = w.roots()
        got = np.zeros((NUM_ROOTS, w.nodes), dtype=bool)
        for r in data:
            i = int(np.searchsorted(roots, r["data"]["root"]))
            if i >= NUM_ROOTS or roots[i] != r["data"]["root"] or got[i, r["data"]["node"]]:
                return f"unexpected or repeated row {r['data']}"
            got[i, r["data"]["node"]] = True
        truth = reachable(w.nodes, window, roots)
        if not np.array_equal(got, truth):
            bad = np.argwhere(got != truth)
            i, v = bad[0]
            return (
                f"{bad.shape[0]} (root, node) pairs differ from BFS, e.g. root "
                f"{int(roots[i])} node {int(v)}: view {bool(got[i, v])}, BFS {bool(truth[i, v])}"
            )
        return None
    n = np.bincount(window[:, 0], minlength=w.nodes)
    s = np.bincount(window[:, 0], weights=window[:, 1], minlength=w.nodes).astype(np.int64)
    expected = {k: (int(n[k]), int(s[k])) for k in np.flatnonzero(n).tolist()}
    got_counts: dict[int, tuple[int, int]] = {}
    for r in data:
        d = r["data"]
        if d["key"] in got_counts:
            return f"key {d['key']} appears twice"
        got_counts[d["key"]] = (d["n"], d["s"])
    if got_counts != expected:
        diff = sorted(set(got_counts.items()) ^ set(expected.items()))[:3]
        return f"{len(set(got_counts.items()) ^ set(expected.items()))} differences, e.g. {diff}"
    return None


# -- the bare engine ----------------------------------------------------------------------
class EngineCount:
    """The count view as an engine dataflow: ``reduce(by=key, n=count, s=sum(value))``."""

    def __init__(self, w: Workload) -> None:
        from engine import Graph

        self.w = w
        self.graph = Graph()
        self.events_in, events = self.graph.new_input(
            [("key", "int"), ("value", "int")], name="events"
        )
        agg = events.reduce(["key"], {"n": ("count", None), "s": ("sum", "value")})
        self.capture = agg.capture()

    def _step_until(self, t: int) -> None:
        while True:
            self.graph.step()
            upper = self.capture.upper
            if upper.is_empty or not upper.less_equal_time(np.array([t], dtype=np.int64)):
                return

    def load(self) -> None:
        e = self.w.initial_edges()
        self.events_in.send_columns([e[:, 0], e[:, 1]], 0, 1)
        self.events_in.advance_to(1)
        self._step_until(0)
        self.capture.drain()

    def apply(self, k0: int, k1: int) -> None:
        times = np.arange(k0 + 1, k1 + 1, dtype=np.int64)
        gone, new = self.w.removed_edges(k0, k1), self.w.update_edges(k0, k1)
        self.events_in.send_columns([gone[:, 0], gone[:, 1]], times, -1)
        self.events_in.send_columns([new[:, 0], new[:, 1]], times, 1)
        self.events_in.advance_to(k1 + 1)
        self._step_until(k1)
        self.capture.drain()


def run_engine(view: str, w: Workload, updates: int, log: Callable[[str], None]) -> dict[str, Any]:
    """The same updates on the bare engine, one time each, closed loop (after a tiny
    warm-up run, so that compiling the engine's kernels is not timed: the server compiled
    its own while loading)."""
    from bench.reach import DifflowReach

    def make(wl: Workload) -> Any:
        return DifflowReach(wl) if view == "reach" else EngineCount(wl)

    warm = make(Workload(max(NUM_ROOTS, 50), 100, w.seed + 1))
    warm.load()
    for k in range(5):
        warm.apply(k, k + 1)
    del warm
    eng = make(w)
    t0 = time.perf_counter()
    eng.load()
    load_s = time.perf_counter() - t0
    lat = np.zeros(updates)
    for k in range(updates):
        w.update_edges(k, k + 1)  # generated outside the timed region
        w.removed_edges(k, k + 1)
        t = time.perf_counter()
        eng.apply(k, k + 1)
        lat[k] = time.perf_counter() - t
    seconds = float(lat.sum())
    log(f"engine: load {load_s:.3f}s, {updates} updates in {seconds:.3f}s")
    return {
        "engine_updates_per_s": round(updates / seconds, 2) if seconds > 0 else None,
        "engine_latency_ms": _quantiles(lat * 1e3),
        "engine_load_s": round(load_s, 6),
    }


# -- the run ------------------------------------------------------------------------------
def _quantiles(ms: np.ndarray) -> dict[str, float | None]:
    """p50, p99 and max of latencies in ms (None for no samples)."""
    out: dict[str, float | None] = {"p50": None, "p99": None, "max": None}
    if ms.size:
        out = {q: round(float(np.percentile(ms, p)), 4) for q, p in (("p50", 50), ("p99", 99))}
        out["max"] = round(float(ms.max()), 4)
    return out


def peak_rss_mib() -> float:
    """Peak resident set size of this process (MiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run(
    view: str,
    nodes: int,
    edges: int,
    updates: int,
    mode: str = "http",
    pipeline: int = 1000,
    seed: int = 0,
    engine: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the benchmark and return the figures (the JSON object of the command line)."""
    if view not in SPECS:
        raise ValueError(f"unknown view {view!r}; use one of {VIEWS}")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES}")
    spec = SPECS[view]
    w = Workload(nodes, edges, seed)

    def log(msg: str) -> None:
        if progress and msg:
            print(f"[serve {view} {mode}] {msg}", file=sys.stderr, flush=True)

    bodies = update_bodies(spec, w, updates)
    from clients import Client

    with (
        tempfile.TemporaryDirectory(prefix="difflow-bench-") as tmp,
        running_server(Path(tmp)) as srv,
    ):
        log(f"server at {srv.url}")
        with Client(srv.url, timeout=None) as c:
            t0 = time.perf_counter()
            create_and_load(c, spec, w)
            t1 = time.perf_counter()
            c.create_view(view, reach_plan() if view == "reach" else count_plan())
            t2 = time.perf_counter()
        log(f"loaded {edges} rows in {t1 - t0:.3f}s, view registered in {t2 - t1:.3f}s")
        if mode == "http":
            tm = run_http(srv.url, spec.table, bodies, log)
        elif mode == "ws":
            tm = run_ws(srv.url, spec.table, bodies, log)
        else:
            tm = run_ws_pipelined(srv.url, spec.table, bodies, pipeline, log)
        with Client(srv.url, timeout=None) as c:
            rows = c.rows(view)
        problem = None
        if tm.last_time is not None and rows["time"] < tm.last_time:
            problem = f"rows at time {rows['time']}, before the last write's {tm.last_time}"
        problem = problem or verify_rows(view, rows, w, updates)
        if problem:
            log(f"WRONG: {problem}")
        rss = srv.peak_rss_mib()
    result: dict[str, Any] = {
        "view": view,
        "mode": mode,
        "nodes": nodes,
        "edges": edges,
        "updates": updates,
        "seed": seed,
        "pipeline": pipeline if mode == "ws-pipelined" else None,
        "seconds": round(tm.seconds, 6),
        "updates_per_s": round(updates / tm.seconds, 2) if tm.seconds > 0 else None,
        "latency_ms": _quantiles(tm.client_ms),
        "server_latency_ms": _quantiles(tm.server_ms),
        "load_s": round(t2 - t0, 6),
        "view_s": round(t2 - t1, 6),
        "rss_mib": rss,
        "verified": problem is None,
    }
    log(
        f"service: {result['updates_per_s']} updates/s, client latency {result['latency_ms']}, "
        f"server latency {result['server_latency_ms']}, verified {result['verified']}"
    )
    if engine:
        result.update(run_engine(view, w, updates, log))
        eps, ups = result["engine_updates_per_s"], result["updates_per_s"]
        result["service_over_engine"] = round(eps / ups, 3) if eps and ups else None
    else:
        result.update(
            engine_updates_per_s=None,
            engine_latency_ms=None,
            engine_load_s=None,
            service_over_engine=None,
        )
    result["client_rss_mib"] = peak_rss_mib()
    return result


# -- report -------------------------------------------------------------------------------
def report_rows(results: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """Table rows (service vs bare engine) for the results of each mode."""
    from bench.report import Row

    rows: list[Row] = []
    for mode, r in results.items():
        el = r.get("engine_latency_ms") or {}
        rows.append(
            Row(
                f"{mode}: throughput",
                r.get("updates_per_s"),
                r.get("engine_updates_per_s"),
                True,
                "updates/s",
            )
        )
        for q in ("p50", "p99"):
            rows.append(
                Row(f"{mode}: latency {q}, client", r["latency_ms"][q], el.get(q), False, "ms")
            )
        for q in ("p50", "p99"):
            rows.append(
                Row(
                    f"{mode}: latency {q}, server",
                    r["server_latency_ms"][q],
                    el.get(q),
                    False,
                    "ms",
                )
            )
    first = next(iter(results.values()))
    rows.append(
        Row("initial load + view", first.get("load_s"), first.get("engine_load_s"), False, "s")
    )
    rows.append(Row("server peak RSS", first.get("rss_mib"), None, False, "MiB"))
    return rows


def write_report(
    section: str,
    results: Mapping[str, Mapping[str, Any]],
    command: str,
    path: Path | None = None,
) -> Path:
    """Write SECTION of BENCHMARKS.md for the results of each mode (same arguments)."""
    from bench import report

    first = next(iter(results.values()))
    what = (
        "sliding-window reachability (seed 000; the API.md plan over `roots`/`edges`)"
        if first["view"] == "reach"
        else "a count and sum per key (`reduce by key`) over `events(key, value)`"
    )
    verified = ", ".join(f"{m} {'yes' if r.get('verified') else 'NO'}" for m, r in results.items())
    pipe = next((r["pipeline"] for r in results.values() if r.get("pipeline")), None)
    text = (
        f"The service (`python -m api.server`, a subprocess; client and server on one machine) "
        f"maintaining {what}: {first['nodes']:,} nodes/keys, {first['edges']:,} rows, seed "
        f"{first.get('seed', 0)}; {first['updates']:,} updates, each one write (one server time) "
        f"removing the oldest row and inserting a new one. Modes: `http` one request per "
        f"write, closed loop; `ws` one frame per write over one WebSocket, closed loop; "
        f"`ws-pipelined` up to {pipe or 'n/a'} frames in flight. Client latency is send to "
        f"answer as the client saw it; server latency is the answer's `latency_ms` (arrival "
        f"to outputs final). Baseline: the same updates on the bare engine in process, one "
        f"logical time per update, closed loop (its per-update latency beside both). The "
        f"service ÷ engine time per update: "
        + ", ".join(
            f"{m} {r['service_over_engine']}x"
            for m, r in results.items()
            if r.get("service_over_engine")
        )
        + f". Rows verified against {'BFS' if first['view'] == 'reach' else 'a recount'}: "
        f"{verified}."
    )
    table = report.render_table(report_rows(results), name="service", baseline="bare engine")
    body = report.render_section(section, table, command, None, text)
    return report.write_section(section, body, path)


# -- command line -------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.serve", description=__doc__.split("\n")[0])
    p.add_argument("--view", choices=VIEWS, required=True)
    p.add_argument("--nodes", type=int, required=True, help="nodes (reach) or keys (count) N")
    p.add_argument("--edges", type=int, required=True, help="window width M (edges or rows)")
    p.add_argument("--updates", type=int, required=True, help="number of updates U")
    p.add_argument("--mode", choices=MODES, default=None, help="default http (--report: all)")
    p.add_argument("--pipeline", type=int, default=1000, help="frames in flight (ws-pipelined)")
    p.add_argument("--seed", type=int, default=0, help="workload seed")
    p.add_argument("--no-engine", action="store_true", help="skip the bare-engine run")
    p.add_argument(
        "--report",
        metavar="SECTION",
        help="run every mode (or --mode) and write SECTION of BENCHMARKS.md",
    )
    p.add_argument("--report-file", type=Path, default=None, help="default: BENCHMARKS.md")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _strip(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    out, drop = [], False
    for a in argv:
        if drop:
            drop = False
        elif a in flags:
            drop = True
        elif not a.startswith(tuple(f + "=" for f in flags)):
            out.append(a)
    return out


def _run_child(argv: list[str]) -> dict[str, Any]:
    """One mode in a fresh interpreter; its JSON line."""
    cmd = [sys.executable, "-m", "bench.serve", *argv]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False, cwd=REPO_ROOT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"{shlex.join(cmd)} exited with {proc.returncode} and no figures")
    return dict(json.loads(lines[-1]))


def main(
    argv: list[str] | None = None, runner: Callable[[list[str]], dict[str, Any]] | None = None
) -> int:
    """The command line; ``runner`` (tests) replaces the child process of each mode."""
    argv = list(sys.argv[1:] if argv is None else argv)
    a = _parser().parse_args(argv)
    if a.report:
        child = _strip(argv, ("--report", "--report-file", "--mode"))
        modes = [a.mode] if a.mode else list(MODES)
        results: dict[str, dict[str, Any]] = {}
        for i, mode in enumerate(modes):
            child_argv = [*child, "--mode", mode, *(["--no-engine"] if i else [])]
            results[mode] = (runner or _run_child)(child_argv)
        first = results[modes[0]]
        for r in results.values():  # the engine ran once, in the first child
            for k in ("engine_updates_per_s", "engine_latency_ms", "engine_load_s"):
                r[k] = first.get(k)
            eps, ups = r.get("engine_updates_per_s"), r.get("updates_per_s")
            r["service_over_engine"] = round(eps / ups, 3) if eps and ups else None
        path = write_report(a.report, results, _command_line(argv), a.report_file)
        print(f"wrote section {a.report!r} of {path}", file=sys.stderr)
        print(json.dumps({"section": a.report, "file": str(path), "results": results}))
        return 0 if all(r.get("verified") for r in results.values()) else 1
    result = run(
        a.view,
        a.nodes,
        a.edges,
        a.updates,
        a.mode or "http",
        a.pipeline,
        a.seed,
        engine=not a.no_engine,
        progress=not a.quiet,
    )
    print(json.dumps(result))
    return 0 if result["verified"] else 1


def _command_line(argv: list[str]) -> str:
    from bench import report

    return report.command("bench.serve", argv)


if __name__ == "__main__":
    sys.exit(main())
