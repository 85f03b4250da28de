"""Dependencies shared by the routers: the runtime on ``app.state``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.runtime import Runtime

__all__ = ["RuntimeDep"]


async def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
