"""The ``difflow`` CLI, run in-process with its client on a MockTransport and stub sockets."""

from __future__ import annotations

import itertools
import re
import sys
import types
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import typer.main
from typer.testing import CliRunner, Result
from websockets.exceptions import ConnectionClosedError
from websockets.frames import Close

from clients import cli_push, cli_records
from clients.cli import app
from clients.cli_state import CliState
from tests.clients.doubles import (
    Connector,
    Exchange,
    StubConnection,
    answer,
    body_of,
    connector,
)

runner = CliRunner()


def invoke(
    exchange: Exchange,
    *args: str,
    stdin: str | bytes | None = None,
    connect: Connector | None = None,
    env: dict[str, str] | None = None,
) -> Result:
    state = CliState(transport=exchange.transport)
    if connect is not None:
        state.ws_connect = connect
    environment: dict[str, str | None] = {"DIFFLOW_URL": None, "COLUMNS": "200", **(env or {})}
    return runner.invoke(app, list(args), input=stdin, obj=state, env=environment)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


EDGES = {
    "name": "edges",
    "columns": [{"name": "src", "type": "int"}, {"name": "dst", "type": "int"}],
}


CLIENT_TIMED = {"name": "t", "columns": [{"name": "a", "type": "int"}], "timing": "client"}


def test_table_create(exchange: Exchange) -> None:
    exchange.on("POST", "/v1/tables", answer(201, EDGES))
    result = ok(
        invoke(
            exchange,
            *("table", "create", "edges", "--column", "src:int", "--column", "dst:int"),
            *("--primary-key", "src,dst", "--timing", "client", "--time-dims", "2"),
        )
    )
    assert str(exchange.last.url) == "http://127.0.0.1:8000/v1/tables"
    assert body_of(exchange.last) == {
        "name": "edges",
        "columns": [{"name": "src", "type": "int"}, {"name": "dst", "type": "int"}],
        "primary_key": ["src", "dst"],
        "timing": "client",
        "time_dims": 2,
    }
    assert result.stdout == "created table edges (src int, dst int)\n"


def test_url_option_and_environment(exchange: Exchange) -> None:
    exchange.on("POST", "/v1/tables", answer(201, EDGES))
    ok(invoke(exchange, "--url", "http://other:1", "table", "create", "t", "--column", "a:int"))
    assert str(exchange.last.url) == "http://other:1/v1/tables"
    ok(invoke(exchange, "--url", "other:2/", "table", "create", "t", "--column", "a:int"))
    assert str(exchange.last.url) == "http://other:2/v1/tables"  # as curl takes it
    assert "primary_key" not in body_of(exchange.last)
    ok(
        invoke(
            exchange,
            "table",
            "create",
            "t",
            "--column",
            "a:int",
            env={"DIFFLOW_URL": "http://env:2"},
        )
    )
    assert str(exchange.last.url) == "http://env:2/v1/tables"


def test_table_create_usage_errors_exit_2(exchange: Exchange) -> None:
    assert invoke(exchange, "table", "create", "t", "--column", "src").exit_code == 2
    assert (
        invoke(exchange, "table", "create", "t", "--column", "a:int", "--timing", "x").exit_code
        == 2
    )
    assert exchange.requests == []


JSONL = """{"src": 1, "dst": 2}

{"delete": {"src": 0, "dst": 1}}
{"weight": 3, "data": {"src": 5, "dst": 6}, "time": 7}
{"upsert": {"src": 1, "dst": 3}}
{"data": 4, "insert": 5}
"""


def test_push_jsonl_in_batches_with_a_summary(exchange: Exchange) -> None:
    answers = [answer(200, {"status": "done", "latency_ms": ms}) for ms in (2.0, 1.0, 4.0)]
    exchange.on("POST", "/v1/tables/edges/updates", *answers)
    result = ok(invoke(exchange, "push", "edges", "--batch", "2", stdin=JSONL))
    assert [body_of(r) for r in exchange.requests] == [
        {"updates": [{"insert": {"src": 1, "dst": 2}}, {"delete": {"src": 0, "dst": 1}}]},
        {
            "updates": [
                {"weight": 3, "data": {"src": 5, "dst": 6}, "time": 7},
                {"upsert": {"src": 1, "dst": 3}},
            ]
        },
        {"updates": [{"insert": {"data": 4, "insert": 5}}]},
    ]
    assert all(r.url.params["wait"] == "true" for r in exchange.requests)
    assert re.fullmatch(
        r"pushed 5 rows to edges in 3 requests \([\d,]+ rows/s\); "
        r"latency p50 2\.00 ms, p99 4\.00 ms\n",
        result.stdout,
    )


def test_push_client_timed_with_default_time_and_frontier(exchange: Exchange) -> None:
    pending = answer(202, {"token": "w-1", "status": "pending"})
    exchange.on("GET", "/v1/tables/t", answer(200, {**CLIENT_TIMED, "time_dims": 2}))
    exchange.on("POST", "/v1/tables/t/updates", pending)
    exchange.on("GET", "/v1/completions/w-1", pending)
    rows = '{"a": 1}\n{"a": 2}\n'
    result = ok(invoke(exchange, "push", "t", "--time", "1,2", "--advance-to", "3,3", stdin=rows))
    assert [body_of(r) for r in exchange.requests[1:3]] == [
        {"updates": [{"insert": {"a": 1}}, {"insert": {"a": 2}}], "time": [1, 2]},
        {"updates": [], "advance_to": [3, 3]},
    ]
    assert "pushed 2 rows to t in 1 request" in result.stdout
    assert "latency n/a; 1 write pending" in result.stdout  # the frontier did not reach it
    assert exchange.last.url.path == "/v1/completions/w-1"
    # the frontier it moves to makes the write final: the summary says nothing is pending
    exchange.on("GET", "/v1/tables/t", answer(200, CLIENT_TIMED))
    exchange.on("GET", "/v1/completions/w-1", answer(200, {"token": "w-1", "status": "done"}))
    result = ok(invoke(exchange, "push", "t", "--time", "1", "--advance-to", "5", stdin=rows))
    assert "pending" not in result.stdout, result.stdout


def test_push_refused_as_too_large_names_its_own_option(exchange: Exchange) -> None:
    """The server's ``--max-batch`` is not push's: the line says which ``--batch`` fits."""
    too_large = answer(
        413,
        {
            "error": {
                "code": "batch_too_large",
                "message": "2 updates in one write; the limit is 1 (--max-batch)",
                "detail": {"limit": 1},
            }
        },
    )
    exchange.on("POST", "/v1/tables/edges/updates", too_large)
    result = invoke(exchange, "push", "edges", stdin='{"src": 1, "dst": 2}\n{"src": 2, "dst": 3}\n')
    assert result.exit_code == 1
    assert result.stderr == (
        "error: batch_too_large: write 1 (lines 1-2) was refused: 2 updates in one write; the "
        "limit is 1 (--max-batch) (push with --batch 1 or less); nothing was written\n"
    )


