"""Service configuration: one settings object, from CLI flags and ``DIFFLOW_*`` variables,
with working defaults (``difflow serve`` alone runs everything embedded)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

__all__ = ["Settings"]


def _env(name: str, default: str) -> str:
    return os.environ.get(f"DIFFLOW_{name.upper()}", default)


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = field(default_factory=lambda: Path("./difflow-data"))
    history: int = 1_000  # times kept queryable behind the frontier, per coordinate (--history)
    max_body_mb: int = 64
    max_batch: int = 1_000_000
    subscriber_buffer: int = 10_000
    heartbeat_s: float = 10.0
    snapshot_frame_rows: int = 1_000  # rows per snapshot frame
    completions_kept: int = 100_000  # finished write tokens remembered for GET /v1/completions
    iterate_round_limit: int = 10_000  # rounds an iterate may run in one step
    load_workers: int = 2  # Spark loads running at once (one at a time per table)
    load_chunk_rows: int = 65_536  # rows per chunk streamed from Spark (progress granularity)
    warmup: bool = True  # compile the engine's kernels in a background process (--no-warmup)

    def __post_init__(self) -> None:
        # resolved once, against the directory the server starts in
        object.__setattr__(self, "data_dir", Path(self.data_dir).absolute())

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Defaults, then ``DIFFLOW_<FIELD>`` variables, then explicit (non-None) overrides."""
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = os.environ.get(f"DIFFLOW_{f.name.upper()}")
            if raw is not None:
                values[f.name] = _convert(f.name, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        if "data_dir" in values:
            values["data_dir"] = Path(str(values["data_dir"]))
        return replace(cls(), **values)  # type: ignore[arg-type]

    @property
    def max_body_bytes(self) -> int:
        return self.max_body_mb * 1024 * 1024


def _convert(name: str, raw: str) -> object:
    default = getattr(Settings(), name)
    if isinstance(default, bool):
        return raw.lower() in ("1", "true", "yes")
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    if isinstance(default, Path):
        return Path(raw)
    return raw
