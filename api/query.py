"""Query parameters: each is given at most once.

Starlette and FastAPI read a repeated parameter as its last value, silently
(``?as_of=1&as_of=2`` would read at 2); every parameter difflow takes has one value, so a
repeated one is refused with the error code its other mistakes get.
"""

from __future__ import annotations

from starlette.datastructures import QueryParams

from service.errors import Invalid

__all__ = ["query_value"]


def query_value(params: QueryParams, name: str, code: str, path: str) -> str | None:
    """The value of query parameter ``name`` (None when absent); given more than once, an
    :class:`Invalid` with ``code`` and ``detail.path`` ``path``."""
    given = params.getlist(name)
    if len(given) > 1:
        values = "&".join(f"{name}={v}" for v in given)
        raise Invalid(
            f"query parameter {name!r} is given {len(given)} times ({values}); give it once",
            {"path": path},
            code,
        )
    return given[0] if given else None
