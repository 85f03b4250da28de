"""The REST endpoints of API.md as data: one ``Call`` builder per endpoint, one decoder.

``Client`` and ``AsyncClient`` differ only in how they send a ``Call``; what goes on the wire
(method, path, query, body) and how an answer becomes a value or a typed error is decided
here, once. A 2xx answer decodes to its JSON body (``None`` for an empty one, text for
``/metrics``); anything else raises the ``DifflowError`` subclass of its status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import orjson

from clients.errors import DifflowError, InvalidError, error_from_body
from clients.plan import Plan
from clients.wire import Time, format_time, loads, segment

ColumnSpec: TypeAlias = Mapping[str, str] | Sequence[tuple[str, str] | Mapping[str, str]]
"""Table columns: ``{"src": "int"}``, ``[("src", "int")]`` or ``[{"name", "type"}]``."""


@dataclass(frozen=True, slots=True)
class Call:
    """One request: ``body`` is JSON-able (None: no body); ``unwrap`` names the answer's
    field to return instead of the whole body; ``text`` returns the answer as text."""

    method: str
    path: str
    params: Mapping[str, str] | None = None
    body: Any = None
    unwrap: str | None = None
    text: bool = False


def decode(call: Call, status: int, content: bytes, reason: str = "") -> Any:
    """The value of an answer to ``call``, or the typed error it carries."""
    if not 200 <= status < 300:
        try:
            body: Any = loads(content)
        except orjson.JSONDecodeError:
            body = content.decode(errors="replace")
        raise error_from_body(status, body, reason)
    if call.text:
        return content.decode()
    if not content:
        return None
    try:
        body = loads(content)
    except orjson.JSONDecodeError as exc:
        message = f"{call.method} {call.path} answered {status} with a body that is not JSON"
        raise DifflowError(message, status=status, code="bad_response") from exc
    return body[call.unwrap] if call.unwrap else body


def write_body(
    updates: Iterable[Mapping[str, Any]] | None = None,
    *,
    columns: Mapping[str, Any] | None = None,
    diff: Any = None,
    time: Time | Sequence[Time] | None = None,
    advance_to: Time | Sequence[Time] | None = None,
) -> dict[str, Any]:
    """A write body: ``updates`` (update objects) or ``columns`` (columnar, with optional
    ``diff``), a default or per-row ``time``, and an optional ``advance_to`` frontier."""
    if updates is not None and columns is not None:
        raise ValueError("give updates or columns, not both")
    if columns is not None:
        body: dict[str, Any] = {"columns": dict(columns)}
        if diff is not None:
            body["diff"] = diff
    elif diff is not None:
        raise ValueError("diff goes with the columnar form: pass columns too")
    elif isinstance(updates, Mapping):  # list() would make it a list of its keys
        raise ValueError(
            'updates is a list of update objects: write [update] for one (e.g. [{"insert": row}])'
        )
    else:
        body = {"updates": list(updates or [])}
    if time is not None:
        body["time"] = time
    if advance_to is not None:
        body["advance_to"] = advance_to
    return body


def health() -> Call:
    return Call("GET", "/healthz")


def create_table(
    name: str,
    columns: ColumnSpec,
    primary_key: Sequence[str] | None = None,
    timing: str = "server",
    time_dims: int = 1,
) -> Call:
    body: dict[str, Any] = {"name": name, "columns": _columns(columns)}
    if primary_key is not None:  # a bare str is one column, not its letters
        body["primary_key"] = [primary_key] if isinstance(primary_key, str) else list(primary_key)
    body.update(timing=timing, time_dims=time_dims)
    return Call("POST", "/v1/tables", body=body)


def tables() -> Call:
    return Call("GET", "/v1/tables", unwrap="tables")


def table(name: str) -> Call:
    return Call("GET", f"/v1/tables/{segment(name)}")


def drop_table(name: str) -> Call:
    return Call("DELETE", f"/v1/tables/{segment(name)}")


def write(table: str, body: Mapping[str, Any], wait: bool = True) -> Call:
    params = {"wait": "true" if wait else "false"}
    return Call("POST", f"/v1/tables/{segment(table)}/updates", params=params, body=dict(body))


def completion(token: str) -> Call:
    return Call("GET", f"/v1/completions/{segment(token)}")


def create_view(name: str, query: Plan | Mapping[str, Any]) -> Call:
    if not isinstance(query, Plan | Mapping):
        message = f"a query is a Plan or a plan object (a mapping), not {type(query).__name__}"
        raise InvalidError(message, status=422, code="invalid_plan", detail={"path": "query"})
    plan = query.to_json() if isinstance(query, Plan) else dict(query)
    return Call("POST", "/v1/views", body={"name": name, "query": plan})


def views() -> Call:
    return Call("GET", "/v1/views", unwrap="views")


def view(name: str) -> Call:
    return Call("GET", f"/v1/views/{segment(name)}")


def drop_view(name: str) -> Call:
    return Call("DELETE", f"/v1/views/{segment(name)}")


def rows(view: str, as_of: Time | None = None) -> Call:
    params = None if as_of is None else {"as_of": format_time(as_of)}
    return Call("GET", f"/v1/views/{segment(view)}/rows", params=params)


def create_load(
    table: str,
    source: Mapping[str, Any],
    columns: Mapping[str, str] | None = None,
    where: str | None = None,
    mode: str = "append",
    time: Time | None = None,
) -> Call:
    body: dict[str, Any] = {"source": dict(source)}
    if columns is not None:
        body["columns"] = dict(columns)
    if where is not None:
        body["where"] = where
    body["mode"] = mode
    if time is not None:
        body["time"] = time
    return Call("POST", f"/v1/tables/{segment(table)}/loads", body=body)


def list_loads() -> Call:
    return Call("GET", "/v1/loads")


def load(load_id: str | int) -> Call:
    return Call("GET", f"/v1/loads/{segment(load_id)}")


def cancel_load(load_id: str | int) -> Call:
    return Call("DELETE", f"/v1/loads/{segment(load_id)}")


def metrics() -> Call:
    return Call("GET", "/metrics", text=True)


def _columns(columns: ColumnSpec) -> list[dict[str, str]]:
    if isinstance(columns, Mapping):
        return [{"name": name, "type": kind} for name, kind in columns.items()]
    specs: list[dict[str, str]] = []
    for column in columns:
        if isinstance(column, Mapping):
            specs.append(dict(column))
        else:
            name, kind = column
            specs.append({"name": name, "type": kind})
    return specs
