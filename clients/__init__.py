"""The difflow Python client: REST and WebSocket clients, the plan builder, typed errors.

Speaks only the wire format of API.md; never imports engine/, service/ or api/. The
``difflow`` command line lives in ``clients.cli``.

    from clients import Client, col, count, table

    with Client() as client:
        client.create_table("edges", {"src": "int", "dst": "int"})
        client.create_view("degree", table("edges").reduce(by=["src"], n=count()))
        client.write("edges", [{"insert": {"src": 1, "dst": 2}}])
        client.rows("degree")
"""

from clients.client import AsyncClient, Client
from clients.endpoints import write_body
from clients.errors import (
    BadRequestError,
    ConflictError,
    ConnectionFailed,
    DifflowError,
    InvalidError,
    NotFoundError,
    ServerError,
    TooLargeError,
)
from clients.expr import Expr, cast, col, fn, if_, lit, to_expr
from clients.plan import (
    Aggregate,
    Plan,
    concat,
    count,
    count_distinct,
    iterate,
    max_,
    min_,
    sum_,
    table,
    var,
    view,
)
from clients.subscription import AsyncSubscription, Subscription
from clients.table_writer import AsyncTableWriter, TableWriter

__all__ = [
    "Aggregate",
    "AsyncClient",
    "AsyncSubscription",
    "AsyncTableWriter",
    "BadRequestError",
    "Client",
    "ConflictError",
    "ConnectionFailed",
    "DifflowError",
    "Expr",
    "InvalidError",
    "NotFoundError",
    "Plan",
    "ServerError",
    "Subscription",
    "TableWriter",
    "TooLargeError",
    "cast",
    "col",
    "concat",
    "count",
    "count_distinct",
    "fn",
    "if_",
    "iterate",
    "lit",
    "max_",
    "min_",
    "sum_",
    "table",
    "to_expr",
    "var",
    "view",
    "write_body",
]