def test_push_refuses_a_frontier_behind_the_tables_before_writing(exchange: Exchange) -> None:
    """``--advance-to`` behind the table's frontier: nothing is written (audit 45: the rows
    were, then the frontier's refusal read as if the whole push had been refused)."""
    two_d = {**CLIENT_TIMED, "time_dims": 2, "frontier": [[4, 4]]}
    exchange.on("GET", "/v1/tables/t", answer(200, two_d))
    for extra in ((), ("--ws",)):
        result = invoke(
            exchange,
            "push",
            "t",
            "--time",
            "5,5",
            "--advance-to",
            "1,5",
            *extra,
            stdin='{"a": 1}\n',
        )
        assert result.exit_code == 1
        assert result.stderr == (
            "error: frontier_backwards: advance_to [1, 5] would move the frontier of table 't' "
            "backwards from [[4, 4]]; nothing was written\n"
        )
    assert [r.method for r in exchange.requests] == ["GET", "GET"]


def test_push_says_the_rows_were_written_when_the_frontier_is_refused(
    exchange: Exchange,
) -> None:
    """The frontier moved by another writer after the check: the refusal of the last
    request says what the writes before it wrote."""
    refused = answer(
        409,
        {
            "error": {
                "code": "frontier_backwards",
                "message": "advance_to [3] would move the frontier of table 't' backwards from [9]",
                "detail": {"path": "advance_to", "frontier": [9]},
            }
        },
    )
    exchange.on("GET", "/v1/tables/t", answer(200, {**CLIENT_TIMED, "frontier": [0]}))
    exchange.on(
        "POST",
        "/v1/tables/t/updates",
        answer(200, {"token": "w-1", "status": "done", "latency_ms": 1.0}),
        refused,
    )
    result = invoke(exchange, "push", "t", "--time", "1", "--advance-to", "3", stdin='{"a": 1}\n')
    assert result.exit_code == 1
    assert result.stderr == (
        "error: frontier_backwards: 1 row in 1 write was written, then moving the frontier "
        "to 3 was refused: advance_to [3] would move the frontier of table 't' backwards from "
        "[9]\n"
    )


def test_a_request_without_an_answer_in_time_may_still_be_carried_out(
    exchange: Exchange,
) -> None:
    """No limit on the wait for an answer unless ``--timeout`` says (audit 45: a view's
    registration outlasted a fixed 60 s and was reported as a failed connection)."""
    exchange.on("POST", "/v1/views", httpx.ReadTimeout("timed out"))
    result = invoke(exchange, "--timeout", "5", "view", "create", "v", "-f", "-", stdin="{}")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: timed_out: POST http://127.0.0.1:8000/v1/views: no answer within the timeout; "
        "the server may still carry out the request\n"
    )
    state = CliState(url="http://h:1", timeout=2.5)
    assert state.client._http.timeout == httpx.Timeout(60.0, read=2.5)
    assert CliState().client._http.timeout == httpx.Timeout(60.0, read=None)


def test_push_with_times_to_a_server_timed_table_is_refused_before_writing(
    exchange: Exchange,
) -> None:
    exchange.on("GET", "/v1/tables/edges", answer(200, {**EDGES, "timing": "server"}))
    for option in ("--time", "--advance-to"):
        result = invoke(exchange, "push", "edges", option, "3", stdin='{"src": 1, "dst": 2}\n')
        assert result.exit_code == 1
        assert result.stderr.startswith("error: bad_input: table edges is server-timed"), (
            result.stderr
        )
    assert [r.method for r in exchange.requests] == ["GET", "GET"]


def test_push_csv_converts_by_column_type(exchange: Exchange, tmp_path: Path) -> None:
    columns = [("src", "int"), ("w", "float"), ("ok", "bool"), ("name", "string")]
    description = {"name": "t", "columns": [{"name": n, "type": k} for n, k in columns]}
    exchange.on("GET", "/v1/tables/t", answer(200, description))
    exchange.on("POST", "/v1/tables/t/updates", answer(200, {"latency_ms": 0.5}))
    data = tmp_path / "t.csv"
    data.write_text('name,src,w,ok\na,1,0.5,true\n"b, c",-2,1e3,0\n\nd,3,2,FALSE\n')
    result = ok(invoke(exchange, "push", "t", "-f", str(data), "--batch", "2"))  # by its suffix
    assert [body_of(r) for r in exchange.requests[1:]] == [
        {
            "columns": {
                "name": ["a", "b, c"],
                "src": [1, -2],
                "w": [0.5, 1000.0],
                "ok": [True, False],
            }
        },
        {"columns": {"name": ["d"], "src": [3], "w": [2.0], "ok": [False]}},
    ]
    assert "pushed 3 rows to t in 2 requests" in result.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("src,dst\n1,2\nx,3\n", "error: bad_input: line 3, column src: 'x' is not of type int\n"),
        ("src,dst\n1,2,3\n", "error: bad_input: line 2: 3 values for 2 columns\n"),
        ("src,weight\n1,2\n", "unknown: ['weight'], missing: ['dst']"),
        (
            "src,dst\n1,99999999999999999999\n",
            "error: bad_input: line 2, column dst: '99999999999999999999' does not fit in 64 bits\n",
        ),
    ],
)
def test_push_csv_rejects_bad_input(exchange: Exchange, text: str, message: str) -> None:
    exchange.on("GET", "/v1/tables/edges", answer(200, EDGES))
    result = invoke(exchange, "push", "edges", "--format", "csv", stdin=text)
    assert result.exit_code == 1
    assert message in result.stderr
    assert result.stderr.startswith("error: bad_input: ")
    assert [r.method for r in exchange.requests] == ["GET"]


def test_push_csv_floats_are_finite_and_a_bom_is_no_column(exchange: Exchange) -> None:
    description = {
        "name": "t",
        "columns": [{"name": "k", "type": "int"}, {"name": "v", "type": "float"}],
    }
    exchange.on("GET", "/v1/tables/t", answer(200, description))
    exchange.on("POST", "/v1/tables/t/updates", answer(200, {"latency_ms": 0.5}))
    for bad in ("nan", "inf", "-Infinity", "1e400"):
        result = invoke(exchange, "push", "t", "--format", "csv", stdin=f"k,v\n1,0.5\n2,{bad}\n")
        assert result.exit_code == 1
        assert result.stderr == (
            f"error: bad_input: line 3, column v: {bad!r} is not a finite float\n"
        ), result.stderr
    assert [r.method for r in exchange.requests] == ["GET"] * 4
    ok(invoke(exchange, "push", "t", "--format", "csv", stdin="\ufeffk,v\n1,0.5\n"))
    assert body_of(exchange.last) == {"columns": {"k": [1], "v": [0.5]}}


