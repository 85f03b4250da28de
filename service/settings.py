"""Service configuration: one settings object, from CLI flags and ``DIFFLOW_*`` variables,
with working defaults (``difflow serve`` alone runs everything embedded)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from service.errors import SettingsError

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
    subscriber_buffer_mb: int = 256  # ... and the bytes of those frames
    heartbeat_s: float = 10.0
    snapshot_frame_rows: int = 1_000  # rows per snapshot frame
    completions_kept: int = 100_000  # finished write tokens remembered for GET /v1/completions
    completion_rows_kept: int = 100_000  # ... and their output rows in all (newest kept)
    iterate_round_limit: int = 10_000  # the round an iterate's changes may not reach
    load_workers: int = 2  # Spark loads running at once (one at a time per table)
    load_chunk_rows: int = 65_536  # rows per chunk streamed from Spark (progress granularity)
    warmup: bool = True  # compile the engine's kernels in a background process (--no-warmup)

    def __post_init__(self) -> None:
        # resolved once, against the directory the server starts in
        object.__setattr__(self, "data_dir", Path(self.data_dir).absolute())
        for name, (least, most) in _RANGES.items():
            value = getattr(self, name)
            if not least <= value <= most:
                bound = f"from {least} to {most}" if most != _NO_MOST else f"at least {least}"
                raise SettingsError(
                    f"{_named(name)} must be {bound}, not {value}", {"setting": name}
                )

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        """Defaults, then ``DIFFLOW_<FIELD>`` variables, then explicit (non-None) overrides
        (a variable a flag overrides is not read). An empty variable is unset, as typer
        reads the flags' variables. An override given as text (a flag's, as typed) is parsed
        as its variable would be."""
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = os.environ.get(f"DIFFLOW_{f.name.upper()}")
            if raw and overrides.get(f.name) is None:
                values[f.name] = _convert(f.name, raw)
        for name, value in overrides.items():
            if value is not None:
                values[name] = _convert(name, value) if isinstance(value, str) else value
        if "data_dir" in values:
            values["data_dir"] = Path(str(values["data_dir"]))
        return replace(cls(), **values)  # type: ignore[arg-type]

    @property
    def max_body_bytes(self) -> int:
        return self.max_body_mb * 1024 * 1024


_FLAGS = {"port", "history", "max_body_mb", "max_batch", "subscriber_buffer", "heartbeat_s"}
_NO_MOST = float("inf")
# the numeric settings' bounds (inclusive); port 0 picks a free port
_RANGES: dict[str, tuple[float, float]] = {
    "port": (0, 65_535),
    "history": (1, _NO_MOST),
    "max_body_mb": (1, _NO_MOST),
    "max_batch": (1, _NO_MOST),
    "subscriber_buffer": (1, _NO_MOST),
    "subscriber_buffer_mb": (1, _NO_MOST),
    "heartbeat_s": (0.001, _NO_MOST),
    "snapshot_frame_rows": (1, _NO_MOST),
    "completions_kept": (1, _NO_MOST),
    "completion_rows_kept": (0, _NO_MOST),
    "iterate_round_limit": (1, _NO_MOST),
    "load_workers": (1, _NO_MOST),
    "load_chunk_rows": (1, _NO_MOST),
}


def _named(name: str) -> str:
    """A setting as its messages name it: ``max_batch (--max-batch / DIFFLOW_MAX_BATCH)``
    (a value may have come from either)."""
    where = f"DIFFLOW_{name.upper()}"
    if name in _FLAGS:
        where = f"--{name.replace('_', '-')} / {where}"
    return f"{name} ({where})"


def _convert(name: str, raw: str) -> object:
    """The text of a variable or flag as the setting's type; SettingsError if it does not
    parse."""
    default = getattr(Settings(), name)
    if isinstance(default, bool):
        if raw.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if raw.strip().lower() in ("0", "false", "no", "off"):
            return False
        raise SettingsError(
            f"{_named(name)} must be true or false (1/0, yes/no, on/off), not {raw!r}",
            {"setting": name},
        )
    kind = type(default)
    if kind in (int, float):
        try:
            value = kind(raw)
        except ValueError:
            value = None
        if value is None or (kind is float and not math.isfinite(value)):
            what = "an integer" if kind is int else "a finite number"
            raise SettingsError(f"{_named(name)} must be {what}, not {raw!r}", {"setting": name})
        return value
    if isinstance(default, Path):
        return Path(raw)
    return raw
