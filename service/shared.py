"""Shared arrangements: one arrangement per (source, key columns), read by every view that
arranges that source by those columns at the top level of its plan (a join on them, a
reduction by them). It holds the source's content as the source keeps it. An entry lives
while some view uses it; its history reader keeps its content queryable at complete times,
so a view registered later hydrates from it at once."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine import Arrangement, Collection, TraceReader
from engine.operators import Operator

__all__ = ["SharedArrangement", "SharedArrangements"]


@dataclass(eq=False)
class SharedArrangement:
    source: str
    keys: tuple[str, ...]
    arrangement: Arrangement
    history: TraceReader
    ops: list[Operator]
    users: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return f"{self.source} by [{', '.join(self.keys)}]"


class SharedArrangements:
    def __init__(self) -> None:
        self.entries: dict[tuple[str, tuple[str, ...]], SharedArrangement] = {}

    def get(self, source: str, keys: list[str]) -> SharedArrangement | None:
        return self.entries.get((source, tuple(keys)))

    def create(self, source: str, keys: list[str], collection: Collection) -> SharedArrangement:
        arr = collection.arrange_by_key(keys, name=f"{source} by [{', '.join(keys)}]")
        entry = SharedArrangement(
            source,
            tuple(keys),
            arr,
            arr.op.spine.reader(name="history"),
            [collection.op, arr.op],
        )
        self.entries[(source, tuple(keys))] = entry
        return entry

    def release(self, view: str) -> list[SharedArrangement]:
        """Drop ``view`` from every entry; returns (and forgets) entries nobody uses now."""
        gone = []
        for key, e in list(self.entries.items()):
            e.users.discard(view)
            if not e.users:
                gone.append(e)
                del self.entries[key]
        return gone

    def used_by(self, view: str) -> list[SharedArrangement]:
        return [e for e in self.entries.values() if view in e.users]
