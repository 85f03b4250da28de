"""Wire models, one family per resource (strict: unknown fields are rejected).

Request bodies are parsed by the service with precise error paths; these models describe
them (and the responses) in the OpenAPI document. numpy never appears here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.plan import NAME_RE

__all__ = [
    "ERRORS",
    "ArrangementInfo",
    "ColumnSpec",
    "ErrorBody",
    "LoadCreate",
    "LoadList",
    "LoadPublic",
    "LoadQueued",
    "RowsPublic",
    "TableCreate",
    "TableList",
    "TablePublic",
    "ViewCreate",
    "ViewList",
    "ViewPublic",
    "WriteBody",
    "WriteDone",
    "WritePending",
    "error_responses",
    "request_schema",
]

Tick = Annotated[int, Field(ge=0)]
Time = Tick | Annotated[list[Tick], Field(min_length=1)]  # one coordinate, or several
ColumnType = Literal["int", "float", "bool", "string"]
NAME = f"^{NAME_RE.pattern}$"  # JSON Schema: ``$`` is the end of the text


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ColumnSpec(Strict):
    name: str = Field(pattern=NAME)
    type: ColumnType


class TableCreate(Strict):
    name: str = Field(pattern=NAME)
    columns: list[ColumnSpec] = Field(min_length=1)
    primary_key: list[str] | None = None
    timing: Literal["server", "client"] = "server"
    time_dims: int = Field(1, ge=1, le=8)


class TablePublic(Strict):
    name: str
    columns: list[ColumnSpec]
    primary_key: list[str]
    timing: Literal["server", "client"]
    time_dims: int
    frontier: list[Time]
    rows: int
    readers: list[str]


class TableList(Strict):
    tables: list[TablePublic]


class Update(Strict):
    insert: dict[str, Any] | None = None
    delete: dict[str, Any] | None = None
    upsert: dict[str, Any] | None = None
    weight: int | None = None
    data: dict[str, Any] | None = None
    time: Time | None = None


class WriteBody(Strict):
    """Row form (``updates``) or columnar form (``columns``, ``diff``, ``time``)."""

    model_config = ConfigDict(json_schema_extra={"not": {"required": ["updates", "columns"]}})

    updates: list[Update] | None = None
    columns: dict[str, list[Any]] | None = None
    diff: list[int] | None = None
    time: Time | list[Time] | None = None
    advance_to: Time | list[Time] | None = None


class OutputUpdate(Strict):
    data: dict[str, Any]
    time: Time
    diff: int


class WriteDone(Strict):
    token: str
    times: list[Time]
    frontier: list[Time]
    status: Literal["done"]
    latency_ms: float
    outputs: dict[str, list[OutputUpdate]]
    failed_views: dict[str, str] | None = None  # views the write made fail, and why


class WritePending(Strict):
    token: str
    status: Literal["pending"]
    times: list[Time] = []
    frontier: list[Time] = []
    failed_views: dict[str, str] | None = None  # views the write made fail already, and why


class ViewCreate(Strict):
    name: str = Field(pattern=NAME)
    query: dict[str, Any]  # its schema: api.plan_schema.QUERY, set in the document


class ArrangementInfo(Strict):
    name: str
    records: int
    bytes: int
    shared_with: list[str]


class LatencySummary(Strict):
    p50: float | None
    p99: float | None


class ViewPublic(Strict):
    name: str
    query: dict[str, Any]
    columns: list[ColumnSpec]
    inputs: list[str]
    frontier: list[Time]
    rows: int
    arrangements: list[ArrangementInfo]
    latency_ms: LatencySummary
    state: Literal["ready", "failed"]
    error: str | None = None  # why it failed (present only then)


class ViewList(Strict):
    views: list[ViewPublic]


class Row(Strict):
    data: dict[str, Any]
    count: int


class RowsPublic(Strict):
    time: Time | None
    frontier: list[Time]
    rows: list[Row]


class ErrorDetail(Strict):
    code: str
    message: str
    detail: Any  # always given, null where nothing applies


class ErrorBody(Strict):
    error: ErrorDetail


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for an endpoint's error answers, with 503: any request that
    waits on the engine may get it from a server shutting down."""
    return {s: {"model": ErrorBody} for s in (*statuses, 503)}


ERRORS = error_responses(400, 404, 409, 413, 422)  # an endpoint taking a body and a name


class LoadSource(Strict):
    """Exactly one of ``path`` (with ``format`` and ``options``), ``table`` or ``sql``."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["path"]}, {"required": ["table"]}, {"required": ["sql"]}]
        }
    )

    path: str | None = Field(None, pattern=r"\S")
    format: Literal["parquet", "csv", "json", "orc"] | None = None
    options: dict[str, Any] | None = None
    table: str | None = Field(None, pattern=r"\S")
    sql: str | None = Field(None, pattern=r"\S")


class LoadCreate(Strict):
    source: LoadSource
    columns: dict[str, str] | None = None
    where: str | None = Field(None, pattern=r"\S")  # not blank
    mode: Literal["append", "replace"] = "append"
    time: Time | None = None


class LoadQueued(Strict):
    id: str
    state: Literal["queued"]


class LoadPublic(Strict):
    """A load job. ``rows``: source rows read so far; ``updates``: updates written once done
    (for ``replace`` only the difference); ``write``: the token of the load's one write
    (``GET /v1/completions/{token}``); ``error``: why it failed or was cancelled."""

    id: str
    table: str
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    mode: Literal["append", "replace"]
    rows: int
    rows_per_s: float | None
    error: ErrorDetail | None = None
    created: str
    started: str | None
    finished: str | None
    time: Time | None = None
    updates: int | None = None
    write: str | None = None


class LoadList(Strict):
    loads: list[LoadPublic]


def request_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema for a request body declared in ``openapi_extra``, with the
    definitions it refers to written in place, and its optional fields optional but not
    nullable. Embedded in the document, a ``#/$defs/...`` reference would point at the
    document's root, which has no ``$defs`` (none of these models refers to itself, so the
    result is finite). An optional field is one to leave out: API.md gives none of them a
    meaning for ``null``, and the server refuses one (422) as it would any other value
    that is not of the field's type."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(v) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            rest = {k: inline(v) for k, v in node.items() if k != "$ref"}
            return {**inline(defs[ref.removeprefix("#/$defs/")]), **rest}
        node = {k: inline(v) for k, v in node.items()}
        if "default" in node and node["default"] is None and "anyOf" in node:
            kinds = [k for k in node["anyOf"] if k != {"type": "null"}]
            rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
            return {**kinds[0], **rest} if len(kinds) == 1 else {**rest, "anyOf": kinds}
        return node

    return dict(inline(schema))
