"""The public surface of service.spark is pinned: changing it is a deliberate act."""

import service.spark


def test_public_api() -> None:
    assert sorted(service.spark.__all__) == [
        "Cancel",
        "Chunk",
        "DEFAULT_CHUNK_ROWS",
        "FORMATS",
        "Interner",
        "LoadSpec",
        "PathSource",
        "Progress",
        "SourceFrame",
        "SparkSettings",
        "SqlSource",
        "TABLE_TYPES",
        "TableSchema",
        "TableSource",
        "build_source",
        "get_spark",
        "intern_strings",
        "parse_load_spec",
        "parse_spark_conf",
        "stop",
        "stream_chunks",
    ]
    for name in service.spark.__all__:
        assert getattr(service.spark, name) is not None
