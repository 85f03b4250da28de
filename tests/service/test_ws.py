"""WebSocket writes and subscriptions against a real server."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import socket
import struct
import threading
import time
from contextlib import ExitStack

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.service.conftest import (
    assert_error,
    make_count_view,
    make_table,
    make_view,
    row_counts,
    rows,
    write,
)
from tests.service.rawws import StalledPeer
from tests.service.server import running_server


def recv(ws, timeout: float = 30.0) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(ws.recv(timeout=timeout))


def test_pipelined_writes_ack_in_order(server, client: httpx.Client, name: str) -> None:  # type: ignore[no-untyped-def]
    make_table(client, name, [("k", "int")])
    view = f"{name}_n"
    make_count_view(client, view, name)
    with connect(f"{server.ws_url}/v1/tables/{name}/updates") as ws:
        for i in range(200):
            ws.send(json.dumps({"id": i, "updates": [{"insert": {"k": i}}]}))
        acks = [recv(ws) for _ in range(200)]
    assert [a["id"] for a in acks] == list(range(200))
    assert all(a["type"] == "ack" and a["status"] == "done" for a in acks)
    times = [a["times"][0] for a in acks]
    assert times == sorted(times) and len(set(times)) == 200  # each frame its own time
    counts = [a["outputs"][view] for a in acks]
    for i, out in enumerate(counts):  # the count after frame i is i + 1, at frame i's time
        assert {"data": {"n": i + 1}, "time": times[i], "diff": 1} in out


def test_a_socket_writes_only_to_the_table_it_opened_on(
    server, client: httpx.Client, name: str
) -> None:  # type: ignore[no-untyped-def]
    """A table dropped and made again under its name is another table: a socket opened on the
    first gets 404s for its frames, as a write that arrived before the drop does (audit 41:
    its frames went into the new table)."""
    make_table(client, name, [("k", "int")])
    with connect(f"{server.ws_url}/v1/tables/{name}/updates") as ws:
        ws.send(json.dumps({"id": 0, "updates": [{"insert": {"k": 1}}]}))
        assert recv(ws)["status"] == "done"
        assert client.delete(f"/v1/tables/{name}").status_code == 204
        make_table(client, name, [("k", "int")])
        ws.send(json.dumps({"id": 1, "updates": [{"insert": {"k": 2}}]}))
        err = recv(ws)
        assert err["type"] == "error" and err["id"] == 1
        assert (
            err["error"]["code"] == "not_found" and "open a new socket" in err["error"]["message"]
        )
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 0
    with connect(f"{server.ws_url}/v1/tables/{name}/updates") as ws:  # a new socket writes
        ws.send(json.dumps({"id": 2, "updates": [{"insert": {"k": 3}}]}))
        assert recv(ws)["status"] == "done"
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 1


def test_frames_are_not_compressed(server, client: httpx.Client, name: str) -> None:  # type: ignore[no-untyped-def]
    """The client offers permessage-deflate (websockets does by default); the server
    declines it: compressing every small ack cost a tenth of the server's time."""
    make_table(client, name, [("k", "int")])
    with connect(f"{server.ws_url}/v1/tables/{name}/updates") as ws:
        assert ws.request is not None and ws.response is not None
        assert "permessage-deflate" in ws.request.headers.get("Sec-WebSocket-Extensions", "")
        assert "Sec-WebSocket-Extensions" not in ws.response.headers


def test_bad_frame_then_good_frame(server, client: httpx.Client, name: str) -> None:  # type: ignore[no-untyped-def]
    make_table(client, name, [("k", "int")])
    with connect(f"{server.ws_url}/v1/tables/{name}/updates") as ws:
        ws.send("{not json")
        ws.send(json.dumps({"id": "b", "updates": [{"insert": {"k": "str"}}]}))
        ws.send(json.dumps({"id": "c", "updates": [{"insert": {"k": 1}}]}))
        e1, e2, ok = recv(ws), recv(ws), recv(ws)
    assert e1["type"] == "error" and e1["error"]["code"] == "invalid_json"
    assert (
        e2 == {"type": "error", "id": "b", "error": e2["error"]}
        and e2["error"]["detail"]["path"] == "updates[0].insert.k"
    )
    assert ok["type"] == "ack" and ok["id"] == "c" and ok["status"] == "done"
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 1


def test_an_id_too_deep_to_echo_is_refused_and_later_frames_are_acked(  # type: ignore[no-untyped-def]
    server, client: httpx.Client, name: str
) -> None:
    """An id nesting 400 lists could not be echoed in an ack: the write used to be applied
    with no ack, and the socket's later acks were lost with it."""
    make_table(client, name, [("k", "int")])
    with connect(f"{server.ws_url}/v1/tables/{name}/updates") as ws:
        ws.send('{"id": %s, "updates": [{"insert": {"k": 1}}]}' % ("[" * 400 + "]" * 400))
        ws.send(json.dumps({"id": [[["fine"]]], "updates": [{"insert": {"k": 2}}]}))
        refused, ok = recv(ws), recv(ws)
    assert refused["type"] == "error" and refused["id"] is None
    assert refused["error"]["code"] == "invalid_id"
    assert ok["type"] == "ack" and ok["id"] == [[["fine"]]] and ok["status"] == "done"
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 1  # the refused frame: no trace


