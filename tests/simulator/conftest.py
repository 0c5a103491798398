"""Fixtures: a simulator under uvicorn on loopback, with an authenticated httpx client."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from isp_gateway.simulator import SimulatorConfig, SimulatorState, create_simulator_app
from tests.support import run_server

SIM_KEY = "simulator-test-key"


@dataclass
class SimServer:
    url: str
    app: Starlette
    client: httpx.Client

    @property
    def sim(self) -> SimulatorState:
        state: SimulatorState = self.app.state.sim
        return state

    def raw_client(self, **kw: Any) -> httpx.Client:
        """A client without the Api-Key header (callers close it)."""
        return httpx.Client(base_url=self.url, **kw)


StartSim = Callable[..., SimServer]


@pytest.fixture
def start_sim() -> Iterator[StartSim]:
    """Factory: start a simulator with SimulatorConfig overrides."""
    with contextlib.ExitStack() as stack:

        def start(**overrides: Any) -> SimServer:
            overrides.setdefault("api_key", SIM_KEY)
            overrides.setdefault("clients", 200)
            overrides.setdefault("ping_duration", 0.2)
            app = create_simulator_app(SimulatorConfig(**overrides))
            url = stack.enter_context(run_server(app))
            client = stack.enter_context(
                httpx.Client(
                    base_url=url, headers={"Authorization": f"Api-Key {SIM_KEY}"}, timeout=10
                )
            )
            return SimServer(url=url, app=app, client=client)

        yield start


@pytest.fixture
def server(start_sim: StartSim) -> SimServer:
    return start_sim()
