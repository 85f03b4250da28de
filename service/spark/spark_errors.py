"""Reading Spark's exceptions: the error condition and a one-line message, whatever the client.

Spark raises ``pyspark.errors`` exceptions (classic and Connect) that carry an error condition
such as ``PATH_NOT_FOUND``, and raw ``py4j`` ``Py4JJavaError`` for JVM failures pyspark does
not convert (e.g. an unreadable Parquet footer); both are read here so that the modules that
translate them into ``LoadError`` never look at exception internals.
"""

from __future__ import annotations

import re

__all__ = [
    "error_condition",
    "error_summary",
    "in_sql_text",
    "is_spark_error",
    "without_spark_advice",
]

_BRACKETED = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")
_SENTENCE = re.compile(r"(?<=\.)\s+")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?")
_MAX_CAUSES = 16
_JAVA_CLASS = re.compile(r"^(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*: ")


def is_spark_error(exc: BaseException) -> bool:
    """True for exceptions raised by pyspark, Spark Connect or the py4j bridge."""
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return False
    return isinstance(exc, PySparkException | Py4JError)


def error_condition(exc: BaseException) -> str | None:
    """Spark's error condition (``"PATH_NOT_FOUND"``, ``"UNRESOLVED_COLUMN.WITH_SUGGESTION"``),
    looked up on the exception, then along the chain of JVM causes."""
    for getter in ("getCondition", "getErrorClass"):
        method = getattr(exc, getter, None)
        if method is None:
            continue
        try:
            condition = method()
        except Exception:  # older clients lack one getter or the other
            continue
        if condition:
            return str(condition)
    for message in _messages(exc):
        match = _BRACKETED.search(message)
        if match:
            return match.group(1)
    return None


def error_summary(exc: BaseException) -> str:
    """One line of Spark's message, without the ``[CONDITION]`` prefix and SQLSTATE: from the
    first exception in the chain that names a condition, else from the root cause."""
    messages = [m for m in _messages(exc) if m.strip()]
    if not messages:
        return type(exc).__name__
    named = [m for m in messages if _BRACKETED.search(m)]
    if not named:
        return _line(messages[-1])
    # "error while reading file ..." says where; the condition it wraps says what
    wrapped = [m for m in named if not _condition_of(m).startswith(_WRAPPERS)]
    if _condition_of(named[0]).startswith(_WRAPPERS) and wrapped:
        return f"{_line(wrapped[0])} ({_line(named[0])})"
    return _line(named[0])


_WRAPPERS = ("FAILED_READ_FILE",)  # conditions that wrap the one that says what went wrong


def _condition_of(message: str) -> str:
    match = _BRACKETED.search(message)
    return match.group(1) if match else ""


def _line(message: str) -> str:
    """The first line of a message, without its class name, ``[CONDITION]`` and SQLSTATE."""
    line = next(line.strip() for line in message.splitlines() if line.strip())
    line = _BRACKETED.sub("", _JAVA_CLASS.sub("", line), count=1).strip()
    return _SQLSTATE.sub("", line).strip().rstrip(";. ")


def in_sql_text(exc: BaseException) -> bool:
    """Whether Spark places the failure in SQL text (a load's ``where`` or ``sql``: its
    message's query context reads ``== SQL (line 1, position 1) ==``) rather than in an
    expression built in code (``== DataFrame ==``, as the casts to a table's types are)."""
    return any("== SQL" in message for message in _messages(exc))


def without_spark_advice(line: str) -> str:
    """``line`` without Spark's advice to use ``try_cast`` or to turn ANSI mode off: either
    gives NULLs, which a table refuses (``null_value``)."""
    sentences = _SENTENCE.split(line)
    kept = [s for s in sentences if "try_cast" not in s and "spark.sql.ansi" not in s]
    return " ".join(kept).rstrip(";. ") if kept else line


def _messages(exc: BaseException) -> list[str]:
    """The Python message, then ``toString()`` of each JVM exception down the cause chain."""
    messages = []
    get_message = getattr(exc, "getMessage", None)
    try:
        text = get_message() if callable(get_message) else None
    except Exception:
        text = None
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if text or java is None:
        messages.append(str(text or exc))
    for _ in range(_MAX_CAUSES):
        if java is None:
            break
        try:
            messages.append(str(java.toString()))
            java = java.getCause()
        except Exception:  # the JVM may be gone; keep what was read
            break
    return messages
