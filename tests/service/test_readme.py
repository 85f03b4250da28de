"""The README's reachability walkthrough, run as written against a real server: its curl
commands are read out of the README (paths and bodies), sent in order, and the answers it
shows are checked. Documentation that drifts from the service fails here."""

from __future__ import annotations

import json
import re

import httpx

from tests.service.server import ROOT

_CURL = re.compile(r"curl -s localhost:8000(\S+)(?: -d '(.*?)')?$", re.DOTALL | re.MULTILINE)


def walkthrough_commands() -> list[tuple[str, str]]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A reachability walkthrough", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    commands = [(path, body) for block in blocks for path, body in _CURL.findall(block)]
    assert len(commands) >= 7, commands  # tables, writes, the view, rows, the cut edge
    return commands


def test_the_readme_walkthrough_answers_as_shown(client: httpx.Client) -> None:
    answers = []
    for path, body in walkthrough_commands():
        json.loads(body or "{}")  # the README shows valid JSON
        # as curl -d sends it: the text as it stands, as a form, not declared JSON
        form = {"content-type": "application/x-www-form-urlencoded"}
        r = client.get(path) if not body else client.post(path, content=body, headers=form)
        assert r.status_code in (200, 201), (path, r.text)
        answers.append((path, r.json()))
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
