"""Random query plans with WebSocket subscribers, checked against the oracle.

Each example takes a random scenario of ``tests.service.test_random_plans`` (client-timed
tables, a random plan as view ``V``, sometimes a view ``W`` over it, a random update stream
and the requests that carry it, frontier moves included) and drives it through a real server
the same way (``Run``), with one to three subscribers per view on
``WS /v1/views/{v}/subscribe?progress=true``, mostly with ``snapshot=true``: some open right
after the view is registered (before any write, when the view is registered before any
data), others after some writes, so that the snapshot is not trivial. Each subscriber reads
its frames on a thread of its own, so that a slow reader never holds the server up. Once the
scenario's requests are sent, every table's frontier is closed (``advance_to: []``), and once
every subscriber has had a ``progress`` frame with frontier ``[]`` its frames are checked:

* ``seq`` counts 0, 1, 2, ... without gaps; every frame is a ``snapshot``, ``diff``,
  ``progress`` or ``heartbeat`` frame (a ``closed`` or ``error`` frame fails the test);
* with ``snapshot=true``, the snapshot frames come first (at least one), all at one time
  ``T``, and together hold the oracle's contents at ``T`` (nothing when ``T`` is ``null``);
* every ``diff`` frame at time ``t`` holds exactly the view's change at ``t`` (the oracle's,
  by inclusion-exclusion over the grid in 2-D; counts wrapped to 64 bits, floats at 9
  significant digits; for a view registered on data, with the changes before its start merged
  into their advanced times: see ``changes_from_start``), no time comes twice, none at or
  before ``T``, and the times come in a linear extension of the (product) order;
* every time with a change that the subscription covers is delivered (see
  ``Subscription.required``);
* ``progress`` frontiers only move forward; a ``diff`` after a progress frame is at a time
  beyond its frontier ("everything before this frontier has been sent"), every time covered
  and not beyond a progress frontier has been delivered before that progress frame, and a
  ``diff`` is at a time complete under the next progress frontier (diffs are for completed
  times);
* in one dimension, the snapshot (or, without one, the oracle's contents just before the
  subscription's first frontier) plus the diffs in order give the oracle's contents at every
  diff time.

The write outputs and ``rows?as_of`` reads are left to ``test_random_plans``. The server runs
with that module's settings plus ``DIFFLOW_SNAPSHOT_FRAME_ROWS=2`` (an environment setting),
so that snapshots of more than two rows come in several frames.

``HYPOTHESIS_PROFILE=thorough`` multiplies every example count by 10.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.service.server import Server, running_server
from tests.service.test_random_plans import (
    MAX_BATCH,
    RowKey,
    Run,
    Scenario,
    Time,
    ViewCheck,
    Write,
    _settings,
    beyond,
    from_wire,
    le,
    multiset,
    precedes,
    scenarios,
    show,
    time_wire,
    wrapped,
)

SNAPSHOT_FRAME_ROWS = 2
WAIT_S = 60.0  # a hang guard only: how long to wait for a frame that is due
FRAME_TYPES = ("snapshot", "diff", "progress", "heartbeat")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("random_subscriptions"),
        max_batch=MAX_BATCH,
        max_body_mb=1,
        snapshot_frame_rows=SNAPSHOT_FRAME_ROWS,
    ) as s:
        yield s


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


# ---------------------------------------------------------------------------------------------
# Scenarios with subscribers


@dataclass
class SubSpec:
    view: str  # logical ("V", "W")
    after: int  # opened right after the scenario's action with this index (at least "register")
    snapshot: bool


@dataclass
class SubScenario:
    sc: Scenario
    subs: list[SubSpec]
    quiet: bool  # the views may have no change at all (most examples have some)

    def __repr__(self) -> str:
        subs = ",\n".join(f"    {s!r}" for s in self.subs)
        return f"SubScenario(quiet={self.quiet},\n  subs=[\n{subs}\n  ],\n  sc={self.sc!r})"


@st.composite
def sub_scenarios(draw: st.DrawFn, dims: int) -> SubScenario:
    sc = draw(scenarios(dims))
    first = sc.actions.index("register")
    last = len(sc.actions) - 1
    subs = []
    for view in sc.views:
        for _ in range(draw(st.integers(1, 3))):
            when = draw(st.sampled_from(("first", "any", "any", "last")))
            if when == "first":  # right after registering (before any write if the cut is 0)
                after = first
            elif when == "last":  # after every write, before the frontiers close
                after = last
            else:
                after = draw(st.integers(first, last))
            subs.append(SubSpec(view, after, draw(st.integers(0, 3)) > 0))
    return SubScenario(sc, subs, draw(st.integers(0, 3)) == 0)


# ---------------------------------------------------------------------------------------------
# What a subscriber can be told: the changes, as of the view's start


def advance(t: Time, frontier: list[Time]) -> Time:
    """``t`` advanced by ``frontier`` (the meet over its elements of the join with ``t``), as
    the engine compacts times (``engine.lattice.advance_by``)."""
    joins = [tuple(max(a, b) for a, b in zip(t, f, strict=True)) for f in frontier]
    return tuple(min(c) for c in zip(*joins, strict=True))


def changes_from_start(view: ViewCheck, grid: Sequence[Time]) -> dict[Time, Counter[RowKey]]:
    """The view's changes by time, as a view registered on data holds them: it starts at its
    inputs' latest complete times (``ViewCheck.start``: the cut minus one, the times before it
    are read back as 409s), and its inputs' history comes in advanced to that start, so the
    changes at times not beyond it are merged into their advanced times (only the
    accumulations at times beyond the start are the view's true contents). A view registered
    before any data starts at 0: these are exactly its changes."""
    merged: dict[Time, Counter[RowKey]] = {}
    for t in grid:
        change = view.change_at(t)
        if change:
            merged.setdefault(advance(t, view.start), Counter()).update(change)
    out = {t: wrapped(c) for t, c in merged.items()}
    return {t: c for t, c in out.items() if c}


# ---------------------------------------------------------------------------------------------
# One subscriber: frames read on a thread of its own


def _frame_line(i: int, f: dict) -> str:
    if f.get("type") in ("snapshot", "diff"):
        ups = sorted(
            (json.dumps(u.get("data"), sort_keys=True), u.get("diff")) for u in f["updates"]
        )
        body = ", ".join(f"{d:+d} {row}" for row, d in ups)
        return f"  [{i}] {f['type']} seq={f.get('seq')} time={f.get('time')}: {body}"
    return f"  [{i}] {json.dumps(f)}"


class Subscription:
    def __init__(
        self,
        run: Run,
        view: ViewCheck,
        changes: dict[Time, Counter[RowKey]],
        spec: SubSpec,
        url: str,
    ) -> None:
        self.view = view
        self.changes = changes  # the view's changes by time, from its start (as held)
        self.spec = spec
        self.frames: list[dict] = []
        self.stop = threading.Event()
        self.first = threading.Event()  # a frame came
        self.finished = threading.Event()  # a progress frame with frontier [] came
        self.failure: BaseException | None = None
        # The view's frontier when the subscription opened: every write sent before has been
        # processed (``Run.send`` waits for a control request after each), and the test
        # waits for the subscription's first frame before it sends another.
        self.frontier_open = view.frontier()
        self.opened_before_writes = run.sc.cut == [(0,) * run.sc.dims] and (
            spec.after == run.sc.actions.index("register")
        )
        snapshot = "true" if spec.snapshot else "false"
        self.url = (
            f"{url}/v1/views/{run.server_names[spec.view]}/subscribe"
            f"?snapshot={snapshot}&progress=true"
        )
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            with connect(self.url, max_size=None) as ws:
                while not self.stop.is_set():
                    try:
                        raw = ws.recv(timeout=0.2)
                    except TimeoutError:
                        continue
                    f = json.loads(raw)
                    self.frames.append(f)
                    self.first.set()
                    if f.get("type") == "progress" and f.get("frontier") == []:
                        self.finished.set()
        except ConnectionClosed:
            pass
        except BaseException as e:  # shown by the checks
            self.failure = e
        finally:
            self.first.set()

    # -- reporting ----------------------------------------------------------------------------

    def describe(self, marks: tuple[int, ...] = ()) -> str:
        shown = self.frames[:400]
        lines = [
            f"subscription to {self.spec.view} ({self.spec!r}), opened with the view's frontier "
            f"at {[time_wire(t) for t in self.frontier_open]}"
            f"{' before any write' if self.opened_before_writes else ''}; the view starts at "
            f"{[time_wire(t) for t in self.view.start]}; frames:",
        ]
        if self.failure is not None:
            lines.insert(0, f"reading frames failed: {self.failure!r}")
        lines += [("=>" if i in marks else "") + _frame_line(i, f) for i, f in enumerate(shown)]
        if len(self.frames) > len(shown):
            lines.append(f"  ... {len(self.frames) - len(shown)} more frames")
        return "\n".join(lines) + "\n" + self.view.context()

    # -- checks -------------------------------------------------------------------------------

    def required(self, snapshot_time: Time | None) -> set[Time]:
        """The times with a change that must come in diff frames (changes as the view holds
        them: ``changes_from_start``). With a snapshot at ``T``, every one not at or before
        ``T`` (all of them when ``T`` is null): changes at times complete when it opened but
        not covered by the snapshot (incomparable to ``T``) come right after it, the rest as
        they complete. Without a snapshot a subscriber only hears of times that complete
        after it opened: every one beyond the view's frontier at opening (every time, when
        it opened before any write; nothing, when that frontier was already closed). Times
        complete at opening may come too (then they are checked), but are not due: their
        changes were final, and published, before the subscription existed."""
        if self.spec.snapshot:
            return {t for t in self.changes if snapshot_time is None or not le(t, snapshot_time)}
        return {t for t in self.changes if beyond(t, self.frontier_open)}

    def check(self, dims: int) -> None:
        frames = self.frames
        assert self.failure is None, f"reading frames failed: {self.failure!r}\n{self.describe()}"
        for i, f in enumerate(frames):
            assert f.get("seq") == i, f"frame {i} has seq {f.get('seq')}\n{self.describe((i,))}"
            assert f.get("type") in FRAME_TYPES, f"unexpected frame {i}\n{self.describe((i,))}"

        # Snapshot frames: first, at one time, holding the contents there.
        snaps = [i for i, f in enumerate(frames) if f["type"] == "snapshot"]
        snapshot_time: Time | None = None
        if self.spec.snapshot:
            assert snaps and snaps == list(range(len(snaps))), (
                f"snapshot frames {snaps}: expected at least one, before every other frame\n"
                f"{self.describe(tuple(snaps))}"
            )
            times = {json.dumps(frames[i]["time"]) for i in snaps}
            assert len(times) == 1, f"snapshot frames at times {times}\n{self.describe()}"
            wire = frames[0]["time"]
            snapshot_time = None if wire is None else from_wire(wire)
            got = multiset((u["data"], u["diff"]) for i in snaps for u in frames[i]["updates"])
            want = Counter() if snapshot_time is None else wrapped(self.view.oracle(snapshot_time))
            assert got == want, (
                f"snapshot at {wire}:\n got  {show(got)}\n want {show(want)}\n"
                f"{self.describe(tuple(snaps))}"
            )
        else:
            assert not snaps, f"snapshot frames without snapshot=true\n{self.describe()}"

        # Diff frames: exactly the change at their time, once each, in a linear extension.
        diffs: list[tuple[int, Time]] = []
        seen: dict[Time, int] = {}
        for i, f in enumerate(frames):
            if f["type"] != "diff":
                continue
            t = from_wire(f["time"])
            assert len(t) == dims, f"diff frame {i} at time {f['time']}\n{self.describe((i,))}"
            assert t not in seen, (
                f"time {f['time']} delivered twice (frames {seen[t]} and {i})\n"
                f"{self.describe((seen[t], i))}"
            )
            seen[t] = i
            got = multiset((u["data"], u["diff"]) for u in f["updates"])
            want = self.changes.get(t, Counter())
            assert got == want, (
                f"diff frame {i} at time {f['time']}:\n got  {show(got)}\n want {show(want)}\n"
                f"{self.describe((i,))}"
            )
            assert got, f"diff frame {i} with no change\n{self.describe((i,))}"
            if snapshot_time is not None:
                assert not le(t, snapshot_time), (
                    f"diff frame {i} at {f['time']}, at or before the snapshot time "
                    f"{time_wire(snapshot_time)}\n{self.describe((0, i))}"
                )
            for j, u in diffs:
                assert not le(t, u), (
                    f"diff frame {i} at {f['time']} after frame {j} at {time_wire(u)}: not in "
                    f"time order\n{self.describe((j, i))}"
                )
            diffs.append((i, t))

        # Every time the subscription covers is delivered.
        required = self.required(snapshot_time)
        missing = sorted(required - set(seen))
        assert not missing, (
            f"times with changes never delivered: {[time_wire(t) for t in missing]} "
            f"(changes: {[(time_wire(t), show(self.changes[t])) for t in missing]})"
            f"\n{self.describe()}"
        )

        # Progress frames: forward only, and everything before each was sent before it.
        progress = [
            (i, [from_wire(x) for x in f["frontier"]])
            for i, f in enumerate(frames)
            if f["type"] == "progress"
        ]
        assert progress and frames[progress[-1][0]]["frontier"] == [], (
            f"no progress frame with frontier []\n{self.describe()}"
        )
        for (i, before), (j, after) in itertools.pairwise(progress):
            assert precedes(before, after), (
                f"progress frame {j} moves the frontier back from frame {i}\n"
                f"{self.describe((i, j))}"
            )
        for i, frontier in progress:
            for j, t in diffs:
                if j > i:
                    assert beyond(t, frontier), (
                        f"diff frame {j} at {time_wire(t)} comes after progress frame {i} "
                        f"whose frontier does not leave it open\n{self.describe((i, j))}"
                    )
            late = sorted(t for t in required if not beyond(t, frontier) and seen[t] > i)
            assert not late, (
                f"progress frame {i} before the diffs at {[time_wire(t) for t in late]}, times "
                f"not beyond its frontier\n{self.describe((i, *(seen[t] for t in late)))}"
            )
        for j, t in diffs:
            nxt = next((i, f) for i, f in progress if i > j)
            assert not beyond(t, nxt[1]), (
                f"diff frame {j} at {time_wire(t)} is not complete under the next progress "
                f"frame {nxt[0]}\n{self.describe((j, nxt[0]))}"
            )

        if dims == 1:
            self.check_accumulated(snapshot_time, snaps, diffs)

    def check_accumulated(
        self, snapshot_time: Time | None, snaps: list[int], diffs: list[tuple[int, Time]]
    ) -> None:
        """One dimension: what came before, plus each diff in order, is the oracle's contents
        at the diff's time."""
        total: Counter[RowKey] = Counter()
        if self.spec.snapshot:
            for i in snaps:
                total.update(multiset((u["data"], u["diff"]) for u in self.frames[i]["updates"]))
        elif self.frontier_open and self.frontier_open[0][0] > 0:
            total.update(self.view.oracle((self.frontier_open[0][0] - 1,)))
        elif not self.frontier_open:
            return  # opened on a closed view: nothing can come
        for i, t in diffs:
            total.update(multiset((u["data"], u["diff"]) for u in self.frames[i]["updates"]))
            total = wrapped(total)
            want = wrapped(self.view.oracle(t))
            assert total == want, (
                f"snapshot and diffs accumulated up to frame {i} (time {t[0]}):\n"
                f" got  {show(total)}\n want {show(want)}\n{self.describe((i,))}"
            )


