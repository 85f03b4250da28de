"""The JSON Schema of query plans and expressions (API.md, "Query plans") for /openapi.json.

``Plan`` and ``Expr`` go into the document's components, each node with its fields' shapes
and no others; a view's ``query`` is any node but ``var`` (a var is read inside an
``iterate`` only). The schema says what a plan looks like, not whether it type-checks: an
unknown column or a function given the wrong arguments fits it and is a 422 all the same.
"""

from __future__ import annotations

from typing import Any

from engine.expr import FUNCTIONS
from service.plan import HOWS, NAME_RE, NODE_FIELDS

__all__ = ["COMPONENTS", "QUERY"]

_PLAN = {"$ref": "#/components/schemas/Plan"}
_EXPR = {"$ref": "#/components/schemas/Expr"}
_INT64 = {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}
_COUNT = {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
_NAMES = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
_TYPES = ["int", "float", "bool", "string"]
_AGGREGATES = ["count", "sum", "min", "max", "count_distinct"]
_NAME = f"^{NAME_RE.pattern}$"  # a JSON Schema pattern is a search: anchored


def _object_of(values: dict[str, Any], named: bool = False, **more: Any) -> dict[str, Any]:
    """A JSON object whose members are all ``values`` (names matching NAME_RE if ``named``)."""
    schema: dict[str, Any] = {"type": "object", "additionalProperties": values, **more}
    if named:
        schema["propertyNames"] = {"pattern": _NAME}
    return schema


_FIELDS: dict[str, dict[str, Any]] = {  # each node's fields but ``op``
    "table": {"name": {"type": "string"}},
    "view": {"name": {"type": "string"}},
    "var": {"name": {"type": "string"}},
    "select": {"input": _PLAN, "columns": _object_of(_EXPR, named=True)},
    "filter": {"input": _PLAN, "where": _EXPR},
    "flat_map": {
        "input": _PLAN,
        "as": {"type": "string", "pattern": _NAME},
        "start": _EXPR,
        "stop": _EXPR,
    },
    "concat": {"inputs": {"type": "array", "items": _PLAN, "minItems": 1}},
    "negate": {"input": _PLAN},
    "join": {
        "left": _PLAN,
        "right": _PLAN,
        "on": {
            "type": "array",
            "items": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 2,
                "maxItems": 2,
            },
        },
        "how": {"enum": sorted(HOWS)},
        "columns": _object_of(_EXPR, named=True),
    },
    "reduce": {
        "input": _PLAN,
        "by": _NAMES,
        "aggregates": _object_of(
            {
                "type": "object",
                "properties": {"fn": {"enum": _AGGREGATES}, "of": _EXPR},
                "required": ["fn"],
                "additionalProperties": False,
            },
            named=True,
        ),
    },
    "distinct": {"input": _PLAN},
    "threshold": {"input": _PLAN, "at_least": _INT64},
    "top_k": {
        "input": _PLAN,
        "by": _NAMES,
        "order_by": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"col": {"type": "string"}, "desc": {"type": "boolean"}},
                "required": ["col"],
                "additionalProperties": False,
            },
        },
        "k": _COUNT,
    },
    "iterate": {
        "vars": _object_of(_PLAN, named=True, minProperties=1),
        "body": _object_of(_PLAN, named=True),
        "result": {"type": "string"},
        "max_iterations": _COUNT,
    },
}
assert set(_FIELDS) == set(NODE_FIELDS)


def _node(op: str) -> dict[str, Any]:
    required, _ = NODE_FIELDS[op]
    return {
        "type": "object",
        "properties": {"op": {"const": op}, **_FIELDS[op]},
        "required": ["op", *sorted(required)],
        "additionalProperties": False,
    }


EXPR: dict[str, Any] = {
    "description": "a column name, a number or boolean literal, {lit} or a function call",
    "anyOf": [
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
        {
            "type": "object",
            "properties": {"lit": {"type": ["string", "number", "boolean"]}},
            "required": ["lit"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "fn": {"enum": sorted(FUNCTIONS)},
                "args": {"type": "array", "items": _EXPR},
                "to": {"enum": _TYPES},
            },
            "required": ["fn"],
            "additionalProperties": False,
        },
    ],
}
PLAN: dict[str, Any] = {
    "description": "a query plan node (API.md, Query plans)",
    "oneOf": [_node(op) for op in sorted(NODE_FIELDS)],
}
COMPONENTS = {"Plan": PLAN, "Expr": EXPR}
QUERY: dict[str, Any] = {  # a view's query: a node reading no var of its own
    "oneOf": [_node(op) for op in sorted(NODE_FIELDS) if op != "var"],
}
