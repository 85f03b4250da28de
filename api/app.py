"""The FastAPI application: ``create_app(settings)`` builds the runtime in the lifespan and
puts it on ``app.state``; routers are thin and delegate to ``service``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from api import ws
from api.errors import install_error_handlers
from api.head import HeadAsGet
from api.models import ErrorBody
from api.plan_schema import COMPONENTS as PLAN_COMPONENTS
from api.plan_schema import QUERY
from api.query import known_query
from api.responses import JSONResponse
from api.routes import loads, ops, tables, views
from service.loads import LoadManager
from service.runtime import Runtime
from service.settings import Settings

__all__ = ["create_app"]

# Swagger UI's and ReDoc's scripts and styles, served by the server itself: FastAPI's pages
# fetch them from a CDN, so on a machine without internet they rendered nothing
# (``fastapi_offline`` packages them, Swagger UI 5, which renders OpenAPI 3.1)
_DOCS_ASSETS = "/docs/assets"


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
        redirect_slashes=False,  # a 404 naming the path without: a followed 307 was a surprise
        docs_url=None,  # _documentation_pages: the same pages, served without a CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.writers = set()  # write sockets' unanswered frames (api.ws.Unanswered)
    install_error_handlers(app)
    app.add_middleware(HeadAsGet)
    # no query parameter a route does not take: any route may answer 422 for one
    known: dict[str, Any] = {
        "dependencies": [Depends(known_query)],
        "responses": {422: {"model": ErrorBody}},
    }
    app.include_router(ops.router, **known)
    app.include_router(tables.router, **known)
    app.include_router(views.router, **known)
    app.include_router(loads.router, **known)
    app.include_router(ws.router)
    _documentation_pages(app)
    app.openapi = lambda: _document(app)  # type: ignore[method-assign]
    return app


def _documentation_pages(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` over ``/openapi.json``, as FastAPI makes them,
    with their scripts and styles from this server (``_DOCS_ASSETS``)."""
    static = files("fastapi_offline") / "static"
    app.mount(_DOCS_ASSETS, StaticFiles(directory=str(static)), name="docs-assets")
    redirect = "/docs/oauth2-redirect"

    def under_root(request: Request, path: str) -> str:
        return request.scope.get("root_path", "").rstrip("/") + path

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        assets = under_root(request, _DOCS_ASSETS)
        return get_swagger_ui_html(
            openapi_url=under_root(request, str(app.openapi_url)),
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=under_root(request, redirect),
            swagger_js_url=f"{assets}/swagger-ui-bundle.js",
            swagger_css_url=f"{assets}/swagger-ui.css",
            swagger_favicon_url=f"{assets}/favicon.png",
        )

    @app.get(redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        assets = under_root(request, _DOCS_ASSETS)
        return get_redoc_html(
            openapi_url=under_root(request, str(app.openapi_url)),
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{assets}/redoc.standalone.js",
            redoc_favicon_url=f"{assets}/favicon.png",
            with_google_fonts=False,
        )


def _document(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document, without the 422 FastAPI documents for any route with a
    parameter: its validation errors are answered in the error envelope (``api.errors``),
    which every route declares for its 422 (any route refuses a query parameter it does
    not take, ``api.query``). An optional query parameter is left out, never ``null``: its schema is
    its type alone (FastAPI offers ``null`` for ``as_of``). Plans and expressions are
    components of their own (``api.plan_schema``), recursive as plans are."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    doc = FastAPI.openapi(app)  # kept as app.openapi_schema: changed in place here, once
    for methods in doc["paths"].values():
        for op in methods.values():
            if "HTTPValidationError" in str(op["responses"].get("422", {})):
                del op["responses"]["422"]
            for param in op.get("parameters", []):
                schema = param.get("schema", {})
                kinds = [k for k in schema.get("anyOf", []) if k != {"type": "null"}]
                if len(kinds) == 1:
                    rest = {k: v for k, v in schema.items() if k != "anyOf"}
                    param["schema"] = {**kinds[0], **rest}
    for name in ("HTTPValidationError", "ValidationError"):
        doc.get("components", {}).get("schemas", {}).pop(name, None)
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(PLAN_COMPONENTS)
    body = doc["paths"]["/v1/views"]["post"]["requestBody"]["content"]["application/json"]
    ref = body["schema"].get("$ref")
    view_create = schemas[ref.rsplit("/", 1)[-1]] if ref else body["schema"]
    view_create["properties"]["query"] = {"title": "Query", **QUERY}
    return doc
