"""top_k orders by each type's own order, both ways, to the ends of int64."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Graph

INTS = st.sampled_from([-(2**63), -(2**63) + 1, -1, 0, 1, 2**63 - 2, 2**63 - 1])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), INTS), min_size=1, max_size=12),
    st.booleans(),
    st.integers(1, 3),
)
def test_top_k_of_ints_to_the_ends_of_int64(
    rows: list[tuple[int, int]], desc: bool, k: int
) -> None:
    g = Graph()
    h, c = g.new_input([("g", "int"), ("v", "int")], name="t")
    out = c.top_k(["g"], [("v", desc)], k).capture()
    data = np.array(rows, dtype=np.int64).T
    h.send_columns([data[0], data[1]], 0, 1)
    h.advance_to(1)
    g.step()
    got = out.drain()
    taken = sorted(zip(got.data[0].tolist(), got.data[1].tolist(), got.diffs.tolist(), strict=True))
    expect = []
    for group in sorted({r[0] for r in rows}):
        values = sorted((v for gr, v in rows if gr == group), reverse=desc)[:k]
        expect += [(group, v, values.count(v)) for v in sorted(set(values))]
    assert taken == expect
