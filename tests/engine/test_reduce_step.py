"""The one-call reduce steps' shared kernels against plain Python: the walk that splits
the input delta and the pending triples into new and waiting times, the merge that makes
the next pending set, and where a split step cuts.

Keys are pairs whose codes collide on purpose (the code is their sum mod 3), so trace
order (code, then key columns) is tested where codes tie; with ``exact`` the code is the
key and decides alone."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from engine.lattice import Antichain
from engine.operators.reduce_step import _halves, joined, merge_pending, walk_new_times

KEYS = [(a, b) for a in range(3) for b in range(3)]


def _code(key: tuple[int, int], exact: bool) -> int:
    return key[0] * 3 + key[1] if exact else (key[0] + key[1]) % 3


def _order(key: tuple[int, int], exact: bool) -> tuple:
    return (_code(key, exact), *key)


def _triples(keys: list, times: list, exact: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, keys, times) arrays of (key, time) triples, kept in the order given."""
    return (
        np.array([_code(k, exact) for k in keys], dtype=np.int64),
        np.array(keys, dtype=np.int64).reshape(-1, 2).T.copy(),
        np.array(times, dtype=np.int64).reshape(-1, 2).T.copy(),
    )


time_ = st.tuples(st.integers(0, 4), st.integers(0, 4))
history = st.dictionaries(st.sampled_from(KEYS), st.sets(time_, min_size=1, max_size=4), max_size=6)
frontier = st.lists(time_, max_size=3)


@given(history, history, frontier, st.booleans(), st.booleans())
def test_walk_splits_delta_and_pending_into_new_and_waiting_times(
    delta: dict, pending: dict, elems: list, exact: bool, take_early: bool
) -> None:
    """With ``early`` (an element ``(0, r + 1)``, a loop round's), a delta record waiting
    for that element alone is a new time at ``(t0, r)``; pending triples wait as ever."""
    f = Antichain(elems, 2)  # empty: closed, every time complete
    bumps = [e for e in f.elements.tolist() if e[0] == 0 and e[1] >= 1]
    early = bumps[0][1] - 1 if take_early and bumps else -1
    keys = sorted(delta, key=lambda k: _order(k, exact))
    d_codes, d_keys, _ = _triples(keys, [(0, 0)] * len(keys), exact)
    d_offsets = np.cumsum([0] + [len(delta[k]) for k in keys]).astype(np.int64)
    d_times = _triples([], [t for k in keys for t in sorted(delta[k])], exact)[2]
    p_list = sorted(
        ((k, t) for k in pending for t in pending[k]), key=lambda x: (_order(x[0], exact), x[1])
    )
    p_codes, p_keys, p_times = _triples([k for k, _ in p_list], [t for _, t in p_list], exact)
    owner, n_times, k_codes, k_keys, w_codes, w_keys, w_times, nw = walk_new_times(
        d_codes, d_keys, d_offsets, d_times, p_codes, p_keys, p_times, f.elements, exact, early
    )
    others = Antichain([e for e in f.elements.tolist() if early < 0 or e != [0, early + 1]], 2)

    def ready_as(x: tuple, from_delta: bool) -> tuple | None:
        if not f.less_equal_time(np.array(x[1])):
            return x
        if from_delta and early >= 0 and not others.less_equal_time(np.array(x[1])):
            return (x[0], (x[1][0], early))  # a later round's input, taken now
        return None

    every = [(k, t, True) for k in keys for t in sorted(delta[k])]
    every += [(k, t, False) for k, t in p_list]
    ready = [y for k, t, dl in every if (y := ready_as((k, t), dl)) is not None]
    waiting = [(k, t) for k, t, dl in every if ready_as((k, t), dl) is None]
    # keys with new times: distinct, in trace order; each new time with its key
    expected_keys = sorted({k for k, _ in ready}, key=lambda k: _order(k, exact))
    assert [tuple(map(int, k_keys[:, i])) for i in range(k_codes.shape[0])] == expected_keys
    assert [int(c) for c in k_codes] == [_code(k, exact) for k in expected_keys]
    assert list(owner) == sorted(owner)
    got = sorted((expected_keys[o], tuple(map(int, n_times[:, i]))) for i, o in enumerate(owner))
    assert got == sorted(ready)
    # the waiting ones, in trace order (key, then time)
    got_w = [(tuple(map(int, w_keys[:, i])), tuple(map(int, w_times[:, i]))) for i in range(nw)]
    assert [int(c) for c in w_codes[:nw]] == [_code(k, exact) for k, _ in got_w]
    assert got_w == sorted(waiting, key=lambda x: (_order(x[0], exact), x[1]))


