"""The load spec is checked without Spark: every mistake is an Invalid naming its field."""

from __future__ import annotations

from typing import Any

import pytest

from service.errors import Invalid
from service.spark import LoadSpec, PathSource, SqlSource, TableSource, parse_load_spec

SCHEMA = [("src", "int"), ("dst", "int"), ("label", "string")]


def parse(spec: dict[str, Any]) -> LoadSpec:
    return parse_load_spec(spec, SCHEMA)


def invalid_path(spec: dict[str, Any], schema: list[tuple[str, str]] = SCHEMA) -> str:
    with pytest.raises(Invalid) as info:
        parse_load_spec(spec, schema)
    return str(info.value.detail["path"])


def test_columns_default_to_table_names_in_schema_order() -> None:
    spec = parse({"source": {"path": "/d/e.parquet"}, "columns": {"dst": "to_id"}})
    assert spec.columns == (("src", "src"), ("dst", "to_id"), ("label", "label"))
    assert spec.source_columns == {"src": "src", "dst": "to_id", "label": "label"}
    assert spec.where is None


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("/d/e.parquet", "parquet"),
        ("/d/e.CSV", "csv"),
        ("/d/e.jsonl", "json"),
        ("/d/e.orc", "orc"),
        ("/d/edges", "parquet"),
        ("s3a://b/k.json", "json"),
    ],
)
def test_format_defaults_from_the_extension(path: str, fmt: str) -> None:
    assert parse({"source": {"path": path}}).source == PathSource(path, fmt, {})


def test_options_become_strings() -> None:
    spec = parse(
        {
            "source": {
                "path": "/e.csv",
                "format": "CSV",
                "options": {"header": False, "sep": ";", "samplingRatio": 0.5},
            }
        }
    )
    assert spec.source == PathSource(
        "/e.csv", "csv", {"header": "false", "sep": ";", "samplingRatio": "0.5"}
    )


def test_table_and_sql_sources() -> None:
    assert parse({"source": {"table": " db.edges "}}).source == TableSource("db.edges")
    sql = "-- edges\n(WITH e AS (SELECT 1 AS src) SELECT * FROM e)"
    assert parse({"source": {"sql": sql}, "where": "src > 0"}).source == SqlSource(sql)


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"source": {"path": "/e.csv", "table": None}}, "source.table"),
        ({"source": {"path": "/e.csv", "format": None}}, "source.format"),
        ({"source": {"table": "t", "options": None}}, "source.options"),
        ({"source": {"path": None, "table": "t"}}, "source.path"),
        ({"source": {"sql": "SELECT 1"}, "columns": None}, "columns"),
        ({"source": {"sql": "SELECT 1"}, "where": None}, "where"),
    ],
)
def test_null_is_no_value(spec: dict[str, Any], path: str) -> None:
    """An optional field is given or left out: a null names its field, it is not left out."""
    assert invalid_path(spec) == path


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({}, "source"),
        ({"source": "/e.parquet"}, "source"),
        ({"source": {}}, "source"),
        ({"source": {"path": "/e.parquet", "sql": "SELECT 1"}}, "source"),
        ({"source": {"path": "/e", "format": "avro"}}, "source.format"),
        ({"source": {"path": "/e", "schema": "a INT"}}, "source.schema"),
        ({"source": {"path": ""}}, "source.path"),
        ({"source": {"path": "/e", "options": ["header"]}}, "source.options"),
        ({"source": {"path": "/e", "options": {"header": [1]}}}, "source.options.header"),
        ({"source": {"table": "t", "format": "csv"}}, "source.format"),
        ({"source": {"sql": "DROP TABLE edges"}}, "source.sql"),
        ({"source": {"table": "t"}, "columns": ["src"]}, "columns"),
        ({"source": {"table": "t"}, "columns": {"weight": "w"}}, "columns.weight"),
        ({"source": {"table": "t"}, "columns": {"src": 3}}, "columns.src"),
        ({"source": {"table": "t"}, "where": "  "}, "where"),
    ],
)
def test_bad_specs_name_the_field(spec: dict[str, Any], path: str) -> None:
    assert invalid_path(spec) == path


def test_schema_types_are_checked() -> None:
    assert invalid_path({"source": {"table": "t"}}, [("x", "date")]) == "schema.x"


def test_messages_say_how_to_fix() -> None:
    with pytest.raises(Invalid, match=r"one of \['parquet', 'csv', 'json', 'orc'\]"):
        parse({"source": {"path": "/e", "format": "avro"}})
    with pytest.raises(Invalid, match="found both 'path' and 'sql'"):
        parse({"source": {"path": "/e", "sql": "SELECT 1"}})
    with pytest.raises(Invalid, match=r"table columns: \['src', 'dst', 'label'\]"):
        parse({"source": {"table": "t"}, "columns": {"weight": "w"}})
