"""The process-wide SparkSession: created lazily on the first load, shared by every load.

Invariants:
- At most one session exists per process; ``get_spark`` creates it under a lock, so concurrent
  first loads start Spark once. Later calls return the running session and ignore their
  settings argument (the first caller configures the session), unless its driver JVM has
  exited: then the dead session is dropped and a new one started.
- The default target is an embedded ``local[*]`` Spark tuned to start fast and quietly: no UI,
  few shuffle partitions, log level ERROR, Arrow enabled, a small driver heap, an in-memory
  catalog and a temporary warehouse directory (under ``<data dir>/spark`` or the system temp
  dir) that ``stop`` removes.
- ``DIFFLOW_SPARK_MASTER`` points the session at a cluster master, ``DIFFLOW_SPARK_REMOTE`` at a
  Spark Connect server (``sc://host:15002``); ``DIFFLOW_SPARK_CONF`` adds configuration as
  ``k=v,k=v`` or a JSON object and wins over the defaults.
- Every failure to start becomes ``LoadError(code="spark_unavailable")`` whose message says how
  to fix it; nothing from pyspark or py4j leaks past this module on start.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from service.errors import LoadError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkSettings", "get_spark", "parse_spark_conf", "stop"]

#: Rows per Arrow batch when the caller does not choose; also the session default.
DEFAULT_BATCH_ROWS = 65_536

# Quiet log4j2 config for the driver JVM. The PythonGatewayServer logger is the one Spark
# compares with the root level to decide whether to print "Setting default log level".
# ``trace``: how much of an exception's Java stack to print (``_trace``).
_LOG4J2 = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex{{{trace}}}
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
"""


# log4j's levels, for the Spark driver's log (``DIFFLOW_SPARK_LOG_LEVEL``)
LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")


@dataclass(frozen=True)
class SparkSettings:
    """Where Spark runs and how it is configured; ``from_env`` reads ``DIFFLOW_*``."""

    master: str = "local[*]"
    remote: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    data_dir: Path | None = None
    log_level: str = "ERROR"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SparkSettings:
        env = os.environ if environ is None else environ
        data_dir = env.get("DIFFLOW_DATA_DIR")
        given = env.get("DIFFLOW_SPARK_LOG_LEVEL") or "ERROR"
        level = given.upper()
        if level not in LOG_LEVELS:
            raise LoadError(
                f"DIFFLOW_SPARK_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, not {given!r}",
                code="spark_unavailable",
            )
        return cls(
            master=env.get("DIFFLOW_SPARK_MASTER") or "local[*]",
            remote=env.get("DIFFLOW_SPARK_REMOTE") or None,
            conf=parse_spark_conf(env.get("DIFFLOW_SPARK_CONF", "")),
            data_dir=Path(data_dir) if data_dir else None,
            log_level=level,
        )


def parse_spark_conf(text: str) -> dict[str, str]:
    """``"a=1,b=x"`` or ``'{"a": 1, "b": "x"}'`` -> ``{"a": "1", "b": "x"}``."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _conf_error(f"not valid JSON ({exc.msg} at position {exc.pos})") from exc
        if not isinstance(raw, dict):
            raise _conf_error("the JSON must be an object of key to value")
        return {str(k): _conf_value(v) for k, v in raw.items()}
    conf: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _conf_error(f"{item.strip()!r} is not of the form key=value")
        conf[key.strip()] = value.strip()
    return conf


def _conf_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _conf_error(why: str) -> LoadError:
    return LoadError(
        f"DIFFLOW_SPARK_CONF: {why}; write it as k=v,k=v or as a JSON object",
        code="spark_unavailable",
    )


@dataclass
class _Running:
    session: SparkSession
    scratch_dir: Path | None


_lock = threading.Lock()
_running: _Running | None = None
_log = logging.getLogger(__name__)


def get_spark(settings: SparkSettings | None = None) -> SparkSession:
    """The shared session, started on first use with ``settings`` (default: from the env),
    and started again when its driver JVM has exited (killed, out of memory)."""
    global _running
    running = _running
    if running is not None and _driver_alive():
        return running.session
    with _lock:
        if _running is not None and not _driver_alive():
            _log.warning("the Spark driver JVM has exited; starting a new Spark session")
            _discard(_running)
            _running = None
        if _running is None:
            _running = _start(settings if settings is not None else SparkSettings.from_env())
        return _running.session


def _driver_alive() -> bool:
    """Whether the driver JVM this process launched still runs (always true of a session it
    did not launch: Spark Connect)."""
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    return process is None or process.poll() is None


def _discard(running: _Running) -> None:
    """Forget a session whose driver JVM is gone, so that the next one launches its own."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    try:
        running.session.stop()  # the JVM is gone: this fails part way
    except Exception:  # nothing of it can be saved
        _log.debug("stopping the dead Spark session failed", exc_info=True)
    with SparkContext._lock:  # what pyspark keeps per process, which a new session reuses
        SparkContext._active_spark_context = None
        SparkContext._gateway = None
        SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    if running.scratch_dir is not None:
        shutil.rmtree(running.scratch_dir, ignore_errors=True)


