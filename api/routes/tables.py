"""Tables: create, list, describe, drop; writes over HTTP; write completions."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Request, Response

from api.body import JsonObject, parse_json, read_body
from api.deps import LoadsDep, RuntimeDep
from api.models import (
    ERRORS,
    ErrorBody,
    TableCreate,
    TableList,
    TablePublic,
    WriteBody,
    WriteDone,
    WritePending,
    error_responses,
    request_schema,
)
from api.query import query_value
from api.responses import JSONResponse
from service.codec import frontier_to_wire
from service.errors import Invalid, NotFound
from service.gc_pause import collector_paused
from service.ingest import TableShape, dropped_since_opened, parse_write
from service.runtime import Runtime
from service.writes import WriteCommand

router = APIRouter(prefix="/v1", tags=["tables"])
PARSE_IN_THREAD_BYTES = 256 * 1024  # bodies larger than this are parsed off the event loop


@router.post(
    "/tables",
    status_code=201,
    response_model=None,
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": request_schema(TableCreate)}},
            "required": True,
        }
    },
    responses={201: {"model": TablePublic}, **ERRORS},
)
async def create_table(body: JsonObject, rt: RuntimeDep) -> JSONResponse:
    name = body.get("name")
    desc = await rt.call(
        lambda: rt.catalog.describe_table(rt.catalog.create_table(body)),
        table=name if isinstance(name, str) else None,
    )
    return JSONResponse(desc, status_code=201)


@router.get(
    "/tables", response_model=None, responses={200: {"model": TableList}, **error_responses()}
)
async def list_tables(rt: RuntimeDep) -> JSONResponse:
    tables = await rt.read(
        lambda: [rt.catalog.describe_table(t) for t in rt.catalog.tables.values()]
    )
    return JSONResponse({"tables": tables})


@router.get(
    "/tables/{name}", response_model=None, responses={200: {"model": TablePublic}, **ERRORS}
)
async def get_table(name: str, rt: RuntimeDep) -> JSONResponse:
    return JSONResponse(
        await rt.read(lambda: rt.catalog.describe_table(rt.catalog.table(name)), ("table", name))
    )


@router.delete("/tables/{name}", status_code=204, response_class=Response, responses=ERRORS)
async def drop_table(name: str, rt: RuntimeDep, loads: LoadsDep) -> Response:
    shape = await rt.call(lambda: rt.drop_table(name), table=name)
    loads.table_dropped(name, shape)  # its unfinished loads stop reading now
    return Response(status_code=204)


async def submit_write(
    rt: Runtime,
    table: str,
    body: Any,
    arrival: float,
    big: bool,
    bound: TableShape | None = None,
) -> WriteCommand:
    """Parse a write body (off the event loop when large) and queue it for the engine;
    ``bound``: the table it must be (a socket's), not one made since under its name. Behind
    a queued change of the table (its creation or drop, a load), the engine parses it once
    the change has run, against the table as it is then."""
    if rt.table_changing(table):
        return rt.submit_write(WriteCommand(table, None, arrival=arrival, body=body, bound=bound))
    shape = rt.table_shape(table)
    if bound is not None and shape is not bound:
        raise dropped_since_opened(table)

    def parse() -> WriteCommand:
        with collector_paused():  # the body holds no cycles; see parse_json
            parsed = parse_write(body, shape, rt.interner, rt.settings.max_batch)
        return WriteCommand(table, parsed, arrival=arrival, shape=shape)

    cmd = await asyncio.to_thread(parse) if big else parse()
    return rt.submit_write(cmd)


def pending_body(rt: Runtime, cmd: WriteCommand) -> dict[str, Any]:
    t = rt.catalog.tables.get(cmd.table)
    if t is None:
        return cmd.pending_body([])
    return cmd.pending_body(frontier_to_wire(rt.catalog.table_frontier(t)))


@router.post(
    "/tables/{name}/updates",
    response_model=None,
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": request_schema(WriteBody)}},
            "required": True,
        }
    },
    responses={200: {"model": WriteDone}, 202: {"model": WritePending}, **ERRORS},
)
async def write(name: str, request: Request, rt: RuntimeDep, wait: bool = True) -> JSONResponse:
    arrival = time.perf_counter()
    query_value(request.query_params, "wait", "invalid", "wait")
    raw = await read_body(request)
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object", {"path": "body"}, "not_an_object")
    cmd = await submit_write(rt, name, body, arrival, len(raw) > PARSE_IN_THREAD_BYTES)
    if not wait:
        await rt.settled(cmd.accepted, cmd)
        return JSONResponse(pending_body(rt, cmd), status_code=202)
    result = await rt.settled(cmd.stepped, cmd)
    return JSONResponse(result, status_code=200 if result["status"] == "done" else 202)


@router.get(
    "/completions/{token}",
    response_model=None,
    responses={200: {"model": WriteDone}, 202: {"model": WritePending}, 404: {"model": ErrorBody}},
)
async def completion(token: str, rt: RuntimeDep) -> JSONResponse:
    found = rt.completions.lookup(token)
    if found is None:
        raise NotFound(
            f"no write with token {token!r}: unknown, or forgotten ({rt.completions.forgotten()})",
            {"token": token},
        )
    state, value = found
    if state == "done":
        return JSONResponse(value, status_code=200)
    assert isinstance(value, WriteCommand)
    return JSONResponse(pending_body(rt, value), status_code=202)
