"""Views over real HTTP: hydration, reachability against an independent BFS, views over
views, shared arrangements, drops, and plan errors with paths."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import httpx
from jsonschema import Draft202012Validator

from tests.oracle.evaluate import INT_MAX, INT_MIN, wrap64
from tests.oracle.plans import reach_plan
from tests.service.conftest import assert_error, make_table, make_view, row_counts, rows, write


def bfs(roots: set[int], edges: list[tuple[int, int]]) -> set[tuple[int, int]]:
    adj: dict[int, list[int]] = defaultdict(list)
    for s, d in edges:
        adj[s].append(d)
    out = set()
    for r in roots:
        seen, todo = {r}, [r]
        while todo:
            n = todo.pop()
            for m in adj[n]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        out |= {(r, n) for n in seen}
    return out


def reach_set(c: httpx.Client, view: str, **params: object) -> set[tuple[int, int]]:
    got = rows(c, view, **params)["rows"]
    assert all(r["count"] == 1 for r in got)
    return {(r["data"]["root"], r["data"]["node"]) for r in got}


def test_reachability_matches_bfs_under_updates(client: httpx.Client, name: str) -> None:
    rng = random.Random(7)
    roots_t, edges_t, view = f"{name}_roots", f"{name}_edges", f"{name}_reach"
    make_table(client, roots_t, [("node", "int")])
    make_table(client, edges_t, [("src", "int"), ("dst", "int")])
    n = 40
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(70)]
    roots = {0, 5, 9}
    write(
        client, edges_t, {"columns": {"src": [s for s, _ in edges], "dst": [d for _, d in edges]}}
    )
    write(client, roots_t, {"updates": [{"insert": {"node": r}} for r in roots]})
    # registered after the data arrived: hydrates at once
    r = client.post("/v1/views", json={"name": view, "query": reach_plan(roots_t, edges_t)})
    assert r.status_code == 201, r.text
    assert r.json()["rows"] == len(bfs(roots, edges))
    assert reach_set(client, view) == bfs(roots, edges)
    current = reach_set(client, view)
    for step in range(25):
        if step % 7 == 3:
            root = rng.randrange(n)
            op = "delete" if root in roots else "insert"
            roots = roots - {root} if op == "delete" else roots | {root}
            body = write(client, roots_t, {"updates": [{op: {"node": root}}]})
        else:
            old = edges.pop(rng.randrange(len(edges)))
            new = (rng.randrange(n), rng.randrange(n))
            edges.append(new)
            body = write(
                client,
                edges_t,
                {
                    "updates": [
                        {"delete": {"src": old[0], "dst": old[1]}},
                        {"insert": {"src": new[0], "dst": new[1]}},
                    ]
                },
            )
        # the write's outputs are exactly the change of the view
        for u in body["outputs"][view]:
            pair = (u["data"]["root"], u["data"]["node"])
            assert u["diff"] in (1, -1) and u["time"] == body["times"][0]
            current = current | {pair} if u["diff"] == 1 else current - {pair}
        expect = bfs(roots, edges)
        assert current == expect
        assert reach_set(client, view) == expect


def test_view_over_view_and_drop_rules(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("k", "string"), ("v", "int")])
    write(
        client, name, {"updates": [{"insert": {"k": "a", "v": 1}}, {"insert": {"k": "b", "v": 5}}]}
    )
    base, top = f"{name}_big", f"{name}_cnt"
    assert (
        client.post(
            "/v1/views",
            json={
                "name": base,
                "query": {
                    "op": "filter",
                    "input": {"op": "table", "name": name},
                    "where": {"fn": "gt", "args": ["v", 2]},
                },
            },
        ).status_code
        == 201
    )
    plan = {
        "op": "reduce",
        "input": {"op": "view", "name": base},
        "by": [],
        "aggregates": {"n": {"fn": "count"}},
    }
    assert client.post("/v1/views", json={"name": top, "query": plan}).status_code == 201
    assert row_counts(client, top) == {(("n", 1),): 1}
    body = write(client, name, {"updates": [{"insert": {"k": "c", "v": 9}}]})
    assert set(body["outputs"]) == {base, top}
    assert row_counts(client, top) == {(("n", 2),): 1}
    assert client.get(f"/v1/tables/{name}").json()["readers"] == [base]
    assert_error(client.delete(f"/v1/tables/{name}"), 409, "in_use")
    assert_error(client.delete(f"/v1/views/{base}"), 409, "in_use")
    assert client.delete(f"/v1/views/{top}").status_code == 204
    assert client.delete(f"/v1/views/{base}").status_code == 204
    assert client.delete(f"/v1/tables/{name}").status_code == 204
    assert_error(client.get(f"/v1/views/{base}"), 404)


def test_views_share_arrangements(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("src", "int"), ("dst", "int")])
    write(client, name, {"columns": {"src": [1, 2, 3], "dst": [2, 3, 4]}})
    two_hop = {
        "op": "join",
        "left": {"op": "table", "name": name},
        "right": {"op": "table", "name": name},
        "on": [["dst", "src"]],
        "columns": {"a": "left.src", "b": "right.dst"},
    }
    for v in ("x", "y"):
        assert (
            client.post("/v1/views", json={"name": f"{name}_{v}", "query": two_hop}).status_code
            == 201
        )
    desc = client.get(f"/v1/views/{name}_y").json()
    shared = [a for a in desc["arrangements"] if a["shared_with"]]
    assert shared and all(a["shared_with"] == [f"{name}_x"] for a in shared)
    assert row_counts(client, f"{name}_y") == {(("a", 1), ("b", 3)): 1, (("a", 2), ("b", 4)): 1}
    client.delete(f"/v1/views/{name}_x")
    desc = client.get(f"/v1/views/{name}_y").json()
    assert all(not a["shared_with"] for a in desc["arrangements"])
    write(client, name, {"updates": [{"insert": {"src": 4, "dst": 5}}]})
    assert (("a", 3), ("b", 5)) in row_counts(client, f"{name}_y")


def test_the_document_describes_plans_to_their_leaves(client: httpx.Client, name: str) -> None:
    """/openapi.json's plan schema is recursive (audit 49: it described the root node alone,
    allowed unknown fields and offered a var at the root): plans the server takes fit it,
    and plans it refuses for their shape do not."""
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/v1/views"]["post"]["requestBody"]["content"]["application/json"]
    check = Draft202012Validator({"allOf": [body["schema"]], "components": spec["components"]})
    make_table(client, f"{name}_r", [("node", "int")])
    make_table(client, f"{name}_e", [("src", "int"), ("dst", "int")])
    reach = reach_plan(f"{name}_r", f"{name}_e")
    assert check.is_valid({"name": f"{name}_v", "query": reach})
    assert client.post("/v1/views", json={"name": f"{name}_v", "query": reach}).status_code == 201
    edges = {"op": "table", "name": f"{name}_e"}
    refused = [
        {"op": "var", "name": "x"},
        {**edges, "extra": 1},
        {"op": "filter", "input": {**edges, "nope": True}, "where": True},
        {"op": "select", "input": edges, "columns": {"a": {"fn": "no_such", "args": []}}},
        {"op": "select", "input": edges, "columns": {"a": {"lit": [1]}}},
        {
            "op": "select",
            "input": edges,
            "columns": {"a": {"fn": "cast", "args": ["src"], "to": "x"}},
        },
        {"op": "concat", "inputs": []},
        {"op": "join", "left": edges, "right": edges, "on": [["src"]]},
        {"op": "top_k", "input": edges, "by": [], "order_by": [{"col": "src"}], "k": -1},
        {"op": "reduce", "input": edges, "by": ["src"], "aggregates": {"n": {"fn": "avg"}}},
        {"op": "iterate", "vars": {}, "body": {}, "result": "x"},
    ]
    for plan in refused:
        assert not check.is_valid({"name": f"{name}_w", "query": plan}), plan
        r = client.post("/v1/views", json={"name": f"{name}_w", "query": plan})
        assert r.status_code == 422, (plan, r.text)


def test_as_of_is_what_the_document_declares(client: httpx.Client, name: str) -> None:
    """``as_of`` is ASCII digits, commas between coordinates (the pattern /openapi.json
    declares), given once; anything else is a 422 ``bad_time``, not a read at whatever
    Python's ``int`` makes of it."""
    make_table(client, name, [("a", "int")], timing="client")
    view = f"{name}_v"
    plan = {"op": "table", "name": name}
    assert client.post("/v1/views", json={"name": view, "query": plan}).status_code == 201
    write(client, name, {"updates": [{"insert": {"a": 1}, "time": 10}], "advance_to": 20})
    spec = client.get("/openapi.json").json()
    params = spec["paths"]["/v1/views/{name}/rows"]["get"]["parameters"]
    assert [p["schema"]["pattern"] for p in params if p["name"] == "as_of"] == [
        "^[0-9]+(,[0-9]+)*$"
    ]
    assert rows(client, view, as_of="15")["time"] == 15
    assert rows(client, view, as_of="0015")["time"] == 15
    assert rows(client, view, as_of="0" * 5000 + "15")["time"] == 15
    for bad in (
        "1_5",
        "+15",
        " 15",
        "15 ",
        "15\n",
        "\u0661\u0665",
        "\uff11\uff15",
        "",
        "-1",
        "1,",
        ",1",
        "9223372036854775808",
        "1" * 4301,  # audit 49: int() refused so many digits, a 500
    ):
        r = client.get(f"/v1/views/{view}/rows", params={"as_of": bad})
        assert assert_error(r, 422, "bad_time")["detail"] == {"path": "as_of"}, bad
    r = client.get(f"/v1/views/{view}/rows", params=[("as_of", "15"), ("as_of", "12")])
    err = assert_error(r, 422, "bad_time")
    assert err["detail"] == {"path": "as_of"} and "given 2 times" in err["message"]
    # a time of the wrong arity says so (audit 82), for a read and for a write
    r = client.get(f"/v1/views/{view}/rows", params={"as_of": "15,16"})
    assert (
        "times here have one coordinate: an integer, not a list"
        in assert_error(r, 422, "bad_time")["message"]
    )
    r = client.post(
        f"/v1/tables/{name}/updates", json={"updates": [{"insert": {"a": 1}, "time": [21, 22]}]}
    )
    assert (
        "times here have one coordinate: an integer, not a list"
        in assert_error(r, 422, "bad_time")["message"]
    )
    pairs = f"{name}_2d"
    make_table(client, pairs, [("a", "int")], timing="client", time_dims=2)
    r = client.post(
        f"/v1/tables/{pairs}/updates", json={"updates": [{"insert": {"a": 1}, "time": [1, 2, 3]}]}
    )
    assert "times here have 2 coordinates, not 3" in assert_error(r, 422, "bad_time")["message"]


