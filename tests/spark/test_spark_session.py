"""The shared session: configuration parsing, one session per process, quiet local defaults,
and a clear error when Spark cannot start."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from service.errors import LoadError
from service.settings import Settings
from service.spark import SparkSettings, get_spark, parse_spark_conf, session

ROOT = Path(__file__).resolve().parents[2]


def test_conf_as_pairs_or_json() -> None:
    assert parse_spark_conf("") == {}
    assert parse_spark_conf("a.b=1, c = x=y") == {"a.b": "1", "c": "x=y"}
    assert parse_spark_conf('{"a": 2, "b": true, "c": "s"}') == {"a": "2", "b": "true", "c": "s"}


@pytest.mark.parametrize("text", ["novalue", "=1", "{bad json", "[1, 2]"])
def test_bad_conf_is_spark_unavailable(text: str) -> None:
    with pytest.raises(LoadError, match="DIFFLOW_SPARK_CONF") as info:
        parse_spark_conf(text)
    assert info.value.code == "spark_unavailable"


def test_settings_from_env(tmp_path: Path) -> None:
    settings = SparkSettings.from_env(
        {
            "DIFFLOW_SPARK_MASTER": "spark://h:7077",
            "DIFFLOW_SPARK_CONF": "spark.executor.memory=2g",
            "DIFFLOW_DATA_DIR": str(tmp_path),
            "DIFFLOW_SPARK_LOG_LEVEL": "warn",
        }
    )
    assert settings == SparkSettings(
        master="spark://h:7077",
        remote=None,
        conf={"spark.executor.memory": "2g"},
        data_dir=tmp_path,
        log_level="WARN",
    )
    assert SparkSettings.from_env({}) == SparkSettings()
    assert SparkSettings.from_env({"DIFFLOW_SPARK_REMOTE": "sc://h:15002"}).remote == "sc://h:15002"


def test_a_relative_data_dir_gives_absolute_spark_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``difflow serve`` defaults to ``./difflow-data``: the session's scratch directory and
    the log configuration's file URI must still be absolute (``as_uri`` refuses relative
    paths, and every load failed as spark_unavailable)."""
    monkeypatch.chdir(tmp_path)
    scratch = session._scratch_dir(Path("difflow-data"))
    assert scratch.is_absolute() and scratch.parent == tmp_path / "difflow-data" / "spark"
    conf = session._local_conf(SparkSettings(), scratch)
    assert f"file://{scratch}/log4j2.properties" in conf["spark.driver.extraJavaOptions"]
    assert "%ex{3}" in (scratch / "log4j2.properties").read_text()  # ERROR: short traces
    session._local_conf(SparkSettings(log_level="WARN"), scratch)
    assert "%ex{full}" in (scratch / "log4j2.properties").read_text()
    assert Settings().data_dir == tmp_path / "difflow-data"
    assert Settings.from_env(data_dir="rel").data_dir == tmp_path / "rel"


def test_a_killed_servers_scratch_dir_is_removed_at_the_next_start(tmp_path: Path) -> None:
    """A server killed before it stopped Spark leaves its scratch directory (audit 105); the
    next session's start removes those whose process is gone, and keeps a live one's."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        parent = tmp_path / "spark"
        parent.mkdir()
        orphan = parent / f"difflow-spark-{gone.pid}-x1"
        kept = parent / f"difflow-spark-{live.pid}-x2"
        other = parent / "difflow-spark-notes"
        for path in (orphan, kept, other):
            (path / "local").mkdir(parents=True)
        scratch = session._scratch_dir(tmp_path)
        assert scratch.name.startswith(f"difflow-spark-{os.getpid()}-")
        assert sorted(p.name for p in parent.iterdir()) == sorted(
            [kept.name, other.name, scratch.name]
        )
    finally:
        live.kill()
        live.wait()


@pytest.mark.spark
def test_one_session_for_all_threads(spark: Any) -> None:
    seen: list[Any] = []
    threads = [threading.Thread(target=lambda: seen.append(get_spark())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8
    assert all(session is spark for session in seen)


@pytest.mark.spark
def test_local_defaults(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    assert warehouse.parent.name.startswith("difflow-spark-")


@pytest.mark.spark
def test_no_java_is_spark_unavailable() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = str(Path(sys.executable).parent)
    code = (
        "from service.errors import LoadError\n"
        "from service.spark import get_spark\n"
        "try:\n    get_spark()\n"
        "except LoadError as e:\n    print(e.code, '|', e.message)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    if Path(env["PATH"], "java").exists():
        pytest.skip("java sits next to the python executable")
    code_out, _, message = result.stdout.partition(" | ")
    assert code_out == "spark_unavailable"
    assert "install Java 17 or 21" in message
