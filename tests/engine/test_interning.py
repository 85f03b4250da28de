"""String interning: ids unique and stable, strings recoverable, safe across threads."""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.interning import StringInterner


def test_interning_is_consistent_across_threads() -> None:
    it = StringInterner()
    words = [f"w{i}" for i in range(5000)]
    got: dict[int, list[int]] = {}

    def work(k: int) -> None:
        got[k] = it.intern_many(iter(words[k::3] + words)).tolist()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = it.intern_many(words).tolist()
    assert len(set(ids)) == len(words) == len(it)
    for k, r in got.items():
        assert r == [ids[int(w[1:])] for w in words[k::3] + words]
    assert [it.lookup(i) for i in ids] == words


def test_ranks_order_by_text() -> None:
    it = StringInterner()
    ids = it.intern_many(["pear", "apple", "fig", "apple"])
    assert ids[1] == ids[3]
    assert it.ranks(ids).tolist() == [2, 0, 1, 0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet="ab\0\x7f\xe9\uffff\U0001f600", max_size=6), max_size=40),
    st.integers(0, 3000),
)
@example(["a\0", "a", "\0\0", ""], 1100)
def test_ranks_follow_python_string_order(words: list[str], filler: int) -> None:
    """Over 1,024 distinct strings numpy sorts them, unless a NUL (which its fixed-width
    text pads with) would make two strings compare equal: code-point order either way."""
    it = StringInterner()
    texts = words + [f"f{i:05d}" for i in range(filler)]
    ranks = it.ranks(it.intern_many(texts)).tolist()
    order = sorted(set(texts))
    rank_of = {w: r for r, w in enumerate(order)}
    assert ranks == [rank_of[w] for w in texts]


def test_text_hashes_hash_each_id_once() -> None:
    it = StringInterner()
    calls: list[list[str]] = []

    def hash_many(strings: list[str]) -> np.ndarray:
        calls.append(list(strings))
        return np.asarray([len(s) * 1000 + ord(s[0]) for s in strings], dtype=np.int64)

    def expect(words: list[str]) -> list[int]:
        return [len(s) * 1000 + ord(s[0]) for s in words]

    first = ["pear", "apple", "pear", "fig"]
    assert it.text_hashes(it.intern_many(first), hash_many).tolist() == expect(first)
    assert sorted(calls[0]) == ["apple", "fig", "pear"]
    # a later call hashes only the ids it has not seen, across the arrays' growth
    more = [f"w{i}" for i in range(100)] + ["fig", "apple"]
    assert it.text_hashes(it.intern_many(more), hash_many).tolist() == expect(more)
    assert sorted(calls[1]) == sorted(f"w{i}" for i in range(100))
    assert it.text_hashes(it.intern_many(first), hash_many).tolist() == expect(first)
    assert len(calls) == 2
    assert it.text_hashes(np.zeros(0, dtype=np.int64), hash_many).tolist() == []
