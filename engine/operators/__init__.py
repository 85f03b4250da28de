"""Operators, one family per module; each stateful one is a driver over pure numpy kernels."""

from engine.operators.arrange import Arrange, AsCollection
from engine.operators.base import Arranged, ArrangementReader, Operator, Scope
from engine.operators.capture import Capture
from engine.operators.input import ArrangedAhead, InputHandle, InputOp
from engine.operators.iterate import Enter, Leave, LoopRegion, Variable
from engine.operators.join import Join
from engine.operators.linear import Concat, Consolidate, Filter, FlatMap, Map, Negate
from engine.operators.reduce import Reduce

__all__ = [
    "Arrange",
    "Arranged",
    "ArrangedAhead",
    "ArrangementReader",
    "AsCollection",
    "Capture",
    "Concat",
    "Consolidate",
    "Enter",
    "Filter",
    "FlatMap",
    "InputHandle",
    "InputOp",
    "Join",
    "Leave",
    "LoopRegion",
    "Map",
    "Negate",
    "Operator",
    "Reduce",
    "Scope",
    "Variable",
]
