"""Random query plans driven through the real server over HTTP, checked against the oracle.

Each example creates fresh client-timed tables, registers a random plan (``tests.oracle.plans``,
an iterate at the root of a third of them, iterates nested anywhere) as a view, sometimes with
a second view that reads the first, before any data or after some (hydration), and pushes a
random update stream (``update_streams``: retractions, multiplicities other than one, many
distinct times, sometimes spread far apart so that the server compacts its history) through
``POST /v1/tables/{t}/updates`` in batches that carry several times each, in the row form or
the columnar form, sometimes with ``?wait=false``, moving each table's frontier with
``advance_to`` in the same request or a separate one, sometimes by several times at once, and
sometimes closing it (``[]``). After every request:

* every time that has become complete in all the tables a view reads is read back with
  ``GET /v1/views/{v}/rows?as_of=t`` and must equal ``evaluate(plan, database_at(..., t))``
  (multisets of rows with counts; floats compared at 9 significant digits; counts wrapped to
  64 bits). A 409 naming the valid range is accepted only for times before the view's start
  (a view registered on data starts at its inputs' latest complete times) or more than
  ``--history`` (1000) times behind the frontier;
* the ``outputs`` of the write answers (and of their completions, for writes that were
  pending) name exactly the views that read the table and hold, at each of the write's times,
  exactly the view's change at that time; in one dimension they accumulate to the contents at
  every complete time;
* a read without ``as_of`` names the latest complete time and the view's frontier (the meet
  of the frontiers of the tables it reads).

The 2-D variant does the same with ``time_dims: 2``, product-ordered times and antichain
frontiers (the change at a time is found by inclusion-exclusion over the grid).
``test_bad_writes_change_nothing`` sends random invalid writes (one bad update in the middle
of a good batch, and malformed bodies) and checks the status (400/409/413/422), the error
shape and that the table, its frontier and a view over it are exactly as before, also after
later good writes. ``test_invalid_plans_agree`` mutates random plans and checks that the
server and the oracle accept the same ones (and the same columns).

``HYPOTHESIS_PROFILE=thorough`` multiplies every example count by 10.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import math
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.oracle.evaluate import Database, PlanError, evaluate, schema_of
from tests.oracle.plans import DOMAINS, database_at, plans, update_streams
from tests.service.conftest import assert_error
from tests.service.server import Server, running_server

_THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
_SCALE = 10 if _THOROUGH else 1
MAX_BATCH = 64  # the module's server runs with --max-batch 64 and --max-body-mb 1


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples * _SCALE,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
        ],
    )


_names = itertools.count()


def _prefix() -> str:
    return f"rp{os.getpid()}_{next(_names)}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("random_plans"), max_batch=MAX_BATCH, max_body_mb=1
    ) as s:
        yield s


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


# ---------------------------------------------------------------------------------------------
# Comparing rows: multisets of rows, floats at 9 significant digits


def canon(v: Any) -> tuple:
    """A value with its kind, so that ``1``, ``1.0`` and ``True`` stay different; floats are
    rounded to 9 significant digits. JSON cannot carry NaN or infinities (the server writes
    them as ``null``), so every non-finite float and ``null`` compare equal."""
    if v is None:
        return ("nonfinite",)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return ("nonfinite",)
        if abs(v) < 1e-9:
            return ("float", 0.0)
        return ("float", float(f"{v:.9g}"))
    return (type(v).__name__, v)


RowKey = tuple[tuple[str, tuple], ...]


def row_key(data: Mapping[str, Any]) -> RowKey:
    return tuple(sorted((name, canon(v)) for name, v in data.items()))


def multiset(pairs: Any) -> Counter[RowKey]:
    out: Counter[RowKey] = Counter()
    for data, count in pairs:
        out[row_key(data)] += count
    return Counter({k: c for k, c in out.items() if c != 0})


def wrapped(counter: Counter[RowKey]) -> Counter[RowKey]:
    """Counts wrapped to signed 64 bits, as the server keeps them (the oracle's are unbounded:
    iterated self-joins can square a count every round; API.md does not bound counts)."""
    out = {k: ((c + 2**63) % 2**64) - 2**63 for k, c in counter.items()}
    return Counter({k: c for k, c in out.items() if c != 0})


def oracle_rows(plan: dict, db: Database) -> Counter[RowKey]:
    rel = evaluate(plan, db)
    names = rel.names
    return multiset((dict(zip(names, row, strict=True)), c) for row, c in rel.rows.items())


def show(counter: Counter[RowKey]) -> list:
    return sorted(([(n, v[-1]) for n, v in k], c) for k, c in counter.items())


# ---------------------------------------------------------------------------------------------
# Times and frontiers (internally tuples of ints; ints on the wire for one dimension)

Time = tuple[int, ...]


def le(s: Time, t: Time) -> bool:
    return all(a <= b for a, b in zip(s, t, strict=True))


def beyond(t: Time, frontier: Sequence[Time]) -> bool:
    """Whether ``t`` may still change under ``frontier`` (at or beyond one of its elements)."""
    return any(le(f, t) for f in frontier)


def minimal(points: Sequence[Time]) -> list[Time]:
    pts = sorted(set(points))
    return [p for p in pts if not any(q != p and le(q, p) for q in pts)]


def precedes(f: Sequence[Time], g: Sequence[Time]) -> bool:
    """``g`` is at or beyond ``f``: a frontier may move from ``f`` to ``g``."""
    return all(beyond(x, f) for x in g)


def time_wire(t: Time) -> int | list[int]:
    return t[0] if len(t) == 1 else list(t)


def time_native(t: Time) -> int | Time:
    """The oracle's form of a time (an int for one dimension)."""
    return t[0] if len(t) == 1 else t


