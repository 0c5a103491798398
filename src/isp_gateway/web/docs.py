"""/docs (Swagger UI) and /redoc served without the internet.

FastAPI's own pages load Swagger UI and ReDoc from a CDN (and ReDoc's fonts from Google): on a
server without outside access, as an ISP's often is, both pages stay blank. The assets come
from the installed `fastapi-offline` distribution (Swagger UI bundle and CSS, ReDoc's
standalone bundle, a favicon) and are served from our own path; nothing leaves the machine.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs-assets"
ASSETS_PACKAGE = "fastapi_offline"
DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
# The pages may load nothing from elsewhere, so the browser never tries: ReDoc's bundle, for
# one, draws its "API docs by Redocly" logo from a CDN whatever its options. (Inline scripts:
# FastAPI's page starts Swagger UI with one; blob: workers: ReDoc's search.)
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
    "frame-ancestors 'self'"
)


# Each page's own URLs, served under the root path a request came by.
SWAGGER_UI_URLS = {
    "oauth2_redirect_url": OAUTH2_REDIRECT_URL,
    "swagger_js_url": f"{ASSETS_PATH}/swagger-ui-bundle.js",
    "swagger_css_url": f"{ASSETS_PATH}/swagger-ui.css",
    "swagger_favicon_url": f"{ASSETS_PATH}/favicon.png",
}
REDOC_URLS = {
    "redoc_js_url": f"{ASSETS_PATH}/redoc.standalone.js",
    "redoc_favicon_url": f"{ASSETS_PATH}/favicon.png",
}


def _offline_page(
    request: Request,
    app: FastAPI,
    render: Callable[..., HTMLResponse],
    title: str,
    urls: dict[str, str],
    **options: Any,
) -> HTMLResponse:
    """FastAPI's page `render`ed with the schema and `urls` under the request's root path (a
    proxy's prefix), and the policy that keeps the browser from loading anything elsewhere."""
    root = request.scope.get("root_path", "")
    page = render(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} - {title}",
        **{name: f"{root}{url}" for name, url in urls.items()},
        **options,
    )
    page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return page


def assets_directory() -> str:
    return str(resources.files(ASSETS_PACKAGE).joinpath("static"))


def install_docs(app: FastAPI) -> None:
    """Mount the assets and add the two pages. The app is built with `docs_url=None,
    redoc_url=None` so that FastAPI's CDN pages are not registered."""
    app.mount(ASSETS_PATH, StaticFiles(directory=assets_directory()), name="docs-assets")
    # Swagger UI shows a badge fetched from an online validator unless told not to.
    parameters = {"validatorUrl": None, **(app.swagger_ui_parameters or {})}

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return _offline_page(
            request,
            app,
            get_swagger_ui_html,
            "Swagger UI",
            SWAGGER_UI_URLS,
            swagger_ui_parameters=parameters,
        )

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return _offline_page(
            request, app, get_redoc_html, "ReDoc", REDOC_URLS, with_google_fonts=False
        )