# ---------------------------------------------------------------------------------------------
# Running a scenario with subscribers


class SubRun(Run):
    """A scenario through the server (``Run``'s requests, without its reads), subscribers
    opened along the way."""

    def __init__(self, c: httpx.Client, server: Server, ss: SubScenario) -> None:
        super().__init__(c, ss.sc)
        self.ss = ss
        self.url = server.ws_url
        self.subs: list[Subscription] = []
        self.by_name = {v.name: v for v in self.views}
        self.changes = {v.name: changes_from_start(v, self.grid) for v in self.views}

    def open(self, after: int) -> None:
        for spec in self.ss.subs:
            if spec.after != after:
                continue
            view = self.by_name[spec.view]
            sub = Subscription(self, view, self.changes[view.name], spec, self.url)
            self.subs.append(sub)
            # The subscription exists once its first frame (a snapshot or progress) is out.
            assert sub.first.wait(WAIT_S) and sub.frames, (
                f"no first frame within {WAIT_S} s\n{sub.describe()}"
            )

    def run(self) -> None:
        self.create()
        try:
            for index, action in enumerate(self.sc.actions):
                if action == "register":
                    self.register()
                else:
                    assert isinstance(action, Write)
                    self.send(action)
                self.poll()
                self.open(index)
            for name in self.sc.tables:  # close every frontier: everything becomes complete
                if self.frontiers[name]:
                    self.send(Write(name, [], [], False, "rows", 0))
            self.poll()
            deadline = time.monotonic() + WAIT_S
            for sub in self.subs:
                while sub.thread.is_alive() and time.monotonic() < deadline:
                    if sub.finished.wait(0.1):
                        break
                assert sub.finished.is_set(), (
                    f"no progress frame with frontier [] within {WAIT_S} s of closing every "
                    f"frontier\n{sub.describe()}"
                )
            self.close()
            for sub in self.subs:
                sub.check(self.sc.dims)
        finally:
            self.close()
            self.drop()

    def close(self) -> None:
        for sub in self.subs:
            sub.stop.set()
        for sub in self.subs:
            sub.thread.join(timeout=10)


@_settings(40)
@given(ss=sub_scenarios(dims=1))
def test_random_subscriptions_one_dimension(
    http: httpx.Client, server: Server, ss: SubScenario
) -> None:
    run = SubRun(http, server, ss)
    assume(ss.quiet or any(run.changes.values()))
    run.run()


@_settings(30)
@given(ss=sub_scenarios(dims=2))
def test_random_subscriptions_two_dimensions(
    http: httpx.Client, server: Server, ss: SubScenario
) -> None:
    run = SubRun(http, server, ss)
    assume(ss.quiet or any(run.changes.values()))
    run.run()