def test_an_id_beyond_64_bits_is_refused_not_echoed_as_a_float(  # type: ignore[no-untyped-def]
    server, client: httpx.Client, name: str
) -> None:
    """The JSON parser reads an integer beyond 64 bits as a float, and the ack echoed that
    float (1.8446744073709552e+19 for 2**64 + 1): the client could not match it. 2**63
    still fits (64 bits unsigned), and a float is echoed as the float it is."""
    make_table(client, name, [("k", "int")])
    sent = [2**64 + 1, [-(2**70)], {"a": 10**30}, 2**63, 1e30, [12345678901234567890.5]]
    with connect(f"{server.ws_url}/v1/tables/{name}/updates") as ws:
        for i, frame_id in enumerate(sent):
            ws.send(json.dumps({"id": frame_id, "updates": [{"insert": {"k": i}}]}))
        answers = [recv(ws) for _ in sent]
    for refused in answers[:3]:
        assert refused["type"] == "error" and refused["id"] is None
        assert refused["error"]["code"] == "invalid_id"
    assert [(a["type"], a["id"]) for a in answers[3:]] == [("ack", x) for x in sent[3:]]
    assert client.get(f"/v1/tables/{name}").json()["rows"] == 3  # the refused: no trace


def test_subscription_snapshot_diffs_progress(server, client: httpx.Client, name: str) -> None:  # type: ignore[no-untyped-def]
    make_table(client, name, [("k", "string"), ("v", "int")])
    view = f"{name}_s"
    plan = {
        "op": "reduce",
        "input": {"op": "table", "name": name},
        "by": ["k"],
        "aggregates": {"s": {"fn": "sum", "of": "v"}},
    }
    assert client.post("/v1/views", json={"name": view, "query": plan}).status_code == 201
    write(client, name, {"updates": [{"insert": {"k": "a", "v": 1}}]})
    with ExitStack() as stack:
        subs = [
            stack.enter_context(connect(f"{server.ws_url}/v1/views/{view}/subscribe"))
            for _ in range(3)
        ]
        firsts = [[recv(ws), recv(ws)] for ws in subs]
        for snap, prog in firsts:
            assert snap["type"] == "snapshot" and snap["seq"] == 0
            assert snap["updates"] == [{"data": {"k": "a", "s": 1}, "diff": 1}]
            assert (
                prog["type"] == "progress"
                and prog["seq"] == 1
                and prog["frontier"] == [snap["time"] + 1]
            )
        t1 = write(client, name, {"updates": [{"insert": {"k": "a", "v": 2}}]})["times"][0]
        t2 = write(client, name, {"updates": [{"insert": {"k": "b", "v": 7}}]})["times"][0]
        for ws in subs:
            frames = [recv(ws) for _ in range(4)]
            assert [f["seq"] for f in frames] == [2, 3, 4, 5]
            assert [f["type"] for f in frames] == ["diff", "progress", "diff", "progress"]
            assert frames[0]["time"] == t1 and sorted(
                frames[0]["updates"], key=lambda u: u["diff"]
            ) == [{"data": {"k": "a", "s": 1}, "diff": -1}, {"data": {"k": "a", "s": 3}, "diff": 1}]
            assert frames[1]["frontier"] == [t1 + 1]
            assert frames[2] == {
                "type": "diff",
                "seq": 4,
                "time": t2,
                "updates": [{"data": {"k": "b", "s": 7}, "diff": 1}],
            }


def test_a_big_time_comes_in_frames_a_default_client_takes(
    server, client: httpx.Client, name: str
) -> None:  # type: ignore[no-untyped-def]
    """A write of 60,000 rows (about 3 MB of changes at one time) reaches a subscriber that
    uses the websockets defaults (messages up to 1 MiB) as several diff frames of that time,
    in order, with gap-free seq; so does a snapshot of them."""
    make_table(client, name, [("k", "int"), ("s", "string")])
    view = f"{name}_all"
    plan = {"op": "table", "name": name}
    assert client.post("/v1/views", json={"name": view, "query": plan}).status_code == 201
    n = 60_000
    rows = {(k, f"row {k:08d}"): 1 for k in range(n)}
    url = f"{server.ws_url}/v1/views/{view}/subscribe?snapshot=false&progress=false"
    with connect(url) as ws:  # max_size: the default 1 MiB
        body = {"columns": {"k": [k for k, _ in rows], "s": [s for _, s in rows]}}
        t = write(client, name, body)["times"][0]
        got: dict[tuple, int] = {}
        seqs = []
        while sum(got.values()) < n:
            frame = recv(ws)
            assert frame["type"] == "diff" and frame["time"] == t, frame
            seqs.append(frame["seq"])
            for u in frame["updates"]:
                got[(u["data"]["k"], u["data"]["s"])] = u["diff"]
        assert len(seqs) > 1 and seqs == list(range(len(seqs)))
        assert got == rows
    url = f"{server.ws_url}/v1/views/{view}/subscribe?snapshot=true&progress=true"
    with connect(url) as ws:
        got = {}
        frame = recv(ws)
        while frame["type"] == "snapshot":
            for u in frame["updates"]:
                got[(u["data"]["k"], u["data"]["s"])] = u["diff"]
            frame = recv(ws)
        assert frame["type"] == "progress" and got == rows


def test_subscribe_unknown_view_is_an_error_frame(server) -> None:  # type: ignore[no-untyped-def]
    with connect(f"{server.ws_url}/v1/views/nope/subscribe") as ws:
        f = recv(ws)
    assert f["type"] == "error" and f["error"]["code"] == "not_found"


def test_an_unknown_websocket_path_is_an_error_frame(server, client: httpx.Client) -> None:  # type: ignore[no-untyped-def]
    """Audit 49: the handshake was refused with a bare 403; and a plain GET of a WebSocket
    path said only "no such endpoint"."""
    for path in ("/v1/nothing", "/v1/views/x/subscribe/", "/v1/views/x/rows"):
        with connect(f"{server.ws_url}{path}") as ws:
            f = recv(ws)
        assert f["type"] == "error" and f["id"] is None, (path, f)
        assert (
            f["error"]["code"] == "not_found"
            and "/v1/views/{name}/subscribe" in (f["error"]["message"])
        )
    err = assert_error(client.get("/v1/views/x/subscribe"), 404, "not_found")
    assert "a WebSocket endpoint" in err["message"]


