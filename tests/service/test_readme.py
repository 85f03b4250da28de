"""The README's reachability walkthrough, run as written against a real server: its curl
commands are read out of the README (paths and bodies), sent in order, and the answers it
shows are checked. Documentation that drifts from the service fails here."""

from __future__ import annotations

import ast
import contextlib
import itertools
import json
import re
from collections.abc import Iterator

import pytest

import clients
from tests.service.server import ROOT, Server

_CURL = re.compile(r"curl -s localhost:8000(\S+)(?: -d '(.*?)')?$", re.DOTALL | re.MULTILINE)


def walkthrough_section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## A reachability walkthrough", 1)[1].split("\n## ", 1)[0]


def walkthrough_commands() -> list[tuple[str, str]]:
    section = walkthrough_section()
    blocks = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    commands = [(path, body) for block in blocks for path, body in _CURL.findall(block)]
    assert len(commands) >= 7, commands  # tables, writes, the view, rows, the cut edge
    return commands


@pytest.fixture(scope="module")
def walked(server: Server) -> list[tuple[str, dict]]:
    """The walkthrough's commands sent in order (once per module), with their answers."""
    answers = []
    with server.client() as client:
        for path, body in walkthrough_commands():
            json.loads(body or "{}")  # the README shows valid JSON
            # as curl -d sends it: the text as it stands, as a form, not declared JSON
            form = {"content-type": "application/x-www-form-urlencoded"}
            r = client.get(path) if not body else client.post(path, content=body, headers=form)
            assert r.status_code in (200, 201), (path, r.text)
            answers.append((path, r.json()))
    return answers


def test_the_readme_walkthrough_answers_as_shown(walked: list[tuple[str, dict]]) -> None:
    answers = walked
    rows = next(a for p, a in answers if p == "/v1/views/reach/rows")
    assert rows["time"] == 2 and rows["frontier"] == [3]
    assert sorted((r["data"]["root"], r["data"]["node"], r["count"]) for r in rows["rows"]) == [
        (1, 1, 1),
        (1, 2, 1),
        (1, 3, 1),
    ]
    cut = answers[-1][1]  # the deleted edge: root 1 no longer reaches 2 or 3
    assert cut["times"] == [3] and cut["frontier"] == [4] and cut["status"] == "done"
    assert sorted((u["data"]["node"], u["time"], u["diff"]) for u in cut["outputs"]["reach"]) == [
        (2, 3, -1),
        (3, 3, -1),
    ]


def test_the_readme_python_example_runs(
    server: Server,
    walked: list[tuple[str, dict]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The README's Python example, run as written against the server the walkthrough set
    up, but for the address and for its subscription loop, which runs forever: here the
    subscription ends after its snapshot and first progress frame."""
    section = walkthrough_section()
    (code,) = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert '"http://127.0.0.1:8000"' in code
    subscribe = clients.Client.subscribe

    @contextlib.contextmanager
    def first_frames(self: clients.Client, view: str, **kw: bool) -> Iterator[Iterator[dict]]:
        with subscribe(self, view, **kw) as frames:
            yield itertools.islice(frames, 2)

    monkeypatch.setattr(clients.Client, "subscribe", first_frames)
    exec(compile(code.replace('"http://127.0.0.1:8000"', repr(server.url)), "README", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 3, printed  # the write's outputs, then two frames
    outputs = ast.literal_eval(printed[0])  # both views: root 1 now reaches node 4
    for view in ("reach", "reach2"):
        assert [(u["data"]["root"], u["data"]["node"], u["diff"]) for u in outputs[view]] == [
            (1, 4, 1)
        ]
    snapshot, progress = (ast.literal_eval(line) for line in printed[1:])
    assert snapshot["type"] == "snapshot" and progress["type"] == "progress"
