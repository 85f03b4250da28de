"""The ``difflow`` command line end to end: the real CLI, run as a subprocess, against one real
server (``python -m api.server`` on a free port) for the module, plus ``difflow serve`` itself.

Every test uses its own table and view names, so tests do not depend on each other's order.
Setup the CLI is not under test for (and most checks) goes through the Python ``Client``;
each CLI run is a fresh interpreter, so the tests spend them where the CLI is the subject.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from clients import Client
from tests.oracle.plans import reach_plan
from tests.service.server import ROOT, Server, running_server

CLI = [sys.executable, "-m", "clients.cli"]
WAIT_S = 30.0  # a bound against hangs only; nothing asserts how long anything takes


def count_plan(table: str, by: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "op": "reduce",
        "input": {"op": "table", "name": table},
        "by": list(by),
        "aggregates": {"n": {"fn": "count"}},
    }


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI run: no DIFFLOW_* settings leaking in, a wide terminal."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIFFLOW_")}
    env.update(COLUMNS="200", PYTHONUNBUFFERED="1", **extra)
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # no heartbeats: a slow machine must not slip one in between the frames tests expect
    with running_server(tmp_path_factory.mktemp("cli-server"), heartbeat_s=3600) as s:
        yield s


@pytest.fixture(scope="module")
def api(server: Server) -> Iterator[Client]:
    with Client(server.url) as client:
        yield client


def run(
    server: Server, *args: str, stdin: str | None = None, exit_code: int = 0
) -> subprocess.CompletedProcess[str]:
    """``difflow ARGS`` against ``server`` (through ``$DIFFLOW_URL``); checks the exit code."""
    done = subprocess.run(
        [*CLI, *args],
        cwd=ROOT,
        env=clean_env(DIFFLOW_URL=server.url),
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == exit_code, (args, done.returncode, done.stdout, done.stderr)
    return done


def run_all(
    server: Server, cases: Sequence[tuple[Sequence[str], str | None]], exit_code: int
) -> list[subprocess.CompletedProcess[str]]:
    """``run`` of each independent ``(args, stdin)`` case, a few at a time, in case order."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [
            pool.submit(run, server, *args, stdin=stdin, exit_code=exit_code)
            for args, stdin in cases
        ]
        return [future.result() for future in futures]


def run_json(server: Server, *args: str) -> Any:
    return orjson.loads(run(server, *args, "--json").stdout)


def one_error_line(done: subprocess.CompletedProcess[str], code: str) -> str:
    """The single ``error: CODE: message`` line a failed command printed on stderr."""
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {code}: "), done.stderr
    return lines[0]


def rich_rows(text: str) -> list[list[str]]:
    """The body rows of the rich tables in ``text``: one list of stripped cells per row."""
    return [
        [cell.strip() for cell in line.strip().strip("│").split("│")]
        for line in text.splitlines()
        if line.strip().startswith("│")
    ]


def counted(answer: dict[str, Any]) -> dict[tuple, int]:
    """A ``rows`` answer as ``{sorted (column, value) items: count}``."""
    rows = {tuple(sorted(r["data"].items())): r["count"] for r in answer["rows"]}
    assert len(rows) == len(answer["rows"])  # one entry per distinct row
    return rows


def reach_rows(pairs: set[tuple[int, int]]) -> dict[tuple, int]:
    return {(("node", node), ("root", root)): 1 for root, node in pairs}


def by_json(items: list[Any]) -> list[Any]:
    return sorted(items, key=orjson.dumps)