def test_a_peer_gone_before_its_error_frame_leaves_no_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A subscriber to an unknown view that resets the connection before the error frame
    (SO_LINGER 0: a reset, not a close) logged an unhandled exception per connection."""
    with running_server(tmp_path) as s:
        host, port = s.ws_url.removeprefix("ws://").split(":")
        for _ in range(5):
            sock = socket.create_connection((host, int(port)))
            key = base64.b64encode(os.urandom(16)).decode()
            sock.sendall(
                f"GET /v1/views/nope/subscribe HTTP/1.1\r\nHost: {host}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
            )
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        with connect(f"{s.ws_url}/v1/views/nope/subscribe") as ws:  # served after them
            assert recv(ws)["error"]["code"] == "not_found"
        time.sleep(0.5)  # what the server logs after the last reset
        assert "Traceback" not in "".join(s.stderr)


def test_a_text_frame_that_is_not_utf8_closes_with_1007_and_one_log_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Invalid UTF-8 in a text frame is the client's fault: the socket closes with 1007
    (invalid frame payload data) and the server logs one warning, not a traceback."""
    with running_server(tmp_path) as s:
        with s.client() as c:
            make_table(c, "t", [("a", "int")])
        host, port = s.ws_url.removeprefix("ws://").split(":")
        sock = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET /v1/tables/t/updates HTTP/1.1\r\nHost: {host}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101")
        payload, mask = b'{"updates": [\xff]}', os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + masked)  # a masked text frame
        frame = b""
        while len(frame) < 4:
            chunk = sock.recv(64)
            assert chunk, "closed without a close frame"
            frame += chunk
        sock.close()
        assert frame[0] == 0x88 and struct.unpack("!H", frame[2:4])[0] == 1007
        time.sleep(0.5)
        log = "".join(s.stderr)
        assert "Traceback" not in log and "UnicodeDecodeError" not in log
        assert "closed a WebSocket (1007): a text frame was not UTF-8" in log


def test_subscribe_with_a_bad_flag_is_an_error_frame(
    server, client: httpx.Client, name: str
) -> None:  # type: ignore[no-untyped-def]
    make_table(client, name, [("k", "int")])
    view = f"{name}_v"
    plan = {"op": "table", "name": name}
    assert client.post("/v1/views", json={"name": view, "query": plan}).status_code == 201
    for query, path in (("snapshot=maybe", "snapshot"), ("snapshot=true&progress=2", "progress")):
        with connect(f"{server.ws_url}/v1/views/{view}/subscribe?{query}") as ws:
            f = recv(ws)
        assert f["type"] == "error" and f["id"] is None
        assert f["error"]["code"] == "invalid" and f["error"]["detail"] == {"path": path}
    with connect(f"{server.ws_url}/v1/views/{view}/subscribe?snapshot=no&snapshot=yes") as ws:
        f = recv(ws)  # a flag given twice: which one was meant is unknown
    assert f["type"] == "error" and f["error"]["code"] == "invalid"
    assert f["error"]["detail"] == {"path": "snapshot"} and "given 2 times" in f["error"]["message"]
    with connect(f"{server.ws_url}/v1/views/{view}/subscribe?snapshot=FALSE&progress=on") as ws:
        assert recv(ws)["type"] == "progress"  # no snapshot
        write(client, name, {"updates": [{"insert": {"k": 7}}]})
        f = recv(ws)
    assert f["type"] == "diff" and f["updates"] == [{"data": {"k": 7}, "diff": 1}]


def test_dropping_a_view_closes_its_subscribers(server, client: httpx.Client, name: str) -> None:  # type: ignore[no-untyped-def]
    make_table(client, name, [("k", "int")])
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    with connect(f"{server.ws_url}/v1/views/{view}/subscribe?snapshot=false&progress=false") as ws:
        write(client, name, {"updates": [{"insert": {"k": 1}}]})
        assert recv(ws)["type"] == "diff"
        assert client.delete(f"/v1/views/{view}").status_code == 204
        closed = recv(ws)
    assert closed["type"] == "closed" and closed["seq"] == 1 and "dropped" in closed["reason"]


def test_a_dropped_views_subscriber_gets_what_it_was_owed_then_closed(  # type: ignore[no-untyped-def]
    server, client: httpx.Client, name: str
) -> None:
    """A subscriber behind by whole frames when its view is dropped gets them all, every
    time in full, then ``closed`` (audit 41: they were dropped, and one subscriber's stream
    ended in the middle of a time)."""
    make_table(client, name, [("k", "int"), ("pad", "string")])
    view = f"{name}_v"
    make_view(client, view, {"op": "table", "name": name})
    url = f"{server.ws_url}/v1/views/{view}/subscribe?snapshot=false&progress=false"
    peer = StalledPeer(url)
    frames = []
    try:
        peer.sock.settimeout(60)
        pad = "x" * 2000
        for i in range(6):  # ~2.4 MB each, in frames of under 1 MB: more than sockets hold
            body = {"columns": {"k": list(range(i * 1200, (i + 1) * 1200)), "pad": [pad] * 1200}}
            write(client, name, body)
        assert client.delete(f"/v1/views/{view}").status_code == 204
        while (f := peer.frame()) is not None:
            frames.append(f)
            if f["type"] == "closed":
                break
    finally:
        peer.close()
    assert [f["seq"] for f in frames] == list(range(len(frames)))
    assert frames[-1]["type"] == "closed" and "dropped" in frames[-1]["reason"]
    keys = sorted(u["data"]["k"] for f in frames[:-1] for u in f["updates"])
    assert keys == list(range(6 * 1200))


