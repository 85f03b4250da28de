"""Errors raised by the service; the API maps each to its HTTP status in one place.

One hierarchy, each class with a wire ``code`` and an HTTP ``status``::

    ServiceError (500 internal)
     ├── BadRequest      400  bad_request      a body that is not JSON / not an object
     ├── NotFound        404  not_found        unknown table, view, token or load
     ├── Conflict        409  conflict         name taken, still read, time not beyond frontier
     ├── TooLarge        413  too_large        body or batch over the configured limit
     ├── Invalid         422  invalid          JSON that does not fit: columns, types, plans
     ├── LoadError       422  load_failed      a Spark load that cannot run (see .code)
     ├── Unavailable     503  unavailable      the server is shutting down
     ├── WarmupError     500  warmup_failed    the kernel warm-up got an unexpected answer
     └── SettingsError   --   bad_setting      a flag or DIFFLOW_* value the server cannot use

``message`` says what was wrong and how to fix it; ``detail`` is JSON-able context (for
plans, ``{"path": "query.body.reach.left"}``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BadRequest",
    "Conflict",
    "Invalid",
    "LoadError",
    "NotFound",
    "ServiceError",
    "SettingsError",
    "TooLarge",
    "Unavailable",
    "WarmupError",
    "member_path",
]


class ServiceError(Exception):
    status = 500
    code = "internal"

    def __init__(self, message: str, detail: Any = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        if code is not None:
            self.code = code

    def to_wire(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "detail": self.detail}}

    @classmethod
    def internal(cls, exc: BaseException) -> ServiceError:
        """An unexpected exception (a bug), as the wire reports it: 500 ``internal``."""
        return cls(f"internal error: {type(exc).__name__}: {exc}")


class BadRequest(ServiceError):
    status = 400
    code = "bad_request"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"


class TooLarge(ServiceError):
    status = 413
    code = "too_large"


class Invalid(ServiceError):
    status = 422
    code = "invalid"


class LoadError(ServiceError):
    """A load that cannot run or failed; ``code`` names the cause (``spark_unavailable``,
    ``source_not_found``, ``source_unreadable``, ``column_missing``, ``column_type``,
    ``null_value``, ``not_finite``, ``cancelled``). A malformed load spec is :class:`Invalid`."""

    status = 422
    code = "load_failed"


class Unavailable(ServiceError):
    """The server is shutting down: the request was not taken, or its answer was not waited
    for (``code`` ``shutting_down``)."""

    status = 503
    code = "unavailable"


class WarmupError(ServiceError):
    """The kernel warm-up's workload (``service.warmup``) got an answer it did not expect."""

    code = "warmup_failed"


class SettingsError(ServiceError):
    """A setting (flag or ``DIFFLOW_*`` variable) that does not parse or is out of range: the
    server does not start, and says which."""

    code = "bad_setting"


def member_path(obj: Any, required: set[str], optional: set[str], path: str) -> str:
    """Where object ``obj`` at ``path`` goes wrong, for ``detail.path``, which names fields:
    its first required member missing (in name order), else its first unknown one
    (``query.aggregates.n.zz``, ``updates[0].inserts``); ``path`` when it is no object or
    has neither."""
    if not isinstance(obj, dict):
        return path
    missing = sorted(required - set(obj))
    if missing:
        return f"{path}.{missing[0]}"
    extra = sorted(set(obj) - required - optional)
    return f"{path}.{extra[0]}" if extra else path
