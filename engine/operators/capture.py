"""Capture: records what a collection emits, run by run (inspection and outputs)."""

from __future__ import annotations

from engine.batch import UpdateBatch
from engine.consolidate import consolidate
from engine.lattice import Antichain
from engine.operators.base import Operator, Scope

__all__ = ["Capture"]


class Capture(Operator):
    """Keeps every non-empty output batch of its input until ``drain()``."""

    name = "capture"

    def __init__(self, scope: Scope, input: Operator) -> None:
        super().__init__(scope, [input], input.schema)
        self.batches: list[UpdateBatch] = []

    def run(self) -> None:
        batch = self.inputs[0].output
        self.frontier = self.input_frontier()
        self.output = None
        if batch is not None and len(batch):
            self.batches.append(batch)

    def drain(self) -> UpdateBatch:
        """Everything captured since the last drain, consolidated."""
        out = consolidate(UpdateBatch.concat(self.batches, self.ncols, self.dims))
        self.batches = []
        return out

    @property
    def upper(self) -> Antichain:
        """Outputs at times not at or beyond this frontier are final."""
        return self.frontier
