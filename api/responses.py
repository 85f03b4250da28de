"""JSON responses serialised with orjson (fast, strict: no NaN, no non-string keys)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

__all__ = ["JSONResponse"]


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