def test_plan_errors_name_their_path(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("x", "int"), ("s", "string")])
    other = f"{name}_c"
    make_table(client, other, [("x", "int")], timing="client")
    right = f"{name}_r"
    make_table(client, right, [("x", "int"), ("z", "string")])
    cases = [
        ({"op": "nope"}, "query"),
        ({"name": name}, "query"),  # no op: the node, as for an unknown one
        ({"op": "table", "name": "missing"}, "query"),
        (
            {"op": "select", "input": {"op": "table", "name": name}, "columns": {"y": "zzz"}},
            "query.columns.y",
        ),
        (
            {
                "op": "filter",
                "input": {"op": "table", "name": name},
                "where": {"fn": "add", "args": ["x", "s"]},
            },
            "query.where.args.1",  # the argument of the wrong type (audit 87)
        ),
        ({"op": "filter", "input": {"op": "table", "name": name}, "where": "x"}, "query.where"),
        # a field missing or unknown: that field, as in a table's body (audit 95: the node)
        ({"op": "filter", "input": {"op": "table", "name": name}}, "query.where"),
        ({"op": "join", "left": {"op": "table", "name": name}}, "query.on"),
        ({"op": "table", "name": name, "alias": "t"}, "query.alias"),
        (
            {"op": "distinct", "input": {"op": "filter", "input": {"op": "table", "name": name}}},
            "query.input.where",
        ),
        # ... and so inside an aggregate, an order_by item and an expression (audit 100:
        # the object holding it)
        (
            {
                "op": "reduce",
                "input": {"op": "table", "name": name},
                "by": [],
                "aggregates": {"n": {"fn": "count", "zz": 1}},
            },
            "query.aggregates.n.zz",
        ),
        (
            {
                "op": "reduce",
                "input": {"op": "table", "name": name},
                "by": [],
                "aggregates": {"n": {"of": "x"}},
            },
            "query.aggregates.n.fn",
        ),
        (
            {
                "op": "top_k",
                "input": {"op": "table", "name": name},
                "by": [],
                "order_by": [{"col": "x"}, {"desc": True}],
                "k": 1,
            },
            "query.order_by.1.col",
        ),
        (
            {
                "op": "top_k",
                "input": {"op": "table", "name": name},
                "by": [],
                "order_by": [{"col": "x", "asc": True}],
                "k": 1,
            },
            "query.order_by.0.asc",
        ),
        (
            {
                "op": "filter",
                "input": {"op": "table", "name": name},
                "where": {"fn": "gt", "args": ["x", {"lit": 1, "q": 2}]},
            },
            "query.where.args.1.q",
        ),
        (
            {
                "op": "filter",
                "input": {"op": "table", "name": name},
                "where": {"fn": "gt", "args": ["x", 1], "argz": []},
            },
            "query.where.argz",
        ),
        (
            {"op": "select", "input": {"op": "table", "name": name}, "columns": {"y\n": "x"}},
            "query.columns.y\n",
        ),
        (
            {
                "op": "concat",
                "inputs": [
                    {"op": "table", "name": name},
                    {"op": "select", "input": {"op": "table", "name": name}, "columns": {"x": "x"}},
                ],
            },
            "query.inputs.1",
        ),
        (
            {
                "op": "join",
                "left": {"op": "table", "name": name},
                "right": {"op": "table", "name": name},
                "on": [["x", "s"]],
            },
            "query.on.0",
        ),
        # a list's item of the wrong shape, a var's body missing or extra: that item, that
        # var (the list or body as a whole before)
        (
            {
                "op": "join",
                "left": {"op": "table", "name": name},
                "right": {"op": "table", "name": name},
                "on": [["x", "x"], ["s"]],
            },
            "query.on.1",
        ),
        (
            {
                "op": "distinct",
                "input": {
                    "op": "reduce",
                    "input": {"op": "table", "name": name},
                    "by": ["x", 3],
                    "aggregates": {},
                },
            },
            "query.input.by.1",
        ),
        *[
            (
                {
                    "op": "iterate",
                    "result": "a",
                    "vars": {v: {"op": "table", "name": name} for v in vars_},
                    "body": {v: {"op": "var", "name": "a"} for v in body},
                },
                want,
            )
            for vars_, body, want in [
                ("ab", "a", "query.body.b"),
                ("a", "ab", "query.body.b"),
                ("ac", "ab", "query.body.c"),
            ]
        ],
        # a join's output expressions: the output column, then within it (audit 87: the
        # output column was left out, or the path was the join's columns as a whole)
        *[
            (
                {
                    "op": "join",
                    "left": {"op": "table", "name": name},
                    "right": {"op": "table", "name": right},
                    "on": [["x", "x"]],
                    "columns": {"ok": "left.s", "y": expr},
                },
                want,
            )
            for expr, want in [
                (
                    {"fn": "add", "args": ["left.x", {"fn": "neg", "args": ["right.nope"]}]},
                    "query.columns.y.args.1.args.0",
                ),
                ({"fn": "add", "args": ["left.x", "s"]}, "query.columns.y.args.1"),
                ({"fn": "length", "args": ["left.s", "right.x"]}, "query.columns.y"),
                ({"fn": "lower", "args": ["left.x"]}, "query.columns.y.args.0"),
                ("x", "query.columns.y"),  # on both sides
                ({"fn": "neg", "args": ["x"]}, "query.columns.y.args.0"),
                ("nope", "query.columns.y"),
            ]
        ],
        (
            {
                "op": "select",
                "input": {"op": "table", "name": name},
                "columns": {"y": {"fn": "if", "args": ["x", 1, 2]}},
            },
            "query.columns.y.args.0",
        ),
        (
            {
                "op": "select",
                "input": {"op": "table", "name": name},
                "columns": {"y": {"fn": "cast", "args": ["x"], "to": None}},
            },
            "query.columns.y.to",
        ),
        (
            {
                "op": "select",
                "input": {"op": "table", "name": name},
                "columns": {"y": {"fn": "and", "args": [True, "x"]}},
            },
            "query.columns.y.args.1",
        ),
        (  # an explicit null is not an absent field
            {
                "op": "join",
                "left": {"op": "table", "name": name},
                "right": {"op": "table", "name": name},
                "on": [["x", "x"]],
                "columns": None,
            },
            "query.columns",
        ),
        (
            {
                "op": "iterate",
                "vars": {"r": {"op": "table", "name": name}},
                "body": {"r": {"op": "var", "name": "r"}},
                "result": "r",
                "max_iterations": None,
            },
            "query.max_iterations",
        ),
        (
            {
                "op": "reduce",
                "input": {"op": "table", "name": name},
                "by": ["x"],
                "aggregates": {"t": {"fn": "sum", "of": "s"}},
            },
            "query.aggregates.t.of",
        ),
        (
            {
                "op": "iterate",
                "vars": {"r": {"op": "table", "name": name}},
                "body": {"r": {"op": "var", "name": "q"}},
                "result": "r",
            },
            "query.body.r",
        ),
        (
            {
                "op": "concat",
                "inputs": [{"op": "table", "name": name}, {"op": "table", "name": other}],
            },
            "query.inputs.1",
        ),
        (
            {
                "op": "filter",
                "input": {"op": "table", "name": name},
                "where": {"fn": "frobnicate", "args": []},
            },
            "query.where.fn",
        ),
    ]
    for plan, path in cases:
        r = client.post("/v1/views", json={"name": f"{name}_v", "query": plan})
        err = assert_error(r, 422)
        assert err["detail"]["path"] == path, (plan, err)
        # where the message names a place, it names the same (audit 103: ``query: filter
        # has unknown field(s) ['zz']`` for ``query.zz``)
        named = err["message"].split(": ", 1)[0]
        assert not named.startswith("query") or named == path, (plan, err)
    # an unknown function in an expression has the code an unknown aggregate has (audit 44)
    assert assert_error(r, 422, "unknown_function")["message"].startswith("query.where.fn")
    bad_name = client.post("/v1/views", json={"name": f"{name}_v\n", "query": cases[1][0]})
    assert assert_error(bad_name, 422)["detail"]["path"] == "name"
    for created in (f"{name}_v", f"{name}_v%0A"):
        assert_error(client.get(f"/v1/views/{created}"), 404)
    assert client.get(f"/v1/tables/{name}").json()["readers"] == []