def test_heartbeats_and_stalled_subscriber(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running_server(tmp_path / "hb", heartbeat_s=0.3) as s, s.client() as c:
        make_table(c, "t", [("k", "int")])
        assert c.post("/v1/views", json={"name": "v", "query": {"op": "table", "name": "t"}})
        with connect(f"{s.ws_url}/v1/views/v/subscribe?snapshot=false&progress=false") as idle:
            hb = recv(idle, timeout=5)
            assert hb == {"type": "heartbeat", "seq": 0}
    # the stalled peer reads once the writes are over, well within the two heartbeat
    # intervals (20 s) after which one that takes nothing more is dropped (below)
    with running_server(tmp_path / "slow", subscriber_buffer=4) as s, s.client() as c:
        make_table(c, "big", [("k", "int"), ("pad", "string")])
        assert (
            c.post(
                "/v1/views", json={"name": "bigv", "query": {"op": "table", "name": "big"}}
            ).status_code
            == 201
        )
        good_frames: list[dict] = []
        stop = threading.Event()

        def reader() -> None:
            with connect(
                f"{s.ws_url}/v1/views/bigv/subscribe?snapshot=false&progress=false", max_size=None
            ) as ws:
                while not stop.is_set():
                    try:
                        good_frames.append(json.loads(ws.recv(timeout=0.5)))
                    except TimeoutError:
                        continue

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.5)
        stalled = StalledPeer(f"{s.ws_url}/v1/views/bigv/subscribe?snapshot=false&progress=false")
        pad = "x" * 2000
        writes = 40
        for i in range(writes):  # ~2.4 MB per frame: far more than the peer's socket holds
            body = {"columns": {"k": list(range(i * 1200, (i + 1) * 1200)), "pad": [pad] * 1200}}
            r = c.post("/v1/tables/big/updates", json=body)
            assert r.status_code == 200 and r.json()["status"] == "done"
        deadline = time.time() + 60

        def received() -> int:
            return sum(len(f["updates"]) for f in good_frames if f["type"] == "diff")

        while received() < writes * 1200 and time.time() < deadline:
            time.sleep(0.1)
        stop.set()
        t.join()
        diffs = [f for f in good_frames if f["type"] == "diff"]
        # the reading subscriber got everything, each write's ~2.4 MB in frames of < 1 MiB
        assert received() == writes * 1200 and len({f["time"] for f in diffs}) == writes
        assert len(diffs) > writes
        assert [f["seq"] for f in good_frames] == list(range(len(good_frames)))
        frames = []
        while (f := stalled.frame()) is not None:
            frames.append(f)
            if f["type"] == "closed":
                break
        stalled.close()
        assert [f["seq"] for f in frames] == list(range(len(frames)))  # no gaps, even when dropped
        assert frames[-1]["type"] == "closed"
        assert "4 frames" in frames[-1]["reason"] and "slow" in frames[-1]["reason"]
        assert len(frames) < writes


def test_a_subscriber_closed_as_too_slow_that_reads_nothing_is_dropped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Its closed frame waits behind what its socket cannot take; a peer that never reads
    again kept its connection, and megabytes of buffers, for as long as the server ran
    (audit 62). Two heartbeat intervals after its socket last took a frame, it is dropped."""
    with running_server(tmp_path, heartbeat_s=0.5, subscriber_buffer=4) as s, s.client() as c:
        make_table(c, "big", [("k", "int"), ("pad", "string")])
        assert c.post("/v1/views", json={"name": "v", "query": {"op": "table", "name": "big"}})
        peer = StalledPeer(f"{s.ws_url}/v1/views/v/subscribe?snapshot=false&progress=false")
        try:
            pad = "x" * 2000
            for i in range(12):  # ~2.4 MB each, in frames of under 1 MB
                body = {
                    "columns": {"k": list(range(i * 1200, (i + 1) * 1200)), "pad": [pad] * 1200}
                }
                write(c, "big", body)
            subscribers = re.compile(r'^difflow_subscribers\{view="v"\} (\S+)$', re.M)
            assert subscribers.search(c.get("/metrics").text).group(1) == "0.0"  # type: ignore[union-attr]
            time.sleep(3)  # more than two heartbeat intervals
            peer.sock.settimeout(20)
            frames = []
            with contextlib.suppress(ConnectionError):  # reset, or closed after what it had
                while (f := peer.frame()) is not None:
                    frames.append(f)
            # the frames its buffers held, then the end: the closed frame never went out
            assert frames and all(f["type"] == "diff" for f in frames), frames[-1:]
        finally:
            peer.close()


def test_a_subscriber_that_pauses_past_the_keepalive_is_not_dropped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A peer that reads nothing for 45 s (longer than the WebSocket keepalive's 20 s ping
    and 20 s wait for its pong) but is far below the buffer's bound stays subscribed, and
    then reads every frame in order (audit 39: it was closed with 1011 "keepalive ping
    timeout", and no ``closed`` frame)."""
    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "t", [("k", "int")])
        view = {"name": "v", "query": {"op": "table", "name": "t"}}
        assert c.post("/v1/views", json=view).status_code == 201
        peer = StalledPeer(f"{s.ws_url}/v1/views/v/subscribe?snapshot=false&progress=false")
        frames = []
        try:
            peer.sock.settimeout(60)
            write(c, "t", {"updates": [{"insert": {"k": 1}}]})
            time.sleep(45)
            write(c, "t", {"updates": [{"insert": {"k": 2}}]})
            while len([f for f in frames if f["type"] == "diff"]) < 2:
                f = peer.frame()
                assert f is not None, f"closed after {frames}"
                frames.append(f)
        finally:
            peer.close()
        assert [f["seq"] for f in frames] == list(range(len(frames)))
        assert {f["type"] for f in frames} <= {"diff", "heartbeat"}
        diffs = [f["updates"] for f in frames if f["type"] == "diff"]
        assert diffs == [[{"data": {"k": 1}, "diff": 1}], [{"data": {"k": 2}, "diff": 1}]]


