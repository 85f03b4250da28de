"""Table lifecycle over real HTTP: create, list, describe, drop, and bad inputs."""

from __future__ import annotations

import re
import uuid

import httpx

from tests.service.conftest import assert_error, make_table, write


def test_health_and_openapi(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    spec = client.get("/openapi.json").json()
    for path in (
        "/v1/tables",
        "/v1/tables/{name}/updates",
        "/v1/views",
        "/v1/views/{name}/rows",
        "/v1/completions/{token}",
    ):
        assert path in spec["paths"], path

    def schemas(node: object) -> list[dict]:
        if isinstance(node, dict):
            found = [node] if "$ref" in node else []
            return found + [s for v in node.values() for s in schemas(v)]
        if isinstance(node, list):
            return [s for v in node for s in schemas(v)]
        return []

    # a reference stands alone (a sibling "type": "string" would make a body unsatisfiable)
    assert [s for s in schemas(spec) if len(s) > 1] == []

    def resolves(ref: str) -> bool:
        node: object = spec
        for part in ref.removeprefix("#/").split("/"):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    # every reference points into this document (request bodies included: a "#/$defs/..."
    # in a schema embedded in the document would point at its root, which has none)
    refs = {str(s["$ref"]) for s in schemas(spec)}
    assert refs and [r for r in refs if not r.startswith("#/") or not resolves(r)] == []

    # request bodies leave optional fields out rather than null (the server refuses a null
    # where API.md gives it no meaning, so a schema allowing one would promise too much)
    bodies = [
        op["requestBody"]["content"]["application/json"]["schema"]
        for methods in spec["paths"].values()
        for op in methods.values()
        if "requestBody" in op
    ]
    assert len(bodies) >= 4
    assert '"null"' not in str(bodies).replace("'", '"')
    # and so do query parameters (as_of offered null)
    params = [
        p["schema"]
        for methods in spec["paths"].values()
        for op in methods.values()
        for p in op.get("parameters", [])
    ]
    assert {"type": "string", "pattern": "^[0-9]+(,[0-9]+)*$", "title": "As Of"} in params
    assert '"null"' not in str(params).replace("'", '"')

    def body_model(path: str, method: str, status: str) -> str:
        schema = spec["paths"][path][method]["responses"][status]["content"]["application/json"]
        return str(schema["schema"]["$ref"]).rsplit("/", 1)[-1]

    assert body_model("/v1/tables", "post", "201") == "TablePublic"
    assert body_model("/v1/tables/{name}/updates", "post", "200") == "WriteDone"
    assert body_model("/v1/tables/{name}/updates", "post", "202") == "WritePending"
    assert body_model("/v1/tables/{name}/updates", "post", "422") == "ErrorBody"
    # every error documented is in the envelope: none is FastAPI's own validation answer,
    # which this server never sends
    errors = {
        body_model(path, method, status)
        for path, methods in spec["paths"].items()
        for method, op in methods.items()
        for status in op["responses"]
        if status.startswith(("4", "5"))
    }
    assert errors == {"ErrorBody"}, errors
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    error = spec["components"]["schemas"]["ErrorDetail"]
    assert sorted(error["required"]) == ["code", "detail", "message"]  # detail: null at least


def test_create_describe_list_drop(client: httpx.Client, name: str) -> None:
    desc = make_table(client, name, [("src", "int"), ("dst", "int")], primary_key=["src", "dst"])
    assert desc == {
        "name": name,
        "columns": [{"name": "src", "type": "int"}, {"name": "dst", "type": "int"}],
        "primary_key": ["src", "dst"],
        "timing": "server",
        "time_dims": 1,
        "frontier": desc["frontier"],
        "rows": 0,
        "readers": [],
    }
    assert client.get(f"/v1/tables/{name}").json() == desc
    assert name in [t["name"] for t in client.get("/v1/tables").json()["tables"]]
    assert client.delete(f"/v1/tables/{name}").status_code == 204
    assert_error(client.get(f"/v1/tables/{name}"), 404, "not_found")
    assert_error(client.delete(f"/v1/tables/{name}"), 404)


def test_client_timed_two_dimensional(client: httpx.Client, name: str) -> None:
    desc = make_table(client, name, [("k", "string")], timing="client", time_dims=2)
    assert desc["timing"] == "client" and desc["time_dims"] == 2 and desc["frontier"] == [[0, 0]]


def test_name_taken_is_409(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("x", "int")])
    r = client.post("/v1/tables", json={"name": name, "columns": [{"name": "x", "type": "int"}]})
    assert_error(r, 409, "name_taken")


