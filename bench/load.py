"""Load benchmark: a parquet file into numpy chunks with strings interned, and (``--server``)
the same file through a real server's ``POST /v1/tables/{t}/loads``.

    python -m bench.load --rows 10000000 [--workdir DIR] [--chunk-rows 65536]
    python -m bench.load --server --rows 10000000 [--report SECTION]

Generates (once, cached in ``--workdir``) a parquet file of ``(a int, b int, x float, s string)``
rows, then measures, each in a fresh process so that peak RSS belongs to one path only:

- ``pyarrow``: ``ParquetFile.iter_batches`` -> the same chunk conversion (numpy columns, strings
  interned by the same dict-based callback) without Spark: the limit for this machine;
- ``spark``: ``service.spark`` (local Spark session, ``build_source`` + ``stream_chunks``).

Prints one JSON line: rows/s, peak RSS of the Python process (``getrusage``), its growth over
the RSS before streaming began, and for Spark the driver JVM's peak RSS (``VmHWM``), plus the
ratio of the two rates. Bounded memory shows as a Python growth that does not scale with rows.

``--server`` measures the end-to-end server path instead of ``spark``: it starts
``python -m api.server`` on a free port (its own data directory), warms Spark up with a
one-row load, creates a table ``(a int, b int, x float, s string)``, POSTs the load of the
file and polls ``GET /v1/loads/{id}`` until it is done. It reports rows/s from the POST to the
``done`` answer (and the job's own figure, from start to finish; ``read_s`` until every row
was read, ``write_s`` for the one write after), the server process's peak RSS (``VmHWM``,
which includes holding the whole table in its arrangement) and its growth over the RSS before
the first measured load, the JVM's peak RSS, and the rate and peak RSS as ratios to
``pyarrow`` alone. ``--repeat`` loads run (each into a new table, the previous one dropped);
the fastest is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
    kib = _proc_kib(pid, "VmHWM")
    return None if kib is None else kib / 1024


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


def _proc_kib(pid: int, field: str) -> int | None:
    """A ``/proc/<pid>/status`` memory field (``VmHWM``, ``VmRSS``) in KiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found.extend(children)
            todo.extend(children)
    return found


def _jvm_pid(server_pid: int) -> int | None:
    for pid in _descendants(server_pid):
        try:
            if b"java" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                return pid
        except OSError:
            continue
    return None


def _mb(kib: int | None) -> float | None:
    return None if kib is None else round(kib / 1024, 1)


def _start_server(data_dir: Path, chunk_rows: int) -> tuple[subprocess.Popen[str], str]:
    env = {
        **os.environ,
        "DIFFLOW_PORT": "0",
        "DIFFLOW_DATA_DIR": str(data_dir),
        "DIFFLOW_LOAD_CHUNK_ROWS": str(chunk_rows),
        "DIFFLOW_WARMUP": "0",  # no kernel warm-up process taking a core from the measurement
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.server"],
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    match = re.search(r"(http://\S+)", proc.stdout.readline())
    if match is None:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        raise RuntimeError("the server did not start")
    return proc, match.group(1)


def _load(client: Any, table: str, path: Path) -> dict[str, Any]:
    """Create ``table`` and load ``path`` into it, polling every 20 ms: seconds from the POST
    to ``done``, and when the job had read every row (the rest is the one write)."""
    columns = [{"name": name, "type": kind} for name, kind in SCHEMA]
    client.post("/v1/tables", json={"name": table, "columns": columns}).raise_for_status()
    started = time.perf_counter()
    r = client.post(f"/v1/tables/{table}/loads", json={"source": {"path": str(path)}})
    r.raise_for_status()
    total, read_s = pq.ParquetFile(path).metadata.num_rows, None
    while True:
        job = client.get(f"/v1/loads/{r.json()['id']}").json()
        if job["state"] in ("done", "failed", "cancelled"):
            break
        if read_s is None and job["rows"] == total:
            read_s = time.perf_counter() - started
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    if job["state"] != "done":
        raise RuntimeError(f"the load of {path} ended {job['state']}: {job['error']}")
    return {
        "rows": job["rows"],
        "seconds": round(elapsed, 3),
        "rows_per_s": round(job["rows"] / elapsed),
        "job_rows_per_s": round(job["rows_per_s"]),
        "read_s": None if read_s is None else round(read_s, 3),
        "write_s": None if read_s is None else round(elapsed - read_s, 3),
    }


def run_server(path: Path, workdir: Path, chunk_rows: int, repeat: int = 2) -> dict[str, Any]:
    """One server subprocess: a one-row load starts Spark, then ``repeat`` measured loads,
    each into a new table (the previous one dropped); the fastest is reported (the first pays
    for Spark's cold code paths), peak RSS is over all of them."""
    import httpx

    warm_path = workdir / "load-warmup.parquet"
    pq.write_table(pq.read_table(path).slice(0, 1), warm_path)
    with tempfile.TemporaryDirectory(dir=workdir) as data_dir:
        proc, url = _start_server(Path(data_dir), chunk_rows)
        try:
            with httpx.Client(base_url=url, timeout=600) as client:
                spark_start_s = _load(client, "warmup", warm_path)["seconds"]
                baseline_kib = _proc_kib(proc.pid, "VmRSS")
                runs = []
                for i in range(repeat):
                    if i:
                        client.delete(f"/v1/tables/bench{i - 1}").raise_for_status()
                    runs.append(_load(client, f"bench{i}", path))
                    stored = client.get(f"/v1/tables/bench{i}").json()["rows"]
                    if stored != runs[-1]["rows"]:
                        raise RuntimeError(f"table bench{i} holds {stored} rows after the load")
            jvm = _jvm_pid(proc.pid)
            peak_kib = _proc_kib(proc.pid, "VmHWM")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    growth_kib = None if peak_kib is None or baseline_kib is None else peak_kib - baseline_kib
    best = min(runs, key=lambda run: run["seconds"])
    return {
        **best,
        "first_run_s": runs[0]["seconds"],
        "spark_start_load_s": round(spark_start_s, 2),
        "peak_rss_mb": _mb(peak_kib),
        "rss_growth_mb": _mb(growth_kib),
        "rss_growth_bytes_per_row": (
            None if growth_kib is None else round(growth_kib * 1024 / max(best["rows"], 1))
        ),
        "jvm_peak_rss_mb": _mb(_proc_kib(jvm, "VmHWM")) if jvm is not None else None,
    }


def _phase(phase: str, args: argparse.Namespace) -> dict[str, Any]:
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
        "--repeat",
        str(args.repeat),
    ]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def report_rows(results: dict[str, Any]) -> list[Any]:
    """The figures of a run next to pyarrow's: rate, time, peak memory (and its growth)."""
    from bench.report import Row

    base = results["pyarrow"]
    path = results.get("server") or results["spark"]
    return [
        Row("rows per second", path["rows_per_s"], base["rows_per_s"], True, "rows/s"),
        Row(f"time for {results['rows']:,} rows", path["seconds"], base["seconds"], False, "s"),
        Row("first (cold) run", path["first_run_s"], base["first_run_s"], False, "s"),
        Row("peak RSS", path["peak_rss_mb"], base["peak_rss_mb"], False, "MB"),
        Row("RSS growth while loading", path["rss_growth_mb"], base["rss_growth_mb"], False, "MB"),
    ]