def test_one_step_with_more_frames_than_the_buffer_does_not_close_a_reader(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A write of 30 times publishes 30 diffs in one step. The buffer bounds the frames left
    unsent from earlier steps, not one step's own: a subscriber that reads was closed as
    "too slow" the moment the step queued its fifth frame (a pipelined stream whose
    writes the engine took 12,000 at a time closed every subscriber). One that does not
    read is still closed (``test_heartbeats_and_stalled_subscriber``)."""
    with running_server(tmp_path, subscriber_buffer=4) as s, s.client() as c:
        make_table(c, "t", [("k", "int")], timing="client")
        make_count_view(c, "n", "t", by=("k",))
        with connect(f"{s.ws_url}/v1/views/n/subscribe?snapshot=false&progress=false") as ws:
            many = [{"insert": {"k": t}, "time": t} for t in range(30)]
            write(c, "t", {"updates": many, "advance_to": 30})
            frames = [recv(ws) for _ in range(30)]
            assert [(f["type"], f["seq"], f["time"]) for f in frames] == [
                ("diff", t, t) for t in range(30)
            ]
            for t in range(30, 36):  # later steps, each a frame: the reader keeps up
                write(c, "t", {"updates": [{"insert": {"k": t}, "time": t}], "advance_to": t + 1})
                assert recv(ws)["time"] == t


def test_a_snapshot_does_not_count_towards_the_buffer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A big view's snapshot is many frames, which its subscriber cannot read at once: they
    are not frames "unsent from earlier steps", and a reader of a 1M-row view was closed as
    too slow after 96 of its 1,000 snapshot frames while writes went on (audit 62)."""
    with running_server(tmp_path, subscriber_buffer=4, snapshot_frame_rows=1) as s, s.client() as c:
        make_table(c, "t", [("k", "int"), ("pad", "string")])
        pad = "x" * 20_000
        write(c, "t", {"columns": {"k": list(range(300)), "pad": [pad] * 300}})  # 6 MB
        assert (
            c.post(
                "/v1/views", json={"name": "v", "query": {"op": "table", "name": "t"}}
            ).status_code
            == 201
        )
        peer = StalledPeer(f"{s.ws_url}/v1/views/v/subscribe?progress=false", rcvbuf=4096)
        frames = []
        try:
            peer.sock.settimeout(60)
            frames.append(peer.frame())  # the snapshot is queued: 299 frames wait behind it
            for k in range(300, 303):  # three later steps, a frame each
                write(c, "t", {"updates": [{"insert": {"k": k, "pad": ""}}]})
            while len(frames) < 303:
                f = peer.frame()
                assert f is not None and f["type"] != "closed", f"closed after {len(frames)}: {f}"
                frames.append(f)
        finally:
            peer.close()
        assert [f["seq"] for f in frames] == list(range(303))
        assert [f["type"] for f in frames] == ["snapshot"] * 300 + ["diff"] * 3


def test_sigterm_closes_subscribers_and_exits_cleanly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import signal

    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "t", [("k", "int")])
        assert (
            c.post(
                "/v1/views", json={"name": "v", "query": {"op": "table", "name": "t"}}
            ).status_code
            == 201
        )
        with connect(f"{s.ws_url}/v1/views/v/subscribe") as ws:
            assert recv(ws)["type"] == "snapshot" and recv(ws)["type"] == "progress"
            s.process.send_signal(signal.SIGTERM)
            closed = recv(ws, timeout=20)
            assert closed == {"type": "closed", "seq": 2, "reason": "server shutting down"}
        assert s.process.wait(timeout=20) == 0