def test_push_jsonl_rejects_bad_lines(exchange: Exchange) -> None:
    result = invoke(exchange, "push", "edges", stdin='{"src": 1}\n{"src": \n')
    assert result.exit_code == 1
    assert result.stderr.startswith("error: bad_input: line 2: not JSON")
    result = invoke(exchange, "push", "edges", stdin="[1, 2]\n")
    assert result.stderr == "error: bad_input: line 1: expected a JSON object, got list\n"
    assert exchange.requests == []


def test_push_over_websocket_keeps_a_bounded_window(
    exchange: Exchange, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_push, "WS_WINDOW", 2)
    exchange.on("GET", "/v1/tables/t", answer(200, CLIENT_TIMED))
    acks = [{"type": "ack", "id": i, "status": "done", "latency_ms": float(i)} for i in range(4)]
    connect = connector([*acks, {"type": "ack", "id": "advance_to"}])
    rows = "".join(f'{{"a": {i}}}\n' for i in range(4))
    args = ("push", "t", "--ws", "--batch", "1", "--time", "5", "--advance-to", "6")
    result = ok(invoke(exchange, *args, stdin=rows, connect=connect))
    sent = connect.connection.sent
    assert sent[:4] == [{"updates": [{"insert": {"a": i}}], "time": 5, "id": i} for i in range(4)]
    assert sent[4] == {"updates": [], "advance_to": 6, "id": "advance_to"}
    log = connect.connection.log
    assert log == ["send", "send", "recv", "send", "recv", "send", "recv", "recv", "send", "recv"]
    assert connect.urls == ["ws://127.0.0.1:8000/v1/tables/t/updates"]
    assert "pushed 4 rows to t in 4 frames" in result.stdout
    assert "p50 1.00 ms, p99 3.00 ms" in result.stdout
    assert [r.url.path for r in exchange.requests] == ["/v1/tables/t"]  # its timing


def test_push_over_websocket_stops_at_an_error_frame(exchange: Exchange) -> None:
    error = {"type": "error", "id": 0, "error": {"code": "invalid", "message": "unknown column b"}}
    connect = connector([error])
    result = invoke(exchange, "push", "t", "--ws", stdin='{"b": 1}\n', connect=connect)
    assert result.exit_code == 1
    assert result.stderr == (
        "error: invalid: write 1 (line 1) was refused: unknown column b; nothing was written\n"
    )


def test_push_over_websocket_says_what_was_written_around_a_refused_frame(
    exchange: Exchange,
) -> None:
    """Pipelined frames after a refused one are still answered before the push stops."""
    ack = {"type": "ack", "status": "done", "latency_ms": 0.1}
    error = {
        "type": "error",
        "id": 1,
        "error": {
            "code": "wrong_type",
            "message": "a must be int",
            "detail": {"path": "updates[1].insert.a"},
        },
    }
    connect = connector([{**ack, "id": 0}, error, {**ack, "id": 2}])
    rows = "".join(f'{{"a": {i}}}\n' for i in range(6))
    result = invoke(exchange, "push", "t", "--ws", "--batch", "2", stdin=rows, connect=connect)
    assert result.exit_code == 1
    assert result.stderr == (
        "error: wrong_type: write 2 (lines 3-4), at line 4, was refused: a must be int; "
        "4 rows in 2 other writes were written\n"
    )


def test_push_says_what_was_written_before_a_line_it_cannot_read(exchange: Exchange) -> None:
    """A bad line after some writes went out: the push stops there and says how many rows
    were written (it said only what was wrong with the line); over a WebSocket, after the
    frames in flight are answered."""
    rows = '{"a": 0}\n{"a": 1}\n{"a": 2}\n{"a": \n'
    exchange.on("POST", "/v1/tables/t/updates", answer(200, {"latency_ms": 0.1}))
    result = invoke(exchange, "push", "t", "--batch", "2", stdin=rows)
    assert result.exit_code == 1
    assert result.stderr == (
        "error: bad_input: line 4: not JSON (unexpected end of data at character 8)"
        "; 2 rows in 1 write before it were written\n"
    ), result.stderr
    ack = {"type": "ack", "status": "done", "latency_ms": 0.1}
    connect = connector([{**ack, "id": 0}])
    result = invoke(exchange, "push", "t", "--ws", "--batch", "2", stdin=rows, connect=connect)
    assert result.exit_code == 1
    assert "; 2 rows in 1 write before it were written\n" in result.stderr
    assert connect.connection.log == ["send", "recv"]


def test_push_over_http_says_where_it_stopped_and_what_was_written(exchange: Exchange) -> None:
    error = {
        "error": {
            "code": "wrong_type",
            "message": "b must be int",
            "detail": {"path": "columns.b[1]"},
        }
    }
    exchange.on(
        "GET", "/v1/tables/t", answer(200, {"name": "t", "columns": [{"name": "b", "type": "int"}]})
    )
    exchange.on(
        "POST", "/v1/tables/t/updates", answer(200, {"latency_ms": 0.1}), answer(422, error)
    )
    result = invoke(
        exchange, "push", "t", "--format", "csv", "--batch", "3", stdin="b\n1\n2\n3\n4\n5\n"
    )
    assert result.exit_code == 1
    assert result.stderr == (
        "error: wrong_type: write 2 (lines 5-6), at line 6, was refused: b must be int; "
        "3 rows in 1 other write were written\n"
    )


ROWS = {
    "time": 7,
    "frontier": [8],
    "rows": [
        {"data": {"root": 1, "node": 9}, "count": 1},
        {"data": {"root": 1, "node": 12}, "count": 3},
    ],
}


def test_peek_prints_a_table(exchange: Exchange) -> None:
    exchange.on("GET", "/v1/views/reach/rows", answer(200, ROWS))
    result = ok(invoke(exchange, "peek", "reach", "--as-of", "1,2"))
    assert exchange.last.url.params["as_of"] == "1,2"
    lines = result.stdout.splitlines()
    assert lines[0].strip() == "reach"
    assert re.search(r"root\W+node\W+count", result.stdout)
    assert any(re.search(r"\b1\b.*\b12\b.*\b3\b", line) for line in lines)
    assert lines[-1] == "time 7, frontier [8], 2 distinct rows"


