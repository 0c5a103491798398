"""A WispHub-compatible upstream simulator for tests, benchmarks and the demo.

    from isp_gateway.simulator import SimulatorConfig, create_simulator_app
    app = create_simulator_app(SimulatorConfig(api_key="k", clients=200, seed=1))
    sim = app.state.sim   # SimulatorState: dataset, calls, faults, variants, ping outcomes

Module map: ``app`` (routes and HTTP), ``state`` (rules and runtime state), ``dataset``
(generation, the data file format), ``faults``, ``pings``, ``config``, ``cli``.
"""

from isp_gateway.simulator.app import create_simulator_app
from isp_gateway.simulator.cli import add_simulator_arguments, config_from_args, serve_simulator
from isp_gateway.simulator.config import SimulatorConfig, Variants
from isp_gateway.simulator.dataset import Dataset, build_dataset, dump_dataset, load_dataset
from isp_gateway.simulator.faults import Faults, Scope
from isp_gateway.simulator.pings import PING_KINDS
from isp_gateway.simulator.state import SimulatorState

__all__ = [
    "PING_KINDS",
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
