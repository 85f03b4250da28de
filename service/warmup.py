"""Compiling the engine's kernels before users need them.

numba compiles each kernel on its first call and keeps it on disk (``engine.jit_cache``); a
fresh install has none, and its first writes wait while dozens of kernels compile (100 s
for reachability on a slow 2-core machine). :func:`warm` runs a fixed workload through the
whole service (a real server on a loopback port, in process): tables of every column type,
server- and client-timed, one and two time dimensions; views of every plan node and
aggregate; single writes, bulk writes and batches of many distinct times, long enough that
traces merge and compact. Every kernel those paths call is then on disk, so later servers
load it instead of compiling it.

``difflow serve`` starts :func:`start_background` (unless ``--no-warmup``): a child process,
at low priority, running this module, while the server answers at once; it ends with the
server, also when the server is killed. Kernels the child
has written by the time a request needs them load from disk; the others the server compiles
itself, as without it. A marker file records a finished warm-up of these sources (by their
content, as numba checks its kernels: checkouts of the same sources share both, see
``engine.jit_cache``), and a lock
keeps concurrent servers to one child, which writes its errors to ``warmup.log`` beside the
marker. ``difflow warmup`` runs it in the foreground, e.g. in a Docker build.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from engine import jit_cache
from service.errors import WarmupError

__all__ = ["is_warm", "marker_path", "start_background", "warm"]

_SERVICE = Path(__file__).resolve().parent
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def marker_path() -> Path:
    """The file that says a warm-up of these sources has finished: in the engine's cache
    directory (``engine.jit_cache``), named for the service's sources, whose kernels it
    compiles too."""
    service = jit_cache.source_digest(_SERVICE)
    return jit_cache.cache_dir(jit_cache.source_digest()) / f"warm-{service}"


def is_warm() -> bool:
    return marker_path().exists()


@contextlib.contextmanager
def _lock() -> Iterator[bool]:
    """Whether this process holds the warm-up lock (taken without waiting)."""
    path = marker_path().with_name("warmup.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a")  # noqa: SIM115 (held for the with block)
    except OSError:
        yield False
        return
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True


def start_background() -> subprocess.Popen | None:
    """Start the warm-up in a child process at low priority, unless the kernels are warm
    already. Returns the child (the caller stops it on shutdown), or None."""
    if is_warm():
        return None
    log = marker_path().with_name("warmup.log")
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        err = open(log, "w")  # noqa: SIM115 (the child's stderr; closed here once it has it)
    except OSError:  # no writable cache: numba compiles each kernel on first use instead
        return None
    with err:
        child = subprocess.Popen(
            [sys.executable, "-m", "service.warmup", "--background", str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    # reaped as soon as it ends, not left a zombie until the server stops
    threading.Thread(target=child.wait, name="warmup-reaper", daemon=True).start()
    return child


def warm(quiet: bool = False) -> dict[str, Any]:
    """Run the warm-up workload (unless another process is running it) and write the
    marker. Returns ``{"ran", "seconds"}``."""
    t0 = time.perf_counter()
    with _lock() as mine:
        if not mine:
            return {"ran": False, "seconds": 0.0}
        with tempfile.TemporaryDirectory(prefix="difflow-warmup-") as tmp:
            _workload(Path(tmp), quiet)
        marker = marker_path()
        with contextlib.suppress(OSError):
            marker.write_text(f"{time.time()}\n")
    return {"ran": True, "seconds": round(time.perf_counter() - t0, 3)}


# -- the workload ---------------------------------------------------------------------------
def _workload(data_dir: Path, quiet: bool) -> None:
    import httpx
    import uvicorn

    from api.app import create_app
    from service.settings import Settings

    app = create_app(Settings(data_dir=data_dir, history=50))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, name="warmup-server", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise WarmupError("the warm-up server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=None) as http:

            def call(method: str, url: str, body: Any = None, ok: int = 200) -> Any:
                r = http.request(method, url, json=body)
                if r.status_code != ok and not (ok == 200 and r.status_code == 202):
                    raise WarmupError(f"{method} {url}: {r.status_code} {r.text[:500]}")
                if not quiet:
                    print(f"warmup: {method} {url} {r.status_code}", file=sys.stderr, flush=True)
                return r.json() if r.content else None

            _reach(call)
            _relational(call)
            _two_dims(call)
    finally:
        server.should_exit = True
        thread.join()


def _table(call: Any, name: str, columns: dict[str, str], **extra: Any) -> None:
    cols = [{"name": c, "type": t} for c, t in columns.items()]
    call("POST", "/v1/tables", {"name": name, "columns": cols, **extra}, 201)


def _view(call: Any, name: str, query: dict) -> None:
    call("POST", "/v1/views", {"name": name, "query": query}, 201)


def _t(name: str) -> dict:
    return {"op": "table", "name": name}


def _reach(call: Any) -> None:
    """Reachability on client-timed edges: a load, then batches of 1, 10, 100 and 1,000
    updates at distinct times (the big steps take the packed and two-thread paths)."""
    nodes, edges = 1000, 2000
    _table(call, "w_roots", {"node": "int"}, timing="client")
    _table(call, "w_edges", {"src": "int", "dst": "int"}, timing="client")
    start = {"op": "select", "input": _t("w_roots"), "columns": {"root": "node", "node": "node"}}
    step = {
        "op": "join",
        "left": {"op": "var", "name": "reach"},
        "right": _t("w_edges"),
        "on": [["node", "src"]],
        "columns": {"root": "left.root", "node": "right.dst"},
    }
    body = {"op": "distinct", "input": {"op": "concat", "inputs": [start, step]}}
    plan = {"op": "iterate", "vars": {"reach": start}, "body": {"reach": body}, "result": "reach"}
    _view(call, "w_reach", plan)
    _view(
        call,
        "w_reach_count",
        {
            "op": "reduce",
            "input": {"op": "view", "name": "w_reach"},
            "by": ["root"],
            "aggregates": {"n": {"fn": "count"}},
        },
    )
    rng = np.random.default_rng(0)
    e = rng.integers(0, nodes, size=(edges, 2))
    roots = [int(x) for x in rng.choice(nodes, size=10, replace=False)]
    call(
        "POST",
        "/v1/tables/w_roots/updates",
        {"columns": {"node": roots}, "time": 0, "advance_to": 1},
    )
    call(
        "POST",
        "/v1/tables/w_edges/updates",
        {"columns": {"src": e[:, 0].tolist(), "dst": e[:, 1].tolist()}, "time": 0, "advance_to": 1},
    )
    t = 1
    for batch in (1, 1, 10, 100, 1000, 1000, 1):  # the oldest edges go, new ones come
        new = rng.integers(0, nodes, size=(batch, 2))
        gone = e[:batch]
        times = list(range(t, t + batch))
        call(
            "POST",
            "/v1/tables/w_edges/updates",
            {
                "columns": {
                    "src": gone[:, 0].tolist() + new[:, 0].tolist(),
                    "dst": gone[:, 1].tolist() + new[:, 1].tolist(),
                },
                "diff": [-1] * batch + [1] * batch,
                "time": times + times,
                "advance_to": t + batch,
            },
        )
        call("POST", "/v1/tables/w_roots/updates", {"updates": [], "advance_to": t + batch})
        e = np.concatenate([e[batch:], new])
        t += batch
    # wide values: node ids near 2**40 and times 2**36 apart, too wide for the packed sorts
    # and merges, so their general paths compile too
    wide = 1 << 40
    src = rng.integers(0, nodes, size=200).tolist() + (wide + np.arange(200)).tolist()
    dst = (wide + np.arange(200)).tolist() + (wide + np.arange(1, 201)).tolist()
    times = [t + (i << 36) for i in range(200)]
    call(
        "POST",
        "/v1/tables/w_edges/updates",
        {"columns": {"src": src, "dst": dst}, "time": times + times, "advance_to": times[-1] + 1},
    )
    call("POST", "/v1/tables/w_roots/updates", {"updates": [], "advance_to": times[-1] + 1})
    t = times[-1] + 1
    call("GET", "/v1/views/w_reach/rows")
    call("GET", f"/v1/views/w_reach_count/rows?as_of={t - 2}")


def _relational(call: Any) -> None:
    """Every other node and aggregate over every column type, on server-timed tables
    (one with a primary key): row writes, upserts, deletes and a bulk write."""
    people = {
        "id": "int",
        "name": "string",
        "city": "string",
        "age": "int",
        "score": "float",
        "active": "bool",
    }
    _table(call, "w_people", people, primary_key=["id"])
    _table(call, "w_cities", {"city": "string", "country": "string"})
    p, c = _t("w_people"), _t("w_cities")
    views: dict[str, dict] = {
        "w_agg": {
            "op": "reduce",
            "input": p,
            "by": ["city"],
            "aggregates": {
                "n": {"fn": "count"},
                "ages": {"fn": "sum", "of": "age"},
                "low": {"fn": "min", "of": "score"},
                "high": {"fn": "max", "of": "name"},
                "names": {"fn": "count_distinct", "of": "name"},
                "scores": {"fn": "sum", "of": "score"},
                "oldest": {"fn": "max", "of": "age"},
                "first": {"fn": "min", "of": "active"},
            },
        },
        "w_all": {"op": "reduce", "input": p, "by": [], "aggregates": {"n": {"fn": "count"}}},
        "w_top": {
            "op": "top_k",
            "input": p,
            "by": ["city"],
            "order_by": [{"col": "score", "desc": True}, {"col": "name"}],
            "k": 2,
        },
        "w_top_all": {"op": "top_k", "input": p, "by": [], "order_by": [{"col": "age"}], "k": 3},
        "w_many": {
            "op": "threshold",
            "at_least": 2,
            "input": {"op": "select", "input": p, "columns": {"city": "city"}},
        },
        "w_calc": {
            "op": "filter",
            "where": {"fn": "gt", "args": ["age", 20]},
            "input": {
                "op": "select",
                "input": p,
                "columns": {
                    "id": "id",
                    "low": {"fn": "lower", "args": ["name"]},
                    "tag": {"fn": "concat", "args": ["city", {"lit": "-"}, "name"]},
                    "h": {"fn": "hash", "args": ["id", "name"]},
                    "f": {"fn": "cast", "args": ["age"], "to": "float"},
                    "q": {"fn": "div", "args": ["age", 7]},
                    "m": {"fn": "mod", "args": ["age", 7]},
                    "a": {"fn": "if", "args": ["active", {"fn": "abs", "args": ["score"]}, 0.5]},
                    "age": "age",
                },
            },
        },
        "w_ages": {
            "op": "flat_map",
            "input": p,
            "as": "year",
            "start": 0,
            "stop": {"fn": "mod", "args": ["age", 5]},
        },
        "w_join": {"op": "join", "left": p, "right": c, "on": [["city", "city"]]},
        "w_join_cols": {
            "op": "join",
            "left": p,
            "right": c,
            "on": [["city", "city"]],
            "columns": {"name": "left.name", "country": "right.country"},
        },
        "w_semi": {"op": "join", "how": "semi", "left": p, "right": c, "on": [["city", "city"]]},
        "w_anti": {"op": "join", "how": "anti", "left": p, "right": c, "on": [["city", "city"]]},
        "w_set": {
            "op": "distinct",
            "input": {
                "op": "concat",
                "inputs": [
                    {"op": "select", "input": p, "columns": {"city": "city"}},
                    {
                        "op": "negate",
                        "input": {"op": "select", "input": c, "columns": {"city": "city"}},
                    },
                ],
            },
        },
    }
    for name, plan in views.items():
        _view(call, name, plan)
    cities = ["ams", "ber", "cph", "dub", "edi", "fra", "gva", "hel"]
    call(
        "POST",
        "/v1/tables/w_cities/updates",
        {"updates": [{"insert": {"city": x, "country": x.upper()}} for x in cities[:6]]},
    )
    rng = np.random.default_rng(1)

    def person(i: int) -> dict:
        return {
            "id": i,
            "name": f"n{int(rng.integers(0, 50))}",
            "city": cities[int(rng.integers(0, len(cities)))],
            "age": int(rng.integers(0, 90)),
            "score": float(rng.random()),
            "active": bool(rng.integers(0, 2)),
        }

    current = {i: person(i) for i in range(3000)}
    for i in range(5):
        call("POST", "/v1/tables/w_people/updates", {"updates": [{"insert": current[i]}]})
    cols = {k: [current[i][k] for i in range(5, 3000)] for k in people}
    call("POST", "/v1/tables/w_people/updates", {"columns": cols})
    for i in range(0, 40, 3):
        current[i] = person(i)
        gone = current.pop(i + 1000)
        call(
            "POST",
            "/v1/tables/w_people/updates",
            {"updates": [{"upsert": current[i]}, {"delete": gone}]},
        )
    for name in views:
        call("GET", f"/v1/views/{name}/rows")


def _two_dims(call: Any) -> None:
    """Client-timed tables with two time dimensions (product order): a reduce and an
    iterate over writes at incomparable times, with antichain frontiers."""
    _table(call, "w_pairs", {"a": "int", "b": "int"}, timing="client", time_dims=2)
    p = _t("w_pairs")
    step = {
        "op": "join",
        "left": {"op": "var", "name": "cl"},
        "right": p,
        "on": [["b", "a"]],
        "columns": {"a": "left.a", "b": "right.b"},
    }
    body = {"op": "distinct", "input": {"op": "concat", "inputs": [p, step]}}
    _view(
        call,
        "w_closure",
        {"op": "iterate", "vars": {"cl": p}, "body": {"cl": body}, "result": "cl"},
    )
    _view(
        call,
        "w_degree",
        {
            "op": "reduce",
            "input": p,
            "by": ["a"],
            "aggregates": {"n": {"fn": "count"}, "m": {"fn": "max", "of": "b"}},
        },
    )
    rng = np.random.default_rng(2)
    live: list[list[int]] = []
    for s in range(4):  # each write: new pairs at (s, x) and (x, s), retractions at (s, s)
        pairs = rng.integers(0, 30, size=(12, 2)).tolist()
        times = [[s, int(x)] for x in rng.integers(0, 3, size=6)]
        times += [[int(x), s] for x in rng.integers(0, 3, size=6)]
        gone, live = live[:3], live[3:] + pairs
        call(
            "POST",
            "/v1/tables/w_pairs/updates",
            {
                "columns": {"a": [a for a, _ in pairs + gone], "b": [b for _, b in pairs + gone]},
                "diff": [1] * len(pairs) + [-1] * len(gone),
                "time": times + [[s, s]] * len(gone),
                "advance_to": [[s + 1, 0], [0, s + 1]],
            },
        )
    call("GET", "/v1/views/w_closure/rows")
    call("GET", "/v1/views/w_degree/rows?as_of=2,2")


def _die_with(server: int) -> None:
    """End this process when the server that started it ends, however it ends (even by
    SIGKILL, which leaves no chance to stop it): ``PR_SET_PDEATHSIG`` on Linux."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != server:  # it ended before the request took effect
        sys.exit(0)


if __name__ == "__main__":  # the background child of ``start_background``
    if sys.argv[1:2] == ["--background"]:
        os.nice(10)  # the server's own requests come first
        _die_with(int(sys.argv[2]))
    warm(quiet=True)