def test_peek_tells_a_count_column_from_the_rows_count(exchange: Exchange) -> None:
    """Audit 106: a view with a column named count showed two count headers."""
    rows = {**ROWS, "rows": [{"data": {"g": "a", "count": 5}, "count": 2}]}
    exchange.on("GET", "/v1/views/n/rows", answer(200, rows))
    result = ok(invoke(exchange, "peek", "n"))
    assert re.search(r"g\W+count\W+\(row count\)", result.stdout), result.stdout
    assert any(re.search(r"\ba\b.*\b5\b.*\b2\b", line) for line in result.stdout.splitlines())


def test_peek_at_a_table_says_to_read_it_through_a_view(exchange: Exchange) -> None:
    missing = {"error": {"code": "not_found", "message": "no view named 'edges'", "detail": {}}}
    exchange.on("GET", "/v1/views/edges/rows", answer(404, missing))
    exchange.on("GET", "/v1/tables/edges", answer(200, EDGES))
    exchange.on("GET", "/v1/tables/nope", answer(404, missing))
    result = invoke(exchange, "peek", "edges")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: not_found: no view named 'edges'; edges is a table, and only views have rows: "
        'create a view of it ({"op": "table", "name": "edges"}) and peek at that\n'
    )
    exchange.on("GET", "/v1/views/nope/rows", answer(404, missing))
    result = invoke(exchange, "peek", "nope")  # neither: the server's answer as it is
    assert result.stderr == "error: not_found: no view named 'edges'\n"


def test_peek_json(exchange: Exchange) -> None:
    exchange.on("GET", "/v1/views/reach/rows", answer(200, ROWS))
    result = ok(invoke(exchange, "peek", "reach", "--json"))
    assert orjson.loads(result.stdout) == ROWS
    assert exchange.last.url.query == b""


TABLES = {
    "tables": [{**EDGES, "primary_key": [], "timing": "server", "rows": 1234, "readers": ["deg"]}]
}
VIEWS = {"views": [{"name": "deg", "columns": [], "inputs": ["edges"], "latency_ms": {"p50": 0.4}}]}


def test_ls(exchange: Exchange) -> None:
    exchange.on("GET", "/v1/tables", answer(200, TABLES))
    exchange.on("GET", "/v1/views", answer(200, VIEWS))
    result = ok(invoke(exchange, "ls"))
    table_line = next(line for line in result.stdout.splitlines() if "edges" in line)
    assert "src int, dst int" in table_line
    assert "1,234" in table_line
    assert "deg" in table_line
    view_line = next(line for line in result.stdout.splitlines() if "deg" in line and "0.4" in line)
    assert "edges" in view_line
    result = ok(invoke(exchange, "ls", "--json"))
    assert orjson.loads(result.stdout) == {"tables": TABLES["tables"], "views": VIEWS["views"]}


def test_errors_print_one_line_and_exit_1(exchange: Exchange) -> None:
    error = {"error": {"code": "not_found", "message": "no view named 'nope'", "detail": None}}
    exchange.on("GET", "/v1/views/nope/rows", answer(404, error))
    exchange.on("GET", "/v1/tables/nope", answer(404, error))
    result = invoke(exchange, "peek", "nope")
    assert result.exit_code == 1
    assert result.stderr == "error: not_found: no view named 'nope'\n"
    assert result.stdout == ""


def test_unreachable_server(exchange: Exchange) -> None:
    import httpx

    exchange.on("GET", "/v1/tables", httpx.ConnectError("[Errno 111] Connection refused"))
    result = invoke(exchange, "ls")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: connection_failed: GET http://127.0.0.1:8000/v1/tables: "
        "[Errno 111] Connection refused\n"
    )


def test_a_url_that_does_not_parse_is_one_line(exchange: Exchange) -> None:
    for url in ("http://[::1", "http://127.0.0.1:80x"):
        result = invoke(exchange, "--url", url, "ls")
        assert result.exit_code == 1, result.stderr
        assert result.stderr.startswith(f"error: connection_failed: bad URL {url!r}"), result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_peek_shows_strings_as_they_are(exchange: Exchange) -> None:
    values = ["[red]x[/red]", ":smile:", "oops [/red] here", "\\[esc]"]
    answer_rows = {
        "time": 1,
        "frontier": [2],
        "rows": [{"data": {"s": v}, "count": 1} for v in values],
    }
    exchange.on("GET", "/v1/views/v/rows", answer(200, answer_rows))
    result = ok(invoke(exchange, "peek", "v"))
    for v in values:
        assert v in result.stdout, (v, result.stdout)


def test_drop(exchange: Exchange) -> None:
    exchange.on("DELETE", "/v1/tables/edges", answer(204))
    exchange.on("DELETE", "/v1/views/deg", answer(204))
    assert ok(invoke(exchange, "drop", "table", "edges")).stdout == "dropped table edges\n"
    assert ok(invoke(exchange, "drop", "view", "deg")).stdout == "dropped view deg\n"
    assert [(r.method, r.url.path) for r in exchange.requests] == [
        ("DELETE", "/v1/tables/edges"),
        ("DELETE", "/v1/views/deg"),
    ]


def test_view_create_from_a_file_or_stdin(exchange: Exchange, tmp_path: Path) -> None:
    plan = {"op": "distinct", "input": {"op": "table", "name": "edges"}}
    exchange.on("POST", "/v1/views", answer(201, {"name": "d", "columns": EDGES["columns"]}))
    path = tmp_path / "plan.json"
    path.write_bytes(orjson.dumps(plan))
    result = ok(invoke(exchange, "view", "create", "d", "-f", str(path)))
    assert body_of(exchange.last) == {"name": "d", "query": plan}
    assert result.stdout == "created view d (src int, dst int)\n"
    ok(invoke(exchange, "view", "create", "d", "-f", "-", stdin=orjson.dumps(plan).decode()))
    assert body_of(exchange.last) == {"name": "d", "query": plan}
    assert invoke(exchange, "view", "create", "d", "-f", "-", stdin="{nope").exit_code == 2
    for not_a_plan in ("[1]", "5", '"x"', "null", "[]"):
        result = invoke(exchange, "view", "create", "d", "-f", "-", stdin=not_a_plan)
        assert result.exit_code == 2 and "must be a JSON object" in result.stderr, result.stderr
    wrapped = orjson.dumps({"name": "d", "query": plan}).decode()
    result = invoke(exchange, "view", "create", "d", "-f", "-", stdin=wrapped)
    assert result.exit_code == 2 and "the plan alone" in result.stderr, result.stderr
    assert invoke(exchange, "view", "create", "d", "-f", str(tmp_path / "missing")).exit_code == 2
    assert len(exchange.requests) == 2


