"""String interning as a differential computation (seed 002), on the engine library.

Each string gets the id ``hash(round, string)`` for the least ``round`` at which it does not
collide with a string that takes precedence. As a dataflow (built-in operators only)::

    start  = strings.select(round=0, s=s)
    body(t):  hashed  = t.select(h=hash(round, s), round, s)
              winners = hashed.top_k(by=[h], order_by=[(round, asc), (s, asc)], k=1)
              losers  = hashed - winners                       # concat + negate
              return winners.select(round, s) + losers.select(round=round + 1, s)
    ids    = start.iterate(body).select(s, id=hash(round, s))

The first ``(round, string)`` of every hash group wins and keeps its round; the others are
promoted to the next round, until no group has two members. With ``--bits B`` the hash is
reduced to ``B`` bits (``mod 2**B``, which is masking the low bits) so that collisions are
common and the promotion rounds do real work; ``2**B`` must be at least the number of
strings, or no assignment of unique ids exists.

``python -m bench.intern --strings N --changes C`` loads ``N`` distinct random strings at
time 0 (interned to ids at the edge by the engine's :class:`~engine.StringInterner`, as the
service does), then applies ``C`` changes, each at its own time, closed loop: remove a
uniformly chosen present string, add a new one. It reports ns per record of the load, the
latency of a change (p50/p99), bytes per record (the engine's trace bytes over ``N``) and
peak RSS, and verifies the final ids against a from-scratch evaluation of the same fixed
point (the hash written out from README's definition, independently of the engine): every
string present has exactly one id, the ids are unique, and each is the reference's.

Seed 002's Rust figures (differential dataflow, 10M integers, one thread): 652 ns per record
(its fastest, delta-based formulation) and about 60 bytes per record (578-621 MB).

Usage::

    python -m bench.intern --strings 1000000 --changes 10000
    python -m bench.intern --strings 10000 --changes 200 --bits 16     # forced collisions
    python -m bench.intern --strings 1000000 --changes 10000 --report "interning 1M"

Progress goes to stderr; the last stdout line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "SEED_BYTES_PER_RECORD",
    "SEED_NS_PER_RECORD",
    "Interning",
    "build_intern",
    "main",
    "random_strings",
    "reference_ids",
    "run",
    "stable_hash_reference",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
SEED_NS_PER_RECORD = 652.0
SEED_BYTES_PER_RECORD = 60.0
STRING_LENGTH = 16
_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)


# -- the dataflow -------------------------------------------------------------------------
def _hash_expr(bits: int | None) -> Any:
    """``hash(round, s)``, reduced to ``bits`` bits if given."""
    from engine import call, col

    h = call("hash", col("round"), col("s"))
    return call("mod", h, 1 << bits) if bits else h


def build_intern(strings: Any, bits: int | None = None) -> Any:
    """The interning dataflow over a collection with one string column ``s``: a collection
    ``(s string, id int)`` with one row per present string."""
    from engine import call, col, lit

    start = strings.select(round=lit(0), s="s")

    def body(t: Any) -> Any:
        hashed = t.select(h=_hash_expr(bits), round="round", s="s")
        winners = hashed.top_k(by=["h"], order_by=[("round", False), ("s", False)], k=1)
        losers = hashed.concat(winners.negate())
        return winners.select(round="round", s="s").concat(
            losers.select(round=call("add", col("round"), 1), s="s")
        )

    return start.iterate(body).select(s="s", id=_hash_expr(bits))


class Interning:
    """A graph with the input ``strings(s)``, the interning dataflow and a capture of its
    output; one logical time per :meth:`load` / :meth:`change`, each stepped until final."""

    def __init__(self, bits: int | None = None) -> None:
        from engine import Graph

        self.graph = Graph()
        self.input, strings = self.graph.new_input([("s", "string")], name="strings")
        self.capture = build_intern(strings, bits).capture()
        self.time = 0
        self.batches: list[Any] = []  # drained outputs, kept for verification

    @property
    def interner(self) -> Any:
        return self.graph.interner

    def _step_until(self, t: int) -> None:
        stamp = np.array([t], dtype=np.int64)
        while True:
            self.graph.step()
            upper = self.capture.upper
            if upper.is_empty or not upper.less_equal_time(stamp):
                return

    def _finish(self, keep: bool) -> None:
        self.input.advance_to(self.time + 1)
        self._step_until(self.time)
        out = self.capture.drain()
        if keep:
            self.batches.append(out)
        self.time += 1

    def load(self, strings: Sequence[str], keep: bool = True) -> None:
        """Intern ``strings`` at the edge and insert them at the current time."""
        ids = self.interner.intern_many(strings)
        self.input.send_columns([ids], self.time, 1)
        self._finish(keep)

    def change(self, gone: str, new: str, keep: bool = True) -> None:
        """Remove ``gone`` and add ``new`` at the next time."""
        ids = np.array([self.interner.intern(gone), self.interner.intern(new)], dtype=np.int64)
        self.input.send_columns([ids], self.time, np.array([-1, 1], dtype=np.int64))
        self._finish(keep)

    def contents(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The accumulated output: ``(string ids, ids, counts)`` of rows with nonzero count."""
        if not self.batches:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        data = np.concatenate([b.data for b in self.batches], axis=1)
        diffs = np.concatenate([b.diffs for b in self.batches])
        self.batches = []
        if data.shape[1] == 0:
            return data[0], data[1], diffs
        rows, inverse = np.unique(data, axis=1, return_inverse=True)
        counts = np.zeros(rows.shape[1], dtype=np.int64)
        np.add.at(counts, inverse.reshape(-1), diffs)
        keep = counts != 0
        self.batches.append(_Batch(rows[:, keep], counts[keep]))
        return rows[0, keep], rows[1, keep], counts[keep]

    def state_bytes(self) -> int:
        """Bytes in the traces of every operator (loop regions included)."""
        from bench.reach import engine_state_bytes

        return engine_state_bytes(self.graph.scope.operators)


