"""Load benchmark, data path only: a parquet file into numpy chunks with strings interned.

    python -m bench.load --rows 10000000 [--workdir DIR] [--chunk-rows 65536]

Generates (once, cached in ``--workdir``) a parquet file of ``(a int, b int, x float, s string)``
rows, then measures, each in a fresh process so that peak RSS belongs to one path only:

- ``pyarrow``: ``ParquetFile.iter_batches`` -> the same chunk conversion (numpy columns, strings
  interned by the same dict-based callback) without Spark: the limit for this machine;
- ``spark``: ``service.spark`` (local Spark session, ``build_source`` + ``stream_chunks``).

Prints one JSON line: rows/s, peak RSS of the Python process (``getrusage``), its growth over
the RSS before streaming began, and for Spark the driver JVM's peak RSS (``VmHWM``), plus the
ratio of the two rates. Bounded memory shows as a Python growth that does not scale with rows.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from service.spark import intern_strings

SCHEMA = [("a", "int"), ("b", "int"), ("x", "float"), ("s", "string")]
ROW_GROUP_ROWS = 1 << 20


class DictInterner:
    """string -> dense int64 id, as the service's interner does it: one dict lookup per string."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, strings: list[str]) -> np.ndarray:
        ids = self.ids
        return np.fromiter(
            (ids.setdefault(s, len(ids)) for s in strings), dtype=np.int64, count=len(strings)
        )


def dataset_path(workdir: Path, rows: int, distinct: int) -> Path:
    """The cached parquet file for ``rows`` rows; written on first use."""
    path = workdir / f"load-{rows}-{distinct}.parquet"
    if path.exists():
        return path
    workdir.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    rng = np.random.default_rng(7)
    pool = pa.array([f"user-{i:08d}" for i in range(distinct)])
    schema = pa.schema(
        [("a", pa.int64()), ("b", pa.int64()), ("x", pa.float64()), ("s", pa.string())]
    )
    with pq.ParquetWriter(partial, schema) as writer:
        for start in range(0, rows, ROW_GROUP_ROWS):
            n = min(ROW_GROUP_ROWS, rows - start)
            writer.write_table(
                pa.table(
                    {
                        "a": np.arange(start, start + n, dtype=np.int64),
                        "b": rng.integers(0, 1 << 40, n),
                        "x": rng.random(n),
                        "s": pool.take(pa.array(rng.integers(0, distinct, n))),
                    },
                    schema=schema,
                )
            )
    partial.rename(path)
    return path


def _to_chunk(batch: pa.RecordBatch, intern: DictInterner) -> dict[str, Any]:
    return {
        "a": batch.column(0).to_numpy(zero_copy_only=False, writable=True),
        "b": batch.column(1).to_numpy(zero_copy_only=False, writable=True),
        "x": batch.column(2).to_numpy(zero_copy_only=False, writable=True),
        "s": intern_strings(batch.column(3), intern),
    }


def _pyarrow_chunks(path: Path, chunk_rows: int) -> Iterator[dict[str, Any]]:
    intern = DictInterner()
    for batch in pq.ParquetFile(path).iter_batches(batch_size=chunk_rows):
        yield _to_chunk(batch, intern)


def _spark_chunks(spark: Any, path: Path, chunk_rows: int) -> Iterator[dict[str, Any]]:
    from service.spark import build_source, stream_chunks

    frame = build_source(spark, {"source": {"path": str(path), "format": "parquet"}}, SCHEMA)
    yield from stream_chunks(frame, chunk_rows=chunk_rows, intern=DictInterner())


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def _jvm_peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_phase(phase: str, path: Path, chunk_rows: int, repeat: int = 2) -> dict[str, Any]:
    """Stream ``path`` ``repeat`` times through ``phase`` in this process and report the
    fastest run (the first is reported too: JIT, codegen and page cache are cold). For Spark
    the session starts first and is timed apart: a server starts it once, not per load."""
    extra: dict[str, Any] = {}
    spark = None
    if phase == "spark":
        from service.spark import SparkSettings, get_spark

        started = time.perf_counter()
        spark = get_spark(SparkSettings.from_env())
        extra["startup_s"] = round(time.perf_counter() - started, 2)
    baseline = _current_rss_mb()
    runs = [_timed_run(spark, path, chunk_rows) for _ in range(repeat)]
    warm = min(runs, key=lambda run: run["seconds"])
    result = {
        **warm,
        "first_run_s": runs[0]["seconds"],
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "rss_growth_mb": round(_peak_rss_mb() - baseline, 1),
        **extra,
    }
    if spark is not None:
        jvm: Any = spark.sparkContext._jvm
        jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
        peak = _jvm_peak_rss_mb(jvm_pid)
        result["jvm_peak_rss_mb"] = None if peak is None else round(peak, 1)
    return result


def _timed_run(spark: Any, path: Path, chunk_rows: int) -> dict[str, Any]:
    cpu_before = _python_cpu_s()
    started = time.perf_counter()
    chunks = (
        _spark_chunks(spark, path, chunk_rows)
        if spark is not None
        else _pyarrow_chunks(path, chunk_rows)
    )
    rows = count = biggest = 0
    for chunk in chunks:
        n = len(chunk["a"])
        rows, count, biggest = rows + n, count + 1, max(biggest, n)
    elapsed = time.perf_counter() - started
    return {
        "rows": rows,
        "seconds": round(elapsed, 3),
        "rows_per_s": round(rows / elapsed),
        "chunks": count,
        "max_chunk_rows": biggest,
        "python_cpu_s": round(_python_cpu_s() - cpu_before, 3),
    }


def _python_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--distinct", type=int, default=100_000, help="distinct strings")
    parser.add_argument("--chunk-rows", type=int, default=65_536)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "difflow-bench-load"
    )
    parser.add_argument("--repeat", type=int, default=2, help="runs per path; best reported")
    parser.add_argument("--phase", choices=["pyarrow", "spark"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    path = dataset_path(args.workdir, args.rows, args.distinct)
    if args.phase:
        print(json.dumps(run_phase(args.phase, path, args.chunk_rows, args.repeat)))
        return
    results: dict[str, Any] = {
        "bench": "load",
        "rows": args.rows,
        "distinct_strings": args.distinct,
        "chunk_rows": args.chunk_rows,
        "file_mb": round(path.stat().st_size / 2**20, 1),
    }
    for phase in ("pyarrow", "spark"):
        command = [
            sys.executable,
            "-m",
            "bench.load",
            "--phase",
            phase,
            "--rows",
            str(args.rows),
            "--distinct",
            str(args.distinct),
            "--chunk-rows",
            str(args.chunk_rows),
            "--workdir",
            str(args.workdir),
        ]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[phase] = json.loads(out.strip().splitlines()[-1])
    results["spark_vs_pyarrow"] = round(
        results["spark"]["rows_per_s"] / results["pyarrow"]["rows_per_s"], 3
    )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
