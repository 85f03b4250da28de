"""Errors raised by the engine.

One hierarchy; callers catch ``EngineError`` or one of its branches::

    EngineError
     ├── SchemaError          columns, types or arities that do not fit an operator
     ├── TimeError            a time of the wrong dimension, 2**63 - 1, or not at/beyond a frontier
     ├── ExpressionError      an expression that does not type-check
     ├── GraphError           wiring that the dataflow cannot run (scopes, dropped parts)
     ├── IterationLimitError  an iterate that found no fixed point within its round limit
     ├── IterationStopped     an iterate stopped between rounds on request (``between_rounds``)
     ├── LimitError           an operator asked to make more rows in one step than it may
     └── StepError            operators that failed during a step (the others still ran)

Messages say what was wrong and how to fix it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "EngineError",
    "ExpressionError",
    "GraphError",
    "IterationLimitError",
    "IterationStopped",
    "LimitError",
    "SchemaError",
    "StepError",
    "TimeError",
]


class EngineError(Exception):
    """Base class of every error the engine raises."""


class SchemaError(EngineError):
    """Columns, types or arities that do not fit an operator."""


class TimeError(EngineError):
    """A time of the wrong dimension, or a time or frontier that goes backwards."""


class ExpressionError(EngineError):
    """An expression that does not type-check; ``path`` names the offending node."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.path = path


class GraphError(EngineError):
    """Dataflow wiring that cannot run: mixed scopes, mismatched time dimensions."""


class IterationLimitError(EngineError):
    """An iterate scope ran more rounds than its limit without reaching a fixed point."""


class IterationStopped(EngineError):
    """An iterate stopped between two rounds because its hook asked it to
    (``LoopRegion.between_rounds``): its dataflow was given up while it still ran."""


class LimitError(EngineError):
    """An operator asked to make more rows in one step than it may (``flat_map`` over a
    range of billions): failing clearly beats exhausting the process's memory."""


class StepError(EngineError):
    """Some operators raised during ``Graph.step``; every other operator still ran.

    ``failures`` pairs each failed operator with its exception. Operators downstream of a
    failed one saw no input from it in this step, so the dataflows containing failed
    operators should be considered broken and dropped."""

    def __init__(self, failures: Sequence[tuple[object, BaseException]]) -> None:
        names = ", ".join(f"{getattr(op, 'name', op)}: {exc}" for op, exc in failures)
        super().__init__(f"{len(failures)} operator(s) failed in this step: {names}")
        self.failures = list(failures)