class Lines:
    """The standard output of a running subprocess, line by line, read on a thread."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(process.stdout,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def next(self) -> str | None:
        """The next line (None at the end of the output)."""
        try:
            return self._queue.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError(f"no output line within {WAIT_S} s") from None

    def frame(self) -> dict[str, Any]:
        line = self.next()
        assert line is not None, "the subscriber's output ended"
        return orjson.loads(line)

    def rest(self) -> list[str]:
        """The lines left once the process has ended."""
        self._thread.join(timeout=WAIT_S)
        lines = []
        while (line := self._queue.get_nowait()) is not None:
            lines.append(line)
        return lines


def start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(process: subprocess.Popen[str]) -> None:
    """Make sure ``process`` is gone and its pipes are closed (for the failure paths)."""
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=WAIT_S)


def wait_for_subscribers(client: Client, view: str, count: int) -> None:
    """Poll ``/metrics`` until the server counts ``count`` open subscriptions of ``view``."""
    pattern = re.compile(rf'^difflow_subscribers\{{view="{view}"\}} (\S+)$', re.MULTILINE)
    deadline = time.monotonic() + WAIT_S
    while True:
        match = pattern.search(client.metrics())
        if match is not None and float(match.group(1)) == count:
            return
        assert time.monotonic() < deadline, f"{view} never had {count} subscribers"
        time.sleep(0.05)


# --- the entry points -------------------------------------------------------------------------


def test_python_dash_m_clients_cli_runs_the_app() -> None:
    # clients/cli.py once had no __main__ guard: this printed nothing and exited 0
    done = subprocess.run(
        [*CLI, "--help"], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    for command in ("serve", "table", "view", "push", "subscribe", "peek", "ls", "drop", "load"):
        assert re.search(rf"│ {command}\s", done.stdout), (command, done.stdout)


def test_console_script_difflow_is_the_cli(server: Server, api: Client, tmp_path: Path) -> None:
    (script,) = entry_points(group="console_scripts", name="difflow")
    assert script.value == "clients.cli:main"
    beside = Path(sysconfig.get_path("scripts")) / "difflow"
    path = str(beside) if beside.exists() else shutil.which("difflow")
    assert path is not None, "pip install -e . puts a difflow script beside the interpreter"
    # run from outside the repository, as a user would: the installed package answers
    done = subprocess.run(
        [path, "table", "create", "script_t", "--column", "a:int"],
        cwd=tmp_path,
        env=clean_env(DIFFLOW_URL=server.url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "created table script_t (a int)\n"
    assert api.table("script_t")["columns"] == [{"name": "a", "type": "int"}]


# --- tables, views, push, peek, ls ------------------------------------------------------------


def test_table_create_server_and_client_timed(server: Server, api: Client) -> None:
    done = run(server, "table", "create", "tc_srv", "--column", "src:int", "--column", "dst:int")
    assert done.stdout == "created table tc_srv (src int, dst int)\n"
    done = run(
        server,
        *("table", "create", "tc_cli", "--column", "k:int", "--column", "name:string"),
        *("--column", "score:float", "--column", "ok:bool"),
        *("--primary-key", "k", "--timing", "client", "--time-dims", "2"),
    )
    assert done.stdout == "created table tc_cli (k int, name string, score float, ok bool)\n"
    srv, cli = api.table("tc_srv"), api.table("tc_cli")
    assert (srv["timing"], srv["time_dims"], srv["primary_key"]) == ("server", 1, [])
    assert (cli["timing"], cli["time_dims"], cli["primary_key"]) == ("client", 2, ["k"])
    assert cli["frontier"] == [[0, 0]]
    assert [c["type"] for c in cli["columns"]] == ["int", "string", "float", "bool"]
    # the name is taken now: the server's 409 code on one line, exit status 1
    again = run(server, "table", "create", "tc_srv", "--column", "a:int", exit_code=1)
    one_error_line(again, "name_taken")
    assert api.table("tc_srv")["columns"] == srv["columns"]


def test_reachability_view_fed_by_every_push_form(
    server: Server, api: Client, tmp_path: Path
) -> None:
    api.create_table("r_edges", {"src": "int", "dst": "int"})
    api.create_table("r_roots", {"node": "int"}, primary_key=["node"])
    plan = tmp_path / "plan.json"
    plan.write_bytes(orjson.dumps(reach_plan("r_roots", "r_edges")))
    done = run(server, "view", "create", "r_reach", "-f", str(plan))
    assert done.stdout == "created view r_reach (root int, node int)\n"
    assert api.view("r_reach")["query"] == reach_plan("r_roots", "r_edges")

    # JSON lines on stdin over HTTP: a bare row and an update object (blank lines skipped)
    lines = '{"src": 1, "dst": 2}\n\n{"insert": {"src": 2, "dst": 3}}\n'
    done = run(server, "push", "r_edges", stdin=lines)
    assert done.stdout.startswith("pushed 2 rows to r_edges in 1 request (")
    assert "latency p50 " in done.stdout and " ms, p99 " in done.stdout
    # CSV from a file (columns in any order) over one WebSocket, two rows per frame
    csv_file = tmp_path / "edges.csv"
    csv_file.write_text("dst,src\n4,3\n5,4\n6,5\n")
    done = run(
        server, "push", "r_edges", "--format", "csv", "-f", str(csv_file), "--ws", "--batch", "2"
    )
    assert done.stdout.startswith("pushed 3 rows to r_edges in 2 frames (")
    # JSON lines from a file over a WebSocket
    roots_file = tmp_path / "roots.jsonl"
    roots_file.write_text('{"node": 1}\n{"upsert": {"node": 20}}\n')
    done = run(server, "push", "r_roots", "--file", str(roots_file), "--ws")
    assert done.stdout.startswith("pushed 2 rows to r_roots in 1 frame (")
    # CSV on stdin over HTTP, one row per request
    done = run(
        server, "push", "r_edges", "--format", "csv", "--batch", "1", stdin="src,dst\n20,21\n21,1\n"
    )
    assert done.stdout.startswith("pushed 2 rows to r_edges in 2 requests (")

    chain = {(1, n) for n in range(1, 7)}
    via_20 = {(20, n) for n in (20, 21, *range(1, 7))}
    answer = run_json(server, "peek", "r_reach")
    assert counted(answer) == reach_rows(chain | via_20)
    assert answer == api.rows("r_reach")

    # a delete over the WebSocket cuts the chain at 2 -> 3
    run(server, "push", "r_edges", "--ws", stdin='{"delete": {"src": 2, "dst": 3}}\n')
    cut = {(1, 1), (1, 2)} | {(20, n) for n in (20, 21, 1, 2)}
    later = api.rows("r_reach")
    assert counted(later) == reach_rows(cut)
    assert later["time"] > answer["time"]
    assert counted(api.rows("r_reach", as_of=answer["time"])) == reach_rows(chain | via_20)

    # the rich table of peek: title, header, one line per row with its count, a summary
    done = run(server, "peek", "r_reach")
    lines = done.stdout.splitlines()
    assert lines[0].strip() == "r_reach"
    assert re.fullmatch(r"┃ root\s*┃ node\s*┃\s*count ┃", lines[2].strip()), lines[2]
    body = sorted((int(r), int(n), int(c)) for r, n, c in rich_rows(done.stdout))
    assert body == sorted((r, n, 1) for r, n in cut)
    frontier = orjson.dumps(later["frontier"]).decode()
    assert lines[-1] == f"time {later['time']}, frontier {frontier}, 6 distinct rows"


def test_client_timed_push_is_pending_until_the_frontier_moves(server: Server, api: Client) -> None:
    api.create_table("ct_t", {"k": "int", "v": "string"}, primary_key=["k"], timing="client")
    api.create_view("ct_n", count_plan("ct_t"))

    done = run(
        server, "push", "ct_t", "--time", "3", stdin='{"k": 1, "v": "a"}\n{"k": 2, "v": "b"}\n'
    )
    assert done.stdout.startswith("pushed 2 rows to ct_t in 1 request")
    assert done.stdout.rstrip().endswith("latency n/a; 1 write pending until the frontier moves")
    answer = api.rows("ct_n")
    assert (answer["rows"], answer["time"], answer["frontier"]) == ([], None, [0])

    # CSV at a default time, then the frontier moved at the end, over the WebSocket
    done = run(
        server,
        *("push", "ct_t", "--format", "csv", "--time", "5", "--advance-to", "4", "--ws"),
        stdin="k,v\n3,c\n",
    )
    assert done.stdout.rstrip().endswith("; 1 write pending until the frontier moves")
    answer = api.rows("ct_n")
    assert (counted(answer), answer["time"], answer["frontier"]) == ({(("n", 2),): 1}, 3, [4])

    # only the frontier: no input at all
    done = run(server, "push", "ct_t", "--advance-to", "6")
    assert done.stdout.startswith("pushed 0 rows to ct_t in 0 requests")
    assert api.table("ct_t")["frontier"] == [6]
    answer = run_json(server, "peek", "ct_n")
    assert (counted(answer), answer["time"], answer["frontier"]) == ({(("n", 3),): 1}, 5, [6])
    answer = run_json(server, "peek", "ct_n", "--as-of", "3")
    assert (counted(answer), answer["time"]) == ({(("n", 2),): 1}, 3)

    # a time before the frontier is the server's 409; so is peeking at a time not complete
    late, not_yet = run_all(
        server,
        [
            (("push", "ct_t", "--time", "2", "--ws"), '{"k": 9, "v": "z"}\n'),
            (("peek", "ct_n", "--as-of", "6"), None),
        ],
        exit_code=1,
    )
    one_error_line(late, "time_before_frontier")
    assert "frontier [6]" in one_error_line(not_yet, "time_unavailable")
    assert api.table("ct_t")["rows"] == 3


def test_ls_shows_tables_and_views(server: Server, api: Client) -> None:
    api.create_table("ls_t", {"a": "int", "b": "string"}, primary_key=["a"])
    api.write("ls_t", [{"insert": {"a": a, "b": b}} for a, b in ((1, "x"), (2, "y"), (3, "y"))])
    api.create_view("ls_v", count_plan("ls_t", by=["b"]))

    rows = {row[0]: row for row in rich_rows(run(server, "ls").stdout)}
    _, columns, key, timing, count, frontier, readers = rows["ls_t"]
    assert (columns, key, timing, count, readers) == (
        "a int, b string",
        "a",
        "server (1d)",
        "3",
        "ls_v",
    )
    assert frontier == orjson.dumps(api.table("ls_t")["frontier"]).decode()
    _, state, columns, inputs, count, frontier, _p50, _p99 = rows["ls_v"]
    assert (state, columns, inputs, count) == ("ready", "b string, n int", "ls_t", "2")

    listed = run_json(server, "ls")
    assert listed == {"tables": api.tables(), "views": api.views()}
    (view,) = [v for v in listed["views"] if v["name"] == "ls_v"]
    assert (view["inputs"], view["rows"], view["query"]) == (["ls_t"], 2, count_plan("ls_t", ["b"]))


def test_a_client_timed_push_names_the_view_it_made_fail_while_pending(
    server: Server, api: Client
) -> None:
    """Audit 108: the write's answer was pending, without the failure, so push exited 0, and
    so did the push that later moved the frontier."""
    api.create_table("fp_t", {"n": "int"}, timing="client")
    plan = {"op": "flat_map", "input": {"op": "table", "name": "fp_t"}, "as": "i"}
    api.create_view("fp_v", {**plan, "start": 0, "stop": "n"})
    done = run(server, "push", "fp_t", "--time", "5", stdin='{"n": 1000000000}\n', exit_code=1)
    assert done.stdout.rstrip().endswith("1 write pending until the frontier moves")
    assert done.stderr.startswith("error: view fp_v failed: LimitError"), done.stderr


def test_a_view_that_fails_is_reported_by_push_ls_and_subscribe(
    server: Server, api: Client
) -> None:
    """Audit 106: push and subscribe ended with status 0 and ls showed the view as any other,
    only ``peek`` telling that it had failed."""
    api.create_table("f_t", {"n": "int"})
    plan = {"op": "flat_map", "input": {"op": "table", "name": "f_t"}, "as": "i"}
    api.create_view("f_v", {**plan, "start": 0, "stop": "n"})
    sub = start("subscribe", "f_v", "--no-progress", env=clean_env(DIFFLOW_URL=server.url))
    try:
        wait_for_subscribers(api, "f_v", 1)
        done = run(server, "push", "f_t", stdin='{"n": 1000000000}\n', exit_code=1)
        assert done.stdout.startswith("pushed 1 row to f_t in 1 request")  # it was written
        assert done.stderr.startswith("error: view f_v failed: LimitError"), done.stderr
        out, err = sub.communicate(timeout=WAIT_S)
        assert sub.returncode == 1
        assert orjson.loads(out.splitlines()[-1])["type"] == "closed"
        assert err.startswith("error: view 'f_v' failed: LimitError"), err
    finally:
        if sub.returncode is None:
            stop(sub)
    assert {row[0]: row[1] for row in rich_rows(run(server, "ls").stdout)}["f_v"] == "failed"


# --- subscribe ----------------------------------------------------------------------------------


def test_subscribe_piped_into_a_reader_that_leaves_ends_cleanly(
    server: Server, api: Client
) -> None:
    """``difflow subscribe v | head -1``: once the reader has gone, the next frame ends the
    subscriber with status 0 and nothing on standard error (audit 45: status 1)."""
    api.create_table("hp_t", {"k": "int"})
    api.create_view("hp_v", {"op": "table", "name": "hp_t"})
    sub = start("subscribe", "hp_v", env=clean_env(DIFFLOW_URL=server.url))
    try:
        assert sub.stdout is not None
        assert orjson.loads(sub.stdout.readline())["type"] == "snapshot"
        sub.stdout.close()  # as head does after its line
        for k in range(50):  # frames until the subscriber writes into the closed pipe
            api.write("hp_t", [{"insert": {"k": k}}])
            if sub.poll() is not None:
                break
            time.sleep(0.1)
        assert sub.wait(timeout=WAIT_S) == 0
        assert sub.stderr is not None and sub.stderr.read() == ""
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()
        assert sub.stderr is not None
        sub.stderr.close()


def test_subscribe_prints_snapshot_progress_and_diff_frames(server: Server, api: Client) -> None:
    api.create_table("s_t", {"k": "int", "g": "string"})
    api.create_view("s_v", count_plan("s_t", by=["g"]))
    api.write("s_t", [{"insert": {"k": 1, "g": "a"}}, {"insert": {"k": 2, "g": "a"}}])
    before = api.rows("s_v")

    env = clean_env(DIFFLOW_URL=server.url)
    full = start("subscribe", "s_v", env=env)
    bare = start("subscribe", "s_v", "--no-snapshot", "--no-progress", env=env)
    try:
        frames, bare_frames = Lines(full), Lines(bare)
        snapshot = frames.frame()
        assert snapshot == {
            "type": "snapshot",
            "seq": 0,
            "time": before["time"],
            "updates": [{"data": {"g": "a", "n": 2}, "diff": 1}],
        }
        progress = frames.frame()
        assert progress == {"type": "progress", "seq": 1, "frontier": before["frontier"]}

        # the bare subscriber prints nothing until a change: wait until the server counts it
        wait_for_subscribers(api, "s_v", 2)
        written = api.write("s_t", [{"insert": {"k": 3, "g": "a"}}, {"insert": {"k": 4, "g": "b"}}])
        expected = [
            {"data": {"g": "a", "n": 2}, "diff": -1},
            {"data": {"g": "a", "n": 3}, "diff": 1},
            {"data": {"g": "b", "n": 1}, "diff": 1},
        ]
        (t,) = written["times"]
        assert by_json(
            [{"data": o["data"], "diff": o["diff"]} for o in written["outputs"]["s_v"]]
        ) == by_json(expected)

        seen = [snapshot, progress]
        while not (
            seen[-1]["type"] == "progress" and seen[-1]["frontier"][0] >= written["frontier"][0]
        ):
            seen.append(frames.frame())
        assert [f["seq"] for f in seen] == list(range(len(seen)))
        (diff,) = [f for f in seen if f["type"] == "diff"]
        assert (diff["time"], by_json(diff["updates"])) == (t, by_json(expected))
        assert all(f["type"] == "progress" for f in seen[2:] if f is not diff)

        # with neither snapshot nor progress, the first frame is the diff
        first = bare_frames.frame()
        assert (first["type"], first["seq"], first["time"]) == ("diff", 0, t)
        assert by_json(first["updates"]) == by_json(expected)

        # Ctrl-C ends a subscription with the conventional status 130
        full.send_signal(signal.SIGINT)
        assert full.wait(timeout=WAIT_S) == 130
        assert all(orjson.loads(line)["type"] == "progress" for line in frames.rest())

        # dropping the view closes the other: it prints the closed frame and exits cleanly
        api.drop_view("s_v")
        closed = bare_frames.frame()
        assert (closed["type"], closed["seq"]) == ("closed", 1)
        assert closed["reason"]
        assert bare.wait(timeout=WAIT_S) == 0
        assert bare_frames.rest() == []
    finally:
        stop(full)
        stop(bare)


# --- drop and errors ----------------------------------------------------------------------------


def test_drop_view_and_table(server: Server, api: Client) -> None:
    api.create_table("d_edges", {"src": "int", "dst": "int"})
    api.create_table("d_roots", {"node": "int"})
    api.create_view("d_reach", reach_plan("d_roots", "d_edges"))
    api.create_view("d_top", {"op": "distinct", "input": {"op": "view", "name": "d_reach"}})

    # a table a view reads, and a view another view reads, are in use: 409, nothing dropped
    table_in_use, view_in_use = run_all(
        server,
        [(("drop", "table", "d_edges"), None), (("drop", "view", "d_reach"), None)],
        exit_code=1,
    )
    assert "d_reach" in one_error_line(table_in_use, "in_use")
    assert "d_top" in one_error_line(view_in_use, "in_use")
    assert api.table("d_edges")["readers"] == ["d_reach"]
    assert api.view("d_reach")["name"] == "d_reach"

    api.drop_view("d_top")
    assert run(server, "drop", "view", "d_reach").stdout == "dropped view d_reach\n"
    assert run(server, "drop", "table", "d_edges").stdout == "dropped table d_edges\n"
    assert "d_reach" not in {v["name"] for v in api.views()}
    assert "d_edges" not in {t["name"] for t in api.tables()}
    assert api.table("d_roots")["readers"] == []


def test_unknown_names_are_not_found(server: Server) -> None:
    cases: list[tuple[tuple[str, ...], str | None]] = [
        (("peek", "no_such_view"), None),
        (("subscribe", "no_such_view"), None),
        (("push", "no_such_table", "--ws"), '{"a": 1}\n'),
        (("push", "no_such_table", "--format", "csv"), "a\n1\n"),
        (("drop", "table", "no_such_table"), None),
    ]
    for (args, _), done in zip(cases, run_all(server, cases, exit_code=1), strict=True):
        kind, name = (
            ("view", "no_such_view") if "no_such_view" in args else ("table", "no_such_table")
        )
        assert one_error_line(done, "not_found") == f"error: not_found: no {kind} named '{name}'"


def test_invalid_input_is_refused_and_changes_nothing(
    server: Server, api: Client, tmp_path: Path
) -> None:
    api.create_table("i_t", {"k": "int", "v": "float"}, primary_key=["k"])
    before = api.write("i_t", [{"insert": {"k": 1, "v": 0.5}}])
    not_json = tmp_path / "plan.json"
    not_json.write_text("{")
    bad_plan = '{"op": "select", "input": {"op": "table", "name": "i_t"}, "columns": {"z": "nope"}}'

    failed = run_all(
        server,
        [
            # wrong types: the server's 422, named by its path, over the WebSocket
            (("push", "i_t", "--ws"), '{"k": 2, "v": 1.5}\n{"k": "three", "v": 2.5}\n'),
            # input the CLI cannot read is refused before anything is sent
            (("push", "i_t", "--format", "csv"), "k,v\n2,1.5\n3,abc\n"),
            # a plan with an unknown column: the server's 422 names where
            (("view", "create", "i_v", "-f", "-"), bad_plan),
        ],
        exit_code=1,
    )
    assert "updates[1].insert.k" in one_error_line(failed[0], "wrong_type")
    assert "line 3, column v" in one_error_line(failed[1], "bad_input")
    assert "query.columns.z" in one_error_line(failed[2], "invalid_expression")

    usage = run_all(
        server,
        [
            (("view", "create", "i_v", "-f", str(not_json)), None),
            (("table", "create", "i_u", "--column", "k"), None),
            (("push", "i_t", "--time", "-1"), '{"k": 2, "v": 1.5}\n'),
        ],
        exit_code=2,
    )
    assert "the plan is not JSON" in usage[0].stderr
    assert "expected NAME:TYPE" in usage[1].stderr
    assert "times are non-negative" in usage[2].stderr

    table = api.table("i_t")
    assert (table["rows"], table["frontier"]) == (1, before["frontier"])
    assert "i_v" not in {v["name"] for v in api.views()}
    assert "i_u" not in {t["name"] for t in api.tables()}


def test_unreachable_server_is_one_line() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    done = subprocess.run(
        [*CLI, "--url", url, "ls"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert url in one_error_line(done, "connection_failed")


# --- difflow serve ------------------------------------------------------------------------------


def test_serve_prints_its_url_answers_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    served = start("serve", "--port", "0", "--data-dir", str(tmp_path), env=clean_env())
    try:
        assert served.stdout is not None
        line = served.stdout.readline()
        match = re.fullmatch(r"difflow listening on (http://127\.0\.0\.1:(\d+))\n", line)
        assert match is not None, line
        url = match.group(1)
        assert int(match.group(2)) > 0
        answer = httpx.get(f"{url}/healthz", timeout=WAIT_S)
        assert (answer.status_code, answer.json()) == (200, {"status": "ok"})
        with Client(url) as client:
            client.create_table("sv_t", {"k": "int"})
            assert client.write("sv_t", [{"insert": {"k": 1}}])["status"] == "done"

        served.send_signal(signal.SIGTERM)
        assert served.wait(timeout=WAIT_S) == 0
        assert served.stdout.read() == ""
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/healthz", timeout=WAIT_S)
    finally:
        stop(served)


def test_python_m_api_server_takes_the_serve_options() -> None:
    """``python -m api.server`` (what scripts and the tests start) reads the same options
    as ``difflow serve``: ``--help`` prints them and starts nothing, a wrong one is a usage
    error."""
    module = [sys.executable, "-m", "api.server"]
    done = subprocess.run(
        [*module, "--help"], cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: python -m api.server [OPTIONS]" in done.stdout
    assert "--port" in done.stdout and "listening" not in done.stdout
    wrong = subprocess.run(
        [*module, "--no-such-option"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode == 2
    assert "No such option" in wrong.stderr


# --- audit 89: input the CLI reads, and what it shows ------------------------------------------


def test_push_stops_at_a_line_that_is_not_utf8_saying_what_was_written(
    server: Server, api: Client, tmp_path: Path
) -> None:
    """Audit 89 F2: a byte that is not UTF-8 ended in a traceback, and the rows already
    written went unmentioned; now the line is named and the count is the server's."""
    rows = [orjson.dumps({"k": k, "s": "é"}) + b"\n" for k in range(5)]
    rows[3] = b'{"k": 3, "s": "\xe9"}\n'  # Latin-1
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(rows))
    for table, extra in (("u8_http", ()), ("u8_ws", ("--ws",))):
        api.create_table(table, {"k": "int", "s": "string"})
        done = run(server, "push", table, "-f", str(bad), "--batch", "2", *extra, exit_code=1)
        assert one_error_line(done, "bad_input") == (
            "error: bad_input: line 4: not UTF-8 text (byte 0xe9 at character 16); "
            "2 rows in 1 write before it were written"
        )
        assert api.table(table)["rows"] == 2


