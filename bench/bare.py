"""The baseline: a bare Starlette app that returns a fixed body from memory.

It answers every path with the body in BENCH_BODY_FILE, so the benchmark can compare the
gateway's lookups with the cost of HTTP alone under the same server settings.
"""

from __future__ import annotations

import os
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def create_app() -> Starlette:
    body = Path(os.environ["BENCH_BODY_FILE"]).read_bytes()

    async def lookup(request: Request) -> Response:
        return Response(body, media_type="application/json")

    async def read(request: Request) -> Response:
        # The server's own cost of a request body (bench/lookups.py, the malformed body):
        # taken as the edge takes it, one ASGI receive.
        await request.receive()
        return Response(body, media_type="application/json")

    return Starlette(
        routes=[
            Route("/api/v1/clients/by-document/{document}", lookup),
            Route("/read", read, methods=["POST"]),
        ]
    )
