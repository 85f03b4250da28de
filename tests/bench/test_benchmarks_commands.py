"""Every command BENCHMARKS.md gives for a section still parses: a flag renamed or dropped
from a ``bench`` script would leave figures whose command no longer reruns them.

Only the fenced commands are checked (the ones under "Command:"); prose abbreviates.
Nothing is run: each script's ``main`` stops once its arguments are parsed.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"
_COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*python -m (bench\.\w+) (.*)$")


def _fenced_commands() -> list[tuple[str, str]]:
    commands, fenced = [], False
    for line in BENCHMARKS.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = _COMMAND.match(line.strip()) if fenced else None
        if m:
            commands.append((m.group(1), m.group(2)))
    return sorted(set(commands))


class _Parsed(Exception):
    """Raised in place of running the script once its arguments parsed."""


COMMANDS = _fenced_commands()


def test_the_sections_give_commands() -> None:
    assert len(COMMANDS) >= 25
    assert {m for m, _ in COMMANDS} >= {"bench.reach", "bench.serve", "bench.components"}


@pytest.mark.parametrize(("module", "args"), COMMANDS)
def test_a_sections_command_parses(
    module: str, args: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self: argparse.ArgumentParser, *a: Any, **k: Any) -> Any:
        parse(self, *a, **k)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    main = importlib.import_module(module).main
    with pytest.raises(_Parsed):
        try:
            main(shlex.split(args))
        except SystemExit:
            pytest.fail(f"python -m {module} {args}: {capsys.readouterr().err.strip()}")
