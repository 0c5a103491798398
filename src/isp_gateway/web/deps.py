"""How a route receives a feature service: `Annotated[XService, ServiceOf(XService)]`.

Each feature declares its own alias next to its router (`TicketsDep = Annotated[TicketService,
ServiceOf(TicketService)]`); the service is found in the running graph (services.py, on
`app.state.runtime`) by its type, so no router imports the graph.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import Depends, Request

T = TypeVar("T")


def _finder(kind: type[T]) -> Callable[[Request], Awaitable[T]]:
    # async on purpose: FastAPI runs a plain `def` dependency in a thread pool, which cost
    # more than the whole lookup it serves.
    async def dependency(request: Request) -> T:
        found: T = request.app.state.runtime.services.by_type[kind]
        return found

    return dependency


def ServiceOf(kind: type[Any]) -> Any:
    """The dependency that hands a route the running service of type `kind`."""
    return Depends(_finder(kind))