def test_bad_table_specs_are_422(client: httpx.Client, name: str) -> None:
    bad = [
        {"name": "9bad", "columns": [{"name": "x", "type": "int"}]},
        {"name": f"{name}\n", "columns": [{"name": "x", "type": "int"}]},  # the whole name
        {"name": "x" * 64, "columns": [{"name": "x", "type": "int"}]},
        {"name": name, "columns": [{"name": "x\n", "type": "int"}]},
        {"name": name, "columns": []},
        {"name": name, "columns": [{"name": "x", "type": "decimal"}]},
        {"name": name, "columns": [{"name": "x", "type": "int"}, {"name": "x", "type": "int"}]},
        {"name": name, "columns": [{"name": "x", "type": "int"}], "primary_key": ["y"]},
        {"name": name, "columns": [{"name": "x", "type": "int"}], "primary_key": {}},
        {"name": name, "columns": [{"name": "x", "type": "int"}], "primary_key": ""},
        {"name": name, "columns": [{"name": "x", "type": "int"}], "primary_key": False},
        {"name": name, "columns": [{"name": "x", "type": "int"}], "timing": "sometimes"},
        {"name": name, "columns": [{"name": "x", "type": "int"}], "time_dims": 2},
        {"name": name, "columns": [{"name": "x", "type": "int"}], "primary_keys": ["x"]},
        {
            "name": name,
            "columns": [{"name": "x", "type": "int"}],
            "timing": "client",
            "time_dims": 0,
        },
    ]
    for body in bad:
        assert_error(client.post("/v1/tables", json=body), 422)
    for created in (name, f"{name}%0A", "x" * 64):  # nothing was created
        assert_error(client.get(f"/v1/tables/{created}"), 404)


def test_null_is_no_value_for_an_optional_field(client: httpx.Client, name: str) -> None:
    """An optional field is given or left out (README): ``null`` is refused like any other
    value of the wrong type, with that field's own code and path, and changes nothing."""
    columns = [{"name": "x", "type": "int"}]
    for field in ("primary_key", "timing", "time_dims"):
        r = client.post("/v1/tables", json={"name": name, "columns": columns, field: None})
        assert assert_error(r, 422, "bad_schema")["detail"] == {"path": field}
    # a column missing a field or holding an unknown one: that field (audit 100: the column)
    for column, path in (
        ({"name": "y"}, "columns[1].type"),
        ({"name": "y", "type": "int", "null": True}, "columns[1].null"),
        ("y", "columns[1]"),
    ):
        r = client.post("/v1/tables", json={"name": name, "columns": [*columns, column]})
        assert assert_error(r, 422, "bad_schema")["detail"] == {"path": path}
    # a list's item at fault: that item (the list as a whole before)
    two = [*columns, {"name": "y", "type": "int"}]
    for body, path in (
        ({"columns": [*two, {"name": "x", "type": "string"}]}, "columns[2].name"),
        ({"columns": two, "primary_key": ["y", "z"]}, "primary_key[1]"),
        ({"columns": two, "primary_key": ["y", "x", "y"]}, "primary_key[2]"),
        ({"columns": two, "primary_key": ["y", 3]}, "primary_key[1]"),
    ):
        r = client.post("/v1/tables", json={"name": name, **body})
        assert assert_error(r, 422, "bad_schema")["detail"] == {"path": path}
    assert_error(client.get(f"/v1/tables/{name}"), 404)

    make_table(client, name, [("x", "int")])
    updates = f"/v1/tables/{name}/updates"
    r = client.post(updates, json={"columns": {"x": [1]}, "diff": None})
    assert assert_error(r, 422, "invalid_update")["detail"] == {"path": "diff"}
    r = client.post(updates, json={"columns": {"x": [1]}, "time": None})
    assert assert_error(r, 422, "invalid_update")["detail"] == {"path": "time"}
    # a column missing, else one unknown: that column
    for cols, path in (({"x": [1], "y": [2]}, "columns.y"), ({"y": [2]}, "columns.x")):
        r = client.post(updates, json={"columns": cols})
        assert assert_error(r, 422, "wrong_columns")["detail"] == {"path": path}
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 0

    loads = f"/v1/tables/{name}/loads"
    source = {"sql": "SELECT 1 AS x"}
    for body, code, path in [
        ({"source": source, "where": None}, "invalid", "where"),
        ({"source": source, "columns": None}, "invalid", "columns"),
        ({"source": source, "mode": None}, "invalid", "mode"),  # one code for every field
        ({"source": source, "mode": "upsert"}, "invalid", "mode"),
        ({"source": source, "at": 0}, "invalid", "at"),
        ({"source": source, "time": None}, "bad_time", "time"),
        ({"source": {**source, "table": None}}, "invalid", "source.table"),
        ({"source": {"path": "/e.csv", "format": None}}, "invalid", "source.format"),
        ({"source": {"path": "/e.csv", "options": None}}, "invalid", "source.options"),
    ]:
        assert assert_error(client.post(loads, json=body), 422, code)["detail"] == {"path": path}
    assert client.get("/v1/loads").json() == {"loads": []}