def test_push_reads_long_csv_values_and_byte_order_marks(
    server: Server, api: Client, tmp_path: Path
) -> None:
    """Audit 89 F3 and F11: a CSV value over 131,072 characters ended in a traceback; a
    byte order mark was skipped in CSV but refused in JSON lines and plan files."""
    api.create_table("long_t", {"k": "int", "s": "string"})
    long = "x" * 200_000
    csv_file = tmp_path / "long.csv"
    csv_file.write_text(f"k,s\n1,{long}\n2,short\n")
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b'\xef\xbb\xbf{"k": 3, "s": "bom"}\n')
    plan = tmp_path / "plan.json"
    plan.write_bytes(b'\xef\xbb\xbf{"op": "table", "name": "long_t"}')
    pushed_csv, pushed_bom, created = run_all(
        server,
        [
            (("push", "long_t", "-f", str(csv_file)), None),
            (("push", "long_t", "-f", str(bom)), None),
            (("view", "create", "long_v", "-f", str(plan)), None),
        ],
        exit_code=0,
    )
    assert pushed_csv.stdout.startswith("pushed 2 rows to long_t")
    assert pushed_bom.stdout.startswith("pushed 1 row to long_t")
    assert created.stdout == "created view long_v (k int, s string)\n"
    assert counted(api.rows("long_v")) == {
        (("k", 1), ("s", long)): 1,
        (("k", 2), ("s", "short")): 1,
        (("k", 3), ("s", "bom")): 1,
    }