@given(
    st.lists(st.tuples(st.sampled_from(KEYS), time_), max_size=12),
    st.lists(st.tuples(st.sampled_from(KEYS), time_), max_size=12),
    st.booleans(),
)
def test_merge_pending_is_the_distinct_union_in_trace_order(
    waiting: list, new: list, exact: bool
) -> None:
    def trace(x: tuple) -> tuple:
        return (_order(x[0], exact), x[1])

    waiting = sorted(waiting, key=trace)  # repeats allowed, as the walk may leave them
    w_codes, w_keys, w_times = _triples([k for k, _ in waiting], [t for _, t in waiting], exact)
    spare = 3  # the walk's arrays are longer than the triples they hold
    w_codes = np.concatenate([w_codes, np.full(spare, -1, np.int64)])
    w_keys = np.concatenate([w_keys, np.full((2, spare), -1, np.int64)], axis=1)
    w_times = np.concatenate([w_times, np.full((2, spare), -1, np.int64)], axis=1)
    # the step's new pending: per key (owner into the step's keys), then time, distinct
    new = sorted(set(new), key=trace)
    step_keys = sorted({k for k, _ in new}, key=lambda k: _order(k, exact))
    k_codes, k_keys, _ = _triples(step_keys, [(0, 0)] * len(step_keys), exact)
    g_owner = np.array([step_keys.index(k) for k, _ in new], dtype=np.int64)
    g_times = _triples([], [t for _, t in new], exact)[2]
    codes, keys, times = merge_pending(
        w_codes, w_keys, w_times, len(waiting), g_owner, g_times, k_codes, k_keys, exact
    )
    got = [(tuple(map(int, keys[:, i])), tuple(map(int, times[:, i]))) for i in range(len(codes))]
    assert got == sorted(set(waiting) | set(new), key=trace)
    assert [int(c) for c in codes] == [_code(k, exact) for k, _ in got]


@given(
    st.lists(st.integers(0, 30), max_size=40),
    st.lists(st.integers(0, 30), max_size=40),
    st.integers(0, 40),
    st.booleans(),
)
@example(delta=[], pending=list(range(8)), at=2, two=True)  # 2 against 6: kept
@example(delta=[], pending=list(range(9)), at=2, two=True)  # 2 against 7: cut again
def test_a_split_step_cuts_between_codes_and_keeps_balanced_parts(
    delta: list, pending: list, at: int, two: bool
) -> None:
    """The halves hold every delta key and pending triple, each code on one side; two pending
    parts (a previous split's) are kept as they are while the halves stay within 3:1, else
    the cut is made afresh."""
    d_codes = np.array(sorted(set(delta)), dtype=np.int64)
    p_codes = np.array(sorted(pending), dtype=np.int64)
    p = (p_codes, np.stack([p_codes, p_codes + 1]), np.stack([p_codes * 0, p_codes % 4]))
    j = min(at, len(pending))
    while two and 0 < j < len(pending) and p_codes[j - 1] == p_codes[j]:
        j += 1  # a previous split never parts one code
    parts = [
        tuple(np.ascontiguousarray(x[..., lo:hi]) for x in p) for lo, hi in [(0, j), (j, None)]
    ]
    if not two or not (0 < j < len(pending)):
        parts = [p]
    cut = _halves(d_codes, parts)
    if cut is None:
        assert len(set(delta) | set(pending)) < 2
        return
    i, a, b = cut
    both = joined([a, b])
    for x, y in zip(both, p, strict=True):
        assert np.array_equal(x, y)
    left = set(d_codes[:i].tolist()) | set(a[0].tolist())
    right = set(d_codes[i:].tolist()) | set(b[0].tolist())
    assert left and right and max(left) < min(right)
    if len(parts) == 2:
        i0 = int(np.searchsorted(d_codes, parts[1][0][0]))
        na, nb = i0 + len(parts[0][0]), len(d_codes) - i0 + len(parts[1][0])
        kept = a is parts[0] and b is parts[1]
        assert kept == (3 * min(na, nb) >= max(na, nb))  # kept while balanced, else cut again
    for x in (*a, *b):
        assert x.flags.c_contiguous
