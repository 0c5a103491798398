"""The /mcp route: the REST credentials first, then the SDK's session manager, started on
the first /mcp request.

The SDK (mcp/server.py and what it imports) costs about 19 MB of memory in every worker that
loads it; a worker that never serves an agent never loads it (issue 25, `make bench` (g)).
`McpEndpoint` authenticates every request with the REST credentials (mcp/auth.py) and puts
the caller and its scopes in the ASGI scope, where the handlers read them back; `Sessions`
starts the stateless session manager once, in a task of its own, closed by the lifespan
before the services it calls.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from isp_gateway.auth.credentials import CREDENTIALS_ERROR
from isp_gateway.kit import deadline, messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import set_current_caller
from isp_gateway.kit.errors import ServiceError
from isp_gateway.mcp.auth import BadEndUser, Unauthenticated, authenticate, scopes_of
from isp_gateway.mcp.request import SCOPE_KEY, McpRequest, use_scopes
from isp_gateway.web.envelope import error_response

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from isp_gateway.services import Runtime

PATH = "/mcp"


class Sessions:
    """The SDK's stateless session manager, started by the first request that needs it."""

    def __init__(self) -> None:
        self._manager: StreamableHTTPSessionManager | None = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def manager(self) -> StreamableHTTPSessionManager:
        if self._manager is None:
            async with self._lock:
                if self._manager is None:
                    self._manager = await self._start()
        return self._manager

    async def _start(self) -> StreamableHTTPSessionManager:
        from isp_gateway.mcp.server import session_manager

        manager = session_manager()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A context of its own: the sessions it runs must not inherit the first request's
        # caller or deadline (each tool call sets its own).
        self._task = asyncio.create_task(self._run(manager, ready), context=contextvars.Context())
        await ready
        return manager

    async def _run(
        self, manager: StreamableHTTPSessionManager, ready: asyncio.Future[None]
    ) -> None:
        try:
            async with manager.run():
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


class McpEndpoint:
    """The ASGI app at /mcp: the REST credentials first, then the SDK's session manager."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope["app"].state
        runtime: Runtime = state.runtime
        try:
            caller = await authenticate(runtime, scope)
        except Unauthenticated:
            # Exactly REST's 401 (auth/dependencies.py).
            response: JSONResponse = JSONResponse(
                {"detail": CREDENTIALS_ERROR},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        except BadEndUser:
            refusal = error_response(
                422, Action.VALIDATION_ERROR, messages.say(Action.VALIDATION_ERROR, "end_user")
            )
            await refusal(scope, receive, send)
            return
        except ServiceError as exc:  # a key past its own rate_per_minute: 429, as on REST
            refused = error_response(
                exc.status_code, exc.action, exc.message, data=exc.data, headers=exc.headers
            )
            await refused(scope, receive, send)
            return
        scopes = scopes_of(caller)
        language = messages.Language(runtime.settings.MESSAGES_LANGUAGE)
        scope[SCOPE_KEY] = McpRequest(caller, scopes, runtime, deadline.current(), language)
        set_current_caller(caller)
        use_scopes(scopes)
        sessions: Sessions = state.mcp_sessions
        manager = await sessions.manager()
        await manager.handle_request(scope, receive, send)


def install(app: FastAPI) -> None:
    """Add the /mcp route and its (not yet started) sessions; the lifespan closes them."""
    app.state.mcp_sessions = Sessions()
    app.router.routes.append(
        Route(
            PATH,
            endpoint=McpEndpoint(),
            # Stateless: no standalone SSE stream (GET) and no session to end (DELETE); the
            # SDK would hold a GET open with nothing ever to send. Both answer 405 here.
            methods=["POST"],
            include_in_schema=False,
        )
    )
