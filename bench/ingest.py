"""Bulk write benchmark: one big write through a real server, against the bare engine taking
the same rows.

    python -m bench.ingest --rows 200000 [--repeat 3] [--report SECTION]

Rows are ``(k int, v int, x float, s string)``: ``k = i``, ``v = 7 i mod 1000``, ``x = i / 2``,
``s = "s" + (i mod 1000)``; a view counts rows and sums ``v`` per ``s``. Each form is one
``POST /v1/tables/{t}/updates`` (``wait=true``) on a fresh table, timed from sending the body
(already JSON) to its 200:

* ``columnar``: the rows in the columnar form, into a table without a primary key;
* ``columnar, keyed``: the same into a table keyed by ``k``;
* ``upserts, keyed``: then half of those keys (every other one) upserted with a new ``v``, in
  the row form: each retracts the stored row and inserts the new one.

Baseline: the bare engine in process taking the same rows as the write puts into it (strings
interned, columns as int64 storage, the upserts' retractions included), sent to an input
and stepped through the same view. ``--repeat`` runs each (with new tables) and keeps the
fastest. The views' rows are checked against counts and sums computed here (a mismatch is an
error). Prints one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson

from bench.serve import running_server

FORMS = ("columnar", "columnar, keyed", "upserts, keyed")
COLUMNS = [("k", "int"), ("v", "int"), ("x", "float"), ("s", "string")]


def columns(n: int, v_shift: int = 0) -> dict[str, list[Any]]:
    i = np.arange(n)
    return {
        "k": i.tolist(),
        "v": ((7 * i + v_shift) % 1000).tolist(),
        "x": (i / 2).tolist(),
        "s": [f"s{j}" for j in (i % 1000).tolist()],
    }


def view_plan(table: str) -> dict[str, Any]:
    return {
        "op": "reduce",
        "input": {"op": "table", "name": table},
        "by": ["s"],
        "aggregates": {"n": {"fn": "count"}, "t": {"fn": "sum", "of": "v"}},
    }


def bodies(n: int) -> dict[str, bytes]:
    """The JSON bodies of the three writes (encoded once, outside the timed region)."""
    columnar = orjson.dumps({"columns": columns(n)})
    half = columns(n, v_shift=1)
    upserts = [
        {"upsert": {c: half[c][i] for c in half}} for i in range(0, n, 2)
    ]  # every other key, a new v
    return {
        "columnar": columnar,
        "columnar, keyed": columnar,
        "upserts, keyed": orjson.dumps({"updates": upserts}),
    }


def run_service(url: str, n: int, rep: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    body = bodies(n)
    with httpx.Client(base_url=url, timeout=600) as c:
        for form in FORMS:
            table = "plain" if form == "columnar" else "keyed"
            name = f"{table}{rep}"
            if form != "upserts, keyed":
                spec: dict[str, Any] = {
                    "name": name,
                    "columns": [{"name": a, "type": b} for a, b in COLUMNS],
                }
                if table == "keyed":
                    spec["primary_key"] = ["k"]
                c.post("/v1/tables", json=spec).raise_for_status()
                view = {"name": f"{name}_v", "query": view_plan(name)}
                c.post("/v1/views", json=view).raise_for_status()
            t = time.perf_counter()
            r = c.post(
                f"/v1/tables/{name}/updates",
                content=body[form],
                headers={"content-type": "application/json"},
            )
            seconds = time.perf_counter() - t
            r.raise_for_status()
            out[form] = {"seconds": seconds, "server_s": r.json()["latency_ms"] / 1000}
        for table, upserted in (("plain", False), ("keyed", True)):
            got = c.get(f"/v1/views/{table}{rep}_v/rows").json()["rows"]
            if sorted((r["data"]["s"], r["data"]["n"], r["data"]["t"]) for r in got) != expected(
                n, upserted
            ):
                raise RuntimeError(f"view {table}{rep}_v does not hold the expected counts")
    return out


def expected(n: int, upserted: bool) -> list[tuple[str, int, int]]:
    """(s, n, t) of the view after the writes (every other key's v moved on by one)."""
    i = np.arange(n)
    v = (7 * i + (upserted & (i % 2 == 0))) % 1000
    s = i % 1000
    counts = np.bincount(s, minlength=1000)
    sums = np.bincount(s, weights=v, minlength=1000).astype(np.int64)
    return sorted((f"s{j}", int(counts[j]), int(sums[j])) for j in range(1000) if counts[j])


def run_engine(n: int) -> dict[str, float]:
    """The bare engine taking each write's rows (interning and storage included)."""
    from engine import Graph

    g = Graph()

    def typed(cols: dict[str, list[Any]]) -> list[np.ndarray]:
        return [
            np.asarray(cols["k"], np.int64),
            np.asarray(cols["v"], np.int64),
            np.asarray(cols["x"], np.float64),
            g.interner.intern_many(cols["s"]),
        ]

    inp, rows = g.new_input(COLUMNS, name="t")
    rows.reduce(["s"], {"n": ("count", None), "t": ("sum", "v")}).capture()
    out: dict[str, float] = {}
    first, half = columns(n), columns(n, v_shift=1)
    t = time.perf_counter()
    inp.send_columns(typed(first), 0, 1)
    inp.advance_to(1)
    g.step()
    out["columnar"] = out["columnar, keyed"] = time.perf_counter() - t
    old = {c: v[::2] for c, v in first.items()}
    new = {c: v[::2] for c, v in half.items()}
    t = time.perf_counter()
    inp.send_columns(typed(old), 1, -1)
    inp.send_columns(typed(new), 1, 1)
    inp.advance_to(2)
    g.step()
    out["upserts, keyed"] = time.perf_counter() - t
    return out


def run(n: int, repeat: int) -> dict[str, Any]:
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp)) as server:
        for rep in range(repeat):
            for form, r in run_service(server.url, n, rep).items():
                if form not in best or r["seconds"] < best[form]["seconds"]:
                    best[form] = r
        rss = server.peak_rss_mib()
    run_engine(max(n // 100, 10))  # compile and cache before timing
    engine = {f: min(run_engine(n)[f] for _ in range(repeat)) for f in FORMS}
    rows = {"columnar": n, "columnar, keyed": n, "upserts, keyed": n // 2}
    return {
        "rows": n,
        "repeat": repeat,
        "forms": {
            f: {
                "rows": rows[f],
                "seconds": round(best[f]["seconds"], 4),
                "server_s": round(best[f]["server_s"], 4),
                "rows_per_s": round(rows[f] / best[f]["seconds"], 1),
                "engine_s": round(engine[f], 4),
                "engine_rows_per_s": round(rows[f] / engine[f], 1),
            }
            for f in FORMS
        },
        "server_rss_mib": rss,
    }


def write_report(section: str, result: dict[str, Any], command: str, path: Path | None) -> Path:
    from bench import report

    rows: list[report.Row] = []
    for form, r in result["forms"].items():
        rows.append(
            report.Row(
                f"{form}: {r['rows']:,} rows, throughput",
                r["rows_per_s"],
                r["engine_rows_per_s"],
                True,
                "rows/s",
            )
        )
        rows.append(report.Row(f"{form}: server latency", r["server_s"], r["engine_s"], False, "s"))
    text = (
        f"One write of {result['rows']:,} rows `(k int, v int, x float, s string)` through the "
        "service (`python -m api.server`, a subprocess; client on the same machine), into a "
        "table read by a view counting rows and summing `v` per `s`: the columnar form into a "
        "table without a key, the same into a table keyed by `k`, then every other key "
        "upserted in the row form. Throughput is rows over the client's time from sending the "
        "(pre-encoded) body to the 200; server latency is the answer's `latency_ms`. "
        "Baseline: the bare engine in process taking the same rows (interned, as storage, "
        f"the upserts' retractions included) through the same view. Fastest of "
        f"{result['repeat']} runs each."
    )
    table = report.render_table(rows, name="service", baseline="bare engine")
    return report.write_section(
        section, report.render_section(section, table, command, None, text), path
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--report", metavar="SECTION", help="write SECTION of BENCHMARKS.md")
    p.add_argument("--report-file", type=Path, default=None, help="default: BENCHMARKS.md")
    a = p.parse_args(argv)
    result = run(a.rows, a.repeat)
    if a.report:
        from bench import report

        path = write_report(a.report, result, report.command("bench.ingest", argv), a.report_file)
        print(f"wrote section {a.report!r} of {path}", file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
