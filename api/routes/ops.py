"""Operations: health and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from api.deps import RuntimeDep

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def metrics(rt: RuntimeDep) -> Response:
    return Response(rt.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
