"""Errors on the wire, mapped in one place.

Every error answer is ``{"error": {"code", "message", "detail"}}`` with the status of its
:class:`~service.errors.ServiceError` class; FastAPI's own errors (unknown route, wrong
method, bad query parameter) are translated into the same shape.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.responses import JSONResponse
from service.errors import ServiceError

__all__ = ["error_response", "install_error_handlers"]

_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid",
}


def error_response(status: int, code: str, message: str, detail: Any = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "detail": detail}}, status_code=status
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.detail)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _CODES.get(exc.status_code, "error")
        message = str(exc.detail) if exc.detail else code
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        return error_response(exc.status_code, code, message)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()))
        return error_response(
            422, "invalid", f"{loc}: {first.get('msg', 'invalid request')}", {"path": loc}
        )
