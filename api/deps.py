"""Dependencies shared by the routers: the runtime and the load jobs on ``app.state``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.loads import LoadManager
from service.runtime import Runtime

__all__ = ["LoadsDep", "RuntimeDep"]


async def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_loads(request: Request) -> LoadManager:
    return request.app.state.loads


LoadsDep = Annotated[LoadManager, Depends(get_loads)]
