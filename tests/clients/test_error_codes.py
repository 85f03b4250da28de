"""Every error code the server sends maps, in the client, to the status its REST answer has:
a WebSocket error frame carries no status, so the client takes class and status from the
code. The codes are read from the server's source, where each error is raised."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import service.errors as server_errors
from clients import ConflictError, InvalidError, ServerError
from clients.errors import _STATUS_BY_CODE, error_from_frame

ROOT = Path(__file__).resolve().parents[2]
# raised before the server serves (a setting) or by the warm-up command: never on the wire
NOT_ON_THE_WIRE = {server_errors.SettingsError, server_errors.WarmupError}


def _raised_codes() -> dict[str, set[int]]:
    """Each code in a ``ServiceError`` subclass's call in ``service/`` and ``api/`` (the
    third positional argument or ``code=``, else the class's own), with its statuses."""
    classes = {
        name: cls
        for name, cls in vars(server_errors).items()
        if inspect.isclass(cls) and issubclass(cls, server_errors.ServiceError)
    }
    found: dict[str, set[int]] = {}
    for package in ("service", "api"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                cls = classes.get(node.func.id)
                if cls is None or cls in NOT_ON_THE_WIRE:
                    continue
                given = [*node.args[2:3], *(k.value for k in node.keywords if k.arg == "code")]
                code = next((g.value for g in given if isinstance(g, ast.Constant)), None)
                found.setdefault(str(code or cls.code), set()).add(cls.status)
    return found


def test_every_code_the_server_raises_has_its_status_in_the_client() -> None:
    codes = _raised_codes()
    assert len(codes) > 30  # the scan finds the raise sites
    wrong = {
        c: (s, _STATUS_BY_CODE.get(c)) for c, s in codes.items() if _STATUS_BY_CODE.get(c) not in s
    }
    assert wrong == {}


@pytest.mark.parametrize(
    ("code", "cls", "status"),
    [
        ("time_out_of_order", ConflictError, 409),
        ("invalid_id", InvalidError, 422),
        ("invalid_value", InvalidError, 422),
        ("shutting_down", ServerError, 503),
    ],
)
def test_error_frames_get_their_rest_twins_class(code: str, cls: type, status: int) -> None:
    """These came as a plain DifflowError with no status (503's as 500)."""
    frame = {"type": "error", "id": 7, "error": {"code": code, "message": "m", "detail": None}}
    err = error_from_frame(frame)
    assert type(err) is cls and err.status == status and err.frame_id == 7
