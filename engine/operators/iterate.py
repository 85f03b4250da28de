"""Iteration to a fixed point over a nested scope whose times gain a loop coordinate.

A :class:`LoopRegion` is one operator of its parent scope that owns an inner scope. Each
variable ``v`` is ``enter(initial_v)`` at iteration 0 plus a feedback edge that carries
``body_v - enter(initial_v)`` from iteration ``i`` to ``i + 1``, so ``v(i + 1) = body_v(vars(i))``
for all variables together (mutual recursion). The result of a variable is its accumulation
over every iteration, with the loop coordinate dropped (``leave``).

When the region runs it executes rounds ``r = r0, r1, ...`` in increasing order: round ``r``
delivers the updates at iteration ``r`` and runs every inner operator once, in creation
order, under the round frontier of ``engine.progress``. The next round is the least
iteration at which a feedback edge holds updates or an inner operator holds work at a time
whose outer part is complete; when there is none the region is done for this parent run.
``max_iterations`` drops feedback beyond that iteration: ``v`` stops at ``v(max_iterations)``.
A loop nested in the body is not run at iterations from ``max_iterations`` on (what it would
give there is only fed back beyond the cap), so one that would not converge on the value at
the cap is no error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from engine.batch import UpdateBatch
from engine.consolidate import consolidate
from engine.errors import IterationLimitError, IterationStopped
from engine.lattice import Antichain
from engine.operators.base import Operator, Scope
from engine.progress import RoundFrontiers
from engine.sort_kernels import PACKED_FROM, feedback_columns

__all__ = ["DEFAULT_ROUND_LIMIT", "Enter", "Leave", "LoopRegion", "Variable"]

DEFAULT_ROUND_LIMIT = 100_000
# a loop's output held from its rounds is folded (the loop coordinate dropped, consolidated)
# once it holds this many records and at least as many as the last fold left: a body whose
# output keeps changing holds its live rows, not every round's changes (audit 81: 200
# writes at 20,000 rounds held 640 MB until the loop ended)
FOLD_FROM = 1 << 16


class LoopScope(Scope):
    """The inner scope of a loop region; ``round`` is the iteration being delivered."""

    def __init__(self, parent: Scope, dims: int, name: str) -> None:
        super().__init__(parent, dims, name)
        self.region: LoopRegion | None = None
        self.built = {}  # see Scope.once


class Enter(Operator):
    """A parent-scope collection inside the loop, at iteration 0 of each outer time."""

    name = "enter"

    def __init__(self, scope: LoopScope, outer: Operator) -> None:
        super().__init__(scope, [], outer.schema, dims=scope.dims)
        self.outer = outer

    def run(self) -> None:
        self.frontier = self.input_frontier()
        scope = self.scope
        assert isinstance(scope, LoopScope)
        out = self.outer.output
        self.output = out.enter() if scope.round == 0 and out is not None and len(out) else None


class Variable(Operator):
    """A loop variable: its initial collection at iteration 0 plus fed-back changes."""

    name = "var"

    def __init__(self, scope: LoopScope, initial: Enter, name: str) -> None:
        super().__init__(scope, [initial], initial.schema)
        self.name = name
        self.body: Operator | None = None
        self.buffer: dict[int, list[UpdateBatch]] = {}
        self.next_iteration = np.zeros((self.dims, 1), dtype=np.int64)  # adds 1 to the last
        self.next_iteration[-1] = 1
        self.empty = UpdateBatch.empty(self.ncols, self.dims)  # stands in for no updates

    def run(self) -> None:
        self.frontier = self.input_frontier()
        scope = self.scope
        assert isinstance(scope, LoopScope)
        parts = [b for b in self.buffer.pop(scope.round, [])]
        init = self.inputs[0].output
        if init is not None:
            parts.append(init)
        self.output = UpdateBatch.concat(parts, self.ncols, self.dims) if parts else None

    def feed_back(self, max_iterations: int | None) -> None:
        """Buffer ``body - initial`` of this round at the next iteration."""
        assert self.body is not None
        body, init = self.body.output, self.inputs[0].output
        body = body if body is not None and len(body) else None
        init = init if init is not None and len(init) else None
        if body is None and init is None:
            return
        n = (len(body) if body is not None else 0) + (len(init) if init is not None else 0)
        if n < PACKED_FROM:  # few rows: one compiled call (C order: one signature)
            b = body if body is not None else self.empty
            i = init if init is not None else self.empty
            c = np.ascontiguousarray
            data, times, diffs, first, last = feedback_columns(
                c(b.data),
                c(b.times),
                b.diffs,
                c(i.data),
                c(i.times),
                i.diffs,
                -1 if max_iterations is None else max_iterations,
            )
            fb = UpdateBatch(data, times, diffs)
        else:
            if init is None and body is not None and body.consolidated:
                fb = body  # a reduce's output, say: nothing to sum or cancel
            else:
                parts = [
                    b for b in (body, init.negate() if init is not None else None) if b is not None
                ]
                fb = consolidate(UpdateBatch.concat(parts, self.ncols, self.dims))
            times = fb.times + self.next_iteration
            if max_iterations is not None:
                keep = times[-1] <= max_iterations
                times, fb = times[:, keep], fb.take(keep)
            fb = UpdateBatch(fb.data, times, fb.diffs)
            first, last = (int(times[-1].min()), int(times[-1].max())) if len(fb) else (0, 0)
        if not len(fb):
            return
        if first == last:  # the usual case: one iteration
            self.buffer.setdefault(first, []).append(fb)
            return
        its = fb.times[-1]
        for it in np.unique(its).tolist():
            self.buffer.setdefault(int(it), []).append(fb.take(its == it))

    def pending_times(self) -> np.ndarray:
        parts = [b.times for bs in self.buffer.values() for b in bs]
        if len(parts) <= 1:  # the usual case: nothing, or one round's feedback
            return parts[0] if parts else self.empty.times
        return np.concatenate(parts, axis=1)


class _Held:
    """A variable's output from a loop's rounds: batches at loop times, and what earlier
    folds left (the loop coordinate dropped, consolidated; ``FOLD_FROM``)."""

    __slots__ = ("dims", "folded", "ncols", "parts", "records")

    def __init__(self, ncols: int, dims: int) -> None:
        self.ncols, self.dims = ncols, dims
        self.parts: list[UpdateBatch] = []
        self.records = 0
        self.folded: UpdateBatch | None = None

    def add(self, batch: UpdateBatch) -> None:
        self.parts.append(batch)
        self.records += len(batch)
        if self.records >= FOLD_FROM and self.records >= len(self.folded or ()):
            self.folded = self.result()
            self.parts, self.records = [], 0

    def result(self) -> UpdateBatch | None:
        """Everything held, the loop coordinate dropped, consolidated (None: nothing)."""
        if not self.parts:
            return self.folded
        left = UpdateBatch.concat(self.parts, self.ncols, self.dims).leave()
        if self.folded is not None:
            left = UpdateBatch.concat([self.folded, left], self.ncols, self.dims - 1)
        return consolidate(left)


class LoopRegion(Operator):
    """Runs an inner scope to a fixed point; see the module docstring."""

    name = "iterate"

    def __init__(
        self,
        parent: Scope,
        inner: LoopScope,
        inputs: Sequence[Operator],
        variables: Sequence[Variable],
        max_iterations: int | None,
        round_limit: int = DEFAULT_ROUND_LIMIT,
    ) -> None:
        super().__init__(parent, inputs, inputs[0].schema, dims=inner.dims - 1)  # type: ignore[operator]
        self.inner = inner
        inner.region = self
        self.variables = list(variables)
        self.max_iterations = max_iterations
        # a bound the plan gives is the plan's: it is not a failure to converge
        self.round_limit = (
            round_limit if max_iterations is None else max(round_limit, max_iterations + 1)
        )
        self.results: dict[str, UpdateBatch | None] = {v.name: None for v in self.variables}
        self.prev_frontier = Antichain.minimum(self.dims)
        self._rest_of = self.prev_frontier
        self._rest_cached = self.prev_frontier.extend(0)
        self.enters = [op for op in inner.operators if isinstance(op, Enter)]
        # the inner operators that can owe work at later times
        self.owing = [
            op for op in inner.operators if type(op).pending_times is not Operator.pending_times
        ]
        self.hook: Callable[[], bool] | None = None  # see between_rounds
        self.root = parent.root  # its ``pause`` during a step (``Graph.step``)

    def between_rounds(self, hook: Callable[[], bool] | None) -> None:
        """This loop and the loops nested in it call ``hook()`` (from the thread stepping the
        graph) at the start of each round; once it answers true they raise
        :class:`IterationStopped` (``None``: no hook). A registration that will not converge
        can be given up without waiting for its round limit, and work can be done between
        the rounds of a long one."""
        self.hook = hook
        for op in self.inner.operators:
            if isinstance(op, LoopRegion):
                op.between_rounds(hook)

    def _rest(self) -> Antichain:
        """What the inner traces may compact to: the outer frontier they may compact to,
        extended by round 0 (built once per outer frontier)."""
        if self.scope.is_loop:
            assert self.scope.rest is not None
            outer = self.scope.rest
        else:
            outer = self.prev_frontier
        if outer is not self._rest_of:
            self._rest_of, self._rest_cached = outer, outer.extend(0)
        return self._rest_cached

    def _next_round(self, frontier: Antichain, after: int) -> int | None:
        best = -1
        for op in self.owing:
            r = op.next_round(frontier.elements, after)
            if r >= 0 and (best < 0 or r < best):
                best = r
        return None if best < 0 else best

    def _past_cap(self) -> bool:
        """Whether the loop this one is nested in is at or past its ``max_iterations``: what
        this one computes there reaches only iterations that loop drops."""
        scope = self.scope
        if not isinstance(scope, LoopScope) or scope.region is None:
            return False
        cap = scope.region.max_iterations
        return cap is not None and scope.round >= cap

    def run(self) -> None:
        frontier = self.input_frontier()
        self.frontier = frontier
        if self._past_cap():  # not computed: a body that would not converge there is no error
            self.results = {v.name: None for v in self.variables}
            self.output = None
            return
        inner = self.inner
        inner.rest = self._rest()
        outputs = {v.name: _Held(v.ncols, v.dims) for v in self.variables}
        entering = any(e.outer.output is not None and len(e.outer.output) for e in self.enters)
        r = 0 if entering else self._next_round(frontier, -1)
        round_frontiers = RoundFrontiers(frontier)
        while r is not None:
            if self.hook is not None and self.hook():
                raise IterationStopped(f"iterate stopped at round {r}: it was cancelled")
            if self.root.pause is not None:
                self.root.pause()
            inner.round = r
            inner.frontier = round_frontiers.at(r)
            for op in inner.operators:
                op.run()
            for v in self.variables:
                v.feed_back(self.max_iterations)
                if v.output is not None and len(v.output):
                    outputs[v.name].add(v.output)
            # the limit is on the round reached, not on the rounds this step ran: a loop
            # whose changes reach round r would need r + 1 rounds from scratch, so whether it
            # fails does not depend on how its input arrived (in one write or several)
            if r >= self.round_limit:
                raise IterationLimitError(
                    f"the iterate at {self.inner.name} did not reach a fixed point within "
                    f"{self.round_limit} rounds; "
                    "set max_iterations or check that the body converges"
                )
            r = self._next_round(frontier, r)
        for v in self.variables:
            self.results[v.name] = outputs[v.name].result()
        self.output = None
        self.prev_frontier = frontier

    def compact(self) -> None:
        """Every outer time before this run's frontier is done: the inner traces may
        compact to it now, before the step ends (``Spine.settle``), not at the next run.
        Its inner operators compact here only: their compaction frontier stays put through
        the rounds."""
        self.inner.rest = self._rest()
        for op in self.inner.operators:
            op.compact()

    def pending_times(self) -> np.ndarray:
        parts = [op.pending_times()[:-1] for op in self.owing]
        parts = [p for p in parts if p.shape[1]]
        if not parts:
            return np.zeros((self.dims, 0), dtype=np.int64)
        return np.concatenate(parts, axis=1)

    def release(self) -> None:
        super().release()
        for op in self.inner.operators:
            op.release()


class Leave(Operator):
    """One variable's result, in the parent scope."""

    name = "leave"

    def __init__(self, scope: Scope, region: LoopRegion, variable: Variable) -> None:
        super().__init__(scope, [region], variable.schema)
        self.region = region
        self.variable = variable.name

    def run(self) -> None:
        self.frontier = self.input_frontier()
        self.output = self.region.results.get(self.variable)
