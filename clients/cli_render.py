"""How the CLI shows server answers: rich tables for ``ls`` and ``peek``, progress bars, JSON.

Results go to standard output, progress bars to standard error, so output stays pipeable.
Consoles are made per call so they bind to the streams of that moment (tests swap them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from clients.wire import dumps

_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # control characters but \n

__all__ = [
    "columns_text",
    "counted",
    "json_text",
    "progress_bar",
    "rate_text",
    "rows_summary",
    "rows_table",
    "stdout",
    "tables_table",
    "views_table",
]


def counted(n: int, noun: str) -> str:
    """``1 row``, ``2,480 rows``: a count with its noun, plural but for one."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def rate_text(per_s: float) -> str:
    """A rate for people: whole numbers from 100 up, three significant digits below (a
    small load's 0.377 rows a second is not "0")."""
    return f"{per_s:,.0f}" if abs(per_s) >= 100 else f"{per_s:.3g}"


def stdout() -> Console:
    # no markup or emoji codes: values print as they are ("[red]x[/red]", ":smile:")
    return Console(soft_wrap=False, highlight=False, markup=False, emoji=False)


def json_text(value: Any) -> str:
    """``value`` as one line of JSON."""
    return dumps(value).decode()


def progress_bar() -> Progress:
    """A progress display on standard error counting rows (only when that is a terminal)."""
    console = Console(stderr=True)
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f} rows"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def columns_text(columns: Iterable[Mapping[str, Any]]) -> str:
    """``src int, dst int``."""
    return ", ".join(f"{c.get('name')} {c.get('type')}" for c in columns)


def _shown(text: str) -> str:
    """``text`` with its control characters escaped as Python writes them (``\x1b``,
    ``\r``), so that data cannot drive the terminal (colours, cursor moves, a line
    overwritten) and a tab (a cell broke the line at it, as at a newline); newlines stay,
    as a cell shows them."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def _cell(value: Any) -> str:
    return _shown(value) if isinstance(value, str) else json_text(value)


def _list(items: Iterable[Any]) -> str:
    return ", ".join(_cell(item) for item in items)


def _frontier(description: Mapping[str, Any]) -> str:
    return _cell(description.get("frontier", ""))


def tables_table(tables: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="tables")
    for header in ("name", "columns", "primary key", "timing", "rows", "frontier", "readers"):
        table.add_column(header, justify="right" if header == "rows" else "left")
    for t in tables:
        table.add_row(
            _cell(t.get("name", "")),
            _shown(columns_text(t.get("columns", []))),
            _list(t.get("primary_key") or []),
            f"{t.get('timing', '')} ({t.get('time_dims', 1)}d)",
            f"{t.get('rows', 0):,}",
            _frontier(t),
            _list(t.get("readers", [])),
        )
    return table


def views_table(views: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="views")
    headers = ("name", "state", "columns", "inputs", "rows", "frontier", "p50 ms", "p99 ms")
    for header in headers:
        table.add_column(header, justify="right" if header in headers[4:] else "left")
    for v in views:
        latency = v.get("latency_ms") or {}
        table.add_row(
            _cell(v.get("name", "")),
            _cell(v.get("state", "")),
            _shown(columns_text(v.get("columns", []))),
            _list(v.get("inputs", [])),
            f"{v.get('rows', 0):,}",
            _frontier(v),
            _cell(latency.get("p50", "")),
            _cell(latency.get("p99", "")),
        )
    return table


def rows_table(view: str, answer: Mapping[str, Any]) -> Table:
    """The ``rows`` answer of ``view``: one line per distinct row, with its count."""
    rows = answer.get("rows", [])
    names = list(rows[0]["data"]) if rows else []
    table = Table(title=_shown(view))
    for name in names:
        table.add_column(_shown(name))
    # each row's count, told apart from a column of the view named count (audit 106)
    table.add_column("count" if "count" not in names else "(row count)", justify="right")
    for row in rows:
        data = row["data"]
        table.add_row(*(_cell(data.get(name)) for name in names), str(row.get("count", "")))
    return table


def rows_summary(answer: Mapping[str, Any]) -> str:
    """``time 7, frontier [8], 2 distinct rows``: what a ``rows`` answer covers."""
    count = len(answer.get("rows", []))
    return (
        f"time {_cell(answer.get('time'))}, frontier {_frontier(answer)}, "
        f"{counted(count, 'distinct row')}"
    )
