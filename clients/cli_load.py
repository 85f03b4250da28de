"""``difflow load``: start a Spark load into a table and follow it to the end.

The source is one of ``--path`` (with ``--format``, inferred from the file suffix when
omitted, and ``--option k=v``), ``--sql`` or ``--source-table``. The command polls
``GET /v1/loads/{id}`` every ``--poll-s`` seconds, feeding a progress bar with ``rows``, and
ends with a ``done`` line (exit 0) or the load's error (exit 1). Ctrl-C cancels the load.
"""

from __future__ import annotations

import re
import time
from enum import Enum
from pathlib import PurePath
from typing import Annotated, Any

import typer

from clients.cli_records import parse_pairs, parse_time
from clients.cli_render import counted, progress_bar, rate_text
from clients.cli_state import client_of
from clients.client import Client
from clients.errors import DifflowError

__all__ = ["LoadMode", "SourceFormat", "load"]

_FINAL_STATES = ("done", "failed", "cancelled")


class SourceFormat(Enum):
    parquet = "parquet"
    csv = "csv"
    json = "json"
    orc = "orc"


class LoadMode(Enum):
    append = "append"
    replace = "replace"


def load(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="The table to load into.")],
    path: Annotated[str | None, typer.Option(help="Files to read (Spark path).")] = None,
    source_format: Annotated[SourceFormat | None, typer.Option("--format")] = None,
    option: Annotated[list[str] | None, typer.Option(help="Spark reader option k=v.")] = None,
    sql: Annotated[str | None, typer.Option(help="A Spark SQL query as the source.")] = None,
    source_table: Annotated[str | None, typer.Option(help="A Spark table, db.t.")] = None,
    column: Annotated[
        list[str] | None, typer.Option(help="tablecol=sourcecol (default: same names).")
    ] = None,
    where: Annotated[str | None, typer.Option(help="Spark SQL filter on the source.")] = None,
    mode: Annotated[LoadMode, typer.Option(help="append rows, or replace the table.")] = (
        LoadMode.append
    ),
    at: Annotated[str | None, typer.Option("--time", help="Time of the rows: T or T1,T2.")] = None,
    poll_s: Annotated[float, typer.Option(min=0, help="Seconds between polls.")] = 0.5,
) -> None:
    """Load TABLE from files, a Spark table or a SQL query, and wait for the load to end."""
    client = client_of(ctx)
    source = _source(path, source_format, option or [], sql, source_table)
    columns = parse_pairs(column or [], "--column") or None
    load_time = None if at is None else parse_time(at, "--time")
    load_id = client.create_load(table, source, columns, where, mode.value, load_time)["id"]
    try:
        status = _follow(client, load_id, table, poll_s)
    except KeyboardInterrupt:
        state = client.cancel_load(load_id)["state"]
        if state == "cancelled":
            typer.echo(f"cancelled load {load_id}", err=True)
        else:  # too late: its write was in the engine already, or it had ended
            typer.echo(f"load {load_id} was not cancelled: it is {state}", err=True)
        raise typer.Exit(130) from None
    if status["state"] != "done":
        raise _load_error(load_id, status)
    rate = rate_text(status.get("rows_per_s") or 0)
    rows = counted(int(status.get("rows", 0)), "row")
    typer.echo(f"load {load_id} done: {rows} into {table} ({rate} rows/s)")


def _source(
    path: str | None,
    source_format: SourceFormat | None,
    options: list[str],
    sql: str | None,
    source_table: str | None,
) -> dict[str, Any]:
    given = [
        name
        for name, value in (("--path", path), ("--sql", sql), ("--source-table", source_table))
        if value is not None
    ]
    if len(given) != 1:
        raise typer.BadParameter("give exactly one of --path, --sql, --source-table")
    if path is None:
        if source_format is not None or options:
            raise typer.BadParameter("--format and --option go with --path")
        return {"sql": sql} if sql is not None else {"table": source_table}
    if source_format is None:
        suffix = PurePath(path).suffix.lstrip(".").lower()
        if suffix not in SourceFormat.__members__:
            raise typer.BadParameter(f"cannot tell the format of {path}: give --format")
        source_format = SourceFormat(suffix)
    return {
        "path": path,
        "format": source_format.value,
        "options": parse_pairs(options, "--option"),
    }


def _follow(client: Client, load_id: str, table: str, poll_s: float) -> dict[str, Any]:
    with progress_bar() as bar:
        task = bar.add_task(f"load {table}", total=None)
        while True:
            status = client.load(load_id)
            bar.update(
                task,
                completed=status.get("rows", 0),
                description=f"load {table}: {status.get('state')}",
            )
            if status.get("state") in _FINAL_STATES:
                return status
            time.sleep(poll_s)


_JSON_ADVICE = re.compile(r'Map it with "columns": .*$')


def _load_error(load_id: str, status: dict[str, Any]) -> DifflowError:
    error = status.get("error")
    if isinstance(error, dict):
        code = str(error.get("code", status["state"]))
        message = str(error.get("message", f"load {load_id} {status['state']}"))
        detail = error.get("detail")
        if code == "column_missing" and isinstance(detail, dict) and "column" in detail:
            # the server's advice is the request's JSON; here the option says it
            advice = f"Map it with --column {detail['column']}=<source column>"
            message = _JSON_ADVICE.sub(advice, message)
        return DifflowError(message, code=code, detail=detail)
    reason = f": {error}" if error else ""
    return DifflowError(f"load {load_id} {status['state']}{reason}", code=f"load_{status['state']}")
