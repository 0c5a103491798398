"""Clients (spec 4.3-4.6). STUB, to be built."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isp_gateway.runtime import Runtime


class ClientService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def start(self) -> None:
        """Start background jobs."""

    async def aclose(self) -> None:
        """Stop background jobs."""