def stop() -> None:
    """Stop the shared session (tests, shutdown); the next ``get_spark`` starts a new one."""
    global _running
    with _lock:
        running, _running = _running, None
    if running is None:
        return
    try:
        running.session.stop()
    finally:
        if running.scratch_dir is not None:
            shutil.rmtree(running.scratch_dir, ignore_errors=True)


def _start(settings: SparkSettings) -> _Running:
    if settings.remote:
        return _Running(_start_remote(settings), scratch_dir=None)
    _require_java()
    scratch = _scratch_dir(settings.data_dir)
    try:
        session = _start_classic(settings, scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return _Running(session, scratch_dir=scratch)


def _scratch_dir(data_dir: Path | None) -> Path:
    """A fresh directory for the session's files, absolute (its log configuration is passed
    to the JVM as a file URI, which a relative data directory cannot give), named for this
    process. Those a killed server left beside it are removed first."""
    parent = None
    if data_dir is not None:
        parent = data_dir.absolute() / "spark"
        parent.mkdir(parents=True, exist_ok=True)
    prefix = f"difflow-spark-{os.getpid()}-"
    _remove_orphans(Path(parent if parent is not None else tempfile.gettempdir()))
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent)).absolute()


def _remove_orphans(parent: Path) -> None:
    """Remove the scratch directories under ``parent`` whose process no longer runs (a
    server killed before it could stop Spark). Another live server's are kept."""
    for path in parent.glob("difflow-spark-*-*"):
        pid = path.name.split("-")[2]
        if pid.isdigit() and pid != str(os.getpid()) and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _trace(level: str) -> str:
    """Java stack lines per logged exception: at the quiet levels (ERROR and above) its first
    3, as a source a load cannot read makes Spark log its task's failure at ERROR, 26-81 lines
    of stack each time (audit 105), which the load's own error already says; in full when
    asked for more (WARN and below)."""
    return "3" if level in ("OFF", "FATAL", "ERROR") else "full"


def _local_conf(settings: SparkSettings, scratch: Path) -> dict[str, str]:
    log4j = scratch / "log4j2.properties"
    log4j.write_text(_LOG4J2.format(level=settings.log_level, trace=_trace(settings.log_level)))
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j.as_uri()}",
        # A shuffle (GROUP BY, join) is split as finely as Spark's default and adaptive
        # execution merges its partitions toward 32 MiB (compressed, as Spark sizes them):
        # with 4, a GROUP BY making 60M groups gave partitions of 15M rows and ran the
        # driver out of heap.
        "spark.sql.shuffle.partitions": "200",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": "32m",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(scratch / "warehouse"),
        "spark.local.dir": str(scratch / "local"),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        # CSV rows are parsed whole, not only the mapped columns: FAILFAST then refuses a
        # row with fields beyond the header whatever columns a load maps (audit 85)
        "spark.sql.csv.parser.columnPruning.enabled": "false",
        # Each partition is buffered whole on the driver JVM while Python reads it.
        "spark.sql.files.maxPartitionBytes": "32m",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(DEFAULT_BATCH_ROWS),
    }
    if settings.master.startswith("local"):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def _start_classic(settings: SparkSettings, scratch: Path) -> SparkSession:
    if settings.master.startswith("local"):
        # Skips the hostname lookup (and its warning) when the JVM starts.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master(settings.master).appName("difflow")
        for key, value in {**_local_conf(settings, scratch), **settings.conf}.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel(settings.log_level)
        _quiet_query_context_loggers()
    except Exception as exc:
        raise LoadError(
            f"could not start Spark (master {settings.master!r}): {_first_line(exc)}. "
            "Check that Java 17 or 21 runs (java -version, JAVA_HOME), that the master URL "
            "(DIFFLOW_SPARK_MASTER) is reachable, and the settings in DIFFLOW_SPARK_CONF",
            code="spark_unavailable",
        ) from exc
    return session


def _start_remote(settings: SparkSettings) -> SparkSession:
    assert settings.remote is not None
    try:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.remote(settings.remote).appName("difflow")
        conf = {
            "spark.sql.execution.arrow.maxRecordsPerBatch": str(DEFAULT_BATCH_ROWS),
            **settings.conf,
        }
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        _quiet_query_context_loggers()
    except Exception as exc:
        raise LoadError(
            f"could not connect to Spark Connect at {settings.remote!r}: {_first_line(exc)}. "
            "Install the client (pip install 'pyspark[connect]'), check that the server runs "
            "and the URL (DIFFLOW_SPARK_REMOTE, e.g. sc://host:15002)",
            code="spark_unavailable",
        ) from exc
    return session


def _quiet_query_context_loggers() -> None:
    # pyspark logs every error that carries a query context (with a JVM stack trace) to these
    # loggers before raising it; loads translate and report those errors themselves.
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _require_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java"):
        return
    raise LoadError(
        "Spark needs Java, but no java was found"
        + (f" (JAVA_HOME={java_home} has no bin/java)" if java_home else "")
        + ": install Java 17 or 21 and put it on PATH or set JAVA_HOME, or point "
        "DIFFLOW_SPARK_REMOTE at a Spark Connect server (sc://host:15002)",
        code="spark_unavailable",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
