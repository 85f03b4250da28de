"""Settings from flags and ``DIFFLOW_*`` variables: values that do not parse or are out of
range stop the server with one clear line, never a traceback or a silently changed value."""

from __future__ import annotations

import subprocess
import sys

import pytest

from service.errors import SettingsError
from service.settings import Settings
from tests.service.server import ROOT


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("PORT", "abc", "DIFFLOW_PORT must be an integer, not 'abc'"),
        ("PORT", "70000", "port (--port / DIFFLOW_PORT) must be from 0 to 65535, not 70000"),
        ("MAX_BATCH", "0", "max_batch (--max-batch / DIFFLOW_MAX_BATCH) must be at least 1"),
        ("HISTORY", "-1", "history (--history / DIFFLOW_HISTORY) must be at least 1, not -1"),
        ("ITERATE_ROUND_LIMIT", "abc", "DIFFLOW_ITERATE_ROUND_LIMIT must be an integer"),
        ("LOAD_WORKERS", "0", "load_workers (DIFFLOW_LOAD_WORKERS) must be at least 1, not 0"),
        ("HEARTBEAT_S", "0", "heartbeat_s (--heartbeat-s / DIFFLOW_HEARTBEAT_S) must be"),
        ("WARMUP", "maybe", "DIFFLOW_WARMUP must be true or false"),
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


def test_the_server_exits_with_one_line() -> None:
    """Not the port modulo 65,536 (70000 listened on 4464), not a traceback: status 2."""
    run = subprocess.run(
        [sys.executable, "-m", "api.server", "--port", "70000", "--no-warmup"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run
    assert run.stderr.strip().splitlines() == [
        "difflow: port (--port / DIFFLOW_PORT) must be from 0 to 65535, not 70000"
    ]
    assert "listening" not in run.stdout