def frontier_wire(frontier: Sequence[Time], style: int) -> Any:
    """A frontier in one of its accepted wire forms (``style`` picks one)."""
    if len(frontier) == 1 and style % 2 == 1:
        return time_wire(frontier[0])  # a single time instead of a one-element list
    return [time_wire(t) for t in frontier]


def from_wire(t: Any) -> Time:
    return (t,) if isinstance(t, int) else tuple(t)


def as_of(t: Time) -> str:
    return ",".join(str(x) for x in t)


# ---------------------------------------------------------------------------------------------
# Scenarios: tables, views, a stream, and the requests that carry it


COLUMN_NAMES = ("a", "k", "v", "x")
COLUMN_TYPES = ("int", "int", "string", "float", "bool")
HISTORY = 1000  # the server's default --history: times kept queryable behind the frontier


@st.composite
def schemas(draw: st.DrawFn, n_tables: int) -> dict[str, list[tuple[str, str]]]:
    tables = {}
    for name in "ABC"[:n_tables]:
        n = draw(st.integers(1, 3))
        names = draw(st.lists(st.sampled_from(COLUMN_NAMES), min_size=n, max_size=n, unique=True))
        tables[name] = [(c, draw(st.sampled_from(COLUMN_TYPES))) for c in names]
    return tables


@dataclass
class Write:
    table: str
    updates: list[tuple[tuple, Time, int]]  # (row, time, diff)
    advance: list[Time] | None  # the new frontier ([] closes)
    separate: bool  # advance in a request of its own after the data
    form: str  # "rows", "rows_default_time" or "columnar"
    style: int  # picks among equivalent wire spellings
    nowait: bool = False  # ?wait=false: answered 202 at once, outputs from the completion

    def __repr__(self) -> str:
        ups = [(row, time_wire(t), d) for row, t, d in self.updates]
        adv = None if self.advance is None else [time_wire(t) for t in self.advance]
        return (
            f"Write({self.table}, {ups}, advance={adv}, separate={self.separate}, "
            f"form={self.form}, style={self.style}, nowait={self.nowait})"
        )


@dataclass
class Scenario:
    dims: int
    n_times: int
    stride: int  # times are multiples of it (large strides make the server compact)
    tables: dict[str, list[tuple[str, str]]]
    views: dict[str, dict]  # "V": a plan over the tables; maybe "W": one that also reads V
    stream: list  # oracle updates: (table, row, time, diff), times native
    cut: list[Time]  # the views are registered once every table's frontier is here
    actions: list[Write | str] = field(default_factory=list)  # "register" once

    def __repr__(self) -> str:
        lines = [
            f"Scenario(dims={self.dims}, n_times={self.n_times}, stride={self.stride}, "
            f"cut={[time_wire(t) for t in self.cut]},",
            f"  tables={self.tables},",
            *(f"  {name}={json.dumps(plan)}," for name, plan in self.views.items()),
            f"  stream={self.stream},",
            "  actions=[",
            *(f"    {a!r}," for a in self.actions),
            "  ])",
        ]
        return "\n".join(lines)


@st.composite
def _phase(
    draw: st.DrawFn,
    tables: Sequence[str],
    pending: dict[str, list[tuple[tuple, Time, int]]],
    frontiers: dict[str, list[Time]],
    target: list[Time],
    dims: int,
    hi: int,
    stride: int,
    max_actions: int,
) -> list[Write]:
    """Requests that send every update in ``pending`` and leave every frontier at ``target``;
    updates go out in random subsets (sometimes ahead of the frontier), frontiers move to
    random antichains (of multiples of ``stride`` up to ``hi``) that keep every unsent update
    beyond them."""
    actions: list[Write] = []

    def render() -> tuple[bool, str, int]:
        return (
            draw(st.booleans()),
            draw(st.sampled_from(("rows", "rows", "rows_default_time", "columnar"))),
            draw(st.integers(0, 3)),
        )

    while any(pending[t] or frontiers[t] != target for t in tables):
        live = [t for t in tables if pending[t] or frontiers[t] != target]
        table = draw(st.sampled_from(live))
        unsent = pending[table]
        if len(actions) >= max_actions:  # flush
            chosen = list(range(len(unsent)))
            new = list(target)
        else:
            if unsent and draw(st.booleans()):
                chosen = list(range(draw(st.integers(0, min(len(unsent), 6)))))
            elif unsent:
                chosen = draw(st.lists(st.integers(0, len(unsent) - 1), unique=True, max_size=6))
            else:
                chosen = []
            rest = [u for i, u in enumerate(unsent) if i not in set(chosen)]
            new = frontiers[table]
            if draw(st.booleans()) or not chosen:
                drawn = draw(st.lists(st.tuples(*[st.integers(0, hi)] * dims), max_size=2))
                points = [
                    p
                    for p in (tuple(x * stride for x in q) for q in drawn)
                    if beyond(p, frontiers[table])
                ]
                new = minimal([*points, *(t for _, t, _ in rest), *target])
            if not chosen and new == frontiers[table]:
                if unsent:
                    chosen = [0]
                else:
                    new = list(target)
        sending = [unsent[i] for i in sorted(chosen)]
        pending[table] = [u for i, u in enumerate(unsent) if i not in set(chosen)]
        advance = new if new != frontiers[table] else None
        frontiers[table] = new
        separate, form, style = render()
        if not sending:
            form, separate = "rows", False
        nowait = draw(st.integers(0, 3)) == 0
        actions.append(Write(table, sending, advance, separate, form, style, nowait))
    return actions