def test_not_json_is_400_and_not_object_is_422(client: httpx.Client) -> None:
    assert_error(client.post("/v1/tables", content=b"{nope"), 400)
    for not_json in (b'{"name": NaN}', b'{"name": Infinity}', b"[1,]", "[1]".encode("utf-16")):
        assert_error(client.post("/v1/tables", content=not_json), 400, "invalid_json")
    assert_error(client.post("/v1/tables", content=b"[" * 5000 + b"}" * 5000), 400)
    assert_error(client.post("/v1/tables", content=b"[" * 5000 + b"]" * 4999), 400)
    assert_error(client.post("/v1/tables", content=b"[" * 5000 + b"]" * 5000 + b"1"), 400)
    assert_error(client.post("/v1/tables", json=[1, 2]), 422)
    # JSON all the same, but with a value nothing here represents: 422, not 400
    for unrepresentable, where in (
        (b'{"name": 1e400}', "name"),
        (b'{"name": "\\ud800"}', "name"),
        (b'{"columns": [{"name": "x", "type": "int"}, {"\\udc00": -1e400}]}', "columns[1].\\udc00"),
        (b'{"a": {"b": [0, [2, -1e999]]}}', "a.b[1][1]"),
        (b'{"a": [1, {"b": ' + b"9" * 310 + b"}]}", "a[1].b"),  # an int past double range
        (b'{"a": [1, {"b": -' + b"9" * 5000 + b"}]}", "a[1].b"),  # past what int() reads
        (b'{"a": ' + b"[" * 1000 + b"1e999" + b"]" * 1000 + b"}", "a" + "[0]" * 1000),
    ):
        err = assert_error(client.post("/v1/tables", content=unrepresentable), 422)
        assert err["code"] == "invalid_value" and err["detail"] == {"path": where}
        assert f" at {where}: " in err["message"]
    for unrepresentable in (
        b'{"name": 1e999, "pad": "' + b"x" * (256 * 1024) + b'"}',  # not read again to say where
        b"[" * 5000 + b"]" * 5000,  # past the 1,024 levels the parser nests (it was a 400)
        b'{"a": ' * 3000 + b'[1, "x", {}, []]' + b"}" * 3000,
    ):
        err = assert_error(client.post("/v1/tables", content=unrepresentable), 422)
        assert err["code"] == "invalid_value" and err["detail"] == {"path": "body"}


