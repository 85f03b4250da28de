"""The allocator setting: what it accepts, and that on glibc freed memory really stays with
the process (it is what saves the page faults) unless the user keeps glibc's defaults, until
``give_back`` hands it back."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from engine import allocator
from engine.errors import EngineError


def test_allocator_setting() -> None:
    assert allocator.configured(None, {}) is True
    assert allocator.configured(" tuned ", {}) is True
    assert allocator.configured("", {}) is True
    assert allocator.configured("system", {}) is False
    assert allocator.configured(None, {"MALLOC_TRIM_THRESHOLD_": "1000"}) is False
    with pytest.raises(EngineError, match="DIFFLOW_MALLOC must be 'tuned' or 'system'"):
        allocator.configured("big", {})


_PROBE = """
import json, numpy as np, engine
from engine import allocator
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
before = resident()
a = np.ones(24 << 20, dtype=np.uint8)  # 24 MiB, touched
free = allocator.free_bytes()
del a
kept, free = resident() - before, allocator.free_bytes() - free
allocator.give_back()
given = kept - resident() + before
print(json.dumps({"setting": allocator.setting(), "kept": kept, "given": given, "free": free}))
"""


def _probe(**env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/statm"),
    reason="the allocator is tuned on glibc (Linux) only",
)
def test_freed_memory_stays_with_the_process_on_glibc() -> None:
    tuned = _probe()
    assert tuned["setting"] == "tuned"
    assert int(tuned["kept"]) >= 16 << 20  # type: ignore[call-overload]
    assert int(tuned["given"]) >= 16 << 20  # type: ignore[call-overload]  # give_back
    assert int(tuned["free"]) >= 16 << 20  # type: ignore[call-overload]  # free_bytes saw it
    system = _probe(DIFFLOW_MALLOC="system")
    assert system["setting"] == "system"
    assert int(system["kept"]) < 8 << 20  # type: ignore[call-overload]
    chosen = _probe(MALLOC_TOP_PAD_="0")  # glibc's own variable: the user chose
    assert chosen["setting"] == "system"