def test_sigterm_applies_no_write_it_refuses(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM during a pipelined stream: the engine finishes its step, so every frame it
    applied is acked with its outputs, and every other frame is refused, applied nowhere.
    The engine used to go on applying the queued frames after the frame being waited on
    was answered 503 ``shutting_down``: the next ack counted it, and 1,400 more were acked."""
    import signal

    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "t", [("k", "int")])
        make_count_view(c, "n", "t", by=("k",))
        with connect(f"{s.ws_url}/v1/tables/t/updates", max_size=None) as ws:
            for i in range(20_000):
                ws.send(json.dumps({"id": i, "updates": [{"insert": {"k": 0}}]}))
            answers = [recv(ws) for _ in range(200)]
            s.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(Exception):
                while True:
                    answers.append(recv(ws, timeout=20))
        assert s.process.wait(timeout=60) == 0
    assert [a["id"] for a in answers] == list(range(len(answers)))
    acked = [a for a in answers if a["type"] == "ack"]
    assert answers[: len(acked)] == acked  # the applied ones, then the refused ones
    for a in acked:  # each frame adds 1 to the count, at its own time
        assert {"data": {"k": 0, "n": a["id"] + 1}, "time": a["times"][0], "diff": 1} in (
            a["outputs"]["n"]
        )
    for a in answers[len(acked) :]:
        assert a["type"] == "error" and a["error"]["code"] == "shutting_down"
        assert "not applied" in a["error"]["message"]


def nested_counters(table: str, depth: int) -> dict:
    """Iterates nested ``depth`` deep, each counting 0, 1, 2 from the one outside it: the
    same answer at every depth, in about four times the rounds for each level more."""

    def level(d: int) -> dict:
        start = {"op": "var", "name": f"v{d - 1}"} if d else {"op": "table", "name": table}
        if d == depth:
            return start
        step = {
            "op": "filter",
            "input": {
                "op": "select",
                "input": {"op": "var", "name": f"v{d}"},
                "columns": {"n": {"fn": "add", "args": ["n", 1]}},
            },
            "where": {"fn": "lt", "args": ["n", 3]},
        }
        body = {"op": "distinct", "input": {"op": "concat", "inputs": [level(d + 1), step]}}
        return {
            "op": "iterate",
            "vars": {f"v{d}": start},
            "body": {f"v{d}": body},
            "result": f"v{d}",
        }

    return level(0)


def test_sigterm_answers_requests_waiting_on_a_long_step(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A view whose first contents take minutes keeps the engine busy when SIGTERM comes:
    its request and a change queued behind it are answered 503 ``shutting_down`` in the
    error shape (they were cut off with a plain-text 500 after a 10 s grace), and the
    server exits cleanly without finishing the step. Writes accepted between the
    registration's rounds (one sent after the change) are stepped once it has stopped, and
    answered done."""
    import signal

    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "t", [("n", "int")])
        make_table(c, "other", [("k", "int")])
        write(c, "t", {"updates": [{"insert": {"n": 0}}]})
        small = {"name": "small", "query": nested_counters("t", 2)}
        assert c.post("/v1/views", json=small).status_code == 201
        assert row_counts(c, "small") == {(("n", n),): 1 for n in range(3)}
        answers: dict[str, httpx.Response] = {}

        def post(key: str, path: str, body: dict) -> None:
            with s.client() as own:
                answers[key] = own.post(path, json=body)

        def drop(key: str, path: str) -> None:
            with s.client() as own:
                answers[key] = own.delete(path)

        big = {"name": "big", "query": nested_counters("t", 12)}
        behind = {"updates": [{"insert": {"k": 1}}]}
        threads = [
            threading.Thread(target=post, args=("view", "/v1/views", big)),
            # accepted between the registration's rounds, stepped when it stops
            threading.Thread(target=post, args=("write", "/v1/tables/other/updates", behind)),
            # a change waits behind the registration; a write goes ahead of it
            threading.Thread(target=drop, args=("drop", "/v1/tables/small_input")),
            threading.Thread(target=post, args=("ahead", "/v1/tables/other/updates", behind)),
        ]
        make_table(c, "small_input", [("k", "int")])
        threads[0].start()
        time.sleep(1.0)  # the view's step has begun
        for t in threads[1:]:
            t.start()
            time.sleep(0.5)
        assert set(answers) == set()  # all wait on the engine
        s.process.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=60)
        assert_error(answers["view"], 503, "shutting_down")
        for key in ("write", "ahead"):
            assert answers[key].status_code == 200 and answers[key].json()["status"] == "done"
        assert_error(answers["drop"], 503, "shutting_down")
        assert s.process.wait(timeout=60) == 0
        assert "Traceback" not in "".join(s.stderr)


def test_sigterm_drops_a_subscriber_that_reads_nothing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A stalled peer, within the buffer's bound, at SIGTERM: its closed frame cannot go
    out, and its socket held the exit for uvicorn's graceful 10 s, which then cancelled the
    socket task with a traceback (audit 67). It is dropped after the 3 s the closed frames
    get."""
    import signal

    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "big", [("k", "int"), ("pad", "string")])
        make_view(c, "v", {"op": "table", "name": "big"})
        peer = StalledPeer(f"{s.ws_url}/v1/views/v/subscribe?snapshot=false&progress=false")
        try:
            pad = "x" * 2000
            for i in range(6):  # ~2.4 MB each: more than the peer's socket holds
                body = {
                    "columns": {"k": list(range(i * 1200, (i + 1) * 1200)), "pad": [pad] * 1200}
                }
                write(c, "big", body)
            s.process.send_signal(signal.SIGTERM)
            assert s.process.wait(timeout=60) == 0
        finally:
            peer.close()
        log = "".join(s.stderr)
        assert "timeout graceful shutdown exceeded" not in log, log
        assert "Exception in ASGI application" not in log, log


def test_sigterm_closes_a_pipelining_writer_with_1012(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A write socket whose peer is behind in reading its answers, and sends on when the
    server stops, still gets the 1012 close frame (audit 90: the server closed its end just
    after writing that frame; the frames arriving meanwhile lay unread, so the kernel reset
    the connection, dropping what it had not yet sent, the close frame included: an abnormal
    closure, 1006, in 2 shutdowns of 7)."""
    import signal

    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "t", [("k", "int")])
        peer = StalledPeer(f"{s.ws_url}/v1/tables/t/updates")  # reads nothing for now
        try:
            frame = json.dumps({"updates": [{"insert": {"k": 1}}]})
            for _ in range(500):  # their answers wait in the server's send buffer
                peer.send_text(frame)
            deadline = time.monotonic() + 60
            while c.get("/v1/tables/t").json()["rows"] < 500 and time.monotonic() < deadline:
                time.sleep(0.05)
            s.process.send_signal(signal.SIGTERM)
            until = time.monotonic() + 0.5
            with contextlib.suppress(OSError):  # the server's end may be gone already
                while time.monotonic() < until:
                    peer.send_text(frame)
                    time.sleep(0.01)
            answers = []
            with contextlib.suppress(ConnectionError):
                while (answer := peer.frame()) is not None:
                    answers.append(answer)
                peer.send_close()
            assert peer.close_code == 1012, (peer.close_code, len(answers))
            assert len(answers) >= 500
        finally:
            peer.close()
        assert s.process.wait(timeout=60) == 0