def test_subscribe_prints_one_json_line_per_frame(exchange: Exchange) -> None:
    frames = [
        {"type": "diff", "seq": 0, "time": 4, "updates": [{"data": {"a": 1}, "diff": 1}]},
        {"type": "closed", "seq": 1, "reason": "view dropped"},
    ]
    connect = connector(frames)
    result = ok(
        invoke(exchange, "subscribe", "v", "--no-snapshot", "--no-progress", connect=connect)
    )
    assert [orjson.loads(line) for line in result.stdout.splitlines()] == frames
    assert connect.urls == [
        "ws://127.0.0.1:8000/v1/views/v/subscribe?snapshot=false&progress=false"
    ]


def test_load_polls_until_done(exchange: Exchange) -> None:
    exchange.on("POST", "/v1/tables/edges/loads", answer(202, {"id": "L1", "state": "queued"}))
    states = [
        {"id": "L1", "state": "queued", "rows": 0},
        {"id": "L1", "state": "running", "rows": 4},
        {"id": "L1", "state": "done", "rows": 10, "rows_per_s": 1000.0},
    ]
    exchange.on("GET", "/v1/loads/L1", *(answer(200, s) for s in states))
    args = ("--option", "mergeSchema=true", "--column", "src=from_id", "--column", "dst=to_id")
    more = ("--where", "w > 0", "--mode", "replace", "--time", "0", "--poll-s", "0")
    result = ok(invoke(exchange, "load", "edges", "--path", "/d/e.parquet", *args, *more))
    assert body_of(exchange.requests[0]) == {
        "source": {"path": "/d/e.parquet", "format": "parquet", "options": {"mergeSchema": "true"}},
        "columns": {"src": "from_id", "dst": "to_id"},
        "where": "w > 0",
        "mode": "replace",
        "time": 0,
    }
    assert len(exchange.requests) == 4
    assert result.stdout == "load L1 done: 10 rows into edges (1,000 rows/s)\n"


def test_a_slow_load_rate_keeps_its_digits(exchange: Exchange) -> None:
    """Audit 56: a load of one row at 0.377 rows a second printed "(0 rows/s)"."""
    exchange.on("POST", "/v1/tables/t/loads", answer(202, {"id": "L2", "state": "queued"}))
    done = {"id": "L2", "state": "done", "rows": 1, "rows_per_s": 0.377}
    exchange.on("GET", "/v1/loads/L2", answer(200, done))
    result = ok(invoke(exchange, "load", "t", "--sql", "SELECT 1 AS x", "--poll-s", "0"))
    assert result.stdout == "load L2 done: 1 row into t (0.377 rows/s)\n"


@pytest.mark.parametrize(
    ("state", "said"),
    [("cancelled", "cancelled load L1"), ("done", "load L1 was not cancelled: it is done")],
)
def test_ctrl_c_during_a_load_cancels_it_and_says_what_came_of_it(
    exchange: Exchange, monkeypatch: pytest.MonkeyPatch, state: str, said: str
) -> None:
    from clients import cli_load

    def interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_load, "_follow", interrupted)
    exchange.on("POST", "/v1/tables/edges/loads", answer(202, {"id": "L1", "state": "queued"}))
    exchange.on("DELETE", "/v1/loads/L1", answer(200, {"id": "L1", "state": state}))
    result = invoke(exchange, "load", "edges", "--path", "/d/e.parquet")
    assert result.exit_code == 130
    assert result.stderr == said + "\n"
    assert exchange.last.method == "DELETE"


def test_load_from_sql_that_fails(exchange: Exchange) -> None:
    exchange.on("POST", "/v1/tables/edges/loads", answer(202, {"id": 7, "state": "queued"}))
    error = {"code": "source_unreadable", "message": "table db.t not found"}
    exchange.on("GET", "/v1/loads/7", answer(200, {"id": 7, "state": "failed", "error": error}))
    result = invoke(exchange, "load", "edges", "--sql", "SELECT * FROM db.t", "--poll-s", "0")
    assert body_of(exchange.requests[0]) == {
        "source": {"sql": "SELECT * FROM db.t"},
        "mode": "append",
    }
    assert result.exit_code == 1
    assert result.stderr == "error: source_unreadable: table db.t not found\n"