def _as_view(plan: Any, view: str) -> Any:
    """``plan`` with its ``table`` nodes named ``view`` turned into ``view`` nodes."""
    if isinstance(plan, list):
        return [_as_view(p, view) for p in plan]
    if not isinstance(plan, dict):
        return plan
    out = {k: _as_view(v, view) for k, v in plan.items()}
    if plan.get("op") == "table" and plan.get("name") == view:
        out["op"] = "view"
    return out


@st.composite
def scenarios(draw: st.DrawFn, dims: int) -> Scenario:
    tables = draw(schemas(draw(st.integers(2, 3))))
    if draw(st.integers(0, 2)) == 0:  # an iterate at the root (they also nest anywhere)
        plan = draw(plans(tables, max_depth=draw(st.integers(2, 4)), root_op="iterate"))
    else:
        plan = draw(plans(tables, max_depth=draw(st.integers(1, 4))))
    views = {"V": plan}
    if draw(st.integers(0, 3)) == 0:  # a second view that reads the first
        columns = schema_of(plan, Database.from_counters(tables, {}))
        other = draw(st.sampled_from(sorted(tables)))
        readable = {"V": columns, other: tables[other]} if draw(st.booleans()) else {"V": columns}
        over = draw(plans(readable, max_depth=draw(st.integers(1, 3))))
        if "V" in tables_read(over):
            views["W"] = _as_view(over, "V")
    n_times = draw(st.integers(3, 10) if dims == 1 else st.integers(2, 4))
    stride = draw(st.sampled_from((1, 1, 1, 3, 400))) if dims == 1 else 1
    stream = draw(
        update_streams(
            tables, n_times, min_updates=4, max_updates=24 if dims == 1 else 16, time_dims=dims
        )
    )
    if stride > 1:
        stream = [(name, row, t * stride, d) for name, row, t, d in stream]
    final = [(n_times * stride,) * dims]
    if draw(st.booleans()):
        cut = [(0,) * dims]  # register before any data
    elif dims == 1:
        cut = [(draw(st.integers(1, n_times)) * stride,)]
    else:
        cut = minimal(
            draw(st.lists(st.tuples(*[st.integers(0, n_times)] * dims), min_size=1, max_size=2))
        )
    names = sorted(tables)
    as_updates = [(name, row, from_wire(t), d) for name, row, t, d in stream]
    first = {
        n: [(r, t, d) for m, r, t, d in as_updates if m == n and not beyond(t, cut)] for n in names
    }
    second = {
        n: [(r, t, d) for m, r, t, d in as_updates if m == n and beyond(t, cut)] for n in names
    }
    frontiers = {n: [(0,) * dims] for n in names}
    actions: list[Write | str] = []
    if cut != [(0,) * dims]:
        actions += draw(_phase(names, first, frontiers, cut, dims, n_times, stride, 8))
    actions.append("register")
    actions += draw(_phase(names, second, frontiers, final, dims, n_times, stride, 14))
    for name in names:
        if draw(st.booleans()):  # close the frontier
            actions.append(Write(name, [], [], False, "rows", draw(st.integers(0, 3))))
    return Scenario(dims, n_times, stride, tables, views, stream, cut, actions)


# ---------------------------------------------------------------------------------------------
# Running a scenario against the server


def rename(plan: Any, names: Mapping[str, str]) -> Any:
    """``plan`` with its table and view names replaced by the server's."""
    if isinstance(plan, list):
        return [rename(p, names) for p in plan]
    if not isinstance(plan, dict):
        return plan
    out = {k: rename(v, names) for k, v in plan.items()}
    if plan.get("op") in ("table", "view") and isinstance(plan.get("name"), str):
        out["name"] = names.get(plan["name"], plan["name"])
    return out


def tables_read(plan: Any, views: Mapping[str, Any] | None = None) -> set[str]:
    """The tables ``plan`` reads, directly or through the ``views`` it reads."""
    if isinstance(plan, list):
        return set().union(*(tables_read(p, views) for p in plan)) if plan else set()
    if not isinstance(plan, dict):
        return set()
    found = {plan["name"]} if plan.get("op") == "table" else set()
    if plan.get("op") == "view" and views is not None:
        found |= tables_read(views[plan["name"]], views)
    for v in plan.values():
        found |= tables_read(v, views)
    return found


def write_bodies(w: Write, columns: list[tuple[str, str]]) -> list[dict]:
    """The request bodies of one scheduled write (one, or two when it advances separately)."""
    names = [n for n, _ in columns]
    body: dict[str, Any] = {}
    times = {t for _, t, _ in w.updates}
    if w.form == "columnar" and w.updates:
        body["columns"] = {n: [row[i] for row, _, _ in w.updates] for i, n in enumerate(names)}
        if any(d != 1 for _, _, d in w.updates) or w.style % 2:
            body["diff"] = [d for _, _, d in w.updates]
        if len(times) == 1 and w.style >= 2:
            body["time"] = time_wire(next(iter(times)))
        else:
            body["time"] = [time_wire(t) for _, t, _ in w.updates]
    else:
        default = next(iter(times)) if w.form == "rows_default_time" and len(times) == 1 else None
        updates = []
        for row, t, d in w.updates:
            data = dict(zip(names, row, strict=True))
            if d == 1 and w.style != 3:
                u: dict[str, Any] = {"insert": data}
            elif d == -1 and w.style != 3:
                u = {"delete": data}
            else:
                u = {"weight": d, "data": data}
            if default is None or w.style == 1:
                u["time"] = time_wire(t)
            updates.append(u)
        body["updates"] = updates
        if default is not None:
            body["time"] = time_wire(default)
    if w.advance is None:
        return [body]
    advance = frontier_wire(w.advance, w.style)
    if w.separate and w.updates:
        return [body, {"updates": [], "advance_to": advance}]
    return [{**body, "advance_to": advance}]


