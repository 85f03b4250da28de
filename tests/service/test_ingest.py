"""The ingest path's whole-array checks agree with the value-by-value ones they stand in for:
the same storage, or the same error naming the same first bad value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import Antichain, ColumnType, Schema, StringInterner
from engine.schema import encode
from service.codec import ColumnBuilder, check_value, checked_column, count_total
from service.errors import Conflict, Invalid
from service.ingest import (
    DELETE,
    INSERT,
    UPSERT,
    WEIGHT,
    ParsedWrite,
    TableShape,
    _apply_distinct_keys,
    _apply_keys,
    parse_write,
    stage_write,
)
from service.key_index import KeyChanges, KeyIndex

ANY_VALUE = st.one_of(
    st.sampled_from([float("inf"), -float("inf"), float("nan"), 2**63, -(2**63) - 1, True, 0]),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
)
TYPED = {
    ColumnType.INT: st.integers(min_value=-(2**63), max_value=2**63 - 1),
    ColumnType.FLOAT: st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers()),
    ColumnType.BOOL: st.booleans(),
    ColumnType.STRING: st.text(max_size=3),
}


def outcome(fn: Any) -> Any:
    try:
        return ("ok", fn())
    except Invalid as exc:
        return ("error", str(exc), exc.detail, exc.code)


def encode_values(values: list, ctype: ColumnType, interner: StringInterner) -> np.ndarray:
    """Checked values as storage, the plain way."""
    if ctype is ColumnType.STRING:
        return interner.intern_many(values)
    dtype = {ColumnType.INT: np.int64, ColumnType.FLOAT: np.float64, ColumnType.BOOL: np.bool_}
    return encode(np.asarray(values, dtype=dtype[ctype]), ctype)


def value_by_value(values: list, ctype: ColumnType, interner: StringInterner) -> np.ndarray:
    for i, v in enumerate(values):
        check_value(v, ctype, f"columns.c[{i}]")
    return encode_values(values, ctype, interner)


@given(
    ctype=st.sampled_from(list(ColumnType)),
    data=st.data(),
)
def test_a_column_checked_whole_equals_value_by_value(ctype: ColumnType, data: Any) -> None:
    # mostly values of the column's own type, with now and then a stranger among them
    own = TYPED[ctype]
    values = data.draw(st.lists(st.one_of(own, own, own, ANY_VALUE), max_size=12))

    def whole_then_interned() -> np.ndarray:
        column = checked_column(values, ctype, "columns.c")
        return StringInterner().intern_many(column) if isinstance(column, list) else column

    whole = outcome(whole_then_interned)
    single = outcome(lambda: value_by_value(values, ctype, StringInterner()))
    assert whole[0] == single[0]
    if whole[0] == "ok":
        np.testing.assert_array_equal(whole[1], single[1])
    else:
        assert whole == single


MIXED = Schema.of([("a", "int"), ("x", "float"), ("b", "bool"), ("s", "string")])


def _first_wrong(row: dict, names: Sequence[str], path: str) -> str:
    """The path of a row's first column at fault: unknown (in name order), else missing
    (in the table's order)."""
    unknown = sorted(set(row) - set(names))
    return f"{path}.{unknown[0] if unknown else next(n for n in names if n not in row)}"


def rows_one_by_one(rows: list[Any], interner: StringInterner) -> np.ndarray:
    """The rows checked in order, row by row and value by value, then stored."""
    for i, row in enumerate(rows):
        path = f"updates[{i}].insert"
        if not isinstance(row, dict):
            raise Invalid("not an object", {"path": path}, "wrong_type")
        if set(row) != set(MIXED.names):
            raise Invalid(
                "wrong columns", {"path": _first_wrong(row, MIXED.names, path)}, "wrong_columns"
            )
        for name, t in zip(MIXED.names, MIXED.types, strict=True):
            check_value(row[name], t, f"{path}.{name}")
    return np.array(
        [
            encode_values([r[n] for r in rows], t, interner)
            for n, t in zip(MIXED.names, MIXED.types, strict=True)
        ],
        dtype=np.int64,
    ).reshape(len(MIXED), len(rows))


ROW = st.fixed_dictionaries(
    {
        n: st.one_of(TYPED[t], TYPED[t], TYPED[t], TYPED[t], ANY_VALUE)
        for n, t in zip(MIXED.names, MIXED.types, strict=True)
    }
)


@given(rows=st.lists(st.one_of(ROW, ROW, ROW, ROW, st.just({"a": 1}), st.just([])), max_size=8))
def test_rows_checked_by_column_equal_rows_checked_in_order(rows: list[Any]) -> None:
    interner = StringInterner()

    def by_column() -> np.ndarray:
        builder = ColumnBuilder(MIXED)
        for i, row in enumerate(rows):
            builder.add(row, f"updates[{i}].insert")
        return builder.storage(interner)

    got = outcome(by_column)
    expected = outcome(lambda: rows_one_by_one(rows, StringInterner()))
    assert got[0] == expected[0]
    if got[0] == "ok":
        np.testing.assert_array_equal(got[1], expected[1])
    else:  # the same first error (its path and kind), and no string kept
        assert (got[2], got[3]) == (expected[2], expected[3])
        assert len(interner) == 0


KEYED = TableShape("kv", Schema.of([("k", "int"), ("v", "int")]), (0,), "server", 1)
UPDATE = st.tuples(
    st.sampled_from([INSERT, DELETE, UPSERT, WEIGHT]),
    st.integers(0, 5),  # key
    st.integers(0, 2),  # value
    st.integers(-2, 2),  # the weight of a weighted update
)


def parsed_of(updates: list[tuple[int, int, int, int]]) -> ParsedWrite:
    ops = np.array([u[0] for u in updates], dtype=np.int64).reshape(-1)
    data = np.array([[u[1] for u in updates], [u[2] for u in updates]], dtype=np.int64)
    weights = np.array(
        [-1 if u[0] == DELETE else (u[3] if u[0] == WEIGHT else 1) for u in updates],
        dtype=np.int64,
    ).reshape(-1)
    return ParsedWrite(ops, data.reshape(2, len(updates)), weights, None, None)


@given(
    stored=st.dictionaries(st.integers(0, 5), st.integers(0, 2), max_size=6),
    updates=st.lists(UPDATE, min_size=1, max_size=8),
)
def test_distinct_keys_at_once_equal_update_by_update(
    stored: dict[int, int], updates: list[tuple[int, int, int, int]]
) -> None:
    def index() -> KeyIndex:
        built = KeyIndex(2, [0])
        rows = np.array([list(stored), list(stored.values())], dtype=np.int64).reshape(2, -1)
        built.apply(KeyChanges(rows, np.ones(len(stored), dtype=bool)))
        return built

    parsed = parsed_of(updates)
    times = np.arange(len(updates), dtype=np.int64).reshape(1, -1) + 10
    at_once = _apply_distinct_keys(parsed, KEYED, index(), times)
    in_order = outcome(lambda: _apply_keys(parsed, KEYED, index(), times, StringInterner()))
    distinct = len({u[1] for u in updates}) == len(updates)
    # at once applies exactly when the keys are distinct and no update is refused
    assert (at_once is not None) == (distinct and in_order[0] == "ok")
    if at_once is not None:
        data, weights, ts, changes = in_order[1]
        np.testing.assert_array_equal(at_once[0], data)
        np.testing.assert_array_equal(at_once[1], weights)
        np.testing.assert_array_equal(at_once[2], ts)
        assert changes_by_key(at_once[3]) == changes_by_key(changes)
    if in_order[0] == "ok":  # what the write leaves: the updates applied in order to a dict
        held = {k: (k, v) for k, v in stored.items()}
        for op, k, v, w in updates:
            if op == UPSERT or (op == INSERT or (op == WEIGHT and w == 1)):
                held[k] = (k, v)
            elif op == DELETE or (op == WEIGHT and w == -1):
                del held[k]
        after = index()
        after.apply(in_order[1][3])
        found = after.lookup(np.arange(6, dtype=np.int64).reshape(1, -1))
        assert {
            k: tuple(after.rows(found[k : k + 1])[:, 0].tolist()) for k in range(6) if found[k] >= 0
        } == held
        assert len(after) == len(held)


def changes_by_key(changes: KeyChanges) -> dict[int, tuple[int, ...] | None]:
    return {
        int(row[0]): tuple(row) if alive else None
        for row, alive in zip(changes.rows.T.tolist(), changes.alive.tolist(), strict=True)
    }


def test_a_bulk_write_with_a_bad_value_deep_inside_names_it() -> None:
    shape = TableShape("t", Schema.of([("a", "int"), ("x", "float")]), (), "client", 2)
    good = {"columns": {"a": list(range(1000)), "x": [0.5] * 1000}, "time": [[1, 2]] * 1000}
    parsed = parse_write(good, shape, StringInterner(), 10_000)
    assert parsed.times is not None and parsed.times.shape == (2, 1000)
    assert (parsed.times[0] == 1).all() and (parsed.times[1] == 2).all()
    cases = [
        ({"a": [*range(999), 2**63]}, "columns.a[999]"),
        ({"a": [*range(500), True, *range(499)]}, "columns.a[500]"),
        ({"x": [0.5] * 700 + ["1"] + [0.5] * 299}, "columns.x[700]"),
        ({"time": [[1, 2]] * 998 + [[1, -2], [3, 4]]}, "time[998]"),
        ({"time": [[1, 2]] * 10 + [[1, 2**63]] + [[1, 2]] * 989}, "time[10]"),
        ({"diff": [1] * 400 + [2**62] + [1] * 599}, "diff[400]"),
    ]
    for change, path in cases:
        body = {**good, "columns": {**good["columns"]}}
        for k, v in change.items():
            if k in body["columns"]:
                body["columns"][k] = v
            else:
                body[k] = v
        with pytest.raises(Invalid) as caught:
            parse_write(body, shape, StringInterner(), 10_000)
        assert caught.value.detail == {"path": path}


ROWS_SHAPE = TableShape("r", Schema.of([("a", "int"), ("s", "string")]), (), "client", 1)
GOOD_ROW = st.fixed_dictionaries({"a": TYPED[ColumnType.INT], "s": TYPED[ColumnType.STRING]})
ANY_ROW = st.one_of(
    GOOD_ROW,
    GOOD_ROW,
    st.fixed_dictionaries({"a": ANY_VALUE, "s": ANY_VALUE}),
    st.just({"a": 1}),
    st.just(7),
)
TIME = st.one_of(st.integers(0, 9), st.integers(0, 9), st.just(-1), st.just("1"), st.just(2**63))
AN_UPDATE = st.one_of(
    st.builds(
        lambda k, r, t: {k: r, "time": t}, st.sampled_from(["insert", "delete"]), ANY_ROW, TIME
    ),
    st.builds(
        lambda w, r, t: {"weight": w, "data": r, "time": t},
        st.one_of(st.integers(-3, 3), st.just(2**62), st.just(True)),
        ANY_ROW,
        TIME,
    ),
    st.builds(lambda r, t: {"upsert": r, "time": t}, ANY_ROW, TIME),
    st.builds(lambda r: {"insert": r, "delete": r, "time": 1}, ANY_ROW),
    st.just({"time": 3}),
    st.just([1]),
)


def parse_in_order(updates: list[Any]) -> None:
    """Every check of update ``i`` before any of update ``i + 1`` (Invalid naming the first)."""
    names = ROWS_SHAPE.schema.names
    for i, u in enumerate(updates):
        path = f"updates[{i}]"
        if not isinstance(u, dict):
            raise Invalid("not an update", {"path": path}, "invalid_update")
        fields = set(u) - {"time"}
        if len(fields) == 1 and fields <= {"insert", "delete", "upsert"}:
            (kind,) = fields
            if kind == "upsert":  # the table has no primary key
                raise Invalid("no key", {"path": f"{path}.upsert"}, "invalid_update")
            row, row_path = u[kind], f"{path}.{kind}"
        elif fields == {"weight", "data"}:
            w = u["weight"]
            if isinstance(w, bool) or not isinstance(w, int) or not -(2**62) < w < 2**62:
                raise Invalid("bad weight", {"path": f"{path}.weight"}, "invalid_update")
            row, row_path = u["data"], f"{path}.data"
        else:
            extra = sorted(set(u) - {"insert", "delete", "upsert", "weight", "data", "time"})
            where = f"{path}.{extra[0]}" if extra else path  # a misspelt field is named
            raise Invalid("bad update", {"path": where}, "invalid_update")
        if not isinstance(row, dict):
            raise Invalid("not a row", {"path": row_path}, "wrong_type")
        if set(row) != set(names):
            raise Invalid("columns", {"path": _first_wrong(row, names, row_path)}, "wrong_columns")
        for name, t in zip(names, ROWS_SHAPE.schema.types, strict=True):
            check_value(row[name], t, f"{row_path}.{name}")
        if "time" in u:
            t = u["time"]
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < 2**63:
                raise Invalid("bad time", {"path": f"{path}.time"}, "bad_time")


@given(updates=st.lists(AN_UPDATE, max_size=6))
def test_row_writes_name_the_error_an_in_order_check_finds_first(updates: list[Any]) -> None:
    got = outcome(lambda: parse_write({"updates": updates}, ROWS_SHAPE, StringInterner(), 100))
    expected = outcome(lambda: parse_in_order(updates))
    assert got[0] == expected[0], (got, expected)
    if got[0] == "error":
        assert (got[2], got[3]) == (expected[2], expected[3])
    else:
        parsed = got[1]
        assert parsed.size == len(updates)
        assert parsed.data[0].tolist() == [
            (u.get("insert") or u.get("delete") or u.get("data"))["a"] for u in updates
        ]


def test_a_refused_columnar_write_interns_no_string() -> None:
    shape = TableShape("t", Schema.of([("s", "string"), ("a", "int")]), (), "client", 1)
    interner = StringInterner()
    for body in (
        {"columns": {"s": ["x", "y"], "a": [1, "2"]}, "time": 1},
        {"columns": {"s": ["x", "y"], "a": [1, 2]}, "diff": [1, True], "time": 1},
        {"columns": {"s": ["x", "y"], "a": [1, 2]}, "time": [1, -1]},
    ):
        with pytest.raises(Invalid):
            parse_write(body, shape, interner, 100)
    assert len(interner) == 0
    parse_write({"columns": {"s": ["x", "y"], "a": [1, 2]}, "time": 1}, shape, interner, 100)
    assert len(interner) == 2


def test_a_default_time_is_checked_without_rows() -> None:
    """A write's top-level ``time`` is checked even when no update would take it; a
    ``diff`` without ``columns`` is refused, not ignored; so is a write of nothing (no
    ``updates``, ``columns`` or ``advance_to``: audit 79)."""
    shape = TableShape("t", Schema.of([("a", "int")]), (), "client", 1)
    for body in ({"time": [[{}]]}, {"time": -1}, {"updates": [], "time": "1"}):
        with pytest.raises(Invalid) as info:
            parse_write(body, shape, StringInterner(), 100)
        assert info.value.detail == {"path": "time"}
    for body in ({"diff": {}}, {"updates": [], "diff": [1], "time": 1}):
        with pytest.raises(Invalid, match="columnar form") as info:
            parse_write(body, shape, StringInterner(), 100)
        assert info.value.detail == {"path": "diff"}
    assert parse_write({"updates": [], "time": 3}, shape, StringInterner(), 100).size == 0
    for body in ({}, {"time": 3}):  # nothing to write: a misspelt field, most likely
        with pytest.raises(Invalid, match="a write gives") as info:
            parse_write(body, shape, StringInterner(), 100)
        assert info.value.detail == {"path": "updates"}
    server = TableShape("s", Schema.of([("a", "int")]), (), "server", 1)
    with pytest.raises(Invalid, match="server-timed"):
        parse_write({"time": 3}, server, StringInterner(), 100)


def test_a_null_float_says_a_nan_may_have_been_written_so() -> None:
    """Audit 109: orjson (the Python client's encoder) writes NaN and infinity as null."""
    for check in (
        lambda: check_value(None, ColumnType.FLOAT, "x"),
        lambda: checked_column([0.5, None], ColumnType.FLOAT, "columns.x"),
    ):
        with pytest.raises(Invalid, match=r"got null \(a NaN or infinity"):
            check()


@given(
    stored=st.dictionaries(st.integers(0, 5), st.integers(0, 2), max_size=6),
    source=st.dictionaries(st.integers(0, 5), st.integers(0, 2), max_size=6),
    client_timed=st.booleans(),
    at=st.sampled_from([2, 4]),  # before or after the time the table's keys were written to
)
def test_a_write_whose_keys_a_load_vouches_for_is_staged_as_checked(
    stored: dict[int, int], source: dict[int, int], client_timed: bool, at: int
) -> None:
    """A load's write (an append into a table with no rows, or a replace's difference) with
    the index it leaves built off the engine thread (``keys_after``): staged as it is when
    its keys are checked, or refused alike (the time order is still checked), and the index
    it leaves holds the same rows."""
    shape = TableShape("kv", KEYED.schema, (0,), "client" if client_timed else "server", 1)

    def index(rows: dict[int, int]) -> KeyIndex:
        built = KeyIndex(2, [0])
        data = np.array([list(rows), list(rows.values())], dtype=np.int64).reshape(2, -1)
        built.apply(KeyChanges(data, np.ones(len(rows), dtype=bool)))
        return built

    def held(ix: KeyIndex) -> dict[int, int]:
        found = ix.lookup(np.arange(6, dtype=np.int64).reshape(1, -1))
        return {k: int(ix.rows(found[k : k + 1])[1, 0]) for k in range(6) if found[k] >= 0}

    # the replace's difference, retractions first: what ``table_difference`` writes
    gone = [(k, v, -1) for k, v in stored.items() if source.get(k) != v]
    came = [(k, v, 1) for k, v in source.items() if stored.get(k) != v]
    updates = np.array(gone + came, dtype=np.int64).reshape(-1, 3).T
    n = updates.shape[1]
    times = np.full((1, n), at, dtype=np.int64) if client_timed else None
    parsed = ParsedWrite(np.full(n, WEIGHT), updates[:2], updates[2], times, None)
    upto = np.array([3], dtype=np.int64) if client_timed else None

    def stage(keys_after: KeyIndex | None) -> Any:
        target = index(stored)
        try:
            staged = stage_write(
                parsed, shape, Antichain.minimum(1), target, 7, upto, StringInterner(), keys_after
            )
        except (Invalid, Conflict) as exc:
            return ("error", str(exc), exc.code), None, None
        if staged.pk_index is None and staged.pk_changes is not None:
            target.apply(staged.pk_changes)
        after = staged.pk_index if staged.pk_index is not None else target
        batch = staged.batch
        plain = (batch.data.tolist(), batch.times.tolist(), batch.diffs.tolist(), staged.times)
        upto_after = staged.keyed_upto.tolist() if client_timed else None
        return ("ok", plain, staged.rows_delta, upto_after), held(after), staged.pk_index

    checked, held_checked, _ = stage(None)
    keys = KeyIndex.of_distinct((0,), np.array([list(source), list(source.values())]))
    vouched, held_vouched, swapped = stage(keys)
    assert vouched == checked and held_vouched == held_checked
    late = client_timed and at == 2 and n > 0  # time_out_of_order either way
    assert checked[0] == ("error" if late else "ok")
    assert (swapped is keys) == (n > 0 and not late)
    if not late:
        assert held_checked == source


INT64 = st.integers(-(2**63), 2**63 - 1)


@given(
    st.lists(st.one_of(INT64, st.integers(-3, 3), st.sampled_from([2**62, -(2**62)]))),
    st.integers(0, 3),
)
def test_a_count_total_is_exact_where_int64_wraps(values: list[int], copies: int) -> None:
    """Both ways of summing (as they are, or in two halves where that could wrap)."""
    diffs = np.array(values * (copies + 1), dtype=np.int64)
    assert count_total(diffs) == sum(values) * (copies + 1)