def test_sigterm_reads_no_more_frames_from_a_pipelining_writer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Once the server is stopping, a write socket reads no more frames: those sent after
    it began get no answer and are not applied (the socket then closes with 1012). It read
    on and refused each with 503 shutting_down, so a pipelining peer's count of frames to
    answer grew as fast as it sent them, and the stop waited for them its full 3 s (with
    four such peers a stop took 6-12 s, against about 1 s now). Here a peer that reads
    nothing holds the stop in that wait; meanwhile an HTTP write refused with 503 says the
    server is stopping, and no frame the other writer sends after that is answered (that
    writer closes as soon as its own answers are out, so it may send none by then). That
    peer's own close waits behind answers it never reads: the stop waited on it for ever,
    and the other writer's socket never closed; it is dropped after 1 s now, and the other
    writer gets its 1012."""
    import signal

    with running_server(tmp_path) as s, s.client() as c, ExitStack() as stack:
        make_table(c, "t", [("k", "int"), ("pad", "string")])
        make_view(c, "v", {"op": "table", "name": "t"})  # acks carry the rows written
        stalled = StalledPeer(f"{s.ws_url}/v1/tables/t/updates")
        pad = "x" * 1000
        for i in range(12):  # ~2 MB answers each: more than its socket's buffers take
            rows = {"k": list(range(i * 2000, (i + 1) * 2000)), "pad": [pad] * 2000}
            stalled.send_text(json.dumps({"columns": rows}))
        ws = stack.enter_context(connect(f"{s.ws_url}/v1/tables/t/updates", max_size=None))
        sent = 0
        answers: list[dict] = []
        codes: list[int | None] = []

        def send() -> None:
            nonlocal sent
            with contextlib.suppress(Exception):  # until the server closes the socket
                while True:
                    ws.send(json.dumps({"updates": [{"insert": {"k": -1, "pad": ""}}], "id": sent}))
                    sent += 1
                    time.sleep(0.001)

        def receive() -> None:
            try:
                while True:
                    answers.append(json.loads(ws.recv(timeout=60)))
            except ConnectionClosed as closed:  # the end
                codes.append(closed.rcvd.code if closed.rcvd is not None else None)

        threads = [threading.Thread(target=f, daemon=True) for f in (send, receive)]
        try:
            for t in threads:
                t.start()
            deadline = time.monotonic() + 120
            while len(answers) < 100 and time.monotonic() < deadline:
                time.sleep(0.05)
            # the stalled peer's writes applied: their answers wait on its full socket
            while c.get("/v1/tables/t").json()["rows"] < 24_000 and time.monotonic() < deadline:
                time.sleep(0.05)
            s.process.send_signal(signal.SIGTERM)
            stopping_at = None  # frames sent when an HTTP write was refused, the server stopping
            with contextlib.suppress(httpx.HTTPError):  # its listener closes at the end
                while stopping_at is None and time.monotonic() < deadline:
                    r = c.post("/v1/tables/t/updates", json={"updates": []})
                    if r.status_code == 503:
                        stopping_at = sent
            for t in threads:
                t.join(timeout=60)
        finally:
            stalled.close()
        assert codes == [1012], codes
        assert stopping_at is not None, "no HTTP write was refused before the server closed"
        late = [a for a in answers if a["id"] is not None and a["id"] >= stopping_at]
        assert late == [], f"{len(late)} frames sent after the stop began were answered"
        assert s.process.wait(timeout=60) == 0
    assert sum(1 for a in answers if a["type"] == "ack") >= 100


def test_a_writer_that_reads_no_answer_is_held_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A write socket reads at most ``UNANSWERED_MAX`` frames ahead of the answers its peer
    takes: one that reads none is then not read either, TCP holding it back, where the
    server read on and kept every answer it could not send (audit 98: 122k of them,
    1.1 GB, from 5 s of frames). Its writes stop being applied short of what it sent."""
    from api.ws import UNANSWERED_MAX

    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "t", [("k", "int")])
        peer = StalledPeer(f"{s.ws_url}/v1/tables/t/updates")
        try:
            peer.sock.settimeout(10)
            sent = 0
            with contextlib.suppress(OSError):  # a send that cannot go on: held back
                for i in range(200_000):
                    peer.send_text(f'{{"updates":[{{"insert":{{"k":{i}}}}}]}}')
                    sent += 1
            rows, before = c.get("/v1/tables/t").json()["rows"], -1
            deadline = time.monotonic() + 120
            while rows != before and time.monotonic() < deadline:  # until no more come
                time.sleep(2)
                rows, before = c.get("/v1/tables/t").json()["rows"], rows
            assert UNANSWERED_MAX <= rows < sent, (rows, sent)
        finally:
            peer.close()