class ViewCheck:
    """What is known and checked about one view."""

    def __init__(self, run: Run, name: str, plan: dict) -> None:
        self.run = run
        self.name = name  # logical ("V", "W")
        self.plan = plan
        self.reads = tables_read(plan, run.sc.views)
        self.expected: dict[Time, Counter[RowKey]] = {}
        self.outputs: dict[Time, Counter[RowKey]] = {}  # outputs by time, from done writes
        self.write_times: set[Time] = set()  # times of writes to read tables after registering
        self.checked_rows: set[Time] = set()
        self.checked_delta: set[Time] = set()
        self.checked_sum: set[Time] = set()
        # Reads at times not beyond both of these may be refused (409 naming the valid range):
        # a view registered on tables with data starts at their latest complete times (the
        # cut minus one), and the server keeps HISTORY times behind the frontier.
        self.start = minimal([tuple(max(x - 1, 0) for x in c) for c in run.sc.cut])
        self.kept_from: list[Time] = [(0,) * run.sc.dims]

    def context(self) -> str:
        views = {n: json.dumps(p) for n, p in self.run.sc.views.items()}
        return f"view {self.name}; plans {views}\nserver names {self.run.names}"

    def oracle(self, t: Time) -> Counter[RowKey]:
        if t not in self.expected:
            sc = self.run.sc
            db = database_at(sc.tables, sc.stream, time_native(t), sc.views)
            self.expected[t] = oracle_rows(self.plan, db)
        return self.expected[t]

    def change_at(self, t: Time) -> Counter[RowKey]:
        """The view's difference at ``t``: inclusion-exclusion over the corners below ``t``
        (contents only change at times of the stream, so ``t - 1`` stands for all between)."""
        out: Counter[RowKey] = Counter()
        for corner in itertools.product((0, 1), repeat=len(t)):
            s = tuple(a - b for a, b in zip(t, corner, strict=True))
            if min(s) < 0:
                continue
            sign = -1 if sum(corner) % 2 else 1
            for k, v in self.oracle(s).items():
                out[k] += sign * v
        return Counter({k: v for k, v in out.items() if v != 0})

    def frontier(self) -> list[Time]:
        """The view's frontier: the meet of the frontiers of the tables it reads."""
        return minimal([t for name in self.reads for t in self.run.frontiers[name]])

    def complete(self, t: Time) -> bool:
        return not beyond(t, self.frontier())

    def record(self, answer: dict, times: set[Time]) -> None:
        """The outputs of a done write to a table this view reads."""
        by_time: dict[Time, list] = {t: [] for t in times}
        for u in answer["outputs"][self.run.server_names[self.name]]:
            t = from_wire(u["time"])
            assert t in by_time, f"output at {u['time']}, not a time of the write {answer}"
            by_time[t].append((u["data"], u["diff"]))
        for t, ups in by_time.items():
            got = multiset(ups)
            if t in self.outputs:
                assert got == self.outputs[t], (
                    f"two writes at time {time_wire(t)} report different outputs:\n"
                    f"{show(self.outputs[t])}\n{show(got)}\n{self.context()}"
                )
            self.outputs[t] = got

    def check(self) -> None:
        c, server_name = self.run.c, self.run.server_names[self.name]
        frontier = self.frontier()
        if frontier:  # a closed frontier keeps the history it had
            self.kept_from = [tuple(max(x - HISTORY, 0) for x in f) for f in frontier]
        for t in self.run.grid:
            if t in self.checked_rows or not self.complete(t):
                continue
            r = c.get(f"/v1/views/{server_name}/rows", params={"as_of": as_of(t)})
            compacted = not beyond(t, self.start) or not beyond(t, self.kept_from)
            if compacted and r.status_code == 409:  # compacted away: fine, if it says so
                err = assert_error(r, 409, "time_unavailable")
                assert "valid_from" in err["detail"] and "frontier" in err["detail"], err
                assert not beyond(t, [from_wire(x) for x in err["detail"]["valid_from"]]), err
                self.checked_rows.add(t)
                continue
            assert r.status_code == 200, (
                f"as_of {as_of(t)} (complete in every table the view reads: frontiers "
                f"{self.run.frontiers}): {r.status_code} {r.text}\n{self.context()}"
            )
            answer = r.json()
            assert from_wire(answer["time"]) == t, answer
            got = multiset((row["data"], row["count"]) for row in answer["rows"])
            want = wrapped(self.oracle(t))
            assert got == want, (
                f"rows as_of {as_of(t)}:\n got  {show(got)}\n want {show(want)}\n{self.context()}"
            )
            self.checked_rows.add(t)
        for t in sorted(self.outputs):
            if t in self.checked_delta:
                continue
            got, want = self.outputs[t], wrapped(self.change_at(t))
            assert got == want, (
                f"write outputs at time {time_wire(t)}:\n got  {show(got)}\n want {show(want)}\n"
                f"{self.context()}"
            )
            self.checked_delta.add(t)
        if self.run.sc.dims == 1:
            self.check_accumulated()

    def check_accumulated(self) -> None:
        """One dimension: the outputs of the writes since registering, added to the contents
        at registration, give the contents at every complete time (once every write time up
        to it has been answered)."""
        (cut,) = self.run.sc.cut
        for t in self.run.grid:
            if t in self.checked_sum or t < cut or not self.complete(t):
                continue
            if any(s <= t and s not in self.outputs for s in self.write_times):
                continue
            total: Counter[RowKey] = Counter()
            if cut[0] > 0:
                total.update(self.oracle((cut[0] - 1,)))
            for s, out in self.outputs.items():
                if s <= t:
                    total.update(out)
            total = wrapped(total)
            want = wrapped(self.oracle(t))
            assert total == want, (
                f"outputs accumulated to time {t[0]}:\n got  {show(total)}\n want {show(want)}\n"
                f"{self.context()}"
            )
            self.checked_sum.add(t)

    def latest(self) -> None:
        """A read without ``as_of`` names the latest complete time (one dimension)."""
        frontier = self.frontier()
        if self.run.sc.dims != 1 or not frontier:
            return
        r = self.run.c.get(f"/v1/views/{self.run.server_names[self.name]}/rows")
        assert r.status_code == 200, r.text
        answer = r.json()
        low = frontier[0][0]
        assert answer["time"] == (low - 1 if low > 0 else None), (answer, self.run.frontiers)
        assert [from_wire(t) for t in answer["frontier"]] == frontier, answer

    def finish(self) -> None:
        for t in self.run.grid:
            assert t in self.checked_rows or not self.complete(t), f"time {t} never checked"
        assert self.write_times <= set(self.outputs), "write times without outputs"
        if self.run.sc.dims == 1:
            cut = self.run.sc.cut[0]
            due = {t for t in self.run.grid if t >= cut and self.complete(t)}
            assert due <= self.checked_sum, sorted(due - self.checked_sum)


