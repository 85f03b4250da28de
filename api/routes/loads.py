"""Spark loads: start one into a table, follow it, cancel it.

The body is checked before the job is queued, so a bad spec (422), an unknown table (404) or
a time behind the table's frontier (409) answer at once; what only Spark can tell (a missing
path, a missing or mistyped column) ends the job as ``failed`` with the error's code.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from api.body import JsonObject
from api.deps import LoadsDep, RuntimeDep
from api.models import (
    ERRORS,
    ErrorBody,
    LoadCreate,
    LoadList,
    LoadPublic,
    LoadQueued,
    request_schema,
)
from api.responses import JSONResponse

router = APIRouter(prefix="/v1", tags=["loads"])


LoadId = Annotated[str, Path(alias="id")]  # API.md's /v1/loads/{id}, in /openapi.json too


@router.post(
    "/tables/{name}/loads",
    status_code=202,
    response_model=None,
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": request_schema(LoadCreate)}},
            "required": True,
        }
    },
    responses={202: {"model": LoadQueued}, **ERRORS},
)
async def create_load(name: str, body: JsonObject, rt: RuntimeDep, loads: LoadsDep) -> JSONResponse:
    job = await rt.call(lambda: loads.create(name, body))
    return JSONResponse({"id": job.id, "state": "queued"}, status_code=202)


@router.get("/loads", response_model=None, responses={200: {"model": LoadList}})
async def list_loads(loads: LoadsDep) -> JSONResponse:
    return JSONResponse({"loads": loads.describe_all()})


@router.get(
    "/loads/{id}",
    response_model=None,
    responses={200: {"model": LoadPublic}, 404: {"model": ErrorBody}},
)
async def get_load(load_id: LoadId, loads: LoadsDep) -> JSONResponse:
    return JSONResponse(loads.get(load_id))


@router.delete(
    "/loads/{id}",
    response_model=None,
    responses={200: {"model": LoadPublic}, 404: {"model": ErrorBody}},
)
async def cancel_load(load_id: LoadId, loads: LoadsDep) -> JSONResponse:
    return JSONResponse(loads.cancel(load_id))
