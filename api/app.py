"""The FastAPI application: ``create_app(settings)`` builds the runtime in the lifespan and
puts it on ``app.state``; routers are thin and delegate to ``service``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api import ws
from api.errors import install_error_handlers
from api.head import HeadAsGet
from api.responses import JSONResponse
from api.routes import loads, ops, tables, views
from service.loads import LoadManager
from service.runtime import Runtime
from service.settings import Settings

__all__ = ["create_app"]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime(settings)
        runtime.start()
        app.state.runtime = runtime
        app.state.loads = LoadManager(runtime)
        try:
            yield
        finally:
            app.state.loads.shutdown()  # cancels unfinished loads before the engine stops
            runtime.stop()

    app = FastAPI(
        title="difflow",
        version="1.0",
        description="Incremental view maintenance: tables, views, writes, subscriptions, loads.",
        default_response_class=JSONResponse,
        lifespan=lifespan,
    )
    app.state.settings = settings
    install_error_handlers(app)
    app.add_middleware(HeadAsGet)
    app.include_router(ops.router)
    app.include_router(tables.router)
    app.include_router(views.router)
    app.include_router(loads.router)
    app.include_router(ws.router)
    return app
