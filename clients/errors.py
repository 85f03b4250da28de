"""The one exception hierarchy of the difflow client; every failure a caller sees is one of these.

An error answer from the server (``{"error": {"code", "message", "detail"}}``) becomes the
class of its HTTP status; a failure to get any answer becomes ``ConnectionFailed``::

    DifflowError              status, code, message, detail (any other status lands here)
     ├── BadRequestError      400  the body was not JSON
     ├── NotFoundError        404  unknown table, view, token or load
     ├── ConflictError        409  name taken, still read, time not beyond the frontier
     ├── TooLargeError        413  body or batch over the server's limit
     ├── InvalidError         422  JSON that does not fit: columns, types, plans
     ├── ServerError          5xx  the server failed
     └── ConnectionFailed     no answer: refused, timed out, socket dropped (status None)

WebSocket error frames carry no status; their ``code`` (the same codes the REST answers use,
generic such as ``invalid`` or specific such as ``wrong_type``) picks the class and the
``status`` its REST twin would have, and an unknown code gives a plain ``DifflowError`` with
``status`` None.
Foreign exceptions (httpx, websockets) are translated where they are caught, with
``raise ... from exc``, so the cause stays attached.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Self

__all__ = [
    "BadRequestError",
    "ConflictError",
    "ConnectionFailed",
    "DifflowError",
    "InvalidError",
    "NotFoundError",
    "ServerError",
    "TooLargeError",
    "error_from_body",
    "error_from_frame",
]


class DifflowError(Exception):
    """An error answer from the server (or, for ``ConnectionFailed``, a failure to get one).

    ``frame_id`` is the ``id`` of the WebSocket frame the error answers, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "error",
        detail: Any = None,
        frame_id: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail
        self.frame_id = frame_id

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def reworded(self, message: str) -> Self:
        """A copy of this error saying ``message`` instead, for a caller that adds where it
        happened: same class, status, code, detail and frame id. A copy rather than a new
        instance of ``type(self)``, as the subclasses' constructors differ
        (``ConnectionFailed`` takes no status)."""
        other = copy.copy(self)
        other.message = message
        other.args = (message,)
        return other


class BadRequestError(DifflowError):
    """400: the request body was not JSON (or not an object)."""


class NotFoundError(DifflowError):
    """404: unknown table, view, completion token or load."""


class ConflictError(DifflowError):
    """409: name taken, dropping something still read, time not beyond the frontier."""


class TooLargeError(DifflowError):
    """413: body or batch over the server's ``--max-body-mb`` / ``--max-batch``."""


class InvalidError(DifflowError):
    """422: JSON that does not fit (unknown column, wrong type, wrong arity, bad plan)."""


class ServerError(DifflowError):
    """5xx: the server failed while handling a valid request."""


class ConnectionFailed(DifflowError):
    """No answer from the server: connection refused or dropped, bad URL (code
    ``connection_failed``), or none within the timeout (code ``timed_out``)."""

    def __init__(self, message: str, code: str = "connection_failed") -> None:
        super().__init__(message, code=code)


_BY_STATUS: dict[int, type[DifflowError]] = {
    400: BadRequestError,
    404: NotFoundError,
    409: ConflictError,
    413: TooLargeError,
    422: InvalidError,
}

_STATUS_BY_CODE: dict[str, int] = {
    "bad_request": 400,
    "not_found": 404,
    "conflict": 409,
    "too_large": 413,
    "invalid": 422,
    "internal": 500,
    # The specific codes the server puts in place of the generic ones (the same codes its
    # REST answers carry), so that WebSocket error frames get the class their REST twin gets.
    "invalid_json": 400,
    "unsupported_encoding": 400,
    "name_taken": 409,
    "in_use": 409,
    "time_before_frontier": 409,
    "time_out_of_order": 409,
    "frontier_backwards": 409,
    "time_unavailable": 409,
    "view_failed": 409,
    "body_too_large": 413,
    "batch_too_large": 413,
    "not_an_object": 422,
    "invalid_update": 422,
    "invalid_value": 422,
    "invalid_id": 422,
    "wrong_type": 422,
    "wrong_columns": 422,
    "bad_time": 422,
    "bad_weight": 422,
    "key_present": 422,
    "row_absent": 422,
    "bad_name": 422,
    "bad_schema": 422,
    "invalid_plan": 422,
    "invalid_expression": 422,
    "unknown_name": 422,
    "unknown_node": 422,
    "unknown_column": 422,
    "unknown_function": 422,
    "unknown_var": 422,
    "type_mismatch": 422,
    "mixed_domains": 422,
    # a load's request, and why a load failed (its status's error)
    "invalid_source": 422,
    "invalid_where": 422,
    "source_not_found": 422,
    "source_unreadable": 422,
    "spark_unavailable": 422,
    "column_missing": 422,
    "column_type": 422,
    "duplicate_key": 422,
    "null_value": 422,
    "not_finite": 422,
    "load_failed": 422,
    "cancelled": 422,
    "shutting_down": 503,
    "engine_failure": 500,
}


def _error_class(status: int | None) -> type[DifflowError]:
    if status is None:
        return DifflowError
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, DifflowError)


def error_from_body(status: int, body: Any, reason: str = "") -> DifflowError:
    """The typed error for an HTTP error answer; ``body`` is its decoded JSON (or anything
    else when the answer was not the documented error object)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        message = reason or f"HTTP {status}"
        return _error_class(status)(message, status=status, code=f"http_{status}", detail=body)
    return _error_class(status)(
        str(error.get("message", reason)),
        status=status,
        code=str(error.get("code", f"http_{status}")),
        detail=error.get("detail"),
    )


def error_from_frame(frame: Mapping[str, Any]) -> DifflowError:
    """The typed error for a WebSocket ``{"type": "error", "id", "error": {...}}`` frame."""
    error = frame.get("error")
    if not isinstance(error, Mapping):
        error = {}
    code = str(error.get("code", "error"))
    status = _STATUS_BY_CODE.get(code)
    return _error_class(status)(
        str(error.get("message", "error frame from the server")),
        status=status,
        code=code,
        detail=error.get("detail"),
        frame_id=frame.get("id"),
    )