class _Batch:
    """An accumulated output, stored like a drained batch."""

    __slots__ = ("data", "diffs")

    def __init__(self, data: np.ndarray, diffs: np.ndarray) -> None:
        self.data = data
        self.diffs = diffs


# -- the reference ------------------------------------------------------------------------
_U64 = np.uint64


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + _U64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def string_hashes(strings: Sequence[str]) -> np.ndarray:
    """blake2b-64 of each string's UTF-8, little-endian, as int64 (README's ``hash``)."""
    return np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")
            for s in strings
        ),
        dtype=np.uint64,
        count=len(strings),
    ).view(np.int64)


def stable_hash_reference(rounds: np.ndarray, string_bits: np.ndarray) -> np.ndarray:
    """``hash(round, s)`` as README defines it: ``h = 0x9E3779B97F4A7C15``, then
    ``h = splitmix64(h ^ bits)`` for each argument."""
    h = np.full(rounds.shape[0], 0x9E3779B97F4A7C15, dtype=np.uint64)
    h = _splitmix64(h ^ rounds.astype(np.int64).view(np.uint64))
    h = _splitmix64(h ^ string_bits.view(np.uint64))
    return h.view(np.int64)


def reference_ids(strings: Sequence[str], bits: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, rounds)`` of ``strings`` (distinct), from scratch: start every string at round
    0 and replace the assignment by the loop body's until nothing changes."""
    n = len(strings)
    sbits = string_hashes(strings)
    text_rank = np.empty(n, dtype=np.int64)
    text_rank[np.argsort(np.asarray(strings, dtype=object), kind="stable")] = np.arange(n)
    rounds = np.zeros(n, dtype=np.int64)
    mask = np.int64((1 << bits) - 1) if bits else None
    while True:
        h = stable_hash_reference(rounds, sbits)
        if mask is not None:
            h = h & mask  # == h mod 2**bits, as the engine's floor mod
        order = np.lexsort((text_rank, rounds, h))
        hs = h[order]
        loser = np.zeros(n, dtype=bool)
        loser[1:] = hs[1:] == hs[:-1]
        if not loser.any():
            return h, rounds
        rounds[order[loser]] += 1