def test_load_of_a_missing_column_says_which_option_maps_it(exchange: Exchange) -> None:
    exchange.on("POST", "/v1/tables/edges/loads", answer(202, {"id": 8, "state": "queued"}))
    error = {
        "code": "column_missing",
        "message": "source column 'src' (for table column 'src') is not in the source; "
        'available columns: a (bigint). Map it with "columns": {"src": "<source column>"}',
        "detail": {"column": "src", "source_column": "src", "available": ["a"]},
    }
    exchange.on("GET", "/v1/loads/8", answer(200, {"id": 8, "state": "failed", "error": error}))
    result = invoke(exchange, "load", "edges", "--path", "/d/e.parquet", "--poll-s", "0")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "available columns: a (bigint). Map it with --column src=<source column>\n"
    ), result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--path", "/d/e.parquet", "--sql", "SELECT 1"),
        (),
        ("--source-table", "db.t", "--format", "csv"),
        ("--path", "/d/e.txt"),
        ("--path", "/d/e.csv", "--option", "header"),
    ],
)
def test_load_usage_errors_exit_2(exchange: Exchange, args: tuple[str, ...]) -> None:
    assert invoke(exchange, "load", "edges", *args).exit_code == 2
    assert exchange.requests == []


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The arguments of each ``api.server.main`` call ``difflow serve`` makes (none runs)."""
    calls: list[dict[str, Any]] = []
    server = types.ModuleType("api.server")
    server.main = lambda **kwargs: calls.append(kwargs)  # type: ignore[attr-defined]
    package = types.ModuleType("api")
    package.server = server  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "api", package)
    monkeypatch.setitem(sys.modules, "api.server", server)
    return calls


def test_serve_calls_the_server_with_flags_and_environment(
    exchange: Exchange, served: list[dict[str, Any]], tmp_path: Path
) -> None:
    env = {"DIFFLOW_PORT": "9001", "DIFFLOW_HEARTBEAT_S": "2.5"}
    ok(
        invoke(
            exchange,
            "serve",
            "--data-dir",
            str(tmp_path),
            "--max-batch",
            "10",
            "--history",
            "7",
            env=env,
        )
    )
    # the options' text, as typed or set: the server's settings parse it (and fill in the
    # defaults), so that a value that does not parse is one line naming it, as one out of range
    assert served == [
        {
            "host": None,
            "port": "9001",
            "data_dir": str(tmp_path),
            "max_body_mb": None,
            "max_batch": "10",
            "subscriber_buffer": None,
            "heartbeat_s": "2.5",
            "history": "7",
            "warmup": None,
        }
    ]
    assert exchange.requests == []


@pytest.mark.parametrize(
    ("args", "env", "passed"),
    [(("--no-warmup",), {}, False), ((), {"DIFFLOW_WARMUP": "0"}, None)],
)
def test_serve_without_warmup_by_flag_or_environment(
    exchange: Exchange,
    served: list[dict[str, Any]],
    args: tuple[str, ...],
    env: dict,
    passed: bool | None,
) -> None:
    """The flag is passed; the variable is left to the server's settings, which read it
    (tests/service/test_settings.py), so that a bad one is one line there too."""
    ok(invoke(exchange, "serve", *args, env=env))
    assert [c["warmup"] for c in served] == [passed]


@pytest.mark.parametrize(
    "args",
    [
        ("peek", "v", "--as-of", "x"),
        ("peek", "v", "--as-of", "1,-2"),
        ("push", "t", "--time", "soon"),
        ("push", "t", "--batch", "0"),
        ("push", "t", "--format", "xml"),
    ],
)
def test_bad_options_are_usage_errors(exchange: Exchange, args: tuple[str, ...]) -> None:
    result = invoke(exchange, *args, stdin='{"a": 1}\n')
    assert result.exit_code == 2
    assert exchange.requests == []


# --- audit 89 -------------------------------------------------------------------------------


def test_push_a_later_write_without_an_answer_says_what_was_written(exchange: Exchange) -> None:
    """Audit 89 F1: a write after the first that timed out (or lost its connection) ended
    in a traceback (the error was rebuilt with a status ``ConnectionFailed`` does not take);
    now one line names the write, says it may still be carried out, and counts the rows of
    the writes before it. So does moving the frontier at the end."""
    done = answer(200, {"status": "done", "latency_ms": 0.1})
    rows = "".join(f'{{"a": {i}}}\n' for i in range(5))
    for failure, code, said in (
        (httpx.ReadTimeout("timed out"), "timed_out", "no answer within the timeout"),
        (httpx.ConnectError("[Errno 111] Connection refused"), "connection_failed", "refused"),
    ):
        exchange.on("POST", "/v1/tables/t/updates", done, done, failure)
        result = invoke(exchange, "--timeout", "1", "push", "t", "--batch", "2", stdin=rows)
        assert result.exit_code == 1, result.exception
        (line,) = result.stderr.splitlines()
        assert line.startswith(
            f"error: {code}: write 3 (line 5) got no answer, and may still be carried out: "
            "POST http://127.0.0.1:8000/v1/tables/t/updates"
        ), line
        assert said in line
        assert line.endswith("; 4 rows in 2 writes before it were written"), line
    exchange.on("GET", "/v1/tables/t", answer(200, {**CLIENT_TIMED, "frontier": [0]}))
    exchange.on("POST", "/v1/tables/t/updates", done, httpx.ReadTimeout("timed out"))
    result = invoke(exchange, "push", "t", "--time", "1", "--advance-to", "2", stdin=rows)
    assert result.exit_code == 1, result.exception
    assert result.stderr.startswith(
        "error: timed_out: 5 rows in 1 write were written, then moving the frontier to 2 got "
        "no answer (it may still be carried out): POST "
    ), result.stderr


def test_push_input_that_is_not_utf8_names_its_line(exchange: Exchange, tmp_path: Path) -> None:
    """Audit 89 F2: a byte that is not UTF-8 ended in a traceback (on stdin before anything
    was sent), never saying what had been written; now it is a bad line like any other, in
    JSON lines and CSV, from a file or stdin, over HTTP or a WebSocket. A plan file that
    is not UTF-8 is a usage error, as one that is not JSON."""
    exchange.on(
        "GET",
        "/v1/tables/t",
        answer(200, {"name": "t", "columns": [{"name": "a", "type": "string"}]}),
    )
    exchange.on("POST", "/v1/tables/t/updates", answer(200, {"latency_ms": 0.1}))
    jsonl = b'{"a": "x"}\n{"a": "y"}\n\n{"a": "caf\xe9"}\n'
    expected = (
        "error: bad_input: line 4: not UTF-8 text (byte 0xe9 at character 11); "
        "2 rows in 1 write before it were written\n"
    )
    file = tmp_path / "t.jsonl"
    file.write_bytes(jsonl)
    for args, stdin in ((("-f", str(file)), None), ((), jsonl)):
        result = invoke(exchange, "push", "t", "--batch", "2", *args, stdin=stdin)
        assert (result.exit_code, result.stderr) == (1, expected), result.exception
    csv_file = tmp_path / "t.csv"
    csv_file.write_bytes(b"a\nx\ny\n\xff\n")
    result = invoke(exchange, "push", "t", "--batch", "2", "-f", str(csv_file))
    assert result.stderr == (
        "error: bad_input: line 4: not UTF-8 text (byte 0xff at character 1); "
        "2 rows in 1 write before it were written\n"
    )
    connect = connector([{"type": "ack", "id": 0, "status": "done", "latency_ms": 0.1}])
    result = invoke(exchange, "push", "t", "--ws", "--batch", "2", stdin=jsonl, connect=connect)
    assert (result.exit_code, result.stderr) == (1, expected), result.exception
    plan = tmp_path / "plan.json"
    plan.write_bytes(b'{"op": "table", "name": "\xe9"}')
    result = invoke(exchange, "view", "create", "v", "-f", str(plan))
    assert result.exit_code == 2
    assert "line 1: not UTF-8 text (byte 0xe9 at character 26)" in result.stderr


def test_push_csv_takes_long_values_and_names_the_line_it_cannot_read(
    exchange: Exchange, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Audit 89 F3: a value over csv's default 131,072 characters ended in a traceback."""
    exchange.on(
        "GET",
        "/v1/tables/t",
        answer(200, {"name": "t", "columns": [{"name": "a", "type": "string"}]}),
    )
    exchange.on("POST", "/v1/tables/t/updates", answer(200, {"latency_ms": 0.1}))
    long = "x" * 200_000
    ok(invoke(exchange, "push", "t", "--format", "csv", stdin=f"a\nshort\n{long}\n"))
    assert body_of(exchange.last) == {"columns": {"a": ["short", long]}}
    monkeypatch.setattr(cli_records, "_CSV_FIELD_LIMIT", 10)  # any csv.Error, named
    text = 'a\nshort\n\n"multi\nline"\n' + "y" * 11 + "\n"
    result = invoke(exchange, "push", "t", "--format", "csv", "--batch", "1", stdin=text)
    assert result.stderr == (
        "error: bad_input: line 6: not CSV (field larger than field limit (10)); "
        "2 rows in 2 writes before it were written\n"
    ), result.stderr


