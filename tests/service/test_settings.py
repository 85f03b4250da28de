"""Settings from flags and ``DIFFLOW_*`` variables: values that do not parse or are out of
range stop the server with one clear line, never a traceback or a silently changed value."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from service.errors import SettingsError
from service.settings import Settings
from tests.service.server import ROOT, running_server


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("PORT", "abc", "port (--port / DIFFLOW_PORT) must be an integer, not 'abc'"),
        ("PORT", "70000", "port (--port / DIFFLOW_PORT) must be from 0 to 65535, not 70000"),
        ("MAX_BATCH", "0", "max_batch (--max-batch / DIFFLOW_MAX_BATCH) must be at least 1"),
        ("HISTORY", "-1", "history (--history / DIFFLOW_HISTORY) must be at least 1, not -1"),
        (
            "ITERATE_ROUND_LIMIT",
            "abc",
            "iterate_round_limit (DIFFLOW_ITERATE_ROUND_LIMIT) must be an integer, not 'abc'",
        ),
        ("LOAD_WORKERS", "0", "load_workers (DIFFLOW_LOAD_WORKERS) must be at least 1, not 0"),
        (
            "COMPLETION_ROWS_KEPT",
            "-1",
            "completion_rows_kept (DIFFLOW_COMPLETION_ROWS_KEPT) must be at least 0, not -1",
        ),
        ("HEARTBEAT_S", "0", "heartbeat_s (--heartbeat-s / DIFFLOW_HEARTBEAT_S) must be"),
        ("WARMUP", "maybe", "warmup (DIFFLOW_WARMUP) must be true or false"),
        ("HEARTBEAT_S", "soon", "heartbeat_s (--heartbeat-s / DIFFLOW_HEARTBEAT_S) must be a"),
        (
            "HEARTBEAT_S",
            "inf",
            "heartbeat_s (--heartbeat-s / DIFFLOW_HEARTBEAT_S) must be a finite",
        ),
        (
            "HEARTBEAT_S",
            "nan",
            "heartbeat_s (--heartbeat-s / DIFFLOW_HEARTBEAT_S) must be a finite",
        ),
    ],
)
def test_bad_values_are_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    monkeypatch.setenv(f"DIFFLOW_{variable}", value)
    with pytest.raises(SettingsError) as err:
        Settings.from_env()
    assert says in err.value.message


def test_a_flag_overrides_its_variable_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIFFLOW_PORT", "abc")
    monkeypatch.setenv("DIFFLOW_WARMUP", "off")
    settings = Settings.from_env(port=9001)
    assert settings.port == 9001 and settings.warmup is False
    with pytest.raises(SettingsError):
        Settings.from_env(port=65_536)


def test_a_flag_as_typed_is_parsed_as_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """``difflow serve`` passes its options' text: the settings parse it, and name the
    setting as for a value out of range."""
    settings = Settings.from_env(max_batch="10", heartbeat_s="2.5", data_dir="d", host="h")
    assert (settings.max_batch, settings.heartbeat_s, settings.host) == (10, 2.5, "h")
    with pytest.raises(SettingsError) as err:
        Settings.from_env(history="abc")
    assert (
        err.value.message == "history (--history / DIFFLOW_HISTORY) must be an integer, not 'abc'"
    )
    monkeypatch.setenv("DIFFLOW_MAX_BATCH", "")  # unset, as typer reads the flags' variables
    assert Settings.from_env().max_batch == Settings().max_batch


def refused(args: list[object], env: dict[str, str] | None = None) -> list[str]:
    """``python -m ARGS`` run to its end: status 2, its standard error's lines."""
    run = subprocess.run(
        [sys.executable, "-m", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run
    assert "listening" not in run.stdout
    return run.stderr.strip().splitlines()


@pytest.mark.parametrize("command", [["api.server"], ["clients.cli", "serve"]])
@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (  # not the port modulo 65,536 (70000 listened on 4464)
            ["--port", "70000"],
            {},
            "port (--port / DIFFLOW_PORT) must be from 0 to 65535, not 70000",
        ),
        (  # not typer's six-line usage box
            ["--history", "abc"],
            {},
            "history (--history / DIFFLOW_HISTORY) must be an integer, not 'abc'",
        ),
        (
            [],
            {"DIFFLOW_MAX_BATCH": "lots"},
            "max_batch (--max-batch / DIFFLOW_MAX_BATCH) must be an integer, not 'lots'",
        ),
        (
            ["--heartbeat-s", "soon"],
            {"DIFFLOW_HEARTBEAT_S": "5"},
            "heartbeat_s (--heartbeat-s / DIFFLOW_HEARTBEAT_S) must be a finite number, not 'soon'",
        ),
        (  # checked at start, not at the first load (audit 45: a traceback and status 3)
            [],
            {"DIFFLOW_SPARK_CONF": "garbage"},
            "DIFFLOW_SPARK_CONF: 'garbage' is not of the form key=value; write it as k=v,k=v "
            "or as a JSON object",
        ),
        (  # checked at start, not at the first load (audit 106: spark_unavailable after 15 s)
            [],
            {"DIFFLOW_SPARK_LOG_LEVEL": "loud"},
            "DIFFLOW_SPARK_LOG_LEVEL must be one of OFF, FATAL, ERROR, WARN, INFO, DEBUG, "
            "TRACE, ALL, not 'loud'",
        ),
    ],
)
def test_the_server_exits_with_one_line(
    command: list[str], args: list[str], env: dict[str, str], line: str
) -> None:
    """A setting the server cannot use: one line naming it, status 2, no traceback."""
    run = subprocess.run(
        [sys.executable, "-m", *command, *args, "--no-warmup"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run
    assert run.stderr.strip().splitlines() == [f"difflow: {line}"]
    assert "listening" not in run.stdout


@pytest.mark.parametrize("command", [["api.server"], ["clients.cli", "serve"]])
def test_a_data_dir_the_server_cannot_use_stops_it_at_start(
    command: list[str], tmp_path: Path
) -> None:
    """Audit 106: a file as the data dir was taken, and the first load then failed as
    ``internal``."""
    afile = tmp_path / "afile"
    afile.write_text("")
    for where, why in ((afile, "it is a file"), (afile / "sub", "Not a directory")):
        assert refused([*command, "--port", "0", "--no-warmup", "--data-dir", where]) == [
            f"difflow: --data-dir / DIFFLOW_DATA_DIR: cannot use {str(where)!r} as a "
            f"directory: {why}" + (", not a directory" if why == "it is a file" else "")
        ]
    made = tmp_path / "a" / "b"  # a path that can be made is made at start
    with running_server(made):
        assert made.is_dir()


def test_a_port_in_use_is_one_line_too(tmp_path: Path) -> None:
    """Audit 106: uvicorn's ``ERROR:    [Errno 98] ...`` and status 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        lines = refused(
            ["api.server", "--port", port, "--no-warmup"], {"DIFFLOW_DATA_DIR": str(tmp_path)}
        )
    assert lines == [
        f"difflow: --host / --port: cannot listen on 127.0.0.1 port {port}: Address already in use"
    ]


def test_a_bad_warmup_variable_is_one_line_too() -> None:
    """``--warmup/--no-warmup`` is a flag: its variable is read by the settings, not typer."""
    run = subprocess.run(
        [sys.executable, "-m", "clients.cli", "serve", "--port", "0"],
        cwd=ROOT,
        env={**os.environ, "DIFFLOW_WARMUP": "maybe"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run
    assert run.stderr.strip().splitlines() == [
        "difflow: warmup (DIFFLOW_WARMUP) must be true or false (1/0, yes/no, on/off), not 'maybe'"
    ]


@pytest.mark.parametrize(
    ("name", "value", "line"),
    [
        ("DIFFLOW_THREADS", "3", "DIFFLOW_THREADS must be 1 or 2, not '3'"),
        ("DIFFLOW_MALLOC", "bogus", "DIFFLOW_MALLOC must be 'tuned' or 'system', not 'bogus'"),
    ],
)
def test_a_bad_engine_variable_is_one_line_from_difflow_serve(
    name: str, value: str, line: str
) -> None:
    """The engine reads these as it loads: ``difflow serve`` printed its traceback, status 1."""
    run = subprocess.run(
        [sys.executable, "-m", "clients.cli", "serve", "--port", "0", "--no-warmup"],
        cwd=ROOT,
        env={**os.environ, name: value},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run
    assert run.stderr.strip().splitlines() == [f"difflow: {line}"]


def test_the_log_keeps_ours_at_info_and_others_at_warning() -> None:
    """Audit 51: py4j logs each failed call to a dead Spark driver at INFO, with its whole
    traceback chain (350,000 lines in 2 s when the JVM died); the server logged INFO for all."""
    script = (
        "import logging; from api.server import configure_logging; configure_logging(); "
        "logging.info('root chatter'); logging.getLogger('py4j.clientserver').info('py4j'); "
        "logging.getLogger('difflow.loads').info('ours'); "
        "logging.getLogger('service.spark.session').info('ours too'); "
        "logging.getLogger('py4j.clientserver').warning('a warning')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "INFO difflow.loads ours",
        "INFO service.spark.session ours too",
        "WARNING py4j.clientserver a warning",
    ], lines


def test_an_ipv6_host_is_printed_as_a_url(tmp_path: Path) -> None:
    """Audit 106: ``http://::1:PORT`` was printed, which no client takes as a URL."""
    with running_server(tmp_path, host="::1") as server:
        assert server.url.startswith("http://[::1]:")
        assert httpx.get(f"{server.url}/healthz", timeout=60).json() == {"status": "ok"}
