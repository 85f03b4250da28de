"""Request bodies: read with a size limit, parsed strictly as JSON (orjson)."""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request

from api.json_grammar import grammatical, refuse_constant
from service.errors import BadRequest, Invalid, TooLarge
from service.gc_pause import collector_paused

__all__ = [
    "ExactJsonObject",
    "JsonObject",
    "exact_json",
    "has_long_number",
    "parse_json",
]

_PARSER_DEPTH = 1024  # levels of objects and lists orjson reads
_LONG_NUMBER = re.compile(rb"\d{19}")  # integers beyond 64 bits have at least 19 digits


def parse_json(raw: bytes | str, too_deep: str = "invalid_value") -> Any:
    """The body's value; not JSON is a 400, JSON holding a value no JSON parser here
    represents (a number beyond double range, a lone surrogate escape) a 422, and so is
    JSON nested deeper than the parser goes (1,024 levels), with the code ``too_deep``.
    The cyclic collector waits meanwhile: a body's values hold no cycles, and its passes
    over every new dict of a large body tripled the parse (a million rows, 56 MB: 3.5-3.8 s
    against 1.0 s), all of it holding the event loop."""
    try:
        with collector_paused():
            return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not grammatical(raw):
            why = "it is not UTF-8 text" if not _utf8(raw) else str(exc)
            raise BadRequest(f"the body is not valid JSON: {why}", code="invalid_json") from exc
        if str(exc).startswith("depth limit exceeded"):
            raise Invalid(
                f"the body nests more than {_PARSER_DEPTH} levels of objects and lists",
                {"path": "body"},
                too_deep,
            ) from exc
        where = _unrepresentable(raw)
        raise Invalid(
            f"the body is JSON but holds a value that cannot be represented"
            f"{f' at {where}' if where != 'body' else ''}: {exc}",
            {"path": where},
            "invalid_value",
        ) from exc


_depth_lock = threading.Lock()


@contextmanager
def _as_deep_as_orjson() -> Iterator[None]:
    """Python's recursion limit raised, meanwhile, so that the standard library's parser,
    which counts its levels against it, reads every level orjson reads."""
    with _depth_lock:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + _PARSER_DEPTH + 64)
        try:
            yield
        finally:
            sys.setrecursionlimit(limit)


_LOOKED_THROUGH = 256 * 1024  # bytes of a refused body read again to say where


def _unrepresentable(raw: bytes | str) -> str:
    """Where the body holds what orjson refused (a number beyond double range, which the
    standard library reads as an infinity, or a string or name with a lone surrogate), as
    ``updates[3].insert.x``; ``body`` for a body too big or too deep to read again here.
    It runs in the request loop: up to 256 KiB (at most about 0.2 s on a slow machine),
    read once more and walked without making a path for any value but the one at fault
    (audit 92: a 4 MiB body of a million empty lists, each given its path, held every
    request 5 s)."""
    if len(raw) > _LOOKED_THROUGH:
        return "body"
    try:
        with _as_deep_as_orjson():
            # ints as floats, as orjson reads those past 64 bits: one past the float range
            # is an infinity, found below, whatever its digits (int() takes 4,300 at most)
            value = json.loads(raw, parse_constant=refuse_constant, parse_int=float)
    except (RecursionError, ValueError):
        return "body"
    keys: list[str | int] = []  # the way to the container walked, then to the value at fault
    walks: list[Iterator[tuple[Any, Any]]] = [iter([("", value)])]
    while walks:
        for key, item in walks[-1]:
            if isinstance(key, str) and not _encodable(key):
                return _path([*keys, key])
            if _refused(item):
                return _path([*keys, key])
            if isinstance(item, dict) and item:
                keys.append(key)
                walks.append(iter(item.items()))
                break
            if isinstance(item, list) and item:
                keys.append(key)
                walks.append(enumerate(item))
                break
        else:
            walks.pop()
            if keys:
                keys.pop()
    return "body"


def _refused(item: Any) -> bool:
    """Whether orjson refuses ``item`` (as the standard library read it)."""
    if isinstance(item, float):
        return not math.isfinite(item)
    return isinstance(item, str) and not _encodable(item)


def _path(keys: list[str | int]) -> str:
    """``updates[3].insert.x`` from ``["", "updates", 3, "insert", "x"]`` (the body's own
    key first; list items as :func:`_item` writes them); a name that is not UTF-8 written
    with backslash escapes."""
    path = ""
    for key in keys[1:]:
        if isinstance(key, int):
            path = _item(path, key)
        else:
            name = key if _encodable(key) else key.encode("utf-8", "backslashreplace").decode()
            path += f".{name}" if path else name
    return path or "body"


def _item(path: str, index: int) -> str:
    """The path of item ``index`` of the list at ``path``: ``updates[3]``, but
    ``query.inputs.1`` in a plan, whose checks name list items so (audit 101: one view's
    body named them both ways)."""
    if path == "query" or path.startswith("query."):
        return f"{path}.{index}"
    return f"{path}[{index}]"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _utf8(raw: bytes | str) -> bool:
    if isinstance(raw, str):
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def has_long_number(raw: bytes | str) -> bool:
    """Whether ``raw`` may hold an integer beyond 64 bits, which orjson reads as a float."""
    return _LONG_NUMBER.search(raw.encode() if isinstance(raw, str) else raw) is not None