class Run:
    """One scenario against the server, checking reads and write outputs as it goes."""

    def __init__(self, c: httpx.Client, sc: Scenario) -> None:
        self.c = c
        self.sc = sc
        prefix = _prefix()
        self.names = {t: f"{prefix}_{t}" for t in sc.tables}
        self.server_names = {v: f"{prefix}_{v}" for v in sc.views}
        self.frontiers: dict[str, list[Time]] = {t: [(0,) * sc.dims] for t in sc.tables}
        self.registered = False
        self.views = [ViewCheck(self, name, plan) for name, plan in sc.views.items()]
        self.pending: dict[str, tuple[str, bool]] = {}  # token -> (table, after registration)
        n, s = sc.n_times, sc.stride
        if sc.dims == 1:  # contents only change at multiples of the stride
            self.grid = sorted(
                {(k * s,) for k in range(n + 1)} | {(k * s - 1,) for k in range(1, n + 1)}
            )
        else:
            self.grid = sorted(itertools.product(range(n + 1), repeat=sc.dims))

    def create(self) -> None:
        for t, columns in self.sc.tables.items():
            body = {
                "name": self.names[t],
                "columns": [{"name": n, "type": ty} for n, ty in columns],
                "timing": "client",
            }
            if self.sc.dims > 1 or len(columns) % 2:
                body["time_dims"] = self.sc.dims
            r = self.c.post("/v1/tables", json=body)
            assert r.status_code == 201, r.text
            desc = r.json()
            assert desc["frontier"] == [time_wire((0,) * self.sc.dims)], desc
            assert desc["rows"] == 0 and desc["timing"] == "client", desc

    def register(self) -> None:
        self.poll()
        assert not self.pending, "writes before the cut are not all done"
        names = {**self.names, **self.server_names}
        for v in self.views:
            db = Database.from_counters(self.sc.tables, {}, self.sc.views)
            schema = schema_of(v.plan, db)
            query = rename(v.plan, names)
            r = self.c.post("/v1/views", json={"name": self.server_names[v.name], "query": query})
            assert r.status_code == 201, (
                f"the server rejects a plan the oracle accepts (columns {schema}):\n"
                f"{r.status_code} {r.text}\n{v.context()}"
            )
            columns = [(c["name"], c["type"]) for c in r.json()["columns"]]
            assert columns == schema, f"view columns {columns}, oracle {schema}\n{v.context()}"
        self.registered = True

    def send(self, w: Write) -> None:
        after = self.registered
        params = {"wait": "false"} if w.nowait else {}
        for body in write_bodies(w, self.sc.tables[w.table]):
            path = f"/v1/tables/{self.names[w.table]}/updates"
            r = self.c.post(path, json=body, params=params)
            if w.nowait:
                assert r.status_code == 202, r.text
            assert r.status_code in (200, 202), (
                f"{r.status_code} {r.text}\nbody={body}\n{self.views[0].context()}"
            )
            answer = r.json()
            if r.status_code == 200:
                self.done(w.table, after, answer)
            else:
                assert answer["status"] == "pending", answer
                self.pending[answer["token"]] = (w.table, after)
            if body.get("updates") or body.get("columns"):
                sent = {t for _, t, _ in w.updates}
                assert {from_wire(t) for t in answer["times"]} == sent, (answer, body)
                for v in self.views:
                    if after and w.table in v.reads:
                        v.write_times |= sent
        if w.advance is not None:
            self.frontiers[w.table] = list(w.advance)
        # A control request runs on the engine thread after the step that processed the write
        # (also with ?wait=false), so completions are settled by the time it answers.
        r = self.c.get(f"/v1/tables/{self.names[w.table]}")
        assert r.status_code == 200, r.text
        got = [from_wire(t) for t in r.json()["frontier"]]
        assert sorted(got) == sorted(self.frontiers[w.table]), (got, self.frontiers[w.table])

    def done(self, table: str, after: bool, answer: dict) -> None:
        assert answer["status"] == "done", answer
        times = {from_wire(t) for t in answer["times"]}
        readers = [v for v in self.views if after and table in v.reads]
        names = {self.server_names[v.name] for v in readers}
        assert set(answer["outputs"]) == names, (
            f"a write to table {table} names views {sorted(answer['outputs'])} in its outputs; "
            f"the views that read it: {sorted(names)}\nanswer={answer}\n{self.views[0].context()}"
        )
        for v in readers:
            v.record(answer, times)

    def poll(self) -> None:
        for token, (table, after) in list(self.pending.items()):
            r = self.c.get(f"/v1/completions/{token}")
            assert r.status_code in (200, 202), r.text
            if r.status_code == 200:
                del self.pending[token]
                self.done(table, after, r.json())

    def drop(self) -> None:
        """Best effort (after a failure the connection may be gone: keep the real error)."""
        with contextlib.suppress(httpx.HTTPError):
            if self.registered:
                for v in reversed(self.views):
                    self.c.delete(f"/v1/views/{self.server_names[v.name]}")
            for name in self.names.values():
                self.c.delete(f"/v1/tables/{name}")

    def run(self) -> None:
        self.create()
        try:
            for action in self.sc.actions:
                if action == "register":
                    self.register()
                else:
                    assert isinstance(action, Write)
                    self.send(action)
                self.poll()
                if self.registered:
                    for v in self.views:
                        v.check()
                        v.latest()
            assert not self.pending, (
                f"writes still pending after every frontier moved: {self.pending}"
            )
            for v in self.views:
                v.finish()
        finally:
            self.drop()


