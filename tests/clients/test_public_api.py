"""The public surface of ``clients`` is pinned, and the package speaks only the wire."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import clients

PUBLIC = [
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


def test_all_is_pinned_and_every_name_exists() -> None:
    assert clients.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(clients, name) is not None


def test_every_error_is_a_difflow_error() -> None:
    errors = [getattr(clients, name) for name in PUBLIC if name.endswith(("Error", "Failed"))]
    assert len(errors) == 8
    assert all(issubclass(error, clients.DifflowError) for error in errors)


def test_clients_import_neither_engine_nor_service_nor_api() -> None:
    probe = (
        "import sys, clients, clients.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('engine', 'service', 'api')))"
    )
    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
