"""Every answer the service tests receive over HTTP, checked against what ``/openapi.json``
declares for it (API.md: the document is accurate): the model it names for the path, method
and status (``api.models``, validated strictly from the JSON text). An answer with a status
the document does not declare for its operation fails too. So does a view the server
registered from a body the document's request schema refuses (its plan schema is recursive:
``api.plan_schema``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import orjson
from jsonschema import Draft202012Validator
from pydantic import BaseModel

import api.models

_UNCHECKED = {"/openapi.json", "/metrics", "/healthz", "/docs", "/redoc"}


class Contract:
    """The operations of one server's document, and the check of an answer against them."""

    def __init__(self, base_url: str) -> None:
        spec = httpx.get(base_url.rstrip("/") + "/openapi.json").json()
        self.operations: list[tuple[re.Pattern[str], dict[str, Any]]] = [
            (re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", path) + "$"), methods)
            for path, methods in spec["paths"].items()
        ]
        body = spec["paths"]["/v1/views"]["post"]["requestBody"]["content"]["application/json"]
        # the components beside the schema, so that its references resolve
        self.view_body = Draft202012Validator(
            {"allOf": [body["schema"]], "components": spec["components"]}
        )

    def declared(self, path: str, method: str, status: int) -> type[BaseModel] | None:
        """The model declared for an answer; None where no JSON body is declared (a 204), or
        where the request names no operation (an unknown route, or a method a path does not
        serve: a 405)."""
        for pattern, methods in self.operations:
            if not pattern.match(path):
                continue
            op = methods.get(method.lower())
            if op is None:
                return None
            declared = op["responses"].get(str(status))
            assert declared is not None, f"{method} {path} answered {status}, undeclared"
            schema = declared.get("content", {}).get("application/json", {}).get("schema", {})
            ref = schema.get("$ref")
            return None if ref is None else getattr(api.models, str(ref).rsplit("/", 1)[-1])
        return None

    def hook(self) -> Callable[[httpx.Response], None]:
        def check(response: httpx.Response) -> None:
            request = response.request
            if request.url.path in _UNCHECKED:
                return
            model = self.declared(request.url.path, request.method, response.status_code)
            if model is not None:
                response.read()
                model.model_validate_json(response.text, strict=True)
            taken = response.status_code == 201  # a body the document refuses was taken?
            if taken and request.method == "POST" and request.url.path == "/v1/views":
                errors = list(self.view_body.iter_errors(orjson.loads(request.content)))
                assert not errors, f"a view registered from a body the schema refuses: {errors[0]}"

        return check