@_settings(200)
@given(sc=scenarios(dims=1))
def test_random_plans_one_dimension(http: httpx.Client, sc: Scenario) -> None:
    Run(http, sc).run()


@_settings(80)
@given(sc=scenarios(dims=2))
def test_random_plans_two_dimensions(http: httpx.Client, sc: Scenario) -> None:
    Run(http, sc).run()


# ---------------------------------------------------------------------------------------------
# Plans the oracle rejects are rejected by the server, and the other way round


def _mutate(draw: st.DrawFn, plan: Any) -> Any:
    """``plan`` with one random change that often makes it invalid."""
    plan = copy.deepcopy(plan)
    spots: list[tuple[Any, Any]] = []  # (container, key) of every value in the tree

    def walk(node: Any) -> None:
        items = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else ()
        )
        for k, v in items:
            spots.append((node, k))
            walk(v)

    walk(plan)
    container, key = draw(st.sampled_from(spots))
    value = container[key]
    kind = draw(st.sampled_from(("column", "function", "type", "drop", "op", "extra", "value")))
    if kind == "column" and isinstance(value, str):
        container[key] = value + "_nope"
    elif kind == "function" and isinstance(container, dict) and key == "fn":
        container[key] = "frobnicate"
    elif kind == "type":
        container[key] = draw(st.sampled_from(({"lit": "s"}, 1.5, True, 3, [], {})))
    elif kind == "drop" and isinstance(container, dict) and key != "op":
        del container[key]
    elif kind == "op" and isinstance(container, dict) and key == "op":
        container[key] = draw(st.sampled_from(("join", "reduce", "select", "nope", "var", "view")))
    elif kind == "extra" and isinstance(value, dict):
        value["extra_field"] = 1
    else:
        container[key] = draw(st.sampled_from(("a", "k", "v", "x", 0, -1, "A", {"lit": 2}, None)))
    return plan


@_settings(100)
@given(data=st.data())
def test_invalid_plans_agree(http: httpx.Client, data: st.DataObject) -> None:
    tables = data.draw(schemas(2))
    plan = data.draw(plans(tables, max_depth=data.draw(st.integers(1, 3))))
    mutated = _mutate(data.draw, plan)
    prefix = _prefix()
    names = {t: f"{prefix}_{t}" for t in tables}
    try:
        oracle_error: Exception | None = None
        try:
            schema = schema_of(mutated, Database.from_counters(tables, {}))
        except PlanError as e:
            oracle_error = e
        except TypeError as e:  # the oracle trips over some malformed plans ("fn": {})
            oracle_error = e
        for t, columns in tables.items():
            body = {
                "name": names[t],
                "columns": [{"name": n, "type": ty} for n, ty in columns],
                "timing": "client",
            }
            assert http.post("/v1/tables", json=body).status_code == 201
        view = f"{prefix}_v"
        r = http.post("/v1/views", json={"name": view, "query": rename(mutated, names)})
        if oracle_error is not None:
            assert r.status_code == 422, (
                f"oracle rejects ({oracle_error}), server answers {r.status_code} {r.text}\n"
                f"plan={json.dumps(mutated)}"
            )
            err = assert_error(r, 422)
            assert isinstance(err["detail"], dict) and str(
                err["detail"].get("path", "")
            ).startswith("query"), err
            assert http.get(f"/v1/views/{view}").status_code == 404
        else:
            assert r.status_code == 201, (
                f"oracle accepts (columns {schema}), server answers {r.status_code} {r.text}\n"
                f"plan={json.dumps(mutated)}"
            )
            columns = [(c["name"], c["type"]) for c in r.json()["columns"]]
            assert columns == schema, (columns, schema, json.dumps(mutated))
            assert http.delete(f"/v1/views/{view}").status_code == 204
    finally:  # best effort: after a failure the connection may be gone
        with contextlib.suppress(httpx.HTTPError):
            for name in names.values():
                http.delete(f"/v1/tables/{name}")


# ---------------------------------------------------------------------------------------------
# Bad writes change nothing

WRONG_VALUES: dict[str, tuple] = {
    "int": ("1", 1.5, True, None, [1], {"x": 1}, 2**64),
    "float": ("1.5", True, None, [1.0], {}),
    "bool": (1, 0, "true", None, 1.0, []),
    "string": (1, 1.5, True, None, ["a"], {}),
}
BAD_TIMES_1D = (-1, 1.5, "3", True, None, [1, 2], {"t": 1})
BAD_TIMES_2D = (3, [1], [1, 2, 3], [1, -1], [1, "2"], [True, 1], None, [[1, 2]])


