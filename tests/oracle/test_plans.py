"""The strategies generate what they promise: valid plans that cover every node, every
function and the iterate variants, and update streams with retractions, multiplicities and
(multi-dimensional) times, that the oracle evaluates."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from .evaluate import FUNCTIONS, Column, Database, evaluate, schema_of
from .plans import (
    DOMAINS,
    Update,
    accumulate,
    database_at,
    plans,
    plans_with_schema,
    update_streams,
)

TABLES: dict[str, list[Column]] = {
    "edges": [("src", "int"), ("dst", "int")],
    "items": [("name", "string"), ("price", "float"), ("ok", "bool")],
    "roots": [("node", "int")],
}
KEYED: dict[str, list[Column]] = {"kv": [("k", "int"), ("v", "string")]}
EMPTY = Database.from_counters(TABLES, {})
EMPTY_KEYED = Database.from_counters(KEYED, {})

SLOW = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def nodes(plan: Any) -> list[dict[str, Any]]:
    """Every plan node and expression call in ``plan`` (any JSON object with "op" or "fn")."""
    found: list[dict[str, Any]] = []
    if isinstance(plan, dict):
        if "op" in plan or "fn" in plan:
            found.append(plan)
        for child in plan.values():
            found += nodes(child)
    elif isinstance(plan, list):
        for child in plan:
            found += nodes(child)
    return found


def ops(plan: Any) -> set[str]:
    return {node["op"] for node in nodes(plan) if "op" in node}


def iterates(plan: Any) -> list[dict[str, Any]]:
    return [node for node in nodes(plan) if node.get("op") == "iterate"]


def times_of(stream: list[Update]) -> list[Any]:
    return sorted({time for _, _, time, _ in stream})


# ---------------------------------------------------------------------------------------------
# Plans


@SLOW
@given(
    st.sampled_from([TABLES, KEYED]).flatmap(
        lambda tables: st.tuples(st.just(tables), plans_with_schema(tables))
    )
)
def test_generated_plans_have_the_claimed_schema(generated: Any) -> None:
    tables, (plan, columns) = generated
    assert schema_of(plan, Database.from_counters(tables, {})) == columns


@settings(SLOW, max_examples=80)
@given(plans(TABLES), update_streams(TABLES, min_updates=10))
def test_plans_evaluate_at_every_time(plan: dict[str, Any], stream: list[Update]) -> None:
    columns = schema_of(plan, EMPTY)
    for time in [0, *times_of(stream)]:
        result = evaluate(plan, database_at(TABLES, stream, time))
        assert result.columns == columns
        assert 0 not in result.rows.values()


@settings(SLOW, max_examples=40)
@given(plans(KEYED, max_depth=2), update_streams(KEYED, 3, time_dims=2))
def test_plans_evaluate_at_two_dimensional_times(
    plan: dict[str, Any], stream: list[Update]
) -> None:
    for time in itertools.product(range(3), repeat=2):
        result = evaluate(plan, database_at(KEYED, stream, time))
        assert result.columns == schema_of(plan, EMPTY_KEYED)


@settings(SLOW, max_examples=40)
@given(plans(TABLES, allow_iterate=False))
def test_plans_without_iterate(plan: dict[str, Any]) -> None:
    assert not ops(plan) & {"iterate", "var"}


def features(plan: dict[str, Any]) -> set[str]:
    """Labels for what ``plan`` exercises: nodes, join kinds, functions, aggregates and the
    iterate variants."""
    found = {f"op:{node['op']}" for node in nodes(plan) if "op" in node}
    found |= {f"fn:{node['fn']}" for node in nodes(plan) if "args" in node}
    for node in nodes(plan):
        if node.get("op") == "join":
            found.add(f"how:{node.get('how', 'inner')}")
        if node.get("op") == "reduce":
            found |= {f"aggregate:{spec['fn']}" for spec in node["aggregates"].values()}
    for node in iterates(plan):
        found.add("iterate:bounded" if "max_iterations" in node else "iterate:unbounded")
        if len(node["vars"]) == 2:
            found.add("iterate:two vars")
        for name, body in node["body"].items():
            read = {n["name"] for n in nodes(body) if n.get("op") == "var"}
            if (read - {name}) & set(node["vars"]):
                found.add("iterate:mutual recursion")
        for inner in iterates(node["body"]):
            found.add("iterate:nested")
            if set(inner["vars"]) & set(node["vars"]):
                found.add("iterate:shadowing")
    return found


EXPECTED_FEATURES = {
    *(f"op:{op}" for op in ("table", "var", "select", "filter", "flat_map", "concat")),
    *(f"op:{op}" for op in ("negate", "join", "reduce", "distinct", "threshold", "top_k")),
    "op:iterate",
    *(f"how:{how}" for how in ("inner", "semi", "anti")),
    *(f"fn:{fn}" for fn in FUNCTIONS),
    *(f"aggregate:{fn}" for fn in ("count", "sum", "min", "max", "count_distinct")),
    *(f"iterate:{variant}" for variant in ("bounded", "unbounded", "two vars")),
    *(f"iterate:{variant}" for variant in ("mutual recursion", "nested", "shadowing")),
}

# Coverage runs: generation only (no shrinking), with a fixed seed so they are reproducible.
COVERAGE = settings(
    max_examples=300,
    phases=[Phase.generate],
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_plans_cover_every_node_function_and_iterate_variant() -> None:
    seen: Counter[str] = Counter()

    @COVERAGE
    @given(plans(TABLES))
    def collect(plan: dict[str, Any]) -> None:
        seen.update(features(plan))

    collect()
    assert EXPECTED_FEATURES - set(seen) == set()


# ---------------------------------------------------------------------------------------------
# Update streams


@settings(SLOW, max_examples=100)
@given(update_streams(TABLES, 5, min_updates=4))
def test_streams_fit_the_tables(stream: list[Update]) -> None:
    assert len(stream) >= 4
    times = [time for _, _, time, _ in stream]
    assert times == sorted(times)
    for name, row, time, diff in stream:
        assert len(row) == len(TABLES[name])
        assert all(v in DOMAINS[t] for v, (_, t) in zip(row, TABLES[name], strict=True))
        assert 0 <= time < 5
        assert diff != 0


@settings(SLOW, max_examples=100)
@given(
    st.integers(1, 3).flatmap(
        lambda d: update_streams(TABLES, 3, time_dims=d, negative_counts=False)
    )
)
def test_streams_without_negative_counts_stay_non_negative(stream: list[Update]) -> None:
    dims = {1 if isinstance(time, int) else len(time) for _, _, time, _ in stream}
    for dim in dims:
        grid = range(3) if dim == 1 else itertools.product(range(3), repeat=dim)
        for time in grid:
            for counter in accumulate(stream, time).values():
                assert all(count > 0 for count in counter.values())


def test_streams_have_retractions_multiplicities_and_many_times() -> None:
    seen: Counter[str] = Counter()

    @COVERAGE
    @given(update_streams(TABLES, 6), update_streams(TABLES, 4, time_dims=2))
    def collect(stream: list[Update], two_d: list[Update]) -> None:
        diffs = {diff for *_, diff in stream}
        seen["retraction"] += any(diff < 0 for diff in diffs)
        seen["multiplicity"] += any(abs(diff) > 1 for diff in diffs)
        seen["many times"] += len(times_of(stream)) >= 5
        seen["2-d times"] += len(times_of(two_d)) >= 4
        assert all(len(time) == 2 for time in times_of(two_d))

    collect()
    assert min(seen[k] for k in ("retraction", "multiplicity", "many times", "2-d times")) > 30


def test_accumulate_by_hand() -> None:
    stream: list[Update] = [
        ("roots", (1,), 0, 2),
        ("roots", (2,), 1, 1),
        ("roots", (1,), 2, -2),
        ("edges", (1, 2), 3, 1),
    ]
    assert accumulate(stream, 0) == {"roots": Counter({(1,): 2}), "edges": Counter()}
    assert accumulate(stream, 1, ["items"]) == {
        "items": Counter(),
        "roots": Counter({(1,): 2, (2,): 1}),
        "edges": Counter(),
    }
    assert accumulate(stream, 2)["roots"] == Counter({(2,): 1})
    product: list[Update] = [
        ("roots", (1,), (0, 1), 1),
        ("roots", (2,), (1, 0), 1),
        ("roots", (3,), (1, 1), 1),
    ]
    assert accumulate(product, (1, 0))["roots"] == Counter({(2,): 1})
    assert accumulate(product, (0, 1))["roots"] == Counter({(1,): 1})
    assert accumulate(product, (2, 1))["roots"] == Counter({(1,): 1, (2,): 1, (3,): 1})
    db = database_at(TABLES, product, (1, 1))
    assert dict(db.tables["roots"].rows) == {(1,): 1, (2,): 1, (3,): 1}
    assert dict(db.tables["items"].rows) == {}
