"""The documentation pages ``/docs`` (Swagger UI) and ``/redoc`` over ``/openapi.json``, with
every script, style and icon they load served by the server itself: FastAPI's own pages
fetch them from a CDN, so on a machine without internet they rendered nothing."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.service.conftest import assert_error


@pytest.mark.parametrize(
    ("page", "script"), [("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")]
)
def test_a_documentation_page_loads_nothing_from_elsewhere(
    client: httpx.Client, page: str, script: str
) -> None:
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert "'/openapi.json'" in html or '"/openapi.json"' in html, html
    assert re.findall(r"https?://", html) == [], html  # no CDN, no web font
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any(a.endswith(f"/{script}") for a in assets), assets
    for asset in assets:
        assert asset.startswith("/docs/assets/"), asset
        served = client.get(asset)
        assert served.status_code == 200 and served.content, asset
        kind = served.headers["content-type"]
        want = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
        assert kind.startswith(want[asset[asset.rindex(".") :]]), (asset, kind)


def test_swagger_ui_renders_the_documents_openapi_version(client: httpx.Client) -> None:
    """Swagger UI 4 cannot render OpenAPI 3.1, which FastAPI writes; 5 can."""
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")
    bundle = client.get("/docs/assets/swagger-ui-bundle.js").text
    assert re.search(r'PACKAGE_VERSION:"5\.\d+\.\d+"', bundle), bundle[:300]


def test_an_unknown_asset_is_a_404_in_the_error_envelope(client: httpx.Client) -> None:
    """A path out of the assets' directory included: ``core.py`` is a file beside it."""
    for path in ("/docs/assets/nope.js", "/docs/assets/%2e%2e/core.py", "/docs/assets"):
        assert_error(client.get(path), 404, "not_found")