def exact_json(raw: bytes | str, too_deep: str) -> Any:
    """``raw`` (JSON, as :func:`parse_json` took it) read again with every integer exact;
    the standard library's parser recurses per level, so text it cannot nest that deep is
    a 422 with the code ``too_deep``."""
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    try:
        with collector_paused():
            return json.loads(text, parse_constant=refuse_constant)
    except RecursionError:
        raise Invalid(
            "the body nests too deep to read its integers exactly",
            {"path": "body"},
            too_deep,
        ) from None


DEFINITION_BYTES = 1024 * 1024  # a table's, view's or load's body: a definition, not data


async def read_body(request: Request, definition: bool = False) -> bytes:
    """The body, within ``--max-body-mb``; a ``definition`` (a table, view or load: small,
    parsed twice, and in the request loop) within :data:`DEFINITION_BYTES` too (audit 52:
    60 MB of them held every other request for seconds)."""
    limit = request.app.state.settings.max_body_bytes
    flag = "(--max-body-mb)"
    if definition and limit > DEFINITION_BYTES:
        limit, flag = DEFINITION_BYTES, "(for a table's, view's or load's definition)"
    declared = request.headers.get("content-length")
    if (
        declared is not None
        and declared.isdigit()
        and (len(declared) > 19 or int(declared) > limit)
    ):
        raise TooLarge(
            f"the body has {declared} bytes; the limit is {limit} {flag}",
            {"limit": limit},
            "body_too_large",
        )
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(
                f"the body is over {limit} bytes {flag}",
                {"limit": limit},
                "body_too_large",
            )
        chunks.append(chunk)
    return _decoded(b"".join(chunks), request.headers.get("content-encoding"), limit, flag)


def _decoded(raw: bytes, encoding: str | None, limit: int, flag: str) -> bytes:
    """The body without its ``Content-Encoding``: ``gzip`` is taken (bulk writes compress
    well), within the same limit once inflated; any other is refused, never read as JSON."""
    coding = (encoding or "identity").strip().lower()
    if coding == "identity":
        return raw
    if coding not in ("gzip", "x-gzip"):
        raise BadRequest(
            f"Content-Encoding {encoding!r} is not taken: send the body as it is, or gzip it",
            code="unsupported_encoding",
        )
    inflate = zlib.decompressobj(wbits=31)  # gzip's header and trailer
    try:
        out = inflate.decompress(raw, limit + 1)
        complete = inflate.eof and not inflate.unused_data
    except zlib.error as exc:
        raise BadRequest(f"the body is not gzip data: {exc}", code="invalid_json") from exc
    if len(out) > limit:
        raise TooLarge(
            f"the body inflates to over {limit} bytes {flag}",
            {"limit": limit},
            "body_too_large",
        )
    if not complete:
        raise BadRequest("the body is not one whole gzip member", code="invalid_json")
    return out


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object", {"path": "body"}, "not_an_object")
    return body


class _Members(list[Any]):
    """An object's ``(name, value)`` pairs in order, as read for :func:`refuse_repeated_names`."""


def refuse_repeated_names(raw: bytes) -> None:
    """Read ``raw`` (JSON that :func:`parse_json` took, so nested at most 1,024 levels)
    again to refuse a member named twice in an object, naming where (``detail.path``, as
    ``query.columns.b``): for the small bodies that define tables, views and loads, not for
    writes (orjson keeps the last of the repeats, silently dropping the others). The
    standard library's parser, which sees repeats, counts its levels against Python's
    recursion limit: that is raised meanwhile so that every level orjson reads is read."""
    with _as_deep_as_orjson():
        value = json.loads(raw, parse_int=str, object_pairs_hook=_Members)  # str: as is
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Members):
            seen: set[str] = set()
            for name, _ in item:
                if name in seen:
                    raise Invalid(
                        f"the body names {name!r} twice in one object; name each member once",
                        {"path": f"{path}.{name}" if path else name},
                        "invalid_value",
                    )
                seen.add(name)
            stack.extend((v, f"{path}.{k}" if path else k) for k, v in reversed(item))
        elif isinstance(item, list):
            stack.extend((v, _item(path, i)) for i, v in reversed(list(enumerate(item))))


async def json_object(request: Request) -> dict[str, Any]:
    raw = await read_body(request, definition=True)
    body = _object(parse_json(raw))
    refuse_repeated_names(raw)
    return body


async def exact_json_object(request: Request) -> dict[str, Any]:
    """:func:`json_object` with every integer exact: orjson reads an integer beyond 64 bits
    as a float (``2**64`` would pass for ``1.8e19``). For small bodies such as plans, whose
    integers are literals that must fit in 64 bits: read again by the standard library
    where a number is that long."""
    raw = await read_body(request, definition=True)
    body = parse_json(raw, too_deep="invalid_plan")
    if has_long_number(raw):
        body = exact_json(raw, "invalid_plan")
    body = _object(body)
    refuse_repeated_names(raw)
    return body


JsonObject = Annotated[dict[str, Any], Depends(json_object)]
ExactJsonObject = Annotated[dict[str, Any], Depends(exact_json_object)]
