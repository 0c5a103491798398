"""A WispHub-compatible upstream simulator for tests, benchmarks and the demo.

    from isp_gateway.simulator import SimulatorConfig, create_simulator_app
    app = create_simulator_app(SimulatorConfig(api_key="k", clients=200, seed=1))
    sim = app.state.sim   # SimulatorState: dataset, calls, faults, variants, ping outcomes

Control endpoints (no Api-Key; never touched by faults):

- ``GET /_sim/stats``: ``{"calls": {"GET /api/clientes/": 3, ...}, "total", "created_tickets",
  "tasks", "promises", "promises_received", "payment_reports"}``; ``POST /_sim/reset-stats``
  zeroes the call counts.
- ``GET|PUT /_sim/faults``: partial JSON update of ``Faults`` (``latency`` [min, max],
  ``error_rate``, ``hang_rate``, ``hang_seconds``, ``force_403``, ``garbage``, ``empty_body``,
  ``rate_limit_per_minute``, ``force_429``, ``retry_after``, ``short_page``,
  ``unreadable_write``, ``blank_list`` ("bare" ``[]`` or "paged" ``{"count": 0}``: a list
  read with no rows), ``method``, ``path_prefix``,
  ``scopes`` {fault: {method, path_prefix, min_offset}}); ``{"reset": true}`` restores the
  defaults.
- ``GET|PUT /_sim/variants``: partial update of ``Variants``; ``{"reset": true}`` too.
- ``GET|PUT /_sim/ping-outcome``: ``{"service_id": 101 or null for all, "kind": "none" or null
  to clear, "duration": seconds in PROCESS}``.
- ``GET|PUT /_sim/routers``: general outages per router (``{"router_id": 3, "outage": true,
  "description": "..."}``, served by ``GET /api/router/`` and in tickets' ``servicio.router``),
  ``{"client_router": "absent"}`` (client rows without ``router``), ``{"ticket_technician":
  "email"}`` (ticket rows with ``tecnico: null`` and ``email_tecnico``), ``{"reset": true}``
  (none of these, whatever the start-up options). ``SimulatorConfig.outages`` (CLI
  ``--outage ROUTER_ID[:DESCRIPTION]``, repeatable) and ``client_router`` (``--client-router
  absent``) set the first two from the start.
- ``GET|PUT /_sim/payments``: the payment promises held (``POST /api/promesa-pago/``), how many
  were received, and the payment reports (``POST /api/facturas/reportar-pago/{id}/``, each
  receipt's size; ``sim.payment_reports`` holds the bytes); ``{"invoice_id": 5001, "estado":
  2}`` sets an invoice's state as staff would (2: its payment registered, its promises gone;
  1: a report rejected), ``{"reset": true}`` forgets the promises and reports.

Module map: ``app`` (routes and HTTP), ``state`` (rules and runtime state), ``dataset``
(generation, the data file format), ``faults``, ``pings`` (outcome kinds), ``money`` (the
promise and report rules), ``config``, ``cli``.
"""

from typing import TYPE_CHECKING, Any

from isp_gateway.simulator.cli import add_simulator_arguments, config_from_args, serve_simulator
from isp_gateway.simulator.config import SimulatorConfig, Variants
from isp_gateway.simulator.dataset import (
    DEMO_TECHNICIAN_ID,
    DataFileError,
    Dataset,
    build_dataset,
    dump_dataset,
    load_dataset,
    suspended_debtors,
)
from isp_gateway.simulator.faults import Faults, Scope
from isp_gateway.simulator.pings import PING_KINDS

if TYPE_CHECKING:
    from isp_gateway.simulator.app import create_simulator_app
    from isp_gateway.simulator.state import SimulatorState


def __getattr__(name: str) -> Any:
    """The app and its state, imported when first asked for: every `isp-gateway` command
    builds its parser with add_simulator_arguments, and only `simulator` and `demo` serve
    the app (its import, Starlette's included, was a fifth of `check-config`'s start)."""
    if name == "create_simulator_app":
        from isp_gateway.simulator.app import create_simulator_app

        return create_simulator_app
    if name == "SimulatorState":
        from isp_gateway.simulator.state import SimulatorState

        return SimulatorState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEMO_TECHNICIAN_ID",
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
    "suspended_debtors",
]