def test_a_member_named_twice_defines_nothing(client: httpx.Client, name: str) -> None:
    """Audit 48: ``{"name": "a", "name": "b"}`` made table ``b``, the parser keeping the last.
    The bodies that define tables, views and loads refuse it; a write keeps the last (its
    parser does not see repeats, README)."""
    columns = '[{"name": "x", "type": "int"}]'
    bodies = [
        ("/v1/tables", f'{{"name": "{name}_a", "name": "{name}", "columns": {columns}}}'),
        (
            "/v1/tables",
            f'{{"name": "{name}", "columns": [{{"name": "x", "name": "y", "type": "int"}}]}}',
        ),
    ]
    for (path, body), where in zip(bodies, ["name", "columns[0].name"], strict=True):
        err = assert_error(client.post(path, content=body.encode()), 422, "invalid_value")
        assert "'name' twice" in err["message"] and err["detail"] == {"path": where}
    assert client.get(f"/v1/tables/{name}").status_code == 404
    make_table(client, name, [("x", "int")])
    plan = f'{{"op": "table", "name": "{name}", "op": "table"}}'
    view = f'{{"name": "{name}_v", "query": {plan}}}'
    err = assert_error(client.post("/v1/views", content=view.encode()), 422, "invalid_value")
    assert "'op' twice" in err["message"] and err["detail"] == {"path": "query.op"}
    # in a plan, list items are dotted numbers, as the plan's own checks name them (audit
    # 101: ``query.inputs[1].where`` here, ``query.inputs.1.where`` for an unknown column)
    table = f'{{"op": "table", "name": "{name}"}}'
    for where, path in (
        ('{"fn": "gt", "args": ["x", 1], "fn": "lt"}', "query.inputs.1.where.fn"),
        ('{"fn": "gt", "args": ["x", 1e400]}', "query.inputs.1.where.args.1"),
        ('{"fn": "gt", "args": ["x", "\\ud800"]}', "query.inputs.1.where.args.1"),
        ('{"fn": "gt", "args": ["nope", 1]}', "query.inputs.1.where.args.0"),
    ):
        filtered = f'{{"op": "filter", "input": {table}, "where": {where}}}'
        plan = f'{{"op": "concat", "inputs": [{table}, {filtered}]}}'
        view = f'{{"name": "{name}_v", "query": {plan}}}'
        err = assert_error(client.post("/v1/views", content=view.encode()), 422)
        assert err["detail"] == {"path": path}, err
    load = '{"source": {"sql": "SELECT 1 AS x"}, "mode": "append", "mode": "replace"}'
    r = client.post(f"/v1/tables/{name}/loads", content=load.encode())
    assert "'mode' twice" in assert_error(r, 422, "invalid_value")["message"]
    assert client.get(f"/v1/views/{name}_v").status_code == 404
    # nested past the standard library's default recursion, up to orjson's 1,024 levels:
    # checked all the same (audit 52: a load body there kept its last "mode"; audit 56:
    # then refused as too deep to check, from about 952 levels)
    deep = b'{"options": ' * 1018 + b'{"k": 1, "k": 2}' + b"}" * 1018
    source = b'{"path": "x.csv", "options": {"a": ' + deep + b"}}"
    load = b'{"source": ' + source + b', "mode": "append"}'
    r = client.post(f"/v1/tables/{name}/loads", content=load)
    err = assert_error(r, 422, "invalid_value")
    assert err["detail"]["path"] == "source.options.a" + ".options" * 1018 + ".k"
    assert [x for x in client.get("/v1/loads").json()["loads"] if x["table"] == name] == []


def test_a_definition_over_a_mebibyte_is_too_large(client: httpx.Client, name: str) -> None:
    """Audit 52: 60 MB of table or view definition (parsed, then read again for repeated
    names, in the request loop) held every other request for seconds. A definition is at
    most 1 MiB; writes keep --max-body-mb."""
    padding = b" " * (1024 * 1024)
    for path in ("/v1/tables", "/v1/views", f"/v1/tables/{name}/loads"):
        err = assert_error(client.post(path, content=b"{" + padding + b"}"), 413, "body_too_large")
        assert "definition" in err["message"], err
    make_table(client, name, [("x", "int")])
    rows = {"columns": {"x": list(range(300_000))}}  # about 2 MB of data: a write takes it
    assert write(client, name, rows)["times"]


def test_unknown_route_has_error_shape(client: httpx.Client) -> None:
    assert_error(client.get("/v1/nothing-here"), 404, "not_found")


def test_a_path_with_a_trailing_slash_is_not_found(client: httpx.Client, name: str) -> None:
    """Audit 49: such a path (``%2F`` too) answered a bare 307 to the path without the
    slash, so a client following redirects dropped a table with ``DELETE .../t%2F``."""
    make_table(client, name, [("x", "int")])
    for method, path in [
        ("GET", "/v1/tables/"),
        ("POST", "/v1/views/"),
        ("DELETE", f"/v1/tables/{name}/"),
        ("DELETE", f"/v1/tables/{name}%2F"),
    ]:
        err = assert_error(client.request(method, path), 404, "not_found")
        assert "paths end without a slash" in err["message"], (method, path)
    assert client.get(f"/v1/tables/{name}").status_code == 200
    # no hint where the path without the slash is no endpoint either (audit 66)
    err = assert_error(client.get("/v1/completions/"), 404, "not_found")
    assert "slash" not in err["message"], err


