"""HEAD wherever GET is served (RFC 9110 section 9.3.2): the GET's status and headers,
without its body. FastAPI routes GET alone, so a HEAD goes through routing as a GET,
marked ``head`` in its scope, and its body is dropped on the way out."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HeadAsGet"]


class HeadAsGet:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET", "head": True}, receive, headers_only)
