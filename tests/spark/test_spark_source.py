"""Planning a load: formats, column mapping, push-down, and errors that say what to fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from service.errors import Invalid, LoadError
from service.spark import SparkSettings
from service.spark.session import _local_conf

pytestmark = pytest.mark.spark

EDGES = [("src", "int"), ("dst", "int")]


def load_error(plan: Callable[..., Any], spec: dict[str, Any], schema: list[Any]) -> LoadError:
    with pytest.raises(LoadError) as info:
        plan(spec, schema)
    return info.value


def test_parquet_values_and_types(write_parquet: Callable[..., str], load: Any) -> None:
    path = write_parquet(
        {
            "i32": pa.array([1, -2, 3], pa.int32()),
            "i64": pa.array([2**40, 0, -(2**40)], pa.int64()),
            "f32": pa.array([0.5, 1.5, -2.0], pa.float32()),
            "f64": [0.1, 1e300, -0.0],
            "flag": [True, False, True],
            "name": ["a", "ü", ""],
        }
    )
    schema = [
        ("a", "int"),
        ("b", "int"),
        ("x", "float"),
        ("y", "float"),
        ("ok", "bool"),
        ("name", "string"),
        ("w", "float"),
    ]
    columns = {"a": "i32", "b": "i64", "x": "f32", "y": "f64", "ok": "flag", "w": "i32"}
    out = load({"source": {"path": path, "format": "parquet"}, "columns": columns}, schema)
    assert out["a"].dtype == np.int64 and out["a"].tolist() == [1, -2, 3]
    assert out["b"].tolist() == [2**40, 0, -(2**40)]
    assert out["x"].dtype == np.float64 and out["x"].tolist() == [0.5, 1.5, -2.0]
    assert out["y"].tolist() == [0.1, 1e300, -0.0]
    assert out["ok"].dtype == np.bool_ and out["ok"].tolist() == [True, False, True]
    assert out["name"] == ["a", "ü", ""]
    assert out["w"].tolist() == [1.0, -2.0, 3.0]


def test_csv_with_header_parses_text_into_table_types(write_text: Any, load: Any) -> None:
    path = write_text("edges.csv", "from,to,w,ok,label\n1,2,0.5,true,007\n3,4,1.5,false,x y\n")
    schema = [("src", "int"), ("dst", "int"), ("w", "float"), ("ok", "bool"), ("label", "string")]
    out = load(
        {"source": {"path": path, "format": "csv"}, "columns": {"src": "from", "dst": "to"}}, schema
    )
    assert out["src"].tolist() == [1, 3]
    assert out["dst"].tolist() == [2, 4]
    assert out["w"].tolist() == [0.5, 1.5]
    assert out["ok"].tolist() == [True, False]
    assert out["label"] == ["007", "x y"]  # strings stay exactly as written


def test_csv_honours_user_options(write_text: Any, load: Any) -> None:
    path = write_text("edges.txt", "1;2\n3;4\n")
    spec = {
        "source": {
            "path": path,
            "format": "csv",
            "options": {"header": False, "sep": ";", "inferSchema": True},
        },
        "columns": {"src": "_c0", "dst": "_c1"},
    }
    out = load(spec, EDGES)
    assert out["src"].tolist() == [1, 3] and out["dst"].tolist() == [2, 4]


def test_json_lines_and_orc(write_text: Any, tmp_path: Any, load: Any) -> None:
    path = write_text("edges.json", '{"src": 1, "dst": 2}\n{"src": 3, "dst": 4, "extra": "x"}\n')
    out = load({"source": {"path": path}}, EDGES)
    assert out["src"].tolist() == [1, 3] and out["dst"].tolist() == [2, 4]
    orc_path = str(tmp_path / "edges.orc")
    orc.write_table(pa.table({"src": [5, 6], "dst": [7, 8]}), orc_path)
    out = load({"source": {"path": orc_path, "format": "orc"}}, EDGES)
    assert out["src"].tolist() == [5, 6] and out["dst"].tolist() == [7, 8]


def test_mapping_and_where_are_pushed_down(
    write_parquet: Any, plan: Any, load: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 1000
    path = write_parquet(
        {
            "from_id": np.arange(n),
            "to_id": np.arange(n) + 1,
            "weight": np.arange(n) % 3,
            "payload": ["x" * 50] * n,
        }
    )
    spec = {
        "source": {"path": path},
        "columns": {"src": "from_id", "dst": "to_id"},
        "where": "weight > 1",
    }
    frame = plan(spec, EDGES)
    assert frame.df.columns == ["src", "dst"]
    assert frame.describe("dst") == "'dst' (source column 'to_id')"
    capsys.readouterr()
    frame.df.explain()
    physical = capsys.readouterr().out
    read_schema = physical.split("ReadSchema: ", 1)[1].split()[0]
    assert read_schema == "struct<from_id:bigint,to_id:bigint,weight:bigint>"  # no payload
    assert "GreaterThan(weight,1)" in physical.split("PushedFilters: ", 1)[1]
    out = load(spec, EDGES)
    expected = np.arange(n)[np.arange(n) % 3 > 1]
    assert out["src"].tolist() == expected.tolist()
    assert out["dst"].tolist() == (expected + 1).tolist()


def test_table_and_temp_view_and_sql_sources(spark: Any, load: Any) -> None:
    df = spark.createDataFrame([(1, 2, "a"), (2, 3, "b"), (3, 1, "c")], "a long, b long, s string")
    df.write.mode("overwrite").saveAsTable("edges_saved")
    df.createOrReplaceTempView("edges_view")
    try:
        saved = load(
            {"source": {"table": "edges_saved"}, "columns": {"src": "a", "dst": "b"}}, EDGES
        )
        assert sorted(saved["src"].tolist()) == [1, 2, 3]
        view = load(
            {
                "source": {"table": "edges_view"},
                "columns": {"src": "a", "dst": "b"},
                "where": "s <> 'b'",
            },
            EDGES,
        )
        assert view["src"].tolist() == [1, 3] and view["dst"].tolist() == [2, 1]
        sql = load(
            {
                "source": {"sql": "SELECT a AS src, b + 10 AS dst FROM edges_view"},
                "where": "src >= 2",
            },
            EDGES,
        )
        assert sql["src"].tolist() == [2, 3] and sql["dst"].tolist() == [13, 11]
    finally:
        spark.sql("DROP TABLE IF EXISTS edges_saved")
        spark.catalog.dropTempView("edges_view")


def partitions(frame: Any) -> int:
    """How many partitions the load will read (planning only: a range runs no job)."""
    return int(frame.df._jdf.queryExecution().executedPlan().execute().getNumPartitions())


def test_a_big_range_is_planned_in_partitions_the_driver_can_hold(spark: Any, plan: Any) -> None:
    """A range() had as many partitions as cores whatever its size, and the driver holds a
    partition whole: 20M rows in 2 ran it out of heap (audit 112). Now about 32 MiB each by
    Spark's row size estimate (8 + 8 + 8 bytes here), with or without slices named."""
    wanted = -(-20_000_000 * 24 // 2**25)
    for sql in ["range(0, 20000000)", "range(0, 20000000, 1, 1)"]:
        query = f"SELECT id AS src, id % 7 AS dst FROM {sql}"
        assert partitions(plan({"source": {"sql": query}}, EDGES)) == wanted, sql
    small = plan({"source": {"sql": "SELECT id AS src, 1 AS dst FROM range(0, 1000)"}}, EDGES)
    assert partitions(small) == spark.sparkContext.defaultParallelism
    assert spark.conf.get("spark.sql.leafNodeDefaultParallelism", None) is None


def test_a_big_shuffle_is_split_toward_32_mib(spark: Any, plan: Any, tmp_path: Path) -> None:
    """A GROUP BY or join ran in 4 shuffle partitions, however big: 60M groups made 15M rows
    a partition and ran the driver out of heap (with 200, they load in 112 s). The server's
    defaults (this fixture's session keeps 2 for speed) split a shuffle finely and merge it
    back toward 32 MiB."""
    defaults = _local_conf(SparkSettings(), tmp_path)
    keys = ["spark.sql.shuffle.partitions", "spark.sql.adaptive.advisoryPartitionSizeInBytes"]
    before = {key: spark.conf.get(key) for key in keys}
    # hashed keys: the shuffle is sized compressed, and counted ids compress to nothing
    grouped = "SELECT xxhash64(id) AS src, count(*) AS dst FROM range(0, {}) GROUP BY 1"
    try:
        for key in keys:
            spark.conf.set(key, defaults[key])
        big = partitions(plan({"source": {"sql": grouped.format(12_000_000)}}, EDGES))
        small = partitions(plan({"source": {"sql": grouped.format(1000)}}, EDGES))
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
    assert 5 <= big <= 12  # 12M rows of two longs (4 at most before)
    assert small <= spark.sparkContext.defaultParallelism


@pytest.mark.parametrize("slices", ["", ", 1, 1"])
def test_a_range_spread_over_more_partitions_loads_every_row(
    load: Any, monkeypatch: pytest.MonkeyPatch, slices: str
) -> None:
    monkeypatch.setattr("service.spark.source._PARTITION_BYTES", 2**16)
    query = f"SELECT id AS src, id % 7 AS dst FROM range(0, 50000{slices})"
    out = load({"source": {"sql": query}}, EDGES)
    order = np.argsort(out["src"])
    assert out["src"][order].tolist() == list(range(50_000))
    assert out["dst"][order].tolist() == [i % 7 for i in range(50_000)]


def test_missing_path_names_it(plan: Any, tmp_path: Any) -> None:
    missing = str(tmp_path / "nope" / "edges.parquet")
    error = load_error(plan, {"source": {"path": missing}}, EDGES)
    assert error.code == "source_not_found"
    assert missing in error.message


def test_missing_table(plan: Any) -> None:
    error = load_error(plan, {"source": {"table": "no_such_table"}}, EDGES)
    assert error.code == "source_not_found"
    assert "no_such_table" in error.message
    error = load_error(plan, {"source": {"sql": "SELECT * FROM no_such_table"}}, EDGES)
    assert error.code == "source_not_found"


@pytest.mark.parametrize("fmt", ["parquet", "orc", "json"])
def test_unreadable_file(write_text: Any, plan: Any, fmt: str) -> None:
    path = write_text(f"edges.{fmt}", "this is not a data file\n")
    error = load_error(plan, {"source": {"path": path, "format": fmt}}, EDGES)
    assert error.code == "source_unreadable"
    assert path in error.message


def test_a_binary_file_read_as_csv_says_so(write_parquet: Any, plan: Any) -> None:
    """Parquet read as CSV listed its first bytes as the available columns (audit 65)."""
    path = write_parquet({"src": [1], "dst": [2]})
    error = load_error(plan, {"source": {"path": path, "format": "csv"}}, EDGES)
    assert error.code == "source_unreadable", error.message
    assert "does not read as CSV text" in error.message and '"format": "parquet"' in error.message


def test_missing_column_lists_available(write_parquet: Any, plan: Any) -> None:
    path = write_parquet({"Src": [1], "to_id": [2]})
    error = load_error(plan, {"source": {"path": path}, "columns": {"dst": "to_id"}}, EDGES)
    assert error.code == "column_missing"
    assert "'src' (for table column 'src')" in error.message
    assert "did you mean 'Src'?" in error.message
    assert "Src (bigint), to_id (bigint)" in error.message
    assert error.detail["available"] == ["Src", "to_id"]


@pytest.mark.parametrize(
    ("values", "table_type", "source_type"),
    [
        (["1", "2"], "int", "string"),
        ([1.5, 2.0], "int", "double"),
        ([1, 2], "string", "bigint"),
        ([1, 0], "bool", "bigint"),
        ([True, False], "float", "boolean"),
    ],
)
def test_wrong_type_names_both(
    write_parquet: Any, plan: Any, values: list[Any], table_type: str, source_type: str
) -> None:
    path = write_parquet({"v": values})
    error = load_error(plan, {"source": {"path": path}}, [("v", table_type)])
    assert error.code == "column_type"
    assert f"type {source_type}" in error.message
    assert f"'v' of type {table_type}" in error.message
    assert error.detail == {
        "column": "v",
        "source_column": "v",
        "source_type": source_type,
        "table_type": table_type,
    }


def test_malformed_csv_value_fails_the_stream(write_text: Any, load: Any) -> None:
    """The failure names the value (Spark's message) and the table column holding it, found
    by one more query once the casts failed."""
    path = write_text("edges.csv", "src,dst\n1,2\n3,four\n")
    with pytest.raises(LoadError) as info:
        load({"source": {"path": path}}, EDGES)
    assert info.value.code == "column_type"
    assert "'four'" in info.value.message
    assert "try_cast" not in info.value.message  # its NULLs a table would refuse (audit 45)
    assert "table column 'dst'" in info.value.message
    assert info.value.detail == {"condition": "CAST_INVALID_INPUT", "column": "dst"}
    path = write_text("renamed.csv", "a,b\n1,2\n3,4\n99999999999999999999,5\n")
    with pytest.raises(LoadError) as info:
        load({"source": {"path": path}, "columns": {"src": "b", "dst": "a"}}, EDGES)
    assert info.value.code == "column_type"
    assert "table column 'dst' (source column 'a')" in info.value.message
    assert info.value.detail["column"] == "dst"


def test_bad_where(write_parquet: Any, plan: Any) -> None:
    path = write_parquet({"src": [1], "dst": [2]})
    with pytest.raises(Invalid) as invalid:
        plan({"source": {"path": path}, "where": "src >"}, EDGES)
    assert invalid.value.detail == {"path": "where"} and invalid.value.code == "invalid_where"
    error = load_error(plan, {"source": {"path": path}, "where": "weight > 0"}, EDGES)
    assert error.code == "column_missing"
    assert "weight" in error.message


def test_bad_sql(spark: Any, plan: Any) -> None:
    with pytest.raises(Invalid) as invalid:
        plan({"source": {"sql": "SELECT src dst FROM"}}, EDGES)
    assert invalid.value.detail == {"path": "source.sql"}
    assert invalid.value.code == "invalid_source"
    spark.createDataFrame([(1, 2)], "src long, dst long").write.saveAsTable("kept")
    try:
        with pytest.raises(Invalid):
            plan({"source": {"sql": "SELECT 1 AS src, 2 AS dst; DROP TABLE kept"}}, EDGES)
        assert spark.catalog.tableExists("kept")
    finally:
        spark.sql("DROP TABLE IF EXISTS kept")


def test_a_query_failing_as_spark_folds_its_constants(write_parquet: Any, plan: Any) -> None:
    """A where or sql whose constant part fails as Spark plans the load (a division by zero,
    a text that is no number) is the query's own failure, as when it fails reading rows:
    source_unreadable naming the where or the sql (audit 114: an internal error)."""
    path = write_parquet({"src": [1], "dst": [2]})
    error = load_error(plan, {"source": {"path": path}, "where": "1 DIV 0 > 0"}, EDGES)
    assert error.code == "source_unreadable", error.message
    assert "where '1 DIV 0 > 0'" in error.message and "zero" in error.message.lower()
    assert error.detail == {"condition": "DIVIDE_BY_ZERO", "query": "where '1 DIV 0 > 0'"}
    sql = {"source": {"sql": "SELECT CAST('x' AS BIGINT) AS src, 2 AS dst"}}
    error = load_error(plan, sql, EDGES)
    assert error.code == "source_unreadable", error.message
    assert "sql query" in error.message and "'x'" in error.message


def test_a_doubled_quote_in_csv_needs_the_escape_option(write_text: Any, load: Any) -> None:
    """Spark escapes a quote in a quoted CSV field with a backslash: a field written as
    Python's csv writes it, `"a""b"`, loads whole, outer quotes and all, unless the load
    gives `escape` (README, audit 114)."""
    path = write_text("quoted.csv", 's\n"a""b"\n')
    schema = [("s", "string")]
    assert load({"source": {"path": path}}, schema)["s"] == ['"a""b"']
    spec = {"source": {"path": path, "options": {"escape": '"'}}}
    assert load(spec, schema)["s"] == ['a"b']


def test_a_json_field_null_on_every_line_says_so(
    write_text: Any, write_parquet: Any, plan: Any
) -> None:
    """Spark reads a JSON field that is null on every line as a string: the type error says
    that such a field cannot load (audit 114: it only said to cast it)."""
    path = write_text("nulls.json", '{"src": null, "dst": 1}\n{"src": null, "dst": 2}\n')
    error = load_error(plan, {"source": {"path": path}}, EDGES)
    assert error.code == "column_type"
    assert "null on every line" in error.message and "'src'" in error.message
    path = write_parquet({"src": ["x"], "dst": [1]})  # a typed source: no such hint
    assert "null on every line" not in load_error(plan, {"source": {"path": path}}, EDGES).message
