"""Operations: health and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from api.deps import RuntimeDep
from api.models import error_responses
from service.errors import Unavailable

router = APIRouter(tags=["operations"])


@router.get("/healthz", responses=error_responses())
async def healthz(rt: RuntimeDep) -> dict[str, str]:
    """Ok while the server takes requests; 503 ``shutting_down`` once it has begun to stop
    (a load balancer must not send it more work: its writes are refused then)."""
    if rt.stopping:
        raise Unavailable("the server is shutting down", code="shutting_down")
    return {"status": "ok"}


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def metrics(rt: RuntimeDep) -> Response:
    return Response(rt.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