# -- the workload -------------------------------------------------------------------------
def random_strings(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct random strings of 16 characters from ``[a-z0-9]``."""
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        k = n - len(out)
        codes = _ALPHABET[rng.integers(0, _ALPHABET.shape[0], size=(k, STRING_LENGTH))]
        batch = codes.view(f"S{STRING_LENGTH}").reshape(-1).astype(f"U{STRING_LENGTH}").tolist()
        for s in batch:
            if s not in seen:
                seen.add(s)
                out.append(s)
    return out


def _interner_bytes(interner: Any) -> int:
    """Approximate bytes of the interner: its dict, list and string objects."""
    strings = interner._strings
    return (
        sys.getsizeof(interner._ids)
        + sys.getsizeof(strings)
        + sum(sys.getsizeof(s) for s in strings)
    )


# -- the run ------------------------------------------------------------------------------
def _ms(values: np.ndarray, q: float) -> float | None:
    return round(float(np.percentile(values, q)) * 1e3, 4) if values.size else None


def peak_rss_mib() -> float:
    """Peak resident set size of this process (MiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def check(
    eng: Interning, present: Sequence[str], bits: int | None
) -> tuple[str | None, dict[str, int]]:
    """(what is wrong or None, statistics) for the engine's output against the present
    strings: one id per string, unique ids, equal to the reference's."""
    s_ids, ids, counts = eng.contents()
    stats = {"promoted": 0, "max_round": 0}
    if (counts != 1).any():
        i = int(np.flatnonzero(counts != 1)[0])
        s = eng.interner.lookup(int(s_ids[i]))
        return f"row ({s!r}, {int(ids[i])}) has count {int(counts[i])}", stats
    if np.unique(s_ids).shape[0] != s_ids.shape[0]:
        return "a string has more than one id", stats
    if np.unique(ids).shape[0] != ids.shape[0]:
        return "two strings share an id", stats
    want = np.sort(eng.interner.intern_many(present))
    order = np.argsort(s_ids)
    if not np.array_equal(s_ids[order], want):
        extra = np.setdiff1d(s_ids, want).shape[0]
        missing = np.setdiff1d(want, s_ids).shape[0]
        return f"{extra} strings with an id that are absent, {missing} present without", stats
    ref_ids, rounds = reference_ids(eng.interner.lookup_many(s_ids[order]), bits)
    stats = {"promoted": int((rounds > 0).sum()), "max_round": int(rounds.max(initial=0))}
    got = ids[order]
    if not np.array_equal(got, ref_ids):
        i = int(np.flatnonzero(got != ref_ids)[0])
        s = eng.interner.lookup(int(s_ids[order][i]))
        return (
            f"{int((got != ref_ids).sum())} ids differ from the reference, e.g. {s!r}: "
            f"engine {int(got[i])}, reference {int(ref_ids[i])} (round {int(rounds[i])})"
        ), stats
    return None, stats


def run(
    strings: int,
    changes: int,
    bits: int | None = None,
    seed: int = 0,
    verify: bool = True,
    verify_each: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Load, change, verify; the figures (the JSON object of the command line)."""
    if strings < 1:
        raise ValueError("need at least one string")
    if bits is not None and not 1 <= bits <= 62:
        raise ValueError("--bits must be in 1..62")
    if bits is not None and (1 << bits) < strings:
        raise ValueError(
            f"{strings} strings cannot have unique ids among 2**{bits} = {1 << bits} values; "
            f"use --bits {int(np.ceil(np.log2(strings)))} or more (more still for few rounds)"
        )
    verify = verify or verify_each

    def log(msg: str) -> None:
        if progress:
            print(f"[intern] {msg}", file=sys.stderr, flush=True)

    rng = np.random.Generator(np.random.PCG64([seed, 0]))
    pool = random_strings(strings + changes, rng)
    picks = np.random.Generator(np.random.PCG64([seed, 1])).integers(0, strings, size=changes)
    present = pool[:strings]
    warm = Interning(bits)  # compile the engine's kernels outside the timed region
    warm.load(random_strings(64, np.random.Generator(np.random.PCG64([seed, 2]))))
    warm.change(warm.interner.lookup(0), "warm-up", keep=False)
    del warm
    eng = Interning(bits)
    problem: str | None = None
    stats: dict[str, int] = {}

    t0 = time.perf_counter()
    eng.load(present, keep=verify)
    load_s = time.perf_counter() - t0
    log(f"loaded {strings} strings in {load_s:.3f}s ({load_s / strings * 1e9:.0f} ns/record)")
    load_state = eng.state_bytes()
    if verify_each:
        problem, stats = check(eng, present, bits)

    lat = np.zeros(changes)
    last_log = time.perf_counter()
    for i in range(changes):
        pos = int(picks[i])
        gone, new = present[pos], pool[strings + i]
        t = time.perf_counter()
        eng.change(gone, new, keep=verify)
        lat[i] = time.perf_counter() - t
        present[pos] = new
        if verify_each and problem is None:
            problem, stats = check(eng, present, bits)
        now = time.perf_counter()
        if now - last_log >= 2.0:
            last_log = now
            log(f"{i + 1}/{changes} changes, last p50 {_ms(lat[max(0, i - 99) : i + 1], 50)} ms")
    if verify and not verify_each:
        problem, stats = check(eng, present, bits)
    if problem:
        log(f"WRONG: {problem}")
    state = eng.state_bytes()
    seconds = float(lat.sum())
    result: dict[str, Any] = {
        "strings": strings,
        "changes": changes,
        "bits": bits,
        "seed": seed,
        "load_s": round(load_s, 6),
        "load_ns_per_record": round(load_s / strings * 1e9, 1),
        "changes_per_s": round(changes / seconds, 2) if seconds > 0 else None,
        "change_latency_ms": {"p50": _ms(lat, 50), "p99": _ms(lat, 99), "max": _ms(lat, 100)},
        "state_bytes": state,
        "bytes_per_record": round(state / strings, 1),
        "load_bytes_per_record": round(load_state / strings, 1),
        "interner_bytes_per_record": round(_interner_bytes(eng.interner) / strings, 1),
        "rss_mib": peak_rss_mib(),
        "verified": (problem is None) if verify else None,
        "promoted": stats.get("promoted"),
        "max_round": stats.get("max_round"),
        "seed002_rust": {
            "ns_per_record": SEED_NS_PER_RECORD,
            "bytes_per_record": SEED_BYTES_PER_RECORD,
        },
    }
    log(
        f"done: {changes} changes, latency {result['change_latency_ms']}, "
        f"{result['bytes_per_record']} bytes/record, verified {result['verified']}"
    )
    return result


# -- report -------------------------------------------------------------------------------
def report_rows(r: dict[str, Any]) -> list[Any]:
    """Table rows: difflow beside seed 002's Rust figures where it has one."""
    from bench.report import Row

    lat = r["change_latency_ms"]
    return [
        Row("load", r["load_ns_per_record"], SEED_NS_PER_RECORD, False, "ns/record"),
        Row("trace bytes per record", r["bytes_per_record"], SEED_BYTES_PER_RECORD, False, "B"),
        Row("interner bytes per record", r["interner_bytes_per_record"], None, False, "B"),
        Row("change latency p50", lat["p50"], None, False, "ms"),
        Row("change latency p99", lat["p99"], None, False, "ms"),
        Row("changes", r["changes_per_s"], None, True, "changes/s"),
        Row("peak RSS", r["rss_mib"], None, False, "MiB"),
    ]


def write_report(section: str, r: dict[str, Any], command: str, path: Path | None = None) -> Path:
    """Write SECTION of BENCHMARKS.md for one run."""
    from bench import report

    bits = f"the hash reduced to {r['bits']} bits" if r["bits"] else "64-bit hashes"
    text = (
        f"String interning as a differential computation (seed 002) on the engine library: "
        f"iterate + hash + top_k (winners) + difference (losers promoted a round), {bits}. "
        f"{r['strings']:,} distinct random 16-character strings loaded at time 0 (interned to "
        f"ids at the edge by the engine's StringInterner; the load time includes that), then "
        f"{r['changes']:,} changes (remove a random present string, add a new one), each at its "
        f"own time, closed loop. Bytes per record: the engine's trace bytes over the number of "
        f"strings (the interner's Python strings separately). Strings promoted past round 0: "
        f"{r.get('promoted')}, highest round {r.get('max_round')}. Verified against a "
        f"from-scratch evaluation (unique ids, one per string): "
        f"{'yes' if r.get('verified') else 'NO' if r.get('verified') is False else 'not checked'}"
        f". Baseline: seed 002's Rust figures (differential dataflow, 10M integers rather than "
        f"strings, one thread, another machine; its 652 ns is the delta-based formulation)."
    )
    table = report.render_table(report_rows(r), name="difflow", baseline="Rust DD (seed 002)")
    body = report.render_section(section, table, command, None, text)
    return report.write_section(section, body, path)


# -- command line -------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.intern", description=__doc__.split("\n")[0])
    p.add_argument("--strings", type=int, required=True, help="distinct strings N at time 0")
    p.add_argument("--changes", type=int, required=True, help="single changes C after the load")
    p.add_argument("--bits", type=int, default=None, help="reduce the hash to B bits")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-verify", action="store_true", help="skip the final check")
    p.add_argument("--verify-each", action="store_true", help="check after every change (small)")
    p.add_argument("--report", metavar="SECTION", help="write SECTION of BENCHMARKS.md")
    p.add_argument("--report-file", type=Path, default=None, help="default: BENCHMARKS.md")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _child(argv: list[str]) -> dict[str, Any]:
    """Run in a fresh interpreter (peak RSS of this run alone); its JSON line."""
    out, drop = [], False
    for a in argv:
        if drop:
            drop = False
        elif a in ("--report", "--report-file"):
            drop = True
        elif not a.startswith(("--report=", "--report-file=")):
            out.append(a)
    cmd = [sys.executable, "-m", "bench.intern", *out]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False, cwd=REPO_ROOT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"{shlex.join(cmd)} exited with {proc.returncode} and no figures")
    return dict(json.loads(lines[-1]))


def main(argv: list[str] | None = None, runner: Callable[..., dict] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = _parser().parse_args(argv)
    if a.report:
        result = (runner or _child)(argv)
        path = write_report(a.report, result, _command_line(argv), a.report_file)
        print(f"wrote section {a.report!r} of {path}", file=sys.stderr)
        print(json.dumps({"section": a.report, "file": str(path), "result": result}))
        return 0 if result.get("verified") is not False else 1
    try:
        result = run(
            a.strings,
            a.changes,
            a.bits,
            a.seed,
            verify=not a.no_verify,
            verify_each=a.verify_each,
            progress=not a.quiet,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0 if result["verified"] is not False else 1


def _command_line(argv: list[str]) -> str:
    from bench import report

    return report.command("bench.intern", argv)


if __name__ == "__main__":
    sys.exit(main())