@st.composite
def table_specs(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 3))
    names = draw(st.lists(st.sampled_from(COLUMN_NAMES), min_size=n, max_size=n, unique=True))
    columns = [(c, draw(st.sampled_from(COLUMN_TYPES))) for c in names]
    pk = (
        draw(st.lists(st.sampled_from(names), unique=True, max_size=n))
        if draw(st.booleans())
        else []
    )
    dims = draw(st.sampled_from((1, 1, 2)))
    return {"columns": columns, "primary_key": pk, "dims": dims}


class BadWrites:
    """A client-timed table with a view over it, good writes tracked, bad writes checked."""

    def __init__(self, c: httpx.Client, spec: dict) -> None:
        self.c = c
        self.columns: list[tuple[str, str]] = spec["columns"]
        self.pk: list[str] = spec["primary_key"]
        self.dims: int = spec["dims"]
        prefix = _prefix()
        self.table, self.view = f"{prefix}_t", f"{prefix}_v"
        self.frontier = 0  # every coordinate
        self.contents: Counter[tuple] = Counter()  # rows sent so far (with their counts)

    def time(self, x: int) -> Any:
        return x if self.dims == 1 else [x] * self.dims

    def setup(self) -> None:
        body: dict[str, Any] = {
            "name": self.table,
            "columns": [{"name": n, "type": t} for n, t in self.columns],
            "timing": "client",
            "time_dims": self.dims,
        }
        if self.pk:
            body["primary_key"] = self.pk
        r = self.c.post("/v1/tables", json=body)
        assert r.status_code == 201, r.text
        r = self.c.post(
            "/v1/views", json={"name": self.view, "query": {"op": "table", "name": self.table}}
        )
        assert r.status_code == 201, r.text

    def row(self, draw: st.DrawFn) -> dict[str, Any]:
        return {n: draw(st.sampled_from(DOMAINS[t])) for n, t in self.columns}

    def key(self, row: Mapping[str, Any]) -> tuple:
        return tuple(row[n] for n in self.pk)

    def good_updates(self, draw: st.DrawFn, n: int) -> list[dict]:
        """Inserts of fresh rows (fresh keys on a keyed table), all at times beyond the frontier
        (a keyed table's at one time: it takes its updates in time order, and a bad update
        goes anywhere among them)."""
        present = {self.key(dict(r)) for r, c in self.contents.items() if c > 0}
        out: list[dict] = []
        for _ in range(n):
            row = self.row(draw)
            if self.pk:
                if self.key(row) in present:
                    continue
                present.add(self.key(row))
            later = 1 if self.pk else draw(st.integers(0, 2))
            out.append({"insert": row, "time": self.time(self.frontier + later)})
        return out

    def state(self) -> tuple:
        t = self.c.get(f"/v1/tables/{self.table}").json()
        answer = self.c.get(f"/v1/views/{self.view}/rows").json()
        return (
            t["rows"],
            t["frontier"],
            answer["time"],
            multiset((r["data"], r["count"]) for r in answer["rows"]),
        )

    def apply_good(self, updates: list[dict]) -> None:
        """A good write that also moves the frontier past its times (so that reads see it)."""
        self.frontier += 3
        body = {"updates": updates, "advance_to": self.time(self.frontier)}
        r = self.c.post(f"/v1/tables/{self.table}/updates", json=body)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "done", r.text
        for u in updates:
            self.contents[tuple(sorted(u["insert"].items()))] += 1

    def bad(self, draw: st.DrawFn) -> tuple[Any, int, str]:
        """A bad write body: (body, expected status, what is wrong)."""
        good = self.good_updates(draw, draw(st.integers(0, 4)))
        kinds = [
            "wrong_type",
            "unknown_column",
            "missing_column",
            "before_frontier",
            "bad_time",
            "no_time",
            "bad_op",
            "bad_weight",
            "not_object",
            "backwards",
            "bad_advance",
            "columnar_type",
            "columnar_length",
            "columnar_columns",
            "columnar_diff",
            "columnar_time",
            "too_many",
            "not_json",
            "unknown_field",
            "too_big",
        ]
        kinds += ["upsert", "delete_absent", "insert_present"] if self.pk else ["upsert_no_key"]
        kind = draw(st.sampled_from(kinds))
        row = self.row(draw)
        name, type_ = draw(st.sampled_from(self.columns))
        t = self.time(self.frontier + 1)
        bad: Any
        status = 422
        if kind == "wrong_type":
            bad = {"insert": {**row, name: draw(st.sampled_from(WRONG_VALUES[type_]))}, "time": t}
        elif kind == "unknown_column":
            bad = {"insert": {**row, "zz": 1}, "time": t}
        elif kind == "missing_column":
            bad = {"insert": {k: v for k, v in row.items() if k != name}, "time": t}
        elif kind == "before_frontier":
            bad, status = (
                {"insert": row, "time": self.time(draw(st.integers(0, self.frontier - 1)))},
                409,
            )
        elif kind == "bad_time":
            bad = {
                "insert": row,
                "time": draw(st.sampled_from(BAD_TIMES_1D if self.dims == 1 else BAD_TIMES_2D)),
            }
        elif kind == "no_time":
            bad = {"insert": row}
        elif kind == "bad_op":
            bad = draw(
                st.sampled_from(
                    (
                        {"bogus": row, "time": t},
                        {"insert": row, "delete": row, "time": t},
                        {"weight": 1, "time": t},
                        [row],
                        "x",
                    )
                )
            )
        elif kind == "bad_weight":
            bad = {"weight": draw(st.sampled_from(("2", 1.5, None, True))), "data": row, "time": t}
        elif kind == "upsert_no_key":
            bad = {"upsert": row, "time": t}
        elif kind == "upsert":  # a keyed table: an upsert is fine, but its row is bad
            bad = {"upsert": {**row, name: draw(st.sampled_from(WRONG_VALUES[type_]))}, "time": t}
        elif kind == "delete_absent":
            bad = {"delete": row, "time": t}
            good = [u for u in good if u["insert"] != row]  # not inserted by the batch itself
            present = {r: c for r, c in self.contents.items() if c > 0}
            if tuple(sorted(row.items())) in present:
                bad = {
                    "delete": {**row, name: draw(st.sampled_from(WRONG_VALUES[type_]))},
                    "time": t,
                }
        elif kind == "insert_present":
            present = [dict(r) for r, c in self.contents.items() if c > 0]
            if present:
                bad = {"insert": draw(st.sampled_from(present)), "time": t}
            else:  # the batch itself inserts a key twice
                bad = {"insert": row, "time": t}
                good = [u for u in good if self.key(u["insert"]) != self.key(row)]
                good.append({"insert": row, "time": t})
        else:
            bad = None
        if bad is not None:
            at = draw(st.integers(0, len(good)))
            return {"updates": [*good[:at], bad, *good[at:]]}, status, kind
        frontier_now = self.time(self.frontier)
        if kind == "not_object":
            return json.dumps(draw(st.sampled_from(([], "x", 1, None)))).encode(), 422, kind
        if kind == "backwards":
            back = self.time(draw(st.integers(0, self.frontier - 1)))
            return {"updates": good, "advance_to": back}, 409, kind
        if kind == "bad_advance":
            adv = draw(st.sampled_from(("x", -1, 1.5, [[1, 2, 3]], [None], {"t": 1})))
            return {"updates": good, "advance_to": adv}, 422, kind
        names = [n for n, _ in self.columns]
        n_rows = max(len(good), 1)
        cols = {
            n: [draw(st.sampled_from(DOMAINS[ty])) for _ in range(n_rows)] for n, ty in self.columns
        }
        body: dict[str, Any] = {"columns": cols, "time": frontier_now}
        if kind == "columnar_type":
            cols[name][draw(st.integers(0, n_rows - 1))] = draw(
                st.sampled_from(WRONG_VALUES[type_])
            )
        elif kind == "columnar_length":
            if len(names) > 1:
                cols[name] = [*cols[name], cols[name][0]]
            else:
                body["diff"] = [1] * (n_rows + 1)
        elif kind == "columnar_columns":
            if draw(st.booleans()) or len(names) == 1:
                cols["zz"] = [1] * n_rows
            else:
                del cols[name]
        elif kind == "columnar_diff":
            body["diff"] = draw(
                st.sampled_from(([1] * (n_rows + 1), ["1"] * n_rows, [1.5] * n_rows, 1))
            )
        elif kind == "columnar_time":
            body["time"] = draw(st.sampled_from(("x", [frontier_now] * (n_rows + 1), -1)))
            if self.dims == 2 and body["time"] == -1:
                body["time"] = [1]
        elif kind == "too_many":
            return {"updates": [{"insert": row, "time": t}] * (MAX_BATCH + 1)}, 413, kind
        elif kind == "not_json":
            return b'{"updates": [', 400, kind
        elif kind == "unknown_field":
            return {"updates": good, "frobnicate": 1}, 422, kind
        elif kind == "too_big":
            return b'{"updates": []' + b" " * (1024 * 1024 + 10) + b"}", 413, kind
        return body, 422, kind

    def check_bad(self, body: Any, status: int, kind: str) -> None:
        before = self.state()
        if isinstance(body, bytes):
            r = self.c.post(
                f"/v1/tables/{self.table}/updates",
                content=body,
                headers={"content-type": "application/json"},
            )
        else:
            r = self.c.post(f"/v1/tables/{self.table}/updates", json=body)
        shown = body[:40] if isinstance(body, bytes) else json.dumps(body)[:2000]
        assert r.status_code == status, (
            f"{kind}: expected {status}, got {r.status_code} {r.text}\nbody={shown}"
        )
        err = assert_error(r, status)
        assert isinstance(err["code"], str) and err["code"], err
        after = self.state()
        assert after == before, (
            f"{kind}: a rejected write changed the state:\n{before}\n{after}\nbody={shown}"
        )


@_settings(80)
@given(spec=table_specs(), data=st.data())
def test_bad_writes_change_nothing(http: httpx.Client, spec: dict, data: st.DataObject) -> None:
    w = BadWrites(http, spec)
    w.setup()
    try:
        w.apply_good(w.good_updates(data.draw, data.draw(st.integers(0, 5))))
        for _ in range(data.draw(st.integers(1, 6))):
            w.check_bad(*w.bad(data.draw))
            if data.draw(st.booleans()):
                w.apply_good(w.good_updates(data.draw, data.draw(st.integers(1, 3))))
        # Everything sent is visible, nothing from the rejected writes is.
        end = w.time(w.frontier + 3)
        r = http.post(f"/v1/tables/{w.table}/updates", json={"updates": [], "advance_to": end})
        assert r.status_code == 200, r.text
        rows_, frontier, _, got = w.state()
        assert frontier == [end]
        want = multiset((dict(k), c) for k, c in w.contents.items())
        assert got == want, f"view rows {show(got)}, sent {show(want)}"
        assert rows_ == sum(w.contents.values())
    finally:
        with contextlib.suppress(httpx.HTTPError):
            http.delete(f"/v1/views/{w.view}")
            http.delete(f"/v1/tables/{w.table}")
