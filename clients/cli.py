"""The ``difflow`` command line: serve, tables, views, push, subscribe, peek, ls, drop, load.

Every command but ``serve`` talks to the server at ``--url`` (``$DIFFLOW_URL``) through one
``Client``. Failures print one line on standard error, ``error: <code>: <message>``, and exit
with status 1; usage errors exit with status 2 (typer's own handling).
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Annotated, Any

import orjson
import typer
from typer.core import TyperGroup

from clients.cli_load import load
from clients.cli_push import push
from clients.cli_records import InputError, open_input, parse_time
from clients.cli_render import (
    columns_text,
    json_text,
    rows_summary,
    rows_table,
    stdout,
    tables_table,
    views_table,
)
from clients.cli_state import CliState, client_of
from clients.errors import DifflowError, NotFoundError
from clients.wire import DEFAULT_URL

__all__ = ["app", "main"]


class _ReportingGroup(TyperGroup):
    """The root group: turns client and input errors into one line and exit status 1."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (DifflowError, InputError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc


app = typer.Typer(cls=_ReportingGroup, no_args_is_help=True)
table_app = typer.Typer(no_args_is_help=True, help="Manage tables.")
view_app = typer.Typer(no_args_is_help=True, help="Manage views.")
drop_app = typer.Typer(no_args_is_help=True, help="Drop a table or a view.")
app.add_typer(table_app, name="table")
app.add_typer(view_app, name="view")
app.add_typer(drop_app, name="drop")
app.command("push")(push)
app.command("load")(load)


class Timing(Enum):
    server = "server"
    client = "client"


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the raw answer as JSON.")]


@app.callback()
def root(
    ctx: typer.Context,
    url: Annotated[str, typer.Option(envvar="DIFFLOW_URL", help="The server.")] = DEFAULT_URL,
    timeout: Annotated[
        float | None,
        typer.Option(
            envvar="DIFFLOW_TIMEOUT",
            min=0.001,
            metavar="SECONDS",
            help="Wait at most this long for each answer (default: as long as the server "
            "works on it; a request given up on may still be carried out). Not for the "
            "answers of push --ws, subscribe or load, which wait as long as it takes.",
        ),
    ] = None,
) -> None:
    """difflow: incremental view maintenance as a service."""
    if not isinstance(ctx.obj, CliState):
        ctx.obj = CliState()
    ctx.obj.url = url
    ctx.obj.timeout = timeout
    ctx.call_on_close(ctx.obj.close)


def _setting(name: str, kind: str, default: str, about: str | None = None) -> Any:
    """A ``serve`` option taken as text: the server's settings parse it (and its variable,
    which typer reads), so that a value that does not parse stops the server with the same
    one line as one out of range, not typer's usage box."""
    return typer.Option(
        envvar=f"DIFFLOW_{name.upper()}", metavar=kind, show_default=default, help=about
    )


@app.command()
def serve(
    host: Annotated[str | None, _setting("host", "TEXT", "127.0.0.1")] = None,
    port: Annotated[str | None, _setting("port", "INTEGER", "8000", "0 picks a free port")] = None,
    data_dir: Annotated[str | None, _setting("data_dir", "PATH", "./difflow-data")] = None,
    max_body_mb: Annotated[str | None, _setting("max_body_mb", "INTEGER", "64")] = None,
    max_batch: Annotated[str | None, _setting("max_batch", "INTEGER", "1000000")] = None,
    subscriber_buffer: Annotated[str | None, _setting("subscriber_buffer", "INTEGER", "10000")] = (
        None
    ),
    heartbeat_s: Annotated[str | None, _setting("heartbeat_s", "SECONDS", "10")] = None,
    history: Annotated[
        str | None,
        _setting("history", "INTEGER", "1000", "times kept queryable behind the frontier"),
    ] = None,
    warmup: Annotated[
        bool | None,
        typer.Option(
            "--warmup/--no-warmup",
            show_default="warmup",
            help="compile the engine's kernels in a background process when not cached yet "
            "(env var: DIFFLOW_WARMUP)",  # read by the settings, as the options' texts are
        ),
    ] = None,
) -> None:
    """Run the server (engine embedded; local Spark started on the first load).

    A setting that does not parse or is out of range stops it: one line naming it, status 2."""
    try:
        import api.server
    except Exception as exc:  # the engine reads DIFFLOW_THREADS and DIFFLOW_MALLOC as it loads
        engine_errors = sys.modules.get("engine.errors")
        if engine_errors is None or not isinstance(exc, engine_errors.EngineError):
            raise
        typer.echo(f"difflow: {exc}", err=True)
        raise typer.Exit(2) from None

    # api.server.main turns SIGTERM into a clean exit (status 0) after a graceful shutdown.
    api.server.main(
        host=host,
        port=port,
        data_dir=data_dir,
        max_body_mb=max_body_mb,
        max_batch=max_batch,
        subscriber_buffer=subscriber_buffer,
        heartbeat_s=heartbeat_s,
        history=history,
        warmup=warmup,
    )


@app.command()
def warmup() -> None:
    """Compile and cache the engine's kernels now, as a fresh server does in the background.

    For a Docker build, say, so that containers start with them."""
    from service.warmup import warm

    result = warm(quiet=True)
    if result["ran"]:
        typer.echo(f"engine kernels compiled and cached in {result['seconds']:.1f} s")
    else:
        typer.echo("another warm-up is running; its kernels will be cached when it ends")


