"""difflow's HTTP and WebSocket API: a thin FastAPI layer over ``service``."""

from api.app import create_app

__all__ = ["create_app"]