def test_a_plan_too_deep_to_echo_is_refused_and_the_listing_still_works(
    client: httpx.Client, name: str
) -> None:
    """A plan that would not render back as JSON (orjson stops at 254 levels) is a 422
    before anything is built: once it was registered, then its answer and every later
    GET /v1/views failed."""
    make_table(client, name, [("x", "int")])

    def chain(depth: int) -> str:
        leaf = json.dumps({"op": "table", "name": name})
        return '{"op": "distinct", "input": ' * depth + leaf + "}" * depth

    ok = client.post("/v1/views", content=f'{{"name": "{name}_ok", "query": {chain(150)}}}')
    assert ok.status_code == 201, ok.text
    for depth in (300, 600, 1000):
        r = client.post("/v1/views", content=f'{{"name": "{name}_d", "query": {chain(depth)}}}')
        assert_error(r, 422, "invalid_plan")
        assert "200 levels" in r.json()["error"]["message"]
    # past the JSON parser's 1,024 levels it is JSON all the same (it was a 400 invalid_json),
    # with a number that makes the body be read again exactly too
    for depth in (1010, 2000, 20_000):
        for extra in ("", ', "n": 12345678901234567890'):
            body = f'{{"name": "{name}_d", "query": {chain(depth)}{extra}}}'
            assert_error(client.post("/v1/views", content=body), 422, "invalid_plan")
    assert_error(client.get(f"/v1/views/{name}_d"), 404)
    listed = client.get("/v1/views")
    assert listed.status_code == 200
    assert f"{name}_ok" in [v["name"] for v in listed.json()["views"]]
    assert client.delete(f"/v1/views/{name}_ok").status_code == 204


def test_casts_at_the_edges_give_values_not_a_failed_view(client: httpx.Client, name: str) -> None:
    """A numeric string beyond 64 bits failed the view (OverflowError: the write was taken,
    the view and its readers failed, and registering it again failed on the stored row);
    finite floats beyond 2**63 cast to the least int. As the oracle: strings wrap, floats
    truncate where they fit (9.21e18 too) and saturate at int64's ends beyond."""
    make_table(client, name, [("s", "string"), ("f", "float")])
    cast = {
        "i": {"fn": "cast", "args": ["s"], "to": "int"},
        "j": {"fn": "cast", "args": ["f"], "to": "int"},
        "k": {"fn": "cast", "args": [{"fn": "div", "args": ["f", 0.0]}], "to": "int"},
    }
    plan = {"op": "select", "input": {"op": "table", "name": name}, "columns": cast}
    assert client.post("/v1/views", json={"name": f"{name}_a", "query": plan}).status_code == 201
    cases = [  # s, f, then the expected i, j and k (f / 0.0: +-inf or NaN)
        ("99999999999999999999", 1e19, wrap64(99999999999999999999), INT_MAX, INT_MAX),
        ("9223372036854775808", -1e300, INT_MIN, INT_MIN, INT_MIN),
        ("-9223372036854775809", 0.0, INT_MAX, 0, 0),
        (" 12 ", -3.7, 12, -3, INT_MIN),
        ("0", 9.21e18, 0, 9210000000000000000, INT_MAX),
        ("1", 2.0**63 - 1024, 1, 2**63 - 1024, INT_MAX),
        ("2", -(2.0**63), 2, INT_MIN, INT_MIN),
    ]
    body = write(client, name, {"updates": [{"insert": {"s": s, "f": f}} for s, f, *_ in cases]})
    assert "failed_views" not in body
    expected = {(("i", i), ("j", j), ("k", k)): 1 for _, _, i, j, k in cases}
    assert row_counts(client, f"{name}_a") == expected
    # registered on the stored rows (hydration) too
    assert client.post("/v1/views", json={"name": f"{name}_b", "query": plan}).status_code == 201
    assert row_counts(client, f"{name}_b") == expected


