"""A WispHub-compatible upstream simulator for tests, benchmarks and the demo.

    from isp_gateway.simulator import SimulatorConfig, create_simulator_app
    app = create_simulator_app(SimulatorConfig(api_key="k", clients=200, seed=1))
    sim = app.state.sim   # SimulatorState: dataset, calls, faults, variants, ping outcomes

Control endpoints (no Api-Key; never touched by faults):

- ``GET /_sim/stats``: ``{"calls": {"GET /api/clientes/": 3, ...}, "total", "created_tickets",
  "tasks"}``; ``POST /_sim/reset-stats`` zeroes the call counts.
- ``GET|PUT /_sim/faults``: partial JSON update of ``Faults`` (``latency`` [min, max],
  ``error_rate``, ``hang_rate``, ``hang_seconds``, ``force_403``, ``garbage``,
  ``rate_limit_per_minute``, ``force_429``, ``retry_after``, ``method``, ``path_prefix``,
  ``scopes`` {fault: {method, path_prefix, min_offset}}); ``{"reset": true}`` restores the
  defaults.
- ``GET|PUT /_sim/variants``: partial update of ``Variants``; ``{"reset": true}`` too.
- ``GET|PUT /_sim/ping-outcome``: ``{"service_id": 101 or null for all, "kind": "none" or null
  to clear, "duration": seconds in PROCESS}``.

Module map: ``app`` (routes and HTTP), ``state`` (rules and runtime state), ``dataset``
(generation, the data file format), ``faults``, ``pings`` (outcome kinds), ``config``, ``cli``.
"""

from isp_gateway.simulator.app import create_simulator_app
from isp_gateway.simulator.cli import add_simulator_arguments, config_from_args, serve_simulator
from isp_gateway.simulator.config import SimulatorConfig, Variants
from isp_gateway.simulator.dataset import (
    DataFileError,
    Dataset,
    build_dataset,
    dump_dataset,
    load_dataset,
)
from isp_gateway.simulator.faults import Faults, Scope
from isp_gateway.simulator.pings import PING_KINDS
from isp_gateway.simulator.state import SimulatorState

__all__ = [
    "PING_KINDS",
    "DataFileError",
    "Dataset",
    "Faults",
    "Scope",
    "SimulatorConfig",
    "SimulatorState",
    "Variants",
    "add_simulator_arguments",
    "build_dataset",
    "config_from_args",
    "create_simulator_app",
    "dump_dataset",
    "load_dataset",
    "serve_simulator",
]
