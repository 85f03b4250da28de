"""Fixtures for the Spark tests: one real local SparkSession for the whole run, and helpers
that write small sources with pyarrow or plain text and read a load back as whole columns."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.spark import (
    SourceFrame,
    SparkSettings,
    build_source,
    get_spark,
    stop,
    stream_chunks,
)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Started once; two local cores and two shuffle partitions keep jobs small and fast."""
    settings = SparkSettings(
        master="local[2]",
        data_dir=tmp_path_factory.mktemp("difflow-data"),
        conf={"spark.sql.shuffle.partitions": "2"},
    )
    session = get_spark(settings)
    yield session
    stop()


@pytest.fixture
def write_parquet(tmp_path: Path) -> Callable[..., str]:
    def write(columns: Mapping[str, Any], name: str = "data.parquet", **kwargs: Any) -> str:
        path = tmp_path / name
        pq.write_table(pa.table(dict(columns)), path, **kwargs)
        return str(path)

    return write


@pytest.fixture
def write_text(tmp_path: Path) -> Callable[[str, str], str]:
    def write(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return write


@pytest.fixture
def plan(spark: Any) -> Callable[..., SourceFrame]:
    def plan(spec: Mapping[str, Any], schema: list[tuple[str, str]]) -> SourceFrame:
        return build_source(spark, spec, schema)

    return plan


@pytest.fixture
def load(plan: Callable[..., SourceFrame]) -> Callable[..., dict[str, Any]]:
    """Plan and stream a load; numbers come back as one array per column, strings as a list."""

    def load(
        spec: Mapping[str, Any], schema: list[tuple[str, str]], **kwargs: Any
    ) -> dict[str, Any]:
        chunks = list(stream_chunks(plan(spec, schema), **kwargs))
        out: dict[str, Any] = {}
        for name, kind in schema:
            parts = [chunk[name] for chunk in chunks]
            if kind == "string" and "intern" not in kwargs:
                out[name] = [s for part in parts for s in part.to_pylist()]
            else:
                dtype = {"int": np.int64, "float": np.float64, "bool": np.bool_}.get(kind, np.int64)
                out[name] = np.concatenate(parts) if parts else np.array([], dtype=dtype)
        return out

    return load
