"""Write benchmark figures into named sections of BENCHMARKS.md (at the repo root).

A section sits between ``<!-- section: NAME -->`` and ``<!-- /section: NAME -->`` markers;
writing it again replaces it in place, other sections are left alone. Each section holds a
table of figures with the baseline beside every figure as a ratio, the exact command line
that produced it, and notes on the machine (CPU, cores, RAM, Python and numpy versions,
date).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Row",
    "default_path",
    "machine_notes",
    "reach_rows",
    "render_section",
    "render_table",
    "shell_join",
    "write_reach_section",
    "write_section",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
HEADER = (
    "# Benchmarks\n\n"
    "Figures written by the scripts in `bench/` (`bench/report.py`); each section names the\n"
    "command that produced it and the machine it ran on. Tests never assert speed.\n"
)


@dataclass(frozen=True, slots=True)
class Row:
    """One figure: its value, the baseline's, and whether higher is better."""

    label: str
    value: float | int | None
    baseline: float | int | None
    higher_is_better: bool
    unit: str = ""


def default_path() -> Path:
    return REPO_ROOT / "BENCHMARKS.md"


def shell_join(argv: Sequence[str]) -> str:
    return shlex.join(list(argv))


def command(module: str, argv: Sequence[str]) -> str:
    """The command line that reruns ``python -m module argv``, with the engine's thread and
    allocator settings in front when they are set (``DIFFLOW_THREADS=1 python -m ...``)."""
    prefix = ""
    for name in ("DIFFLOW_THREADS", "DIFFLOW_MALLOC"):
        value = os.environ.get(name, "").strip()
        if value:
            prefix += f"{name}={shlex.quote(value)} "
    return f"{prefix}python -m {module} {shell_join(argv)}"


# -- machine notes ------------------------------------------------------------------------
def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _physical_cores() -> int | None:
    pairs: set[tuple[str, str]] = set()
    phys = core = ""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("physical id"):
            phys = line.split(":", 1)[1].strip()
        elif line.startswith("core id"):
            core = line.split(":", 1)[1].strip()
        elif not line.strip() and core:
            pairs.add((phys, core))
            phys = core = ""
    if core:
        pairs.add((phys, core))
    return len(pairs) or None


def _ram_gib() -> float | None:
    m = re.search(r"^MemTotal:\s+(\d+)\s+kB", _read("/proc/meminfo"), re.MULTILINE)
    return round(int(m.group(1)) / 2**20, 1) if m else None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine_notes() -> dict[str, str]:
    """CPU model, cores, the engine's threads (``DIFFLOW_THREADS``) and allocator setting
    (``DIFFLOW_MALLOC``), RAM, OS, Python / numpy / scipy versions, date, git commit."""
    from engine import allocator, parallel  # here: a baseline's process need not load the engine

    logical = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = logical
    phys = _physical_cores()
    cores = f"{logical} logical" + (f", {phys} physical" if phys else "")
    if usable != logical:
        cores += f", {usable} usable by this process"
    ram = _ram_gib()
    notes = {
        "CPU": _cpu_model(),
        "cores": cores,
        "engine threads": str(parallel.threads()),
        "allocator": allocator.setting(),
        "RAM": f"{ram} GiB" if ram is not None else "unknown",
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "numpy": np.__version__,
    }
    try:
        import scipy

        notes["scipy"] = scipy.__version__
    except ImportError:  # pragma: no cover - scipy is a dev dependency
        pass
    notes["date"] = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = _git_commit()
    if commit:
        notes["commit"] = commit
    return notes


# -- tables -------------------------------------------------------------------------------
def _fmt(x: float | int | None, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "n/a"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int) or (float(x).is_integer() and abs(x) >= 1000):
        s = f"{int(x):,}"
    elif abs(x) >= 100:
        s = f"{x:,.1f}"
    elif abs(x) >= 1:
        s = f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"
    else:
        s = f"{x:.3g}"
    return f"{s} {unit}".rstrip()


def _ratio(row: Row) -> tuple[str, str]:
    """(difflow ÷ baseline, verdict) for a row."""
    v, b = row.value, row.baseline
    if v is None or b is None or isinstance(v, bool) or isinstance(b, bool):
        return "n/a", ""
    v, b = float(v), float(b)
    if not (np.isfinite(v) and np.isfinite(b)) or b == 0 or v == 0:
        return "n/a", ""
    r = v / b
    better = r if row.higher_is_better else 1 / r
    if 0.995 <= better <= 1.005:
        verdict = "same"
    elif better > 1:
        verdict = f"{better:.3g}x better"
    else:
        verdict = f"{1 / better:.3g}x worse"
    return f"{r:.3g}", verdict


def render_table(rows: Sequence[Row], name: str = "difflow", baseline: str = "recompute") -> str:
    """A Markdown table: figure, value, baseline, ratio, verdict."""
    lines = [
        f"| figure | {name} | {baseline} (baseline) | {name} ÷ {baseline} | {name} is |",
        "|---|---:|---:|---:|---|",
    ]
    for row in rows:
        ratio, verdict = _ratio(row)
        arrow = "↑" if row.higher_is_better else "↓"
        lines.append(
            f"| {row.label} {arrow} | {_fmt(row.value, row.unit)} | "
            f"{_fmt(row.baseline, row.unit)} | {ratio} | {verdict} |"
        )
    return "\n".join(lines)