def _key_names(items: list[str]) -> list[str]:
    """The ``--primary-key`` names, repeated or comma-separated (``"a, b"``); an empty one
    is a mistake, not a table without a key."""
    names = [part.strip() for item in items for part in item.split(",")]
    if not all(names):
        message = f"a key column name is empty in {items}"
        raise typer.BadParameter(message, param_hint="--primary-key")
    return names


def _column_spec(spec: str) -> tuple[str, str]:
    name, sep, kind = spec.partition(":")
    if not sep or not name or not kind:
        raise typer.BadParameter(f"expected NAME:TYPE, not {spec!r}", param_hint="--column")
    return name, kind


@table_app.command("create")
def table_create(
    ctx: typer.Context,
    name: str,
    column: Annotated[list[str], typer.Option(help="NAME:TYPE, repeated in order.")],
    primary_key: Annotated[
        list[str] | None, typer.Option(help="Key column(s), repeated or comma-separated.")
    ] = None,
    timing: Annotated[Timing, typer.Option(help="Who stamps times.")] = Timing.server,
    time_dims: Annotated[int, typer.Option(min=1)] = 1,
) -> None:
    """Create table NAME."""
    columns = [_column_spec(spec) for spec in column]
    key = _key_names(primary_key) if primary_key else None
    answer = client_of(ctx).create_table(name, columns, key, timing.value, time_dims)
    typer.echo(f"created table {answer['name']} ({columns_text(answer['columns'])})")


@view_app.command("create")
def view_create(
    ctx: typer.Context,
    name: str,
    file: Annotated[str, typer.Option("--file", "-f", help="Plan JSON file; - is stdin.")],
) -> None:
    """Create view NAME from a plan (API.md "Query plans")."""
    try:
        with open_input(file) as lines:
            text = "".join(lines)
    except InputError as exc:
        raise typer.BadParameter(exc.message, param_hint="--file") from exc
    try:
        plan = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise typer.BadParameter(f"the plan is not JSON: {exc}", param_hint="--file") from exc
    if not isinstance(plan, dict):
        message = f"the plan must be a JSON object (a plan node), not {type(plan).__name__}"
        raise typer.BadParameter(message, param_hint="--file")
    if "op" not in plan and "query" in plan:
        message = 'the file holds {"name", "query"}: give the plan alone (its "query")'
        raise typer.BadParameter(message, param_hint="--file")
    answer = client_of(ctx).create_view(name, plan)
    typer.echo(f"created view {answer['name']} ({columns_text(answer.get('columns', []))})")


@app.command()
def subscribe(
    ctx: typer.Context,
    view: str,
    snapshot: Annotated[bool, typer.Option(help="Start with the current contents.")] = True,
    progress: Annotated[bool, typer.Option(help="Include progress frames.")] = True,
) -> None:
    """Print each frame of VIEW's subscription as one JSON line, as it arrives."""
    try:
        with client_of(ctx).subscribe(view, snapshot=snapshot, progress=progress) as frames:
            for frame in frames:
                typer.echo(json_text(frame))
                if frame.get("type") == "closed" and str(frame.get("reason", "")).startswith(
                    f"view {view!r} failed"
                ):
                    typer.echo(f"error: {frame['reason']}", err=True)
                    raise typer.Exit(1)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except BrokenPipeError:  # the reader has gone (``| head -1``): a normal end, at the
        # first frame after it (a heartbeat at the latest); nothing more goes to the pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None


@app.command()
def peek(
    ctx: typer.Context,
    view: str,
    as_of: Annotated[str | None, typer.Option(help="A time, T or T1,T2.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show the rows of VIEW (at its latest complete time, or --as-of)."""
    client = client_of(ctx)
    try:
        answer = client.rows(view, None if as_of is None else parse_time(as_of, "--as-of"))
    except NotFoundError as exc:
        try:
            client.table(view)
        except DifflowError:
            raise exc from None
        raise NotFoundError(  # only views have rows: a table is read through one
            f"{exc.message}; {view} is a table, and only views have rows: create a view "
            f'of it ({{"op": "table", "name": "{view}"}}) and peek at that',
            status=exc.status,
            code=exc.code,
            detail=exc.detail,
        ) from exc
    if as_json:
        typer.echo(json_text(answer))
    else:
        console = stdout()
        console.print(rows_table(view, answer))
        console.print(rows_summary(answer), markup=False)


@app.command("ls")
def list_all(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List tables and views."""
    client = client_of(ctx)
    tables, views = client.tables(), client.views()
    if as_json:
        typer.echo(json_text({"tables": tables, "views": views}))
        return
    console = stdout()
    console.print(tables_table(tables))
    console.print(views_table(views))


@drop_app.command("table")
def drop_table(ctx: typer.Context, name: str) -> None:
    """Drop table NAME (refused while a view reads it)."""
    client_of(ctx).drop_table(name)
    typer.echo(f"dropped table {name}")


@drop_app.command("view")
def drop_view(ctx: typer.Context, name: str) -> None:
    """Drop view NAME (refused while another view reads it)."""
    client_of(ctx).drop_view(name)
    typer.echo(f"dropped view {name}")


def main() -> None:
    """The ``difflow`` entry point."""
    app()


if __name__ == "__main__":
    main()