def test_push_times_with_the_wrong_number_of_coordinates_are_refused_before_writing(
    exchange: Exchange,
) -> None:
    """Audit 89 F4 and F5: ``--time 10,20`` on a 1-D table spread CSV rows over times 10
    and 20 (the server reads a columnar write's list of times as one per row), and
    ``--advance-to 1,2`` was refused only after the rows were written."""
    exchange.on(
        "GET", "/v1/tables/t", answer(200, {**CLIENT_TIMED, "time_dims": 1, "frontier": [0]})
    )
    cases = [
        (("--format", "csv", "--time", "10,20"), "a\n1\n2\n", "--time 10,20 has 2 coordinates"),
        (
            ("--time", "20", "--advance-to", "1,2"),
            '{"a": 1}\n',
            "--advance-to 1,2 has 2 coordinates",
        ),
    ]
    for extra in ((), ("--ws",)):
        for args, stdin, said in cases:
            result = invoke(exchange, "push", "t", *args, *extra, stdin=stdin)
            assert result.exit_code == 1, result.exception
            assert result.stderr == (
                f"error: bad_input: {said}, but the times of table t have 1; nothing was written\n"
            )
    exchange.on("GET", "/v1/tables/t", answer(200, {**CLIENT_TIMED, "time_dims": 2}))
    result = invoke(exchange, "push", "t", "--time", "5", stdin='{"a": 1}\n')
    assert result.stderr == (
        "error: bad_input: --time 5 has 1 coordinate, but the times of table t have 2; "
        "nothing was written\n"
    )
    assert {r.method for r in exchange.requests} == {"GET"}


WS_ACK = {"type": "ack", "status": "done", "latency_ms": 0.1}


def _ws_push_failure(exchange: Exchange, connection: StubConnection) -> str:
    """The one line a ``--ws`` push of 7 rows in writes of 2 prints when ``connection``
    fails it."""
    rows = "".join(f'{{"a": {i}}}\n' for i in range(7))
    result = invoke(
        exchange, "push", "t", "--ws", "--batch", "2", stdin=rows, connect=Connector(connection)
    )
    assert result.exit_code == 1, result.exception
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: connection_failed: connection to ws://"), line
    return line


def test_push_over_websocket_says_what_was_written_when_the_connection_is_lost(
    exchange: Exchange,
) -> None:
    """Audit 89 F7: the lost connection's line said how many frames got no answer, but not
    what the acknowledged ones wrote."""
    lost = ConnectionClosedError(Close(1009, "message too big"), None)
    line = _ws_push_failure(
        exchange, StubConnection([{**WS_ACK, "id": 0}, {**WS_ACK, "id": 1}, lost])
    )
    assert line.endswith(
        "; 2 frame(s) sent got no answer (each may or may not have been applied); "
        "4 rows in 2 acknowledged writes were written"
    ), line


def test_push_over_websocket_counts_the_answers_that_came_before_a_send_failed(
    exchange: Exchange,
) -> None:
    """A server shutting down answers the frames it read, then closes with 1012: the next
    send fails, and the acks already on the socket are read and counted (they were said to
    have got no answer, each maybe not applied, so a careful user would send them again)."""
    closing = ConnectionClosedError(Close(1012, "server shutting down"), None)
    acks = [{**WS_ACK, "id": 0}, {**WS_ACK, "id": 1}]
    line = _ws_push_failure(exchange, StubConnection([*acks, closing], send_fails=closing, sends=2))
    assert line.endswith(
        " lost: received 1012 (service restart) server shutting down; no close frame sent; "
        "4 rows in 2 acknowledged writes were written"
    ), line
    # one answer came, one did not: a stopping server (1012) had not read that one, so it
    # was not applied
    line = _ws_push_failure(
        exchange, StubConnection([acks[0], closing], send_fails=closing, sends=2)
    )
    assert line.endswith(
        "; the server stopped before reading the last 1 frame(s) sent, so none of them was "
        "applied; 2 rows in 1 acknowledged write were written"
    ), line
    # a connection lost otherwise leaves the frame in doubt
    reset = ConnectionClosedError(None, None)
    line = _ws_push_failure(exchange, StubConnection([acks[0], reset], send_fails=reset, sends=2))
    assert line.endswith(
        "; 1 frame(s) sent got no answer (each may or may not have been applied); "
        "2 rows in 1 acknowledged write were written"
    ), line


def test_push_refusals_name_lines_as_input_errors_do(exchange: Exchange) -> None:
    """Audit 89 F8: refusals counted "input rows" (blank lines and the CSV header not
    counted) where unreadable input named lines; both name the input's lines now (a CSV
    record's first line)."""

    def refusal(path: str) -> httpx.Response:
        error = {"code": "wrong_type", "message": "no", "detail": {"path": path}}
        return answer(422, {"error": error})

    exchange.on("POST", "/v1/tables/t/updates", refusal("updates[1].insert.a"))
    result = invoke(exchange, "push", "t", stdin='\n{"a": 0}\n\n\n{"a": "x"}\n')
    assert result.stderr == (
        "error: wrong_type: write 1 (lines 2-5), at line 5, was refused: no; nothing was written\n"
    )
    exchange.on(
        "GET",
        "/v1/tables/t",
        answer(200, {"name": "t", "columns": [{"name": "s", "type": "string"}]}),
    )
    exchange.on("POST", "/v1/tables/t/updates", refusal("columns.s[2]"))
    text = 's\n"two\nlines"\n\nx\n"three\n\nlines"\n'
    result = invoke(exchange, "push", "t", "--format", "csv", stdin=text)
    assert result.stderr == (
        "error: wrong_type: write 1 (lines 2-6), at line 6, was refused: no; nothing was written\n"
    )


@pytest.mark.parametrize("key", ["", "a,,b", "a,"])
def test_an_empty_primary_key_name_is_a_usage_error(exchange: Exchange, key: str) -> None:
    """Audit 89 F9: ``--primary-key ""`` made a table without a key."""
    result = invoke(exchange, "table", "create", "t", "--column", "a:int", "--primary-key", key)
    assert result.exit_code == 2
    assert "--primary-key" in result.stderr
    assert exchange.requests == []


