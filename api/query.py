"""Query parameters: each is given at most once, and only those an endpoint takes.

Starlette and FastAPI read a repeated parameter as its last value, silently
(``?as_of=1&as_of=2`` would read at 2); every parameter difflow takes has one value, so a
repeated one is refused with the error code its other mistakes get. They also ignore a
parameter nobody declared, so a typo changed what a request did without a word
(``?asof=0`` read the latest contents, ``?waits=false`` waited; audits 90 and 93): an
unknown one is refused (``invalid``), on every HTTP route (``known_query``, a dependency of
their routers) and on the WebSocket paths (``api.ws``).
"""

from __future__ import annotations

from collections.abc import Collection

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.datastructures import QueryParams

from service.errors import Invalid

__all__ = ["known_query", "query_value", "refuse_unknown"]


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


def refuse_unknown(params: QueryParams, known: Collection[str]) -> None:
    """An :class:`Invalid` (``invalid``, ``detail.path`` the name) for the first query
    parameter not in ``known``."""
    for name in params:
        if name not in known:
            takes = ", ".join(sorted(known)) if known else "none"
            raise Invalid(
                f"unknown query parameter {name!r}: this endpoint takes {takes}",
                {"path": name},
                "invalid",
            )


async def known_query(request: Request) -> None:
    """Refuse a query parameter the route (and its dependencies) does not declare. A
    coroutine: FastAPI runs a plain function dependency on a worker thread, and the hand-over
    there and back cost every request two thread wake-ups."""
    route = request.scope.get("route")
    if isinstance(route, APIRoute) and request.query_params:
        refuse_unknown(request.query_params, _declared(route.dependant))


def _declared(dependant: Dependant) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _declared(sub)
    return names
