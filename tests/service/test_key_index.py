"""The primary-key index against a dict: lookups after random changes, growth, tombstones,
and keys whose hashes all collide."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service import key_index
from service.key_index import KeyChanges, KeyIndex

# rows (a, b, v) keyed by (a, b); a write sets or removes each key it names once
CHANGE = st.tuples(st.integers(-3, 3), st.integers(0, 3), st.integers(-5, 5), st.booleans())
WRITES = st.lists(
    st.lists(CHANGE, max_size=12, unique_by=lambda c: (c[0], c[1])), min_size=1, max_size=25
)


def check(index: KeyIndex, model: dict[tuple[int, int], int]) -> None:
    grid = np.array([(a, b) for a in range(-3, 4) for b in range(4)], dtype=np.int64).T
    found = index.lookup(grid)
    got = {
        (int(a), int(b)): int(index.rows(found[i : i + 1])[2, 0])
        for i, (a, b) in enumerate(grid.T.tolist())
        if found[i] >= 0
    }
    assert got == model
    assert len(index) == len(model)
    for key, v in model.items():  # rows come back whole
        row = index.rows(index.lookup(np.array(key, dtype=np.int64).reshape(2, 1)))
        assert row[:, 0].tolist() == [*key, v]


def run(
    writes: list[list[tuple[int, int, int, bool]]],
    index: KeyIndex | None = None,
    model: dict[tuple[int, int], int] | None = None,
) -> None:
    index = index if index is not None else KeyIndex(3, [0, 1])
    model = model if model is not None else {}
    for write in writes:
        rows = np.array([[a, b, v] for a, b, v, _ in write], dtype=np.int64).reshape(-1, 3).T
        alive = np.array([keep for *_, keep in write], dtype=bool)
        index.apply(KeyChanges(rows, alive))
        for a, b, v, keep in write:
            if keep:
                model[(a, b)] = v
            else:
                model.pop((a, b), None)
        check(index, model)


@given(WRITES)
@settings(max_examples=150)
def test_lookups_agree_with_a_dict(writes: list[list[tuple[int, int, int, bool]]]) -> None:
    run(writes)


@given(WRITES)
@settings(max_examples=60)
def test_keys_whose_hashes_collide(writes: list[list[tuple[int, int, int, bool]]]) -> None:
    with pytest.MonkeyPatch.context() as m:  # every key in one probe chain
        m.setattr(key_index, "_hashes", lambda keys: np.full(keys.shape[1], 7, dtype=np.int64))
        run(writes)


@given(WRITES)
@settings(max_examples=100)
def test_an_index_built_of_rows_answers_as_one_they_were_applied_to(
    writes: list[list[tuple[int, int, int, bool]]],
) -> None:
    """``of_distinct`` (a load into a table with no rows), then more writes: the same
    lookups as a dict, through tombstones and rebuilds."""
    first = {(a, b): v for a, b, v, keep in writes[0] if keep}
    rows = np.array([[*key, v] for key, v in first.items()], dtype=np.int64).reshape(-1, 3).T
    index = KeyIndex.of_distinct([0, 1], rows)
    check(index, first)
    run(writes[1:], index, first)


def test_many_keys_set_and_removed_in_turns() -> None:
    """Growth, tombstones and rebuilds over many writes: a million keys in, every other out,
    half of those back with new values."""
    index = KeyIndex(2, [0])
    keys = np.arange(1_000_000, dtype=np.int64) * 7919 - 3_000_000
    for part in np.array_split(np.arange(keys.shape[0]), 7):
        index.apply(KeyChanges(np.stack([keys[part], part]), np.ones(len(part), dtype=bool)))
    odd = np.arange(1, keys.shape[0], 2)
    index.apply(KeyChanges(np.stack([keys[odd], odd]), np.zeros(len(odd), dtype=bool)))
    back = odd[::2]
    index.apply(KeyChanges(np.stack([keys[back], -back]), np.ones(len(back), dtype=bool)))
    expect = np.arange(keys.shape[0])  # each key's value, -1 where absent
    expect[odd] = -1
    expect[back] = -back
    found = index.lookup(keys.reshape(1, -1))
    got = np.full(keys.shape[0], -1, dtype=np.int64)
    got[found >= 0] = index.rows(found[found >= 0])[1]
    assert np.array_equal(got, expect) and (found[back] >= 0).all()
    assert len(index) == keys.shape[0] - len(odd) + len(back)
    assert index.lookup(np.array([[5]], dtype=np.int64)).tolist() == [-1]


def test_churn_of_new_keys_keeps_finding_absent_ones() -> None:
    """Few live keys, ever new ones: the slots deleted keys leave are reclaimed (a table
    full of them would make a probe for an absent key go round for ever)."""
    index = KeyIndex(1, [0])
    for w in range(300):
        new = np.arange(50 * w, 50 * w + 50, dtype=np.int64).reshape(1, -1)
        index.apply(KeyChanges(new, np.ones(50, dtype=bool)))
        if w:
            index.apply(KeyChanges(new - 50, np.zeros(50, dtype=bool)))
        assert len(index) == 50
        assert (index.lookup(new) >= 0).all() and (index.lookup(new - 50) < 0).all() if w else True
    assert len(index.table) <= 1024
