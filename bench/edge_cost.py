"""(a) in-process: the gateway's own time a request, for a cached lookup and each refusal.

Under wrk, the server's CPU a request is mostly the server's own (granian's HTTP, its
threads, the event loop): the gateway's part of a cached lookup is a few µs of about 40, and
the machine's load moves the whole by more than that from run to run. Here the app (as
shipped: `create_app` on the shipped settings, its lifespan started, its access log written
to a file) is called as the server calls it, an ASGI call a request, in a loop, with no
server and no socket: what the gateway itself spends on each answer, to the tenth of a µs.
The least of several rounds is kept, the round least disturbed by the rest of the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench import procs

ROUNDS = 7
CALLS = 10_000
Case = tuple[str, str, dict[str, str], bytes | None]


@contextlib.contextmanager
def _shipped_process(env: dict[str, str]) -> Iterator[Path]:
    """The settings as `serve` reads them (only `env` set, no `.env`), and the logs as it
    writes them (INFO, text, to a file): restored after."""
    from isp_gateway.settings import Settings
    from isp_gateway.web.logs import configure_logging

    saved_env = dict(os.environ)
    saved_cwd = Path.cwd()
    root = logging.getLogger()
    saved_logging = (root.handlers[:], root.level)
    with tempfile.TemporaryDirectory() as directory, open(Path(directory) / "log", "w") as log:
        for name in Settings.model_fields:
            os.environ.pop(name, None)
        os.environ.update(env)
        os.chdir(directory)
        try:
            with contextlib.redirect_stderr(log):
                configure_logging("INFO")
                yield Path(directory)
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            root.handlers[:], level = saved_logging
            root.setLevel(level)


def _scope(method: str, path: str, headers: dict[str, str], body: bytes | None) -> dict[str, Any]:
    raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    raw += [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"wrk")]
    if body is not None:
        raw.append((b"content-length", str(len(body)).encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def _time(app: Any, cases: dict[str, Case]) -> tuple[dict[str, float], dict[str, int]]:
    """µs a call of each case (the least of ROUNDS rounds of CALLS calls), and its status."""
    statuses: dict[str, int] = {}
    best: dict[str, float] = {}
    for _ in range(ROUNDS):
        for name, (method, path, headers, body) in cases.items():
            base = _scope(method, path, headers, body)
            message = {"type": "http.request", "body": body or b"", "more_body": False}

            async def receive(message: dict[str, Any] = message) -> dict[str, Any]:
                return message

            async def send(sent: dict[str, Any], name: str = name) -> None:
                if sent["type"] == "http.response.start":
                    statuses[name] = sent["status"]

            started = time.perf_counter()
            for _ in range(CALLS):
                await app({**base, "state": {}}, receive, send)
            spent = (time.perf_counter() - started) / CALLS * 1e6
            best[name] = min(spent, best.get(name, spent))
    return best, statuses


async def _measure(document: str, keys_in_use: tuple[str, str]) -> list[str]:
    from isp_gateway.app import create_app
    from isp_gateway.settings import load_settings

    app = create_app(load_settings())
    api_key, scopeless_key = keys_in_use
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            form = {"username": procs.USERNAME, "password": procs.PASSWORD}
            token = (await client.post("/api/v1/auth/token", data=form)).json()["access_token"]
            jwt = {"Authorization": f"Bearer {token}"}
            # The list waits for the full load: the index is warm after it.
            (await client.get("/api/v1/clients/", headers=jwt, timeout=120)).raise_for_status()
        lookup = f"/api/v1/clients/by-document/{document}"
        json_type = {"Content-Type": "application/json"}
        cases: dict[str, Case] = {
            "cached lookup (JWT)": ("GET", lookup, jwt, None),
            "cached lookup, API key": ("GET", lookup, {"X-API-Key": api_key}, None),
            "unknown route": ("GET", "/api/v1/no-such-route", {}, None),
            "bad token": ("GET", lookup, {"Authorization": "Bearer not-a-valid-token"}, None),
            "missing scope": ("GET", lookup, {"X-API-Key": scopeless_key}, None),
            "malformed JSON body": (
                "POST",
                "/api/v1/clients/resolve",
                {**jwt, **json_type},
                b'{"document": "123',
            ),
        }
        spent, statuses = await _time(app, cases)
    base = spent["cached lookup (JWT)"]
    return [
        f"    {name:22} {statuses[name]}  {us:5.2f} us a request, "
        f"{us / base:.2f}x the cached lookup"
        for name, us in spent.items()
    ]


def run_in_process(
    upstream: str, document: str, keys_file: Path, keys_in_use: tuple[str, str]
) -> list[str]:
    """The lines of the gateway's own time a request of each case (see the module)."""
    heading = (
        "  the gateway's own time a request, in-process (the shipped app called as an ASGI "
        f"app, no server; least of {ROUNDS} rounds of {CALLS:,} calls):"
    )
    env = {**procs.gateway_env(upstream), "API_KEYS_FILE": str(keys_file)}
    with _shipped_process(env):
        return [heading, *asyncio.run(_measure(document, keys_in_use))]