def write_report(
    section: str, results: dict[str, Any], command: str, path: Path | None = None
) -> Path:
    """Write SECTION of BENCHMARKS.md for ``results`` (the JSON the command prints)."""
    from bench import report

    server = "server" in results
    run = results.get("server") or results["spark"]
    what = (
        "through a real server (`POST /v1/tables/{t}/loads`, polled until `done`; the table "
        "holds every row in its arrangement at the end, which the server's peak RSS includes)"
        if server
        else "through `service.spark` in one process (Spark -> Arrow -> numpy chunks)"
    )
    extra = ""
    if server:
        extra = (
            f" Server: the job's own rate {run['job_rows_per_s']:,} rows/s; reading took "
            f"{run['read_s']} s and the one write of all rows {run['write_s']} s; the JVM "
            f"peaked at {run['jvm_peak_rss_mb']} MB; growth per row "
            f"{run['rss_growth_bytes_per_row']} bytes."
        )
    text = (
        f"An initial load of {results['rows']:,} rows of (int, int, float, string) "
        f"({results['distinct_strings']:,} distinct strings; parquet, {results['file_mb']} MB; "
        f"chunks of {results['chunk_rows']:,} rows) {what}. Baseline: reading the same file "
        "with pyarrow alone into the same numpy chunks with strings interned (the limit on "
        "this machine). Best of the runs; peak RSS is the measured process's `VmHWM`." + extra
    )
    name = "server load" if server else "spark load"
    table = report.render_table(report_rows(results), name=name, baseline="pyarrow")
    body = report.render_section(section, table, command, None, text)
    return report.write_section(section, body, path)


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
    parser.add_argument(
        "--server",
        action="store_true",
        help="measure a load through a real server (POST /v1/tables/{t}/loads) next to pyarrow",
    )
    parser.add_argument("--report", metavar="SECTION", help="write SECTION of BENCHMARKS.md")
    parser.add_argument("--report-file", type=Path, help="default: BENCHMARKS.md")
    parser.add_argument("--phase", choices=["pyarrow", "spark"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    path = dataset_path(args.workdir, args.rows, args.distinct)
    if args.phase:
        print(json.dumps(run_phase(args.phase, path, args.chunk_rows, args.repeat)))
        return
    results: dict[str, Any] = {
        "bench": "load-server" if args.server else "load",
        "rows": args.rows,
        "distinct_strings": args.distinct,
        "chunk_rows": args.chunk_rows,
        "file_mb": round(path.stat().st_size / 2**20, 1),
    }
    results["pyarrow"] = _phase("pyarrow", args)
    if args.server:
        server = run_server(path, args.workdir, args.chunk_rows, args.repeat)
        results["server"] = server
        results["server_vs_pyarrow"] = round(
            server["rows_per_s"] / results["pyarrow"]["rows_per_s"], 3
        )
        if server["peak_rss_mb"] is not None:
            results["server_rss_vs_pyarrow"] = round(
                server["peak_rss_mb"] / results["pyarrow"]["peak_rss_mb"], 2
            )
    else:
        results["spark"] = _phase("spark", args)
        results["spark_vs_pyarrow"] = round(
            results["spark"]["rows_per_s"] / results["pyarrow"]["rows_per_s"], 3
        )
    if args.report:
        from bench.report import shell_join

        argv_ = sys.argv[1:] if argv is None else argv
        command = shell_join(["python", "-m", "bench.load", *argv_])
        written = write_report(args.report, results, command, args.report_file)
        print(f"wrote section {args.report!r} of {written}", file=sys.stderr)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
