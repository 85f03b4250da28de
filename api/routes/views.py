"""Views: create (hydrating from live tables), list, describe, drop, and reads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from api.body import ExactJsonObject
from api.deps import RuntimeDep
from api.models import (
    ERRORS,
    RowsPublic,
    ViewCreate,
    ViewList,
    ViewPublic,
    error_responses,
    request_schema,
)
from api.query import query_value
from api.responses import JSONResponse
from service.codec import TIME_TEXT
from service.errors import Conflict, Invalid, ServiceError, Unavailable
from service.runtime import Runtime

AS_OF = f"^{TIME_TEXT.pattern}$"  # JSON Schema: the whole value, as the server checks it

router = APIRouter(prefix="/v1", tags=["views"])


@router.post(
    "/views",
    status_code=201,
    response_model=None,
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": request_schema(ViewCreate)}},
            "required": True,
        }
    },
    responses={201: {"model": ViewPublic}, **ERRORS},
)
async def create_view(body: ExactJsonObject, rt: RuntimeDep) -> JSONResponse:
    name = body.get("name")

    def create(between: Callable[[], bool], stopped: Callable[[], bool]) -> dict[str, Any]:
        if stopped():
            raise _stopped(rt, str(name))
        v = rt.catalog.create_view(body)
        rt.adopt_view(v)
        rt.graph.between_rounds(v.ops, between)
        try:
            rt.step()  # hydrate from the current contents of what it reads
        finally:
            rt.graph.between_rounds(v.ops, lambda: rt.dropped_next(v))
        if v.failure is not None:
            rt.drop_view(v.name, rejected=True)
            if stopped():
                raise _stopped(rt, v.name)
            raise Invalid(
                f"the view could not compute its initial contents: {v.failure}",
                {"path": "query"},
                "no_fixed_point" if "IterationLimitError" in v.failure else "view_failed",
            )
        return rt.catalog.describe_view(v)

    if not isinstance(name, str):  # refused by the catalog
        return JSONResponse(
            await rt.call(lambda: create(lambda: False, lambda: False)), status_code=201
        )
    # a DELETE of the name while this is queued or computing cancels it (``drop_view``)
    future = rt.submit_registration(name, create)
    try:
        return JSONResponse(await rt.settled(future), status_code=201)
    finally:
        rt.registered(name, future)


def _stopped(rt: Runtime, name: str) -> ServiceError:
    """Why a registration stopped: the server shutting down, or a DELETE of its name."""
    if rt.stopping:
        return Unavailable(
            f"the server shut down before view {name!r} had its initial contents; it was "
            "not created",
            code="shutting_down",
        )
    return Conflict(
        f"the registration of view {name!r} was cancelled by a DELETE of its name before "
        "its initial contents were complete; nothing of it is kept",
        {"name": name},
        "cancelled",
    )


@router.get(
    "/views", response_model=None, responses={200: {"model": ViewList}, **error_responses()}
)
async def list_views(rt: RuntimeDep) -> JSONResponse:
    views = await rt.read(lambda: [rt.catalog.describe_view(v) for v in rt.catalog.views.values()])
    return JSONResponse({"views": views})


@router.get("/views/{name}", response_model=None, responses={200: {"model": ViewPublic}, **ERRORS})
async def get_view(name: str, rt: RuntimeDep) -> JSONResponse:
    return JSONResponse(
        await rt.read(lambda: rt.catalog.describe_view(rt.catalog.view(name)), ("view", name))
    )


@router.delete("/views/{name}", status_code=204, response_class=Response, responses=ERRORS)
async def drop_view(name: str, rt: RuntimeDep) -> Response:
    running = rt.cancel_registration(name, _stopped(rt, name))
    if running is None:
        # next in line behind a step, it stops the view's loops there (``dropped_next``)
        await rt.call(lambda: rt.drop_view(name), drops=name)
        return Response(status_code=204)
    # registrations of the name: those queued are answered 409 ``cancelled`` already, those
    # running stop at their next round, or had just completed; then the view under the name
    # goes, if there is one (one of them, or one registered before them: audit 72)
    for future in running:
        try:
            await rt.settled(future)
        except Unavailable:
            raise
        except ServiceError:
            pass  # it stopped: its own request has the answer
    if name in rt.catalog.views:  # else answered at once, a registration ahead running
        await rt.call(lambda: rt.drop_view(name) if name in rt.catalog.views else None, drops=name)
    return Response(status_code=204)


async def read_time(
    request: Request,
    as_of: Annotated[str | None, Query(json_schema_extra={"pattern": AS_OF})] = None,
) -> str | None:
    """``as_of``, given at most once. Its text is checked against ``AS_OF`` by the catalog
    rather than by FastAPI, so that a mistake is a 422 ``bad_time``, as a bad time in a body."""
    query_value(request.query_params, "as_of", "bad_time", "as_of")
    return as_of


@router.get(
    "/views/{name}/rows", response_model=None, responses={200: {"model": RowsPublic}, **ERRORS}
)
async def rows(
    name: str, rt: RuntimeDep, as_of: Annotated[str | None, Depends(read_time)]
) -> Response:
    encoded = await rt.read(lambda: rt.catalog.rows(rt.catalog.view(name), as_of), ("view", name))
    return Response(await asyncio.to_thread(encoded), media_type="application/json")
