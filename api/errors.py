"""Errors on the wire, mapped in one place.

Every error answer is ``{"error": {"code", "message", "detail"}}`` with the status of its
:class:`~service.errors.ServiceError` class; FastAPI's own errors (unknown route, wrong
method, bad query parameter) are translated into the same shape, and so is an unexpected
exception (a 500 ``internal``).
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from api.responses import JSONResponse
from service.errors import ServiceError

__all__ = ["error_response", "install_error_handlers"]

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid",
}


_WS_PATHS = re.compile(r"/v1/tables/[^/]+/updates|/v1/views/[^/]+/subscribe")


def is_websocket_path(path: str) -> bool:
    """Whether ``path`` is one a WebSocket connects to (an HTTP GET there is a mistake)."""
    return _WS_PATHS.fullmatch(path) is not None


def error_response(
    status: int, code: str, message: str, detail: Any = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "detail": detail}},
        status_code=status,
        headers=headers,
    )


def _allowed_methods(request: Request) -> str:
    """The methods some route serves at the request's path (Starlette's own ``Allow``
    names only the first route that matched the path, and a path has a route per method)."""
    served = []
    for method in _METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes):
            served.append(method)
            if method == "GET":
                served.append("HEAD")  # api.head
    return ", ".join(served)


def _routed(request: Request, path: str) -> bool:
    """Whether some route serves ``path`` (any method): ``/v1/completions/`` was told to
    try ``/v1/completions``, another 404 (audit 66)."""
    scope = {**request.scope, "path": path}
    return any(route.matches(scope)[0] != Match.NONE for route in request.app.router.routes)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.detail)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _CODES.get(exc.status_code, "error")
        message = str(exc.detail) if exc.detail else code
        headers = dict(exc.headers) if exc.headers else None
        method = "HEAD" if request.scope.get("head") else request.method  # api.head
        if exc.status_code == 404:
            path = request.url.path
            message = f"no such endpoint: {method} {path}"
            bare = path.rstrip("/")
            if path.endswith("/") and bare and _routed(request, bare):
                message += f" (paths end without a slash: {bare})"
            elif is_websocket_path(path):
                message += " (a WebSocket endpoint: connect to it with a WebSocket client)"
        if exc.status_code == 405:
            allowed = _allowed_methods(request)
            message = f"{method} is not served at {request.url.path}; it serves {allowed}"
            headers = {**(headers or {}), "Allow": allowed}
        return error_response(exc.status_code, code, message, headers=headers)

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
        """A client gone before its body was all read: nothing was done, and no one reads
        this answer; handled here rather than as a bug, which logged a traceback of 65
        lines per such request (audit 101)."""
        return error_response(
            400, "bad_request", "the client closed the connection before its body was read"
        )

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        """A bug: still an answer in the error shape (Starlette logs the traceback)."""
        error = ServiceError.internal(exc)
        return error_response(error.status, error.code, error.message)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        parts = list(first.get("loc", ()))
        if len(parts) > 1 and parts[0] in ("query", "path"):  # a parameter: its bare name,
            parts = parts[1:]  # as for one given twice or not taken (``api.query``)
        loc = ".".join(str(p) for p in parts)
        return error_response(
            422, "invalid", f"{loc}: {first.get('msg', 'invalid request')}", {"path": loc}
        )