def test_a_view_registered_late_reads_every_input_as_of_one_start(
    client: httpx.Client, name: str
) -> None:
    """Inputs whose frontiers differ ([2] and [15]): the view starts at their earliest latest
    complete time (1) and reads both as of then, not each as of its own latest time."""
    left, right, view = f"{name}_l", f"{name}_r", f"{name}_j"
    make_table(client, left, [("x", "int")], timing="client")
    make_table(client, right, [("x", "int"), ("y", "int")], timing="client")
    ups = [{"insert": {"x": 1, "y": 7}, "time": 0}, {"insert": {"x": 2, "y": 8}, "time": 0}]
    write(client, right, {"updates": ups, "advance_to": 2})
    ups = [{"insert": {"x": 1}, "time": 0}, {"insert": {"x": 2}, "time": 10}]
    write(client, left, {"updates": ups, "advance_to": 15})
    plan = {
        "op": "join",
        "left": {"op": "table", "name": left},
        "right": {"op": "table", "name": right},
        "on": [["x", "x"]],
    }
    created = client.post("/v1/views", json={"name": view, "query": plan})
    assert created.status_code == 201 and created.json()["rows"] == 1
    err = assert_error(
        client.get(f"/v1/views/{view}/rows", params={"as_of": 0}), 409, "time_unavailable"
    )
    assert err["detail"]["valid_from"] == [1]
    assert row_counts(client, view) == {(("x", 1), ("y", 7)): 1}  # at time 1
    body = write(
        client, right, {"updates": [{"insert": {"x": 1, "y": 9}, "time": 5}], "advance_to": 20}
    )
    assert body["outputs"][view] == [{"data": {"x": 1, "y": 9}, "time": 5, "diff": 1}]
    first = {(("x", 1), ("y", 7)): 1}
    for t, expect in (
        (4, first),
        (5, {**first, (("x", 1), ("y", 9)): 1}),
        (9, {**first, (("x", 1), ("y", 9)): 1}),
    ):
        assert row_counts(client, view, as_of=t) == expect
    assert row_counts(client, view, as_of=14) == {
        **first,
        (("x", 1), ("y", 9)): 1,
        (("x", 2), ("y", 8)): 1,
    }


