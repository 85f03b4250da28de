"""Immutable arranged batches: updates sorted by (key, value, time) with a key index.

A :class:`TraceBatch` is the trie of seed 000 in columns: ``codes``/``keys`` hold each
distinct key once (sorted by code, then key columns), ``offsets`` delimit each key's
records, and ``vals``/``times``/``diffs`` hold the records sorted by (key, value, time).
Invariant: records are consolidated (no two share key, value and time; no zero diffs) and
every key has at least one record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine import parallel
from engine.batch import UpdateBatch
from engine.hashing import key_codes
from engine.lattice import Antichain, advance_by
from engine.sort_kernels import (
    PACKED_FROM,
    arrange_rows,
    consolidate_hashed,
    consolidate_rows_order,
    trace_arrays,
)
from engine.trace.layout import Layout
from engine.trace.merge import (
    joined_halves,
    merge_into,
    merge_outputs,
    merge_table,
    merge_whole,
    range_size,
)
from engine.trace.packed_arrange import packed_arrange
from engine.trace.seek import RADIX_FROM, radix_index, table_row

__all__ = ["MERGE_SPLIT_FROM", "TraceBatch"]

_NO_RADIX = np.zeros(0, dtype=np.int64)
# records from which a merge splits in two by key range: the merges of 4 batches at 1k/2k,
# batch 1,000 (116, replayed) took 13.5 ms a batch from 2**15 records, 12.9 from 2**13 or
# 2**14, 13.0 from 2**12
MERGE_SPLIT_FROM = 1 << 13


# Immutable by convention, not frozen: a frozen dataclass's constructor sets each field through
# ``object.__setattr__`` (1.3 µs for these eight), and a single update builds about 30 batches.
@dataclass(slots=True, eq=False)
class TraceBatch:
    codes: np.ndarray
    keys: np.ndarray
    offsets: np.ndarray
    vals: np.ndarray
    times: np.ndarray
    diffs: np.ndarray
    table_row: np.ndarray | None = field(default=None, compare=False, repr=False)
    radix: np.ndarray | None = field(default=None, compare=False, repr=False)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def empty(cls, layout: Layout, dims: int) -> TraceBatch:
        z = np.zeros(0, dtype=np.int64)
        return cls(
            z,
            np.zeros((len(layout.key_cols), 0), dtype=np.int64),
            np.zeros(1, dtype=np.int64),
            np.zeros((len(layout.val_cols), 0), dtype=np.int64),
            np.zeros((dims, 0), dtype=np.int64),
            z,
        )

    @classmethod
    def from_updates(
        cls, layout: Layout, batch: UpdateBatch, since: Antichain | None = None
    ) -> TraceBatch:
        if since is None and 0 < len(batch) < PACKED_FROM:  # few rows: one compiled call
            codes, keys, offsets, vals, times, diffs, row = arrange_rows(
                np.ascontiguousarray(batch.data),
                layout.key_index,
                layout.val_index,
                np.ascontiguousarray(batch.times),
                np.ascontiguousarray(batch.diffs),
                layout.exact_codes,
            )
            # the kernel's seek row of the arrays it returned (empty: addresses() builds it)
            return cls(codes, keys, offsets, vals, times, diffs, row if row.shape[0] else None)
        keys, vals = layout.split(batch.data)
        return cls.from_records(
            layout, key_codes(keys), keys, vals, batch.times, batch.diffs, since
        )

    @classmethod
    def from_records(
        cls,
        layout: Layout,
        codes: np.ndarray,
        keys: np.ndarray,
        vals: np.ndarray,
        times: np.ndarray,
        diffs: np.ndarray,
        since: Antichain | None = None,
    ) -> TraceBatch:
        """Sort, advance times by ``since``, consolidate, and index records by key: by one
        packed sort (``packed_arrange``) where values and times allow, else by the general
        sorts."""
        n = diffs.shape[0]
        if n == 0:
            return cls.empty(layout, times.shape[0])
        if since is not None:
            times = advance_by(times, since)
        codes, keys = np.ascontiguousarray(codes), np.ascontiguousarray(keys)
        vals, times = np.ascontiguousarray(vals), np.ascontiguousarray(times)
        if n >= PACKED_FROM:
            packed = packed_arrange(
                codes, keys, vals, times, np.ascontiguousarray(diffs), layout.exact_codes
            )
            if packed is not None:
                return cls(*packed)
        if layout.exact_codes:
            first, sums = consolidate_rows_order([codes, *vals, *times], diffs)
        else:
            first, sums = consolidate_hashed(codes, keys, [*vals, *times], diffs)
        arrays = trace_arrays(first, codes, keys, vals, times, layout.exact_codes)
        return cls(*arrays, sums)

    @classmethod
    def merge(cls, layout: Layout, parts: list[TraceBatch], since: Antichain | None) -> TraceBatch:
        """One batch holding all of ``parts``, compacted to ``since``."""
        dims = parts[0].dims if parts else 1
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty(layout, dims)
        if len(parts) == 1 and since is None:
            return parts[0]
        return cls.merge_rows(layout, np.array([p.addresses() for p in parts]), since, parts)

    @classmethod
    def merge_rows(
        cls,
        layout: Layout,
        table: np.ndarray,
        since: Antichain | None,
        parts: list[TraceBatch],
        split: bool = True,
    ) -> TraceBatch:
        """``parts`` (non-empty batches, their seek-table rows ``table``, from
        ``addresses``) merged into one, compacted to ``since``; the caller keeps them alive
        meanwhile. A big merge (``MERGE_SPLIT_FROM`` records) runs as two key ranges at
        once, on two threads (``engine.parallel``; keys merge independently), unless
        ``split`` is False."""
        kk, kv = len(layout.key_cols), len(layout.val_cols)
        dims = parts[0].dims
        s = since.elements if since is not None else np.zeros((0, dims), dtype=np.int64)
        exact = layout.exact_codes
        cut = None
        if split and parallel.threads() > 1 and int(table[:, 7].sum()) >= MERGE_SPLIT_FROM:
            cut = parallel.middle_cut([p.codes for p in parts])
        if cut is None:
            codes, keys, offsets, vals, times, diffs, row = merge_whole(table, kk, kv, s, exact)
            return cls(codes, keys, offsets, vals, times, diffs, row if row.shape[0] else None)
        first, last = np.zeros(len(parts), np.int64), table[:, 6].copy()
        out = merge_outputs(table, first, last, kk, kv, dims)
        nk_a, n_a = range_size(table, first, cut, kk, kv, dims)
        (u_a, w_a), (u_b, w_b) = parallel.both(
            lambda: merge_into(table, first, cut, kk, kv, s, exact, out, 0, 0),
            lambda: merge_into(table, cut, last, kk, kv, s, exact, out, nk_a, n_a),
        )
        return cls(*joined_halves(out, nk_a, n_a, u_a, w_a, u_b, w_b))

    @classmethod
    def merge_keys(
        cls,
        layout: Layout,
        parts: list[TraceBatch],
        lo: np.ndarray,
        hi: np.ndarray,
        since: Antichain | None,
    ) -> TraceBatch:
        """The records of keys ``lo[i]:hi[i]`` of each part ``i``, merged into one batch and
        compacted to ``since`` (one key range of a merge under way)."""
        dims = parts[0].dims
        codes, keys, offsets, vals, times, diffs = merge_table(
            np.array([p.addresses() for p in parts]),
            lo,
            hi,
            len(layout.key_cols),
            len(layout.val_cols),
            since.elements if since is not None else np.zeros((0, dims), dtype=np.int64),
            layout.exact_codes,
        )
        return cls(codes, keys, offsets, vals, times, diffs)

    @classmethod
    def concat_keys(cls, layout: Layout, parts: list[TraceBatch], dims: int) -> TraceBatch:
        """One batch from batches whose keys follow each other in trace order (the key
        ranges of a merge, in order)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty(layout, dims)
        if len(parts) == 1:
            return parts[0]
        starts = np.cumsum([0] + [len(p) for p in parts[:-1]])
        offsets = np.concatenate(
            [p.offsets[:-1] + s for p, s in zip(parts, starts, strict=True)]
            + [np.array([starts[-1] + len(parts[-1])], dtype=np.int64)]
        )
        return cls(
            np.concatenate([p.codes for p in parts]),
            np.concatenate([p.keys for p in parts], axis=1),
            offsets,
            np.concatenate([p.vals for p in parts], axis=1),
            np.concatenate([p.times for p in parts], axis=1),
            np.concatenate([p.diffs for p in parts]),
        )

    # -- access -------------------------------------------------------------------------
    def addresses(self) -> np.ndarray:
        """This batch's row of a compiled seek table (``trace.seek.gather_spine``): the
        addresses of its six arrays, its number of keys and of records, and its radix index
        (``trace.seek.radix_index``, for big batches). Computed once: the
        batch is immutable, and its arrays live as long as it does."""
        if self.table_row is None:
            radix, shift = radix_index(self.codes) if self.nkeys >= RADIX_FROM else (_NO_RADIX, 0)
            try:
                arrays = (self.codes, self.keys, self.offsets, self.vals, self.times, self.diffs)
                row = table_row(*arrays, radix, shift)
            except TypeError:
                raise ValueError("trace batch arrays must be C-contiguous int64") from None
            self.radix = radix  # kept alive with the batch
            self.table_row = row
        return self.table_row

    def __len__(self) -> int:
        return self.diffs.shape[0]

    @property
    def nkeys(self) -> int:
        return self.codes.shape[0]

    @property
    def dims(self) -> int:
        return self.times.shape[0]

    def record_keys(self) -> np.ndarray:
        """Key index (into ``codes``/``keys``) of every record."""
        return np.repeat(np.arange(self.nkeys, dtype=np.int64), np.diff(self.offsets))

    def to_updates(self, layout: Layout) -> UpdateBatch:
        rk = self.record_keys()
        data = layout.assemble(np.take(self.keys, rk, axis=1), self.vals)
        return UpdateBatch(data, self.times, self.diffs, consolidated=True)

    def nbytes(self) -> int:
        return int(
            self.codes.nbytes
            + self.keys.nbytes
            + self.offsets.nbytes
            + self.vals.nbytes
            + self.times.nbytes
            + self.diffs.nbytes
        )
