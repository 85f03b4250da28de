"""String interning: ids unique and stable, strings recoverable, safe across threads."""

from __future__ import annotations

import threading

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
