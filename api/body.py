"""Request bodies: read with a size limit, parsed strictly as JSON (orjson)."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import Depends, Request

from service.errors import BadRequest, Invalid, TooLarge

__all__ = ["JsonBody", "JsonObject", "parse_json"]


def parse_json(raw: bytes | str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}", code="invalid_json") from exc


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


async def json_object(request: Request) -> dict[str, Any]:
    body = await json_body(request)
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object", {"path": "body"}, "not_an_object")
    return body


JsonBody = Annotated[Any, Depends(json_body)]
JsonObject = Annotated[dict[str, Any], Depends(json_object)]