def test_wrong_method_is_405_naming_the_allowed_ones(client: httpx.Client, name: str) -> None:
    make_table(client, name, [("x", "int")])
    r = client.put(f"/v1/tables/{name}")
    assert_error(r, 405, "method_not_allowed")
    assert set(r.headers["allow"].split(", ")) == {"GET", "HEAD", "DELETE"}
    r = client.request("TRACE", "/v1/views")
    assert_error(r, 405)
    assert set(r.headers["allow"].split(", ")) == {"GET", "HEAD", "POST"}
    r = client.head(f"/v1/tables/{name}/updates")  # served for POST alone
    assert r.status_code == 405 and r.content == b"" and r.headers["allow"] == "POST"


def test_head_is_a_get_without_its_body(client: httpx.Client, name: str) -> None:
    """HEAD wherever GET is served (RFC 9110): the GET's status and headers, no body."""
    make_table(client, name, [("x", "int")])
    for path in ("/healthz", "/metrics", "/v1/tables", f"/v1/tables/{name}", "/v1/views"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200, (path, head.status_code)
        assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]
    head = client.head(f"/v1/tables/{name}_nope")
    assert head.status_code == 404 and head.content == b""


def test_metrics_count_the_interned_strings(client: httpx.Client, name: str) -> None:
    """``difflow_interned_strings`` counts each distinct string once, for the server's life
    (README: strings are never given back): fresh strings raise it by their number, the same
    strings again (here, deleting those rows) leave it where it is."""

    def interned() -> int:
        text = client.get("/metrics").text
        found = re.search(r"^difflow_interned_strings (\S+)$", text, re.M)
        assert found, text
        return int(float(found.group(1)))

    make_table(client, name, [("s", "string")])
    fresh = [f"{name}-{i}-{uuid.uuid4()}" for i in range(40)]
    before = interned()
    write(client, name, {"updates": [{"insert": {"s": s}} for s in fresh]})
    after = interned()
    assert after >= before + len(fresh)
    write(client, name, {"updates": [{"delete": {"s": s}} for s in fresh]})
    assert interned() == after


def test_rows_past_int64_saturate_and_the_listings_still_answer(
    client: httpx.Client, name: str
) -> None:
    """Every count here fits in 64 bits, only their total does not: a table's and a view's
    ``rows`` stop at int64's ends instead of wrapping or failing the listings (audit 5: the
    listings answered 500 or dropped the connection, single GETs showed a negative total)."""
    make_table(client, name, [("a", "int")])
    view = f"{name}_v"
    r = client.post("/v1/views", json={"name": view, "query": {"op": "table", "name": name}})
    assert r.status_code == 201, r.text
    big = 2**62 - 1

    def weighted(*rows: tuple[int, int]) -> dict:
        return {"updates": [{"weight": w, "data": {"a": a}} for a, w in rows]}

    def totals() -> tuple[int, int]:
        listed = []
        for path, key, which in (("/v1/tables", "tables", name), ("/v1/views", "views", view)):
            r = client.get(path)
            assert r.status_code == 200, r.text
            listed.append({d["name"]: d["rows"] for d in r.json()[key]}[which])
        assert listed == [
            client.get(f"/v1/tables/{name}").json()["rows"],
            client.get(f"/v1/views/{view}").json()["rows"],
        ]
        return listed[0], listed[1]

    write(client, name, weighted((1, big), (2, big)))
    assert totals() == (2**63 - 2, 2**63 - 2)
    write(client, name, weighted((3, big)))  # past 2**63 over two writes
    assert totals() == (2**63 - 1, 2**63 - 1)
    write(client, name, weighted((4, big), (5, big)))  # and within one
    assert totals() == (2**63 - 1, 2**63 - 1)
    write(client, name, weighted((3, -big), (4, -big), (5, -big)))  # the exact total is back
    assert totals() == (2**63 - 2, 2**63 - 2)
    write(client, name, weighted(*((a, -big) for a in range(6, 11))))
    assert totals() == (-(2**63), -(2**63))
    assert client.delete(f"/v1/views/{view}").status_code == 204
    assert client.delete(f"/v1/tables/{name}").status_code == 204
