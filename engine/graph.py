"""The root of a dataflow: inputs, the step loop, and dropping parts of the graph.

A :class:`Graph` holds any number of dataflows, added at any time; operators run in creation
order, which is a topological order because an operator can only read operators that exist.
``step()`` releases every input's buffered updates and runs each operator once; afterwards
every output is complete at every time not at or beyond its frontier (``engine.progress``),
and every trace is settled (``Spine.settle``: one batch after a bulk load).
A dataflow added after data arrived starts from the current content of the arrangements it
reads (``Arrangement.as_collection``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from engine.collection import Arrangement, Collection
from engine.errors import StepError, TimeError
from engine.interning import StringInterner
from engine.operators.arrange import Arrange
from engine.operators.base import BuiltKey, Operator, Scope
from engine.operators.input import InputHandle, InputOp
from engine.operators.iterate import LoopRegion
from engine.operators.reduce import Reduce
from engine.schema import ColumnType, Schema
from engine.trace import Spine

__all__ = ["Graph"]


class Graph:
    """A single-process dataflow graph. Not thread-safe: drive it from one thread."""

    def __init__(self, interner: StringInterner | None = None) -> None:
        self.scope = Scope(None, None)
        self.scope.interner = interner if interner is not None else StringInterner()
        self.steps = 0

    @property
    def interner(self) -> StringInterner:
        assert self.scope.interner is not None
        return self.scope.interner

    def new_input(
        self,
        columns: Schema | Iterable[tuple[str, ColumnType | str]],
        dims: int = 1,
        name: str = "input",
    ) -> tuple[InputHandle, Collection]:
        """An input collection and the handle that feeds it (times with ``dims`` coordinates)."""
        if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
            raise TimeError(f"an input's times have at least 1 coordinate, not {dims!r}")
        schema = columns if isinstance(columns, Schema) else Schema.of(columns)
        op = InputOp(self.scope, schema, dims, name)
        return InputHandle(op), Collection(op)

    def step(self, pause: Callable[[], None] | None = None) -> None:
        """Run every operator once: afterwards all outputs are final up to their frontiers.

        An operator that raises does not stop the others (dataflows are independent); after
        the step a :class:`StepError` names every failed operator. ``pause()`` is called
        between operators and at the start of every loop's rounds: the caller may do other
        work there, reading what the step leaves unchanged (it must not step this graph or
        change its operators)."""
        failures: list[tuple[Operator, BaseException]] = []
        self.scope.pause = pause
        try:
            for op in list(self.scope.operators):
                if pause is not None:
                    pause()
                op.output = None
                try:
                    op.run()
                    op.compact()  # its traces may forget what its frontier now calls done
                except Exception as exc:
                    op.output = None
                    failures.append((op, exc))
        finally:
            self.scope.pause = None
        self.steps += 1
        _forget_outputs(self.scope)
        if failures:
            raise StepError(failures)
        for spine in _spines(self.scope):
            spine.settle()

    @contextmanager
    def building(
        self, provide: Callable[[BuiltKey], Operator | None] | None = None
    ) -> Iterator[None]:
        """Meanwhile, the root scope keeps what it builds for sharing (``Scope.once``), as
        loop scopes always do: one dataflow's collection arranged twice by the same columns
        reads one arrangement. Build one dataflow (a service's view) inside it: outside, two
        dataflows would share operators, and dropping one would break the other. ``provide``
        offers operators kept outside the dataflow to read in place of new ones (a service's
        shared arrangements of the tables a view reads)."""
        scope = self.scope
        if scope.built is not None:  # nested: the outer build goes on
            yield
            return
        scope.built, scope.provide = {}, provide
        try:
            yield
        finally:
            scope.built, scope.provide = None, None

    def drop(self, ops: Sequence[Operator]) -> None:
        """Remove operators (and their loops) from the graph, releasing their trace readers."""
        for op in ops:
            op.release()
        self.scope.remove(ops)

    @staticmethod
    def between_rounds(ops: Sequence[Operator], hook: Callable[[], bool] | None) -> None:
        """The loops among ``ops``, and those nested in them, call ``hook()`` at the start of
        each round: the caller may do other work there (it must not step this graph or
        change its operators), and a true answer stops the loop, failing it in the step
        with :class:`IterationStopped` (``LoopRegion.between_rounds``; ``None`` undoes it)."""
        for op in ops:
            if isinstance(op, LoopRegion):
                op.between_rounds(hook)

    def operators_since(self, mark: int) -> list[Operator]:
        """Root operators created after ``mark`` (a previous ``len(graph.scope.operators)``)."""
        return self.scope.operators[mark:]

    @staticmethod
    def import_arrangement(arrangement: Arrangement) -> Collection:
        """A new reader of an existing arrangement, starting from its current content."""
        return arrangement.as_collection()


def _forget_outputs(scope: Scope) -> None:
    """Let go of a finished step's outputs: every reader ran in the step (operators run in
    creation order, and each sets its output afresh when it runs), so nothing reads them
    again; kept, a view's first contents would stay in memory until the next step."""
    for op in scope.operators:
        op.output = None
        if isinstance(op, LoopRegion):
            op.results = dict.fromkeys(op.results)
            _forget_outputs(op.inner)


def _spines(scope: Scope) -> Iterator[Spine]:
    """The traces owned by the operators of a scope and of the loops nested in it."""
    for op in scope.operators:
        if isinstance(op, (Arrange, Reduce)):
            yield op.spine
        elif isinstance(op, LoopRegion):
            yield from _spines(op.inner)
