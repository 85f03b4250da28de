"""The rows of a table with a primary key, by key, in numpy arrays.

An open-addressing hash table (linear probing) whose slots hold row numbers into a columnar
store of the rows, each stored row once (its key columns among its columns). Lookups and
changes take whole arrays of keys in one compiled call each: a write of a million keyed rows
makes no Python object per row, and a stored row costs its columns plus about 40 bytes (the
dict of tuples this replaces held about 200 bytes a row of two columns, and built two tuples
per row of every write).

A load builds the index the table will have after its write off the engine thread
(:meth:`KeyIndex.of_distinct`): the engine only swaps it in.

Deleted slots stay as tombstones (probes go on past them; an insert may reuse one) until a
rebuild, which packs the store, when the store is full. Every used or deleted slot names a
row written to the store, and the table has at least twice as many slots as the store has
room for rows, so it is never more than half full: a probe always reaches an empty slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from engine.hashing import key_codes, mix64

__all__ = ["KeyChanges", "KeyIndex"]

_EMPTY = -1
_GONE = -2  # a deleted slot


@dataclass(frozen=True)
class KeyChanges:
    """What a write leaves under each key it touched, each key once, in the table's storage
    form: ``rows`` ``(ncols, m)``, and ``alive[i]`` whether row ``i`` is stored after the
    write (else its key is absent, and only its key columns matter)."""

    rows: np.ndarray
    alive: np.ndarray

    def __len__(self) -> int:
        return int(self.alive.shape[0])


def _hashes(keys: np.ndarray) -> np.ndarray:
    """One mixed 64-bit hash per key (column) of a ``(kk, n)`` block: equal keys, equal hashes."""
    return mix64(key_codes(keys).view(np.uint64)).view(np.int64)


class KeyIndex:
    """Rows by primary key: ``lookup`` finds row numbers, ``rows`` reads them, ``apply``
    stores a write's :class:`KeyChanges`."""

    def __init__(self, ncols: int, key_cols: Sequence[int]) -> None:
        self.key_cols = np.asarray(key_cols, dtype=np.int64)
        self.store = np.zeros((ncols, 0), dtype=np.int64)  # rows; columns past ``used`` unset
        self.hashes = np.zeros(0, dtype=np.int64)  # each stored row's hash
        self.table = np.full(8, _EMPTY, dtype=np.int64)
        self.used = 0  # rows written to the store (deleted ones included)
        self.live = 0  # keys present

    def __len__(self) -> int:
        return self.live

    @classmethod
    def of_distinct(cls, key_cols: Sequence[int], rows: np.ndarray) -> KeyIndex:
        """An index holding ``rows`` (``(ncols, n)``, each key once), as one applied to an
        empty index holds them."""
        index = cls(rows.shape[0], key_cols)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        index._pack(rows, _hashes(rows[index.key_cols]), rows.shape[1])
        return index

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The row number stored under each key of a ``(kk, n)`` block, -1 where absent."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        out = np.empty(keys.shape[1], dtype=np.int64)
        if keys.shape[1]:
            _find(self.table, self.hashes, self.store, self.key_cols, _hashes(keys), keys, out)
        return out

    def rows(self, found: np.ndarray) -> np.ndarray:
        """The stored rows (``(ncols, n)``) at row numbers from :meth:`lookup` (all present)."""
        return np.take(self.store, found, axis=1)

    def apply(self, changes: KeyChanges) -> None:
        """Store each alive row under its key (replacing what was there) and remove the keys
        of the others."""
        m = len(changes)
        if m == 0:
            return
        rows = np.ascontiguousarray(changes.rows, dtype=np.int64)
        if self.used + m > self.store.shape[1]:
            self._rebuild(self.live + m)
        alive = np.ascontiguousarray(changes.alive, dtype=np.bool_)
        hashes = _hashes(rows[self.key_cols])
        self.used, self.live = _apply(
            self.table, self.hashes, self.store, self.key_cols, hashes, rows, alive,
            self.used, self.live,
        )  # fmt: skip

    def _rebuild(self, need: int) -> None:
        """Room for ``need`` keys: the live rows packed into a store of twice that, in a
        table of at least twice as many slots."""
        live = self.table[self.table >= 0]
        self._pack(self.store[:, live], self.hashes[live], need)

    def _pack(self, rows: np.ndarray, hashes: np.ndarray, need: int) -> None:
        """``rows`` (distinct keys) and their ``hashes`` alone in the index, with room for
        ``need`` keys."""
        n = rows.shape[1]
        size = max(16, 2 * need)
        self.store = np.zeros((rows.shape[0], size), dtype=np.int64)
        self.store[:, :n] = rows
        self.hashes = np.zeros(size, dtype=np.int64)
        self.hashes[:n] = hashes
        slots = 1 << (2 * size - 1).bit_length()
        self.table = np.full(slots, _EMPTY, dtype=np.int64)
        _place(self.table, self.hashes, n)
        self.used = self.live = n


@njit(cache=True, nogil=True)
def _find(
    table: np.ndarray,
    hashes: np.ndarray,
    store: np.ndarray,
    key_cols: np.ndarray,
    q_hashes: np.ndarray,
    q_keys: np.ndarray,
    out: np.ndarray,
) -> None:
    mask = table.shape[0] - 1
    kk = key_cols.shape[0]
    for i in range(q_hashes.shape[0]):
        h = q_hashes[i]
        s = h & mask
        out[i] = -1
        while True:
            row = table[s]
            if row == _EMPTY:
                break
            if row >= 0 and hashes[row] == h:
                same = True
                for c in range(kk):
                    if store[key_cols[c], row] != q_keys[c, i]:
                        same = False
                        break
                if same:
                    out[i] = row
                    break
            s = (s + 1) & mask


@njit(cache=True, nogil=True)
def _apply(
    table: np.ndarray,
    hashes: np.ndarray,
    store: np.ndarray,
    key_cols: np.ndarray,
    c_hashes: np.ndarray,
    rows: np.ndarray,
    alive: np.ndarray,
    used: int,
    live: int,
) -> tuple[int, int]:
    mask = table.shape[0] - 1
    kk, ncols = key_cols.shape[0], rows.shape[0]
    for i in range(c_hashes.shape[0]):
        h = c_hashes[i]
        s = h & mask
        free, found = -1, -1
        while True:
            row = table[s]
            if row == _EMPTY:
                break
            if row == _GONE:
                if free < 0:
                    free = s
            elif hashes[row] == h:
                same = True
                for c in range(kk):
                    if store[key_cols[c], row] != rows[key_cols[c], i]:
                        same = False
                        break
                if same:
                    found = s
                    break
            s = (s + 1) & mask
        if found >= 0:
            if alive[i]:
                row = table[found]
                for c in range(ncols):
                    store[c, row] = rows[c, i]
            else:
                table[found] = _GONE
                live -= 1
        elif alive[i]:
            if free >= 0:
                s = free
            table[s] = used
            hashes[used] = h
            for c in range(ncols):
                store[c, used] = rows[c, i]
            used += 1
            live += 1
    return used, live


@njit(cache=True, nogil=True)
def _place(table: np.ndarray, hashes: np.ndarray, n: int) -> None:
    """Rows ``0..n-1`` (distinct keys) into an empty table."""
    mask = table.shape[0] - 1
    for row in range(n):
        s = hashes[row] & mask
        while table[s] != _EMPTY:
            s = (s + 1) & mask
        table[s] = row