def test_a_view_starts_where_the_traces_it_reads_still_remember(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With one time of history, an input far ahead has forgotten the times below its own:
    the view starts there (409 before), rather than read that input at a time it cannot."""
    from tests.service.server import running_server

    with running_server(tmp_path, history=1) as s, s.client() as c:
        make_table(c, "a", [("x", "int")], timing="client")
        make_table(c, "b", [("x", "int")], timing="client")
        write(c, "a", {"updates": [{"insert": {"x": 1}, "time": 0}], "advance_to": 2})
        write(
            c,
            "b",
            {
                "updates": [{"insert": {"x": 1}, "time": 0}, {"insert": {"x": 2}, "time": 6}],
                "advance_to": 9,
            },
        )
        plan = {
            "op": "join",
            "left": {"op": "table", "name": "a"},
            "right": {"op": "table", "name": "b"},
            "on": [["x", "x"]],
            "columns": {"x": "left.x"},
        }
        assert c.post("/v1/views", json={"name": "j", "query": plan}).status_code == 201
        err = assert_error(c.get("/v1/views/j/rows", params={"as_of": 1}), 409, "time_unavailable")
        assert err["detail"] == {"valid_from": [8], "frontier": [2]}
        write(c, "a", {"updates": [{"insert": {"x": 2}, "time": 3}], "advance_to": 12})
        assert row_counts(c, "j", as_of=8) == {(("x", 1),): 1, (("x", 2),): 1}


def test_a_view_registered_on_data_compacts_as_its_frontier_moves_on_one_coordinate(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """A 2-D view registered at ``[[5, 5]]``, then frontiers ``[[X, 5]]``: its history window
    ``max(f - 3, 0)`` never passes its start on the second coordinate, and it kept every
    time's changes and answered reads long outside the window (audit 63). It forgets like
    the view registered before the data."""
    from tests.service.server import running_server

    with running_server(tmp_path, history=3) as s, s.client() as c:
        make_table(c, "s", [("k", "int"), ("v", "int")], timing="client", time_dims=2)
        plan = {
            "op": "reduce",
            "input": {"op": "table", "name": "s"},
            "by": ["k"],
            "aggregates": {"n": {"fn": "count"}, "t": {"fn": "sum", "of": "v"}},
        }
        make_view(c, "early", plan)
        ups = [{"insert": {"k": i % 7, "v": i}, "time": [i % 5, (i // 5) % 5]} for i in range(50)]
        write(c, "s", {"updates": ups, "advance_to": [[5, 5]]})
        make_view(c, "late", plan)
        for b in range(12):
            x = 5 + 10 * b
            ups = [
                {"insert": {"k": i % 7, "v": i}, "time": [x + i % 10, 5 + i % 3]}
                for i in range(b * 40, b * 40 + 40)
            ]
            write(c, "s", {"updates": ups, "advance_to": [[x + 10, 5]]})
        for view in ("early", "late"):
            err = assert_error(
                c.get(f"/v1/views/{view}/rows", params={"as_of": "20,9"}), 409, "time_unavailable"
            )
            assert err["detail"]["frontier"] == [[125, 5]], err
        late = assert_error(c.get("/v1/views/late/rows", params={"as_of": "20,9"}), 409)
        assert late["detail"]["valid_from"] == [[122, 4]], late  # its start: one below [[5, 5]]
        records = {
            v: sum(a["records"] for a in c.get(f"/v1/views/{v}").json()["arrangements"])
            for v in ("early", "late")
        }
        assert records["late"] <= 2 * records["early"], records
        assert row_counts(c, "late", as_of="124,9") == row_counts(c, "early", as_of="124,9")


def test_a_union_lines_up_the_same_names_by_name(client: httpx.Client, name: str) -> None:
    """Rows are objects: concat inputs, and an iterate's body against its var, with the same
    column names in another order line up by name (they lined up by position)."""
    make_table(client, name, [("x", "int"), ("f", "float")])
    write(client, name, {"updates": [{"insert": {"x": 1, "f": 0.5}}]})
    src = {"op": "table", "name": name}
    ab = {"op": "select", "input": src, "columns": {"a": "x", "b": 0}}
    ba = {"op": "select", "input": src, "columns": {"b": "x", "a": 0}}
    plan = {"op": "concat", "inputs": [ab, ba]}
    assert client.post("/v1/views", json={"name": f"{name}_c", "query": plan}).status_code == 201
    assert row_counts(client, f"{name}_c") == {(("a", 1), ("b", 0)): 1, (("a", 0), ("b", 1)): 1}
    # types that line up only by name
    kf = {"op": "select", "input": src, "columns": {"k": "x", "g": "f"}}
    fk = {"op": "select", "input": src, "columns": {"g": "f", "k": 2}}
    plan = {"op": "concat", "inputs": [kf, fk]}
    created = client.post("/v1/views", json={"name": f"{name}_t", "query": plan})
    assert created.status_code == 201 and created.json()["columns"] == [
        {"name": "k", "type": "int"},
        {"name": "g", "type": "float"},
    ]
    assert row_counts(client, f"{name}_t") == {(("g", 0.5), ("k", 1)): 1, (("g", 0.5), ("k", 2)): 1}
    # an iterate's body with its var's names in another order: the symmetric closure
    swap = {"op": "select", "input": {"op": "var", "name": "p"}, "columns": {"b": "a", "a": "b"}}
    body = {
        "op": "distinct",
        "input": {"op": "concat", "inputs": [{"op": "var", "name": "p"}, swap]},
    }
    plan = {"op": "iterate", "vars": {"p": ab}, "body": {"p": body}, "result": "p"}
    assert client.post("/v1/views", json={"name": f"{name}_i", "query": plan}).status_code == 201
    assert row_counts(client, f"{name}_i") == {(("a", 1), ("b", 0)): 1, (("a", 0), ("b", 1)): 1}


def test_integers_in_a_plan_fit_in_64_bits(client: httpx.Client, name: str) -> None:
    """An integer literal beyond 64 bits is refused wherever it stands (2**64 and -2**63-1
    passed as float literals, {"lit": 2**63} and top_k's k = 2**63 failed the view with an
    OverflowError), and so are k, at_least and max_iterations beyond it."""
    make_table(client, name, [("x", "int")])
    src = {"op": "table", "name": name}
    cases = [
        ({"op": "select", "input": src, "columns": {"r": 2**64}}, "query.columns.r"),
        ({"op": "select", "input": src, "columns": {"r": -(2**63) - 1}}, "query.columns.r"),
        (
            {"op": "select", "input": src, "columns": {"r": {"fn": "add", "args": ["x", 2**63]}}},
            "query.columns.r.args.1",
        ),
        ({"op": "select", "input": src, "columns": {"r": {"lit": 2**63}}}, "query.columns.r"),
        (
            {"op": "top_k", "input": src, "by": [], "order_by": [{"col": "x"}], "k": 2**63},
            "query.k",
        ),
        ({"op": "threshold", "input": src, "at_least": 2**70}, "query.at_least"),
        (
            {
                "op": "iterate",
                "vars": {"v": src},
                "body": {"v": {"op": "var", "name": "v"}},
                "result": "v",
                "max_iterations": 2**63,
            },
            "query.max_iterations",
        ),
    ]
    for plan, path in cases:
        body = json.dumps({"name": f"{name}_v", "query": plan})  # integers exact in the text
        r = client.post("/v1/views", content=body, headers={"content-type": "application/json"})
        err = assert_error(r, 422)
        assert err["detail"]["path"] == path, (plan, err)
    assert client.get("/v1/tables").status_code == 200
    assert_error(client.get(f"/v1/views/{name}_v"), 404)
    fits = {
        "op": "select",
        "input": src,
        "columns": {"r": -(2**63), "s": {"lit": 2**63 - 1}, "f": 1.8446744073709552e19},
    }
    created = client.post("/v1/views", json={"name": f"{name}_v", "query": fits})
    assert created.status_code == 201
    assert [c["type"] for c in created.json()["columns"]] == ["int", "int", "float"]


def _reach_view_arrangements(client: httpx.Client, name: str) -> tuple[str, list[str]]:
    """API.md's reachability view over two small tables: its name and its arrangements'."""
    roots, edges, view = f"{name}_r", f"{name}_e", f"{name}_reach"
    make_table(client, roots, [("node", "int")])
    make_table(client, edges, [("src", "int"), ("dst", "int")])
    write(client, edges, {"columns": {"src": [1, 2], "dst": [2, 3]}})
    write(client, roots, {"columns": {"node": [1]}})
    r = client.post("/v1/views", json={"name": view, "query": reach_plan(roots, edges)})
    assert r.status_code == 201, r.text
    return view, [a["name"] for a in client.get(f"/v1/views/{view}").json()["arrangements"]]


def test_arrangement_names_are_unique_in_descriptions_and_metrics(
    client: httpx.Client, name: str
) -> None:
    """Each arrangement of API.md's reachability view (arrangements by the same keys may
    stand inside its iterate and outside it) has a name of its own, in the description and
    as the label of its series in ``/metrics`` (a repeated label set is a duplicate sample,
    which Prometheus refuses)."""
    from prometheus_client.parser import text_string_to_metric_families

    view, names = _reach_view_arrangements(client, name)
    assert len(names) == len(set(names)), names
    metrics = client.get("/metrics").text
    for family in text_string_to_metric_families(metrics):
        seen = [(s.name, tuple(sorted(s.labels.items()))) for s in family.samples]
        assert len(seen) == len(set(seen)), [x for x in seen if seen.count(x) > 1]
        if family.name == "difflow_arrangement_records":
            ours = [dict(labels)["arrangement"] for _, labels in seen if ("view", view) in labels]
            assert sorted(ours) == sorted(names)


def test_reachability_arranges_each_collection_once(client: httpx.Client, name: str) -> None:
    """API.md's reachability view keeps five arrangements: in its loop, the reached nodes by
    node and the edges by src (the join's sides), the `distinct`'s input and output, and the
    view's own. An arrangement no operator reads is still kept up at every step: none is
    made outside the loop for a join whose other side is a var."""
    view, names = _reach_view_arrangements(client, name)
    assert sorted(names) == sorted(
        [
            "iterate: arrange by [node]",
            "iterate: arrange by [src]",
            "iterate: arrange by self",
            "iterate: distinct",
            view,
        ]
    ), names


def test_a_subplan_written_twice_is_built_once(client: httpx.Client, name: str) -> None:
    """A plan repeats a subplan where it would name it (JSON has no names): the same count
    per key, joined with itself, is one reduce, read by both sides of the join through its
    own arrangement."""
    make_table(client, name, [("k", "int"), ("v", "int")])
    write(client, name, {"columns": {"k": [1, 1, 2], "v": [5, 6, 7]}})
    counted = {
        "op": "reduce",
        "input": {"op": "table", "name": name},
        "by": ["k"],
        "aggregates": {"n": {"fn": "count"}},
    }
    plan = {
        "op": "join",
        "left": counted,
        "right": json.loads(json.dumps(counted)),
        "on": [["k", "k"]],
        "columns": {"k": "left.k", "n": "left.n", "m": "right.n"},
    }
    r = client.post("/v1/views", json={"name": f"{name}_v", "query": plan})
    assert r.status_code == 201, r.text
    names = [a["name"] for a in client.get(f"/v1/views/{name}_v").json()["arrangements"]]
    # the table by k (the reduce's input: the table's shared arrangement), the reduce (by
    # its groups: both sides of the join read it as it is), the view's own
    assert sorted(names) == sorted([f"{name} by [k]", "reduce", f"{name}_v"]), names
    assert row_counts(client, f"{name}_v") == {
        (("k", 1), ("m", 2), ("n", 2)): 1,
        (("k", 2), ("m", 1), ("n", 1)): 1,
    }
    write(client, name, {"updates": [{"insert": {"k": 2, "v": 8}}]})
    assert row_counts(client, f"{name}_v")[(("k", 2), ("m", 2), ("n", 2))] == 1


def test_a_repeated_subplan_reads_the_var_in_scope_where_it_stands(
    client: httpx.Client, name: str
) -> None:
    """The same JSON reading var ``v`` stands in an iterate's body and in the body of an
    iterate nested in it that binds ``v`` again: each copy reads its own ``v`` (the one built
    for the outer body is not the inner one's). Checked against the from-scratch evaluator."""
    from tests.oracle.evaluate import Database, evaluate

    step = {  # reads the v in scope
        "op": "select",
        "input": {"op": "var", "name": "v"},
        "columns": {"x": {"fn": "mod", "args": [{"fn": "add", "args": ["x", 1]}, 7]}},
    }
    inner = {
        "op": "iterate",
        "vars": {"v": {"op": "table", "name": f"{name}_b"}},
        "body": {"v": {"op": "distinct", "input": {"op": "concat", "inputs": [step, step]}}},
        "result": "v",
        "max_iterations": 2,
    }
    plan = {
        "op": "iterate",
        "vars": {"v": {"op": "table", "name": f"{name}_a"}},
        "body": {
            "v": {
                "op": "distinct",
                "input": {"op": "concat", "inputs": [{"op": "var", "name": "v"}, step, inner]},
            }
        },
        "result": "v",
        "max_iterations": 3,
    }
    contents = {f"{name}_a": {(0,): 1}, f"{name}_b": {(3,): 1}}
    for table, rows_ in contents.items():
        make_table(client, table, [("x", "int")])
        write(client, table, {"columns": {"x": [row[0] for row, _ in rows_.items()]}})
    r = client.post("/v1/views", json={"name": f"{name}_v", "query": plan})
    assert r.status_code == 201, r.text
    db = Database.from_counters({t: [("x", "int")] for t in contents}, contents)
    want = {(("x", row[0]),): n for row, n in evaluate(plan, db).rows.items()}
    assert row_counts(client, f"{name}_v") == want


def test_a_repeated_iterate_is_built_in_the_loop_where_it_stands(
    client: httpx.Client, name: str
) -> None:
    """An iterate whose body reads no var of its own (audit 30) is built inside the loop
    around it: written in two different loops, or in a loop and at the top, each copy is
    its own (sharing one across loops was a 422 ``not visible from scope``, or a 500 that
    left a reader on the table). Checked against the from-scratch evaluator."""
    from tests.oracle.evaluate import Database, evaluate

    n, e = f"{name}_n", f"{name}_e"
    make_table(client, n, [("node", "int")])
    make_table(client, e, [("src", "int"), ("dst", "int")])
    write(client, n, {"columns": {"node": [1, 3, 3, 0]}})
    write(client, e, {"columns": {"src": [1, 3], "dst": [2, 0]}})
    table = {"op": "table", "name": n}

    def var(v: str) -> dict:
        return {"op": "var", "name": v}

    def it(vars_: dict, body: dict, result: str, most: int | None = None) -> dict:
        plan = {"op": "iterate", "vars": vars_, "body": body, "result": result}
        return plan if most is None else {**plan, "max_iterations": most}

    def cat(*inputs: dict) -> dict:
        return {"op": "concat", "inputs": list(inputs)}

    def dist(p: dict) -> dict:
        return {"op": "distinct", "input": p}

    below3 = {"op": "filter", "input": table, "where": {"fn": "lt", "args": ["node", 3]}}
    moved = {
        "op": "join",
        "left": table,
        "right": {"op": "table", "name": e},
        "on": [["node", "src"]],
        "columns": {"node": "right.dst"},
    }
    closed = it({"w": table}, {"w": table}, "w")
    closed_below3 = it({"w": table}, {"w": below3}, "w")
    closed_moved = it({"w": table}, {"w": moved}, "w")
    plans = [
        cat(it({"y": table}, {"y": closed}, "y"), closed),
        cat(closed, it({"y": table}, {"y": closed}, "y")),
        it({"x": it({"y": table}, {"y": closed}, "y")}, {"x": closed}, "x"),
        cat(
            it({"y": table}, {"y": cat(var("y"), closed_below3)}, "y", 2),
            it({"x": table}, {"x": cat(var("x"), closed_below3)}, "x", 3),
        ),
        it(
            {"x": table},
            {
                "x": dist(
                    cat(
                        var("x"),
                        it({"y": table}, {"y": dist(cat(var("y"), closed_moved))}, "y"),
                        closed_moved,
                    )
                )
            },
            "x",
        ),
    ]
    db = Database.from_counters(
        {n: [("node", "int")], e: [("src", "int"), ("dst", "int")]},
        {n: {(1,): 1, (3,): 2, (0,): 1}, e: {(1, 2): 1, (3, 0): 1}},
    )
    for i, plan in enumerate(plans):
        r = client.post("/v1/views", json={"name": f"{name}_v{i}", "query": plan})
        assert r.status_code == 201, (i, r.text)
        want = {(("node", row[0]),): c for row, c in evaluate(plan, db).rows.items()}
        assert row_counts(client, f"{name}_v{i}") == want, i
    readers = client.get(f"/v1/tables/{n}").json()["readers"]
    assert sorted(readers) == sorted(f"{name}_v{i}" for i in range(len(plans)))


def test_a_subplan_semi_and_anti_joined_with_itself_is_arranged_once(
    client: httpx.Client, name: str
) -> None:
    """Both sides of a semi or anti join of a subplan with itself on the same columns read
    one arrangement; a key is present where some row of it has a positive count, and the
    left rows keep their own counts (README)."""
    make_table(client, name, [("k", "int"), ("v", "int")])
    updates = [
        {"insert": {"k": 1, "v": 5}},
        {"weight": 2, "data": {"k": 1, "v": 6}},
        {"insert": {"k": 2, "v": 7}},
        {"weight": -1, "data": {"k": 3, "v": 1}},
    ]
    write(client, name, {"updates": updates})
    kept = {
        "op": "filter",
        "input": {"op": "table", "name": name},
        "where": {"fn": "gt", "args": ["v", 0]},
    }
    want = {
        "semi": {(("k", 1), ("v", 5)): 1, (("k", 1), ("v", 6)): 2, (("k", 2), ("v", 7)): 1},
        "anti": {(("k", 3), ("v", 1)): -1},
    }
    for how, rows_ in want.items():
        plan = {
            "op": "join",
            "how": how,
            "left": kept,
            "right": json.loads(json.dumps(kept)),
            "on": [["k", "k"]],
        }
        view = f"{name}_{how}"
        r = client.post("/v1/views", json={"name": view, "query": plan})
        assert r.status_code == 201, r.text
        names = [a["name"] for a in client.get(f"/v1/views/{view}").json()["arrangements"]]
        assert sorted(names) == sorted(["arrange by [k]", "present", view]), names
        assert row_counts(client, view) == rows_


def test_a_var_joined_twice_by_the_same_columns_is_arranged_once(
    client: httpx.Client, name: str
) -> None:
    """In a loop, a var joined on ``b`` by an inner, a semi- and an anti-join, and a table
    joined on ``src`` by all three, are each arranged once (audit 31: the var was arranged
    once per join), and the table's keys counted once for the semi- and the anti-join
    (audit 32). Checked against the from-scratch evaluator after each write."""
    from tests.oracle.evaluate import Database, evaluate

    p, e = f"{name}_p", f"{name}_e"
    make_table(client, p, [("a", "int"), ("b", "int")])
    make_table(client, e, [("src", "int"), ("dst", "int")])
    var, edges = {"op": "var", "name": "x"}, {"op": "table", "name": e}
    step = {
        "op": "join",
        "left": var,
        "right": edges,
        "on": [["b", "src"]],
        "columns": {"a": "left.a", "b": "right.dst"},
    }
    ends = {"op": "join", "how": "semi", "left": var, "right": edges, "on": [["b", "src"]]}
    stuck = {**ends, "how": "anti"}
    plan = {
        "op": "iterate",
        "vars": {"x": {"op": "table", "name": p}},
        "body": {
            "x": {
                "op": "distinct",
                "input": {"op": "concat", "inputs": [var, step, ends, stuck]},
            }
        },
        "result": "x",
    }
    r = client.post("/v1/views", json={"name": f"{name}_v", "query": plan})
    assert r.status_code == 201, r.text
    names = [a["name"] for a in client.get(f"/v1/views/{name}_v").json()["arrangements"]]
    assert sorted(names) == sorted(
        [
            "iterate: arrange by [b]",
            "iterate: arrange by [src]",
            "iterate: present",
            "iterate: arrange by self",
            "iterate: distinct",
            f"{name}_v",
        ]
    ), names
    schemas = {p: [("a", "int"), ("b", "int")], e: [("src", "int"), ("dst", "int")]}
    contents: dict[str, dict[tuple, int]] = {p: defaultdict(int), e: defaultdict(int)}
    writes = [
        (p, {"columns": {"a": [1, 2], "b": [1, 5]}}),
        (e, {"columns": {"src": [1, 2, 5, 3], "dst": [2, 3, 1, 1]}}),
        (e, {"updates": [{"delete": {"src": 2, "dst": 3}}, {"insert": {"src": 2, "dst": 4}}]}),
        (p, {"updates": [{"weight": 2, "data": {"a": 7, "b": 4}}]}),
    ]
    for table, body in writes:
        write(client, table, body)
        _written(contents[table], [c for c, _ in schemas[table]], body)
        db = Database.from_counters(schemas, contents)
        want = {(("a", a), ("b", b)): n for (a, b), n in evaluate(plan, db).rows.items()}
        assert row_counts(client, f"{name}_v") == want, (table, body)


def _written(contents: dict[tuple, int], cols: list[str], body: dict) -> None:
    """Add a write's rows (columnar, or updates: insert, delete, weighted data) to a table's
    counts by row."""
    if "columns" in body:
        for row in zip(*(body["columns"][c] for c in cols), strict=True):
            contents[row] += 1
    for up in body.get("updates", []):
        for kind, sign in (("insert", 1), ("delete", -1), ("data", up.get("weight", 1))):
            if kind in up:
                contents[tuple(up[kind][c] for c in cols)] += sign


def test_semi_and_anti_joins_of_tables_read_their_shared_arrangements(
    client: httpx.Client, name: str
) -> None:
    """At the top level, a semi- or anti-join of two tables reads both tables' shared
    arrangements, as an inner join does (audit 30: its left side was arranged anew): the
    three views below hold no arrangement of their own but the `present` keys and their
    outputs, and each shared one lists the other views."""
    t, u = f"{name}_t", f"{name}_u"
    make_table(client, t, [("k", "int"), ("v", "int")])
    make_table(client, u, [("k", "int")])
    write(client, t, {"columns": {"k": [1, 2, 2, 3], "v": [10, 20, 21, 30]}})
    write(client, u, {"columns": {"k": [2, 3, 3]}})
    views = {}
    for how in ("inner", "semi", "anti"):
        plan = {
            "op": "join",
            "how": how,
            "left": {"op": "table", "name": t},
            "right": {"op": "table", "name": u},
            "on": [["k", "k"]],
        }
        views[how] = f"{name}_{how}"
        r = client.post("/v1/views", json={"name": views[how], "query": plan})
        assert r.status_code == 201, r.text
    for how, view in views.items():
        desc = client.get(f"/v1/views/{view}").json()
        shared = sorted(a["name"] for a in desc["arrangements"] if a["shared_with"])
        own = sorted(a["name"] for a in desc["arrangements"] if not a["shared_with"])
        assert len(shared) == 2, desc["arrangements"]
        assert own == sorted([view, *(["present"] if how != "inner" else [])]), own
    want = {
        "semi": {(("k", 2), ("v", 20)): 1, (("k", 2), ("v", 21)): 1, (("k", 3), ("v", 30)): 1},
        "anti": {(("k", 1), ("v", 10)): 1},
    }
    for how, rows_ in want.items():
        assert row_counts(client, views[how]) == rows_
    write(client, u, {"updates": [{"delete": {"k": 2}}, {"insert": {"k": 1}}]})
    write(client, t, {"updates": [{"insert": {"k": 4, "v": 40}}]})
    assert row_counts(client, views["semi"]) == {
        (("k", 1), ("v", 10)): 1,
        (("k", 3), ("v", 30)): 1,
    }
    assert row_counts(client, views["anti"]) == {
        (("k", 2), ("v", 20)): 1,
        (("k", 2), ("v", 21)): 1,
        (("k", 4), ("v", 40)): 1,
    }
    assert client.delete(f"/v1/views/{views['inner']}").status_code == 204
    write(client, t, {"updates": [{"delete": {"k": 3, "v": 30}}]})
    assert row_counts(client, views["semi"]) == {(("k", 1), ("v", 10)): 1}


def test_a_subplan_joined_twice_at_the_top_level_is_arranged_once(
    client: httpx.Client, name: str
) -> None:
    """Outside loops too, one view arranges a subplan once per set of columns, however many
    joins read it: a filter joined on ``k`` with two tables by inner joins, and a semi- and
    an anti-join against one table's shared arrangement, which count its keys once (audit
    32). A second view builds its own. Checked against the evaluator after each write."""
    from tests.oracle.evaluate import Database, evaluate

    t, u, w = f"{name}_t", f"{name}_u", f"{name}_w"
    schemas = {t: [("k", "int"), ("v", "int")], u: [("k", "int")], w: [("k", "int")]}
    for table, cols in schemas.items():
        make_table(client, table, cols)
    kept = {
        "op": "filter",
        "input": {"op": "table", "name": t},
        "where": {"fn": "gt", "args": ["v", 0]},
    }

    def join(right: str, how: str) -> dict:
        plan = {
            "op": "join",
            "how": how,
            "left": kept,
            "right": {"op": "table", "name": right},
            "on": [["k", "k"]],
        }
        return plan if how != "inner" else {**plan, "columns": {"k": "left.k", "v": "left.v"}}

    plan = {
        "op": "concat",
        "inputs": [join(u, "inner"), join(w, "inner"), join(u, "semi"), join(u, "anti")],
    }
    for view in (f"{name}_a", f"{name}_b"):
        r = client.post("/v1/views", json={"name": view, "query": plan})
        assert r.status_code == 201, r.text
        arrangements = client.get(f"/v1/views/{view}").json()["arrangements"]
        names = sorted(a["name"] for a in arrangements)
        # the filter by k, the keys of u, the view's own; u's and w's shared ones by k
        mine = ["arrange by [k]", "present", view, f"{u} by [k]", f"{w} by [k]"]
        assert names == sorted(mine), arrangements
    contents: dict[str, dict[tuple, int]] = {table: defaultdict(int) for table in schemas}
    writes = [
        (t, {"columns": {"k": [1, 2, 2, 3, 4], "v": [1, 2, -2, 3, 4]}}),
        (u, {"columns": {"k": [2, 3, 3]}}),
        (w, {"columns": {"k": [1, 2, 5]}}),
        (u, {"updates": [{"delete": {"k": 3}}, {"insert": {"k": 4}}]}),
        (t, {"updates": [{"weight": 2, "data": {"k": 5, "v": 9}}, {"delete": {"k": 1, "v": 1}}]}),
    ]
    for table, body in writes:
        write(client, table, body)
        _written(contents[table], [c for c, _ in schemas[table]], body)
        db = Database.from_counters(schemas, contents)
        want = {(("k", k), ("v", v)): n for (k, v), n in evaluate(plan, db).rows.items()}
        for view in (f"{name}_a", f"{name}_b"):
            assert row_counts(client, view) == want, (view, table, body)
    assert client.delete(f"/v1/views/{name}_a").status_code == 204
    write(client, t, {"updates": [{"insert": {"k": 2, "v": 7}}]})
    assert (("k", 2), ("v", 7)) in row_counts(client, f"{name}_b")


def test_reductions_of_a_table_read_its_shared_arrangements(
    client: httpx.Client, name: str
) -> None:
    """At the top level, a table arranged by some columns is the table's shared arrangement
    by them, whatever reads it: a semi-join on all its columns and a `distinct` of it in one
    view read one (audit 33: the distinct arranged it anew), a `distinct` in a second view
    reads it too, and a count by one column in a third reads the table by that column.
    Checked against the evaluator after each write, and after the first view is dropped."""
    from tests.oracle.evaluate import Database, evaluate

    e, r = f"{name}_e", f"{name}_r"
    schemas = {e: [("x", "int"), ("y", "int")], r: [("x", "int"), ("y", "int")]}
    for table, cols in schemas.items():
        make_table(client, table, cols)
    table = {"op": "table", "name": e}
    plans = {
        f"{name}_a": {
            "op": "concat",
            "inputs": [
                {
                    "op": "join",
                    "how": "semi",
                    "left": table,
                    "right": {"op": "table", "name": r},
                    "on": [["x", "x"], ["y", "y"]],
                },
                {"op": "distinct", "input": table},
            ],
        },
        f"{name}_b": {"op": "distinct", "input": table},
        f"{name}_c": {
            "op": "reduce",
            "input": table,
            "by": ["x"],
            "aggregates": {"n": {"fn": "count"}},
        },
    }
    for view, plan in plans.items():
        created = client.post("/v1/views", json={"name": view, "query": plan})
        assert created.status_code == 201, created.text
    a, b, c = plans
    listed = {
        view: {
            x["name"]: x["shared_with"]
            for x in client.get(f"/v1/views/{view}").json()["arrangements"]
        }
        for view in plans
    }
    assert listed[a] == {
        f"{e} by [x, y]": [b],
        f"{r} by [x, y]": [],
        "present": [],
        "distinct": [],
        a: [],
    }, listed[a]
    # a view whose result is a reduction keeps it as its own arrangement
    assert listed[b] == {f"{e} by [x, y]": [a], "distinct": []}, listed[b]
    assert listed[c] == {f"{e} by [x]": [], "reduce": []}, listed[c]
    contents: dict[str, dict[tuple, int]] = {t: defaultdict(int) for t in schemas}
    writes = [
        (e, {"columns": {"x": [1, 1, 2, 3], "y": [1, 2, 2, 3]}}),
        (r, {"columns": {"x": [1, 3], "y": [2, 3]}}),
        (e, {"updates": [{"weight": 2, "data": {"x": 1, "y": 2}}, {"delete": {"x": 3, "y": 3}}]}),
        ("drop", {}),
        (e, {"updates": [{"insert": {"x": 4, "y": 1}}, {"delete": {"x": 1, "y": 1}}]}),
    ]
    live = dict(plans)
    for target, body in writes:
        if target == "drop":
            assert client.delete(f"/v1/views/{a}").status_code == 204
            del live[a]
            continue
        write(client, target, body)
        _written(contents[target], [col for col, _ in schemas[target]], body)
        db = Database.from_counters(schemas, contents)
        for view, plan in live.items():
            got = evaluate(plan, db)
            want = {
                tuple(sorted(zip(got.names, row, strict=True))): n for row, n in got.rows.items()
            }
            assert row_counts(client, view) == want, (view, target, body)


def test_a_shared_arrangement_holds_its_source_history_for_views_that_start_earlier(
    client: httpx.Client, name: str
) -> None:
    """A shared arrangement made by a view holds its source's content as the source keeps it,
    not advanced to that view's start (audit 34): a later view that also reads a lagging
    table starts earlier, and its `distinct` (or join) of the shared table is right there."""
    t, u = f"{name}_t", f"{name}_u"
    make_table(client, t, [("a", "int")], timing="client")
    make_table(client, u, [("a", "int")], timing="client")
    write(
        client,
        t,
        {"updates": [{"insert": {"a": i}, "time": i} for i in range(10)], "advance_to": 10},
    )
    write(client, u, {"updates": [], "advance_to": 3})
    dist_t = {"op": "distinct", "input": {"op": "table", "name": t}}
    early = {
        "op": "concat",
        "inputs": [dist_t, {"op": "distinct", "input": {"op": "table", "name": u}}],
    }
    joined = {
        "op": "join",
        "left": {"op": "table", "name": t},
        "right": {"op": "table", "name": u},
        "on": [["a", "a"]],
    }
    for view, plan in ((f"{name}_late", dist_t), (f"{name}_early", early), (f"{name}_j", joined)):
        r = client.post("/v1/views", json={"name": view, "query": plan})
        assert r.status_code == 201, r.text
    # the first view made the shared arrangement at time 9; the second starts at 2 (u's)
    assert row_counts(client, f"{name}_early", as_of="2") == {
        (("a", 0),): 1,
        (("a", 1),): 1,
        (("a", 2),): 1,
    }
    write(client, u, {"updates": [{"insert": {"a": 1}, "time": 3}], "advance_to": 5})
    assert row_counts(client, f"{name}_early", as_of="4") == {
        **{(("a", i),): 1 for i in range(5) if i != 1},
        (("a", 1),): 2,
    }
    assert row_counts(client, f"{name}_j", as_of="4") == {(("a", 1),): 1}
    assert row_counts(client, f"{name}_late") == {(("a", i),): 1 for i in range(10)}
