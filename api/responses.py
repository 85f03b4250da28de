"""JSON responses serialised with orjson (fast, strict: no NaN, no non-string keys)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse as StarletteJSONResponse

__all__ = ["JSONResponse"]


class JSONResponse(StarletteJSONResponse):
    """A JSON response (a subclass of Starlette's, so that OpenAPI describes its bodies by
    their models alone), rendered by orjson."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
