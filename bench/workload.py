"""The sliding-window reachability workload (seed 000), defined exactly so that figures
compare with other systems.

With ``N`` nodes, ``M`` edges and seed ``s``:

* roots: ``sorted(Generator(PCG64([s, 0])).choice(N, size=10, replace=False))``;
* initial edges, eids ``0..M-1``: ``Generator(PCG64([s, 1])).integers(0, N, size=(M, 2))``
  (columns src, dst);
* update edges come in blocks of 65,536: block ``b`` is
  ``Generator(PCG64([s, 2 + b])).integers(0, N, size=(65536, 2))``; the edge inserted by
  update ``k`` (eid ``M + k``) is row ``k mod 65536`` of block ``k // 65536``;
* update ``k`` removes eid ``k`` and inserts eid ``M + k`` at logical time ``k + 1`` (the
  initial load is time 0). Duplicate edges and self-loops are distinct edges: the graph is a
  multiset, and removing eid ``k`` retracts one copy of its ``(src, dst)``.

So after ``u`` updates the graph is exactly the edges with eids ``u .. u + M - 1``
(:meth:`Workload.window`).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

__all__ = ["BLOCK", "NUM_ROOTS", "Workload"]

BLOCK = 65_536
NUM_ROOTS = 10


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64([seed, stream]))


class Workload:
    """Roots and edges of the workload; edges are ``(n, 2)`` int64 arrays (src, dst)."""

    def __init__(self, nodes: int, edges: int, seed: int = 0, cache_blocks: int = 8) -> None:
        if nodes < NUM_ROOTS:
            raise ValueError(f"need at least {NUM_ROOTS} nodes, got {nodes}")
        if edges < 1:
            raise ValueError(f"need at least one edge, got {edges}")
        self.nodes = int(nodes)
        self.edges = int(edges)
        self.seed = int(seed)
        self.cache_blocks = max(1, int(cache_blocks))
        self._blocks: OrderedDict[int, np.ndarray] = OrderedDict()
        self._roots: np.ndarray | None = None
        self._initial: np.ndarray | None = None

    # -- the definition -----------------------------------------------------------------
    def roots(self) -> np.ndarray:
        """The 10 root nodes, sorted ascending (int64)."""
        if self._roots is None:
            r = _rng(self.seed, 0).choice(self.nodes, size=NUM_ROOTS, replace=False)
            self._roots = np.sort(np.asarray(r, dtype=np.int64))
            self._roots.setflags(write=False)
        return self._roots

    def initial_edges(self) -> np.ndarray:
        """Edges with eids ``0 .. M-1``, shape ``(M, 2)``."""
        if self._initial is None:
            e = _rng(self.seed, 1).integers(0, self.nodes, size=(self.edges, 2), dtype=np.int64)
            e.setflags(write=False)
            self._initial = e
        return self._initial

    def block(self, b: int) -> np.ndarray:
        """Update block ``b``: the edges inserted by updates ``65536 b .. 65536 (b+1) - 1``."""
        blk = self._blocks.get(b)
        if blk is not None:
            self._blocks.move_to_end(b)
            return blk
        blk = _rng(self.seed, 2 + b).integers(0, self.nodes, size=(BLOCK, 2), dtype=np.int64)
        blk.setflags(write=False)
        self._blocks[b] = blk
        while len(self._blocks) > self.cache_blocks:
            self._blocks.popitem(last=False)
        return blk

    def update_edges(self, k0: int, k1: int) -> np.ndarray:
        """The edges inserted by updates ``k0 .. k1-1`` (eids ``M + k0 .. M + k1 - 1``)."""
        if not 0 <= k0 <= k1:
            raise ValueError(f"bad update range {k0}..{k1}")
        if k0 == k1:
            return np.zeros((0, 2), dtype=np.int64)
        b0, b1 = k0 // BLOCK, (k1 - 1) // BLOCK
        if b0 == b1:
            return self.block(b0)[k0 - b0 * BLOCK : k1 - b0 * BLOCK]
        parts = []
        for b in range(b0, b1 + 1):
            lo = max(k0, b * BLOCK) - b * BLOCK
            hi = min(k1, (b + 1) * BLOCK) - b * BLOCK
            parts.append(self.block(b)[lo:hi])
        return np.concatenate(parts)

    # -- derived ------------------------------------------------------------------------
    def edges_by_eid(self, e0: int, e1: int) -> np.ndarray:
        """Edges with eids ``e0 .. e1-1`` (initial ones below ``M``, then update edges)."""
        if not 0 <= e0 <= e1:
            raise ValueError(f"bad eid range {e0}..{e1}")
        m = self.edges
        parts = []
        if e0 < m:
            parts.append(self.initial_edges()[e0 : min(e1, m)])
        if e1 > m:
            parts.append(self.update_edges(max(e0, m) - m, e1 - m))
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return np.zeros((0, 2), dtype=np.int64)
        return np.concatenate(parts)

    def removed_edges(self, k0: int, k1: int) -> np.ndarray:
        """The edges removed by updates ``k0 .. k1-1`` (eids ``k0 .. k1-1``)."""
        return self.edges_by_eid(k0, k1)

    def window(self, updates: int) -> np.ndarray:
        """The edge multiset after ``updates`` updates: eids ``updates .. updates + M - 1``."""
        return self.edges_by_eid(updates, updates + self.edges)
