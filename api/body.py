"""Request bodies: read with a size limit, parsed strictly as JSON (orjson)."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request

from service.errors import BadRequest, Invalid, TooLarge

__all__ = ["ExactJsonObject", "JsonBody", "JsonObject", "parse_json"]


def parse_json(raw: bytes | str) -> Any:
    """The body's value; not JSON is a 400, JSON holding a value no JSON parser here
    represents (a number beyond double range, a lone surrogate escape) a 422."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if _grammatical(raw):
            raise Invalid(
                f"the body is JSON but holds a value that cannot be represented: {exc}",
                {"path": "body"},
                "invalid_value",
            ) from exc
        raise BadRequest(f"the body is not valid JSON: {exc}", code="invalid_json") from exc


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _grammar_only(digits: str) -> int:
    """An integer's digits, not converted: ``int()`` refuses more than 4,300 of them."""
    return 0


def _grammatical(raw: bytes | str) -> bool:
    """Whether text orjson refused follows JSON's grammar all the same (the standard
    library's parser, which takes ``1e400`` and ``"\\ud800"``, without its extensions)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        json.loads(text, parse_constant=_not_json, parse_int=_grammar_only)
    except (ValueError, RecursionError):  # ValueError: UnicodeDecodeError, JSONDecodeError
        return False
    return True


async def read_body(request: Request) -> bytes:
    limit = request.app.state.settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(
            f"the body has {declared} bytes; the limit is {limit} (--max-body-mb)",
            {"limit": limit},
            "body_too_large",
        )
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(
                f"the body is over {limit} bytes (--max-body-mb)",
                {"limit": limit},
                "body_too_large",
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def json_body(request: Request) -> Any:
    return parse_json(await read_body(request))


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object", {"path": "body"}, "not_an_object")
    return body


async def json_object(request: Request) -> dict[str, Any]:
    return _object(await json_body(request))


_LONG_NUMBER = re.compile(rb"\d{19}")  # integers beyond 64 bits have at least 19 digits


async def exact_json_object(request: Request) -> dict[str, Any]:
    """:func:`json_object` with every integer exact: orjson reads an integer beyond 64 bits
    as a float (``2**64`` would pass for ``1.8e19``). For small bodies such as plans, whose
    integers are literals that must fit in 64 bits: read again by the standard library
    where a number is that long."""
    raw = await read_body(request)
    body = parse_json(raw)
    if _LONG_NUMBER.search(raw):
        body = json.loads(raw.decode("utf-8"), parse_constant=_not_json)
    return _object(body)


JsonBody = Annotated[Any, Depends(json_body)]
JsonObject = Annotated[dict[str, Any], Depends(json_object)]
ExactJsonObject = Annotated[dict[str, Any], Depends(exact_json_object)]
