"""Wire basics shared by the HTTP and WebSocket sides: server URLs, JSON, times in queries.

JSON goes through orjson both ways (numpy arrays and scalars in write bodies are encoded as
JSON arrays and numbers). The server URL comes from the caller, else ``DIFFLOW_URL``, else
``http://127.0.0.1:8000``; WebSocket URLs are the same URL with ``ws``/``wss`` scheme.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import numpy as np
import orjson

from clients.errors import ConnectionFailed, InvalidError

__all__ = [
    "DEFAULT_URL",
    "Time",
    "dumps",
    "format_time",
    "loads",
    "resolve_url",
    "segment",
    "ws_url",
]

DEFAULT_URL = "http://127.0.0.1:8000"

Time: TypeAlias = int | Sequence[int]
"""A time: an int, or one int per dimension for tables with ``time_dims > 1``."""

_WS_SCHEMES = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}


def resolve_url(url: str | None = None) -> str:
    """The server's base URL, without a trailing slash; ``host:port`` means ``http://``."""
    given = url or os.environ.get("DIFFLOW_URL") or DEFAULT_URL
    resolved = (given if "://" in given else f"http://{given}").rstrip("/")
    try:
        host = urlsplit(resolved).netloc
    except ValueError as exc:  # an unclosed IPv6 bracket, say
        raise ConnectionFailed(f"bad URL {resolved!r}: {exc}") from exc
    if not host:
        raise ConnectionFailed(f"bad URL {given!r}: it names no host")
    return resolved


def segment(name: str | int) -> str:
    """``name`` escaped for use as one path segment."""
    return quote(str(name), safe="")


def ws_url(base_url: str, path: str, params: Mapping[str, str] | None = None) -> str:
    """The WebSocket URL of ``path`` on the server at ``base_url``."""
    parts = urlsplit(base_url)
    scheme = _WS_SCHEMES.get(parts.scheme)
    if scheme is None:
        raise ConnectionFailed(
            f"bad URL {base_url!r}: it must start with http://, https://, ws:// or wss://"
        )
    query = urlencode(params or {})
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + path, query, ""))


def format_time(time: Time) -> str:
    """A time as written in a query string: ``7``, or ``1,2`` for a multi-dimensional time."""
    coordinates = list(time) if isinstance(time, Sequence) else [time]
    for c in coordinates:  # not int(): 0.9 read time 0, True time 1 (audit 109)
        if not isinstance(c, (int, np.integer)) or isinstance(c, (bool, np.bool_)):
            raise InvalidError(
                f"a time is a non-negative integer or a list of them, not {time!r}",
                status=422,
                code="bad_time",
            )
    return ",".join(str(int(c)) for c in coordinates)


def dumps(value: Any) -> bytes:
    """``value`` as JSON bytes (numpy arrays, including strided slices, as lists); a value
    JSON cannot carry (an int beyond 64 bits, an object, a NaN or infinity) is an
    ``InvalidError``. orjson writes NaN and infinities as ``null``: where the text has a
    null, the value is searched for one (``not_finite``, ``detail.path`` naming it)."""
    try:
        text = orjson.dumps(value, default=_numpy_default, option=orjson.OPT_SERIALIZE_NUMPY)
    except orjson.JSONEncodeError as exc:
        raise InvalidError(
            f"a value cannot be sent as JSON: {exc}", status=422, code="invalid_value"
        ) from exc
    if b"null" in text and not _all_finite(value):
        path = _non_finite(value, "")
        if path is not None:
            raise InvalidError(
                f"{path or 'the value'}: a NaN or infinity cannot be sent (JSON has neither; "
                "it would arrive as null)",
                status=422,
                code="not_finite",
                detail={"path": path},
            )
    return text


def _all_finite(value: Any) -> bool:
    """Whether ``value`` holds no NaN or infinity: the standard library's C encoder refuses
    them (a tenth of the time of walking the value in Python, which is left for finding one,
    and for values orjson encodes and it cannot: a datetime, a deep nesting)."""
    try:
        json.dumps(value, allow_nan=False, default=_numpy_default)
    except (ValueError, TypeError, RecursionError):  # or a value json cannot encode: walk it
        return False
    return True


def _non_finite(value: Any, path: str) -> str | None:
    """The path (``updates[0].insert[3]``) of the first NaN or infinity in ``value``."""
    if isinstance(value, (float, np.floating)):
        return None if math.isfinite(value) else path
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "fcO":
            return None
        if value.dtype.kind != "O":
            bad = np.argwhere(~np.isfinite(value))
            return None if not bad.size else _join(path, *(int(i) for i in bad[0]))
        return _non_finite(value.tolist(), path)
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _non_finite(item, _join(path, key))
        if found is not None:
            return found
    return None


def _join(path: str, *keys: Any) -> str:
    """``path`` extended by ``keys`` as the server writes paths: ``updates[3].insert.x``, but
    list items in a plan (``query.inputs.1``) dotted."""
    for key in keys:
        if isinstance(key, int) and path and path != "query" and not path.startswith("query."):
            path = f"{path}[{key}]"
        else:
            path = f"{path}.{key}" if path else str(key)
    return path


def _numpy_default(value: Any) -> Any:
    """orjson serialises C-contiguous numpy arrays itself; other arrays and numpy scalars
    come here."""
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value).tolist()
    if isinstance(value, np.generic):
        item = value.item()  # a long double's item is itself
        return float(item) if isinstance(item, np.floating) else item
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


def loads(data: bytes | str) -> Any:
    """The value of the JSON text ``data``."""
    return orjson.loads(data)