def test_push_time_of_the_wrong_arity_writes_nothing(
    server: Server, api: Client, tmp_path: Path
) -> None:
    """Audit 89 F4 and F5: on a 1-D table, ``--time 10,20`` spread a CSV file's rows over
    times 10 and 20 (two rows a write), and ``--advance-to 1,2`` was refused only after
    the rows were written."""
    api.create_table("arity_t", {"a": "int"}, timing="client")
    csv_file = tmp_path / "rows.csv"
    csv_file.write_text("a\n" + "".join(f"{a}\n" for a in range(10)))
    spread, frontier = run_all(
        server,
        [
            (("push", "arity_t", "-f", str(csv_file), "--time", "10,20", "--batch", "2"), None),
            (("push", "arity_t", "--time", "20", "--advance-to", "1,2"), '{"a": 1}\n'),
        ],
        exit_code=1,
    )
    assert one_error_line(spread, "bad_input").endswith(
        "--time 10,20 has 2 coordinates, but the times of table arity_t have 1; nothing was written"
    )
    assert "--advance-to 1,2 has 2 coordinates" in one_error_line(frontier, "bad_input")
    table = api.table("arity_t")
    assert (table["rows"], table["frontier"]) == (0, [0])
    assert api.write("arity_t", advance_to=1)["frontier"] == [1]  # nothing was pending


def test_peek_escapes_control_characters_in_values(server: Server, api: Client) -> None:
    """Audit 89 F12: ``peek`` wrote a value's ESC to the terminal as it is."""
    api.create_table("ctl_t", {"s": "string"})
    api.write("ctl_t", [{"insert": {"s": "\x1b[31mRED"}}, {"insert": {"s": "two\nlines"}}])
    api.create_view("ctl_v", {"op": "table", "name": "ctl_t"})
    shown = run(server, "peek", "ctl_v").stdout
    assert "\x1b" not in shown
    assert "\\x1b[31mRED" in shown
    assert re.search(r"two\s*│\s*\d", shown) and re.search(r"lines\s*│", shown), shown