def test_sigterm_closes_subscribers_behind_a_flood_of_refused_writes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM while a long registration has 60,000 pipelined frames in hand (accepted
    between its rounds, or queued): their answers keep the event loop busy, and the
    subscribers still get their ``closed`` frame before their sockets go (audit 41: after
    a fixed 0.3 s they were closed with 1012 and no ``closed`` frame)."""
    import signal

    with running_server(tmp_path) as s, s.client() as c:
        make_table(c, "t", [("n", "int")])
        make_table(c, "w", [("k", "int")])
        write(c, "t", {"updates": [{"insert": {"n": 0}}]})
        make_view(c, "v", {"op": "table", "name": "w"})
        big = {"name": "big", "query": nested_counters("t", 12)}
        with ExitStack() as stack:
            subs = [
                stack.enter_context(connect(f"{s.ws_url}/v1/views/v/subscribe")) for _ in range(3)
            ]
            for ws in subs:
                assert recv(ws)["type"] == "snapshot" and recv(ws)["type"] == "progress"
            answers: list[httpx.Response] = []

            def register() -> None:
                with s.client() as own:
                    answers.append(own.post("/v1/views", json=big))

            registering = threading.Thread(target=register)
            registering.start()
            time.sleep(1.0)  # the view's step has begun
            writer = stack.enter_context(connect(f"{s.ws_url}/v1/tables/w/updates"))
            for i in range(60_000):
                writer.send(json.dumps({"id": i, "updates": [{"insert": {"k": i}}]}))
            time.sleep(1.0)
            s.process.send_signal(signal.SIGTERM)
            for ws in subs:  # diffs of the writes accepted during the registration, closed
                frames = [recv(ws, timeout=30)]
                while frames[-1]["type"] != "closed":
                    frames.append(recv(ws, timeout=30))
                assert frames[-1]["reason"] == "server shutting down"
                assert [f["seq"] for f in frames] == list(range(2, 2 + len(frames)))
        registering.join(timeout=60)
        assert_error(answers[0], 503, "shutting_down")
        assert s.process.wait(timeout=60) == 0


def test_a_subscriber_gets_no_change_before_the_view_starts(  # type: ignore[no-untyped-def]
    server, client: httpx.Client, name: str
) -> None:
    """A view that starts ahead of its frontier (it reads a view whose history begins later)
    sends a new subscriber no change stamped before its start, though its inputs' shared
    arrangements hold their sources' history (audit 35: a change at time 1 came as a diff,
    never retracted); what the subscriber accumulates is the view's rows."""
    a, c, counted, joined = f"{name}_a", f"{name}_c", f"{name}_n", f"{name}_j"
    make_table(client, a, [("k", "int"), ("v", "int")], timing="client")
    make_table(client, c, [("k", "int"), ("v", "int")], timing="client")
    for t in (1, 2, 3):
        write(
            client, a, {"updates": [{"insert": {"k": 0, "v": t}, "time": t}], "advance_to": t + 1}
        )
    write(client, c, {"updates": [{"insert": {"k": 0, "v": 100}, "time": 1}], "advance_to": 2})
    make_count_view(client, counted, a, by=("k",))  # starts at 3
    plan = {
        "op": "join",
        "left": {"op": "view", "name": counted},
        "right": {"op": "table", "name": c},
        "on": [["k", "k"]],
    }
    assert client.post("/v1/views", json={"name": joined, "query": plan}).status_code == 201
    got: dict[tuple, int] = {}
    url = f"{server.ws_url}/v1/views/{joined}/subscribe?snapshot=true&progress=true"
    with connect(url) as ws:
        frame = recv(ws)
        assert frame["type"] == "snapshot" and frame["time"] is None and not frame["updates"]
        write(client, c, {"updates": [], "advance_to": 6})
        write(client, a, {"updates": [], "advance_to": 6})
        while True:
            frame = recv(ws)
            if frame["type"] == "diff":
                assert frame["time"] >= 3, frame
                for u in frame["updates"]:
                    key = tuple(sorted(u["data"].items()))
                    got[key] = got.get(key, 0) + u["diff"]
            if frame["type"] == "progress" and frame["frontier"] == [6]:
                break
    assert {k: n for k, n in got.items() if n} == row_counts(client, joined)
    assert row_counts(client, joined) == {(("k", 0), ("n", 3), ("v", 100)): 1}


def test_a_closed_view_reads_and_snapshots_no_time_before_its_start(  # type: ignore[no-untyped-def]
    server, client: httpx.Client, name: str
) -> None:
    """A view registered on data starts at its inputs' latest complete time; once every
    input is closed (frontier ``[]``), its latest time is still not before that start,
    though its trace holds updates from before it, read from the table's shared
    arrangement (a subscription's snapshot came at time 0, then nothing for time 2)."""
    a, d = f"{name}_a", f"{name}_d"
    make_table(client, a, [("x", "int")], timing="client")
    write(client, a, {"updates": [{"insert": {"x": 1}, "time": 0}], "advance_to": 3})
    plan = {"op": "distinct", "input": {"op": "table", "name": a}}
    assert client.post("/v1/views", json={"name": d, "query": plan}).status_code == 201
    write(client, a, {"updates": [], "advance_to": []})
    body = rows(client, d)
    assert (body["time"], body["frontier"]) == (2, [])
    assert body["rows"] == [{"data": {"x": 1}, "count": 1}]
    with connect(f"{server.ws_url}/v1/views/{d}/subscribe?snapshot=true") as ws:
        frame = recv(ws)
        assert frame["type"] == "snapshot" and frame["time"] == 2, frame
        assert [(u["data"], u["diff"]) for u in frame["updates"]] == [({"x": 1}, 1)]


def test_a_subscriber_that_leaves_is_let_go_before_any_heartbeat(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Audit 56: a subscription the client closed was counted (``/metrics``) and kept until
    the server next sent on it, a heartbeat up to ``--heartbeat-s`` later. With heartbeats
    an hour apart it must still go, frames the client sent on it ignored."""
    with running_server(tmp_path, heartbeat_s=3600) as s, s.client() as c:
        make_table(c, "t", [("k", "int")])
        make_view(c, "tv", {"op": "table", "name": "t"})

        def subscribers() -> float:
            found = re.search(
                r'^difflow_subscribers\{view="tv"\} (\S+)$', c.get("/metrics").text, re.M
            )
            return float(found.group(1)) if found else 0.0

        url = f"{s.ws_url}/v1/views/tv/subscribe?snapshot=true&progress=false"
        with connect(url) as ws, connect(url) as other:
            assert recv(ws)["type"] == "snapshot" and recv(other)["type"] == "snapshot"
            ws.send('{"ignored": true}')
            assert subscribers() == 2
        deadline = time.monotonic() + 60
        while subscribers() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert subscribers() == 0