def render_section(
    section: str,
    tables: str,
    command: str,
    notes: Mapping[str, str] | None = None,
    text: str = "",
) -> str:
    """The Markdown of one section, markers included."""
    notes = machine_notes() if notes is None else notes
    machine = "; ".join(f"{k}: {v}" for k, v in notes.items())
    parts = [
        f"<!-- section: {section} -->",
        f"## {section}",
        "",
        *([text.strip(), ""] if text.strip() else []),
        tables.strip(),
        "",
        "↑ higher is better, ↓ lower is better.",
        "",
        "Command:",
        "",
        "```",
        command,
        "```",
        "",
        f"Machine: {machine}.",
        f"<!-- /section: {section} -->",
    ]
    return "\n".join(parts) + "\n"


def write_section(section: str, body: str, path: Path | None = None) -> Path:
    """Insert or replace ``section`` (rendered by :func:`render_section`) in ``path``."""
    path = default_path() if path is None else Path(path)
    old = path.read_text() if path.exists() else HEADER
    begin, end = f"<!-- section: {section} -->", f"<!-- /section: {section} -->"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end) + r"\n?", re.DOTALL)
    if pattern.search(old):
        new = pattern.sub(lambda _m: body, old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + body
    path.write_text(new)
    return path


# -- the reachability benchmark -----------------------------------------------------------
def reach_rows(result: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[Row]:
    """The figures of two ``bench.reach`` results, in table order."""
    rows = [
        Row(
            "throughput",
            result.get("updates_per_s"),
            baseline.get("updates_per_s"),
            True,
            "updates/s",
        ),
    ]
    for q in ("p50", "p99", "max"):
        rows.append(
            Row(
                f"batch latency {q}",
                result.get("latency_ms", {}).get(q),
                baseline.get("latency_ms", {}).get(q),
                False,
                "ms",
            )
        )
    cps, bcps = result.get("checkpoints", {}), baseline.get("checkpoints", {})
    for cp in sorted(set(cps) | set(bcps), key=int):
        a, b = cps.get(cp, {}), bcps.get(cp, {})
        for q in ("p50", "p99"):
            rows.append(
                Row(
                    f"latency {q}, last 100 batches before {int(cp):,} updates",
                    a.get(q),
                    b.get(q),
                    False,
                    "ms",
                )
            )
        rows.append(
            Row(
                f"state at {int(cp):,} updates",
                a.get("state_bytes"),
                b.get("state_bytes"),
                False,
                "bytes",
            )
        )
        rows.append(
            Row(
                f"state per reachable pair at {int(cp):,} updates",
                a.get("state_bytes_per_pair"),
                b.get("state_bytes_per_pair"),
                False,
                "bytes",
            )
        )
    rows += [
        Row("initial load (time 0)", result.get("load_s"), baseline.get("load_s"), False, "s"),
        Row("state at end", result.get("state_bytes"), baseline.get("state_bytes"), False, "bytes"),
        Row("peak RSS", result.get("rss_mib"), baseline.get("rss_mib"), False, "MiB"),
    ]
    return rows


def _answer_sizes(checkpoints: Mapping[str, Mapping[str, Any]]) -> str:
    """The reachable (root, node) pairs at each checkpoint, as a sentence ('' when none)."""
    sizes = [
        f"{_fmt(c['reachable_pairs'])} after {int(cp):,} updates"
        for cp, c in sorted(checkpoints.items(), key=lambda kv: int(kv[0]))
        if c.get("reachable_pairs") is not None
    ]
    if not sizes:
        return ""
    return (
        " The answer's size (reachable pairs, by BFS at each checkpoint): "
        + ", ".join(sizes)
        + " (state per reachable pair separates growth over time from the answer's own)."
    )


def write_reach_section(
    section: str,
    result: Mapping[str, Any],
    baseline: Mapping[str, Any],
    command: str,
    path: Path | None = None,
    notes: Mapping[str, str] | None = None,
) -> Path:
    """Write one section for a difflow run and its recompute baseline (same arguments)."""
    verified = {
        str(r.get("engine", name)): (
            "yes" if r.get("verified") else "no" if r.get("verified") is False else "not checked"
        )
        for name, r in (("difflow", result), ("recompute", baseline))
    }
    text = (
        f"Sliding-window reachability (seed 000): {result.get('nodes'):,} nodes, "
        f"{result.get('edges'):,} edges, 10 roots, seed {result.get('seed', 0)}; "
        f"{result.get('updates'):,} updates in batches of {result.get('batch')} "
        f"(one logical time per update), closed loop: a batch's latency is the wall time from "
        f"submitting it until the outputs at all its times are final. Baseline: recompute "
        f"from scratch at every time (BFS from the 10 roots with scipy, diffed against the "
        f"previous answer). Output changes: "
        f"{_fmt(result.get('output_changes'))} (difflow), "
        f"{_fmt(baseline.get('output_changes'))} (recompute). Verified by BFS: "
        + ", ".join(f"{e} {v}" for e, v in verified.items())
        + "."
        + _answer_sizes(result.get("checkpoints", {}))
    )
    table = render_table(reach_rows(result, baseline))
    body = render_section(section, table, command, notes, text)
    return write_section(section, body, path)