def test_primary_key_names_are_stripped(exchange: Exchange) -> None:
    """Audit 89 F9: ``--primary-key "a, b"`` named a column " b"."""
    exchange.on("POST", "/v1/tables", answer(201, EDGES))
    args = ("--column", "a:int", "--column", "b:int", "--column", "c:int")
    ok(
        invoke(
            exchange, "table", "create", "t", *args, "--primary-key", "a, b", "--primary-key", " c"
        )
    )
    assert body_of(exchange.last)["primary_key"] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("value", "kind"), [("1_000", "int"), ("1_0.5", "float"), ("1e1_0", "float")]
)
def test_push_csv_numbers_with_underscores_are_refused(
    exchange: Exchange, value: str, kind: str
) -> None:
    """Audit 89 F10: Python's int() and float() take ``1_000``; JSON does not."""
    description = {"name": "t", "columns": [{"name": "n", "type": kind}]}
    exchange.on("GET", "/v1/tables/t", answer(200, description))
    result = invoke(exchange, "push", "t", "--format", "csv", stdin=f"n\n{value}\n")
    assert result.exit_code == 1
    assert result.stderr == f"error: bad_input: line 2, column n: {value!r} is not of type {kind}\n"
    assert [r.method for r in exchange.requests] == ["GET"]


def test_a_byte_order_mark_is_skipped_in_json_lines_and_plans(
    exchange: Exchange, tmp_path: Path
) -> None:
    """Audit 89 F11: CSV skipped a byte order mark; JSON lines and plan files refused it."""
    exchange.on("POST", "/v1/tables/t/updates", answer(200, {"latency_ms": 0.1}))
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(b'\xef\xbb\xbf{"a": 1}\n')
    for args, stdin in ((("-f", str(rows)), None), ((), rows.read_bytes())):
        ok(invoke(exchange, "push", "t", *args, stdin=stdin))
        assert body_of(exchange.last) == {"updates": [{"insert": {"a": 1}}]}
    plan = {"op": "table", "name": "t"}
    exchange.on("POST", "/v1/views", answer(201, {"name": "v", "columns": []}))
    path = tmp_path / "plan.json"
    path.write_bytes(b"\xef\xbb\xbf" + orjson.dumps(plan))
    ok(invoke(exchange, "view", "create", "v", "-f", str(path)))
    assert body_of(exchange.last) == {"name": "v", "query": plan}


def test_peek_and_ls_escape_control_characters(exchange: Exchange) -> None:
    """Audit 89 F12: a value holding ESC went to the terminal as it is, and could recolour
    it or move its cursor; control characters are shown escaped now (newlines as they are,
    as a cell shows them). Audit 115: a tab too (a cell broke the line at it)."""
    values = ["\x1b[31mRED", "a\rb", "bell\x07", "c1\x9b2J", "t1\tt2"]
    rows = {"time": 1, "frontier": [2], "rows": [{"data": {"s": v}, "count": 1} for v in values]}
    exchange.on("GET", "/v1/views/v/rows", answer(200, rows))
    result = ok(invoke(exchange, "peek", "v"))
    for shown in ("\\x1b[31mRED", "a\\rb", "bell\\x07", "c1\\x9b2J", "t1\\tt2"):
        assert shown in result.stdout, (shown, result.stdout)
    tables = {"tables": [{**EDGES, "name": "e\x1bdges", "primary_key": ["s\x1brc"], "readers": []}]}
    exchange.on("GET", "/v1/tables", answer(200, tables))
    exchange.on("GET", "/v1/views", answer(200, {"views": []}))
    result = ok(invoke(exchange, "ls"))
    assert "e\\x1bdges" in result.stdout and "s\\x1brc" in result.stdout, result.stdout
    for output in (result.stdout, ok(invoke(exchange, "peek", "v")).stdout):
        assert not any(c in output for c in "\x1b\r\x07\x9b\t"), output


def test_push_over_websocket_names_every_refused_write(exchange: Exchange) -> None:
    """Audit 89 F13: with pipelined frames, only the first refused write was named."""
    ack = {"type": "ack", "status": "done", "latency_ms": 0.1}

    def error(frame: int) -> dict[str, Any]:
        return {"type": "error", "id": frame, "error": {"code": "wrong_type", "message": "no"}}

    frames = [{**ack, "id": 0}, error(1), {**ack, "id": 2}, *(error(i) for i in range(3, 9))]
    rows = [f'{{"a": {i}}}\n' for i in range(9)]
    for answered, also in (
        (frames[:4], "write 4 was refused too"),
        (frames[:6], "writes 4, 5 and 6 were refused too"),
        (frames, "writes 4, 5, 6, 7 and 2 more were refused too"),
    ):
        connect = connector(answered)
        result = invoke(
            exchange,
            "push",
            "t",
            "--ws",
            "--batch",
            "1",
            stdin="".join(rows[: len(answered)]),
            connect=connect,
        )
        assert result.stderr == (
            f"error: wrong_type: write 2 (line 2) was refused: no; {also}; "
            "2 rows in 2 other writes were written\n"
        ), result.stderr


def test_the_timeout_says_what_it_does_not_bound(exchange: Exchange) -> None:
    """Audit 89 F6: ``--timeout`` does not bound WebSocket answers or a load (by design:
    a subscription waits for changes, a load for Spark); its help says so."""
    result = ok(invoke(exchange, "--help"))
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.stdout).split())
    assert "Not for the answers of push --ws, subscribe or load" in text, text


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        found.append((*path, name))
        if hasattr(command, "commands"):
            found.extend(_commands(command, (*path, name)))
    return found


def test_help_breaks_lines_at_the_terminal_not_where_the_source_does(exchange: Exchange) -> None:
    """At 200 columns every command's line in a listing is one line, and so is each
    paragraph of its own help: a docstring's line breaks do not reach the terminal (the
    listing showed ``serve``'s and ``warmup``'s over three lines each)."""
    commands = _commands(typer.main.get_group(app))
    assert ("serve",) in commands and ("table", "create") in commands
    for path in [(), *commands]:
        text = ok(invoke(exchange, *path, "--help")).stdout
        if "Commands" in text:  # a group: one row per command, each on one line
            panel = text[text.index("Commands") :].split("╰")[0].splitlines()[1:]
            rows = [line.strip("│ ").split()[0] for line in panel]
            assert sorted(rows) == sorted(c[-1] for c in commands if c[:-1] == path), text
        about = text.split("Usage:")[1].split("╭")[0].splitlines()[1:]
        for above, below in itertools.pairwise(about):
            assert not (above.strip() and below.strip()), (path, text)
