"""Command-line wiring for the simulator: argparse flags → ``SimulatorConfig`` → uvicorn."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from isp_gateway.simulator.config import CHOICES, SimulatorConfig, Variants
from isp_gateway.simulator.faults import Faults, parse_latency


def _rate(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError("a fraction between 0 and 1")
    return value


def _latency(text: str) -> tuple[float, float]:
    try:
        return parse_latency(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _per_minute(text: str) -> int:
    number = text.removesuffix("/min").strip()
    if not number.isdigit() or int(number) < 1:
        raise argparse.ArgumentTypeError("N or N/min, N >= 1")
    return int(number)


def _outage(text: str) -> tuple[int, str]:
    """`ROUTER_ID` or `ROUTER_ID:DESCRIPTION`."""
    ident, _, description = text.partition(":")
    if not ident.strip().isdigit():
        raise argparse.ArgumentTypeError("ROUTER_ID or ROUTER_ID:DESCRIPTION")
    return int(ident), description.strip()


# The variants chosen by a flag of their name (--ticket-labels for `ticket_labels`), offering
# the variant's values with its default first (config.CHOICES).
_VARIANT_HELP = {
    "ticket_labels": "how ticket rows give estado and prioridad",
    "answers": "a ticket's respuestas as a list or one object",
    "fecha_corte": "the date format of the clients' fecha_corte",
    "precio_plan": "mixed: some clients' precio_plan empty or 0.00",
    "money": "amounts as decimal strings or numbers",
}


def add_simulator_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the simulator's flags (host, port, data, faults, variants) to ``parser``."""
    data = parser.add_argument_group("simulator data")
    # The caller's parser may already define --host (the main CLI does); keep its own.
    with contextlib.suppress(argparse.ArgumentError):
        data.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    data.add_argument("--port", type=int, default=8001, help="port (default 8001)")
    data.add_argument("--clients", type=int, default=200, help="generated clients (default 200)")
    data.add_argument("--tickets", type=int, default=300, help="generated tickets (default 300)")
    data.add_argument("--seed", type=int, default=1, help="data and fault seed (default 1)")
    data.add_argument(
        "--data",
        type=Path,
        default=None,
        help="load the dataset from a JSON file (default: none, generated from --seed)",
    )
    data.add_argument("--max-page-size", type=int, default=1000, help="limit cap (default 1000)")
    data.add_argument(
        "--default-page-size", type=int, default=10, help="rows of a page asked without limit"
    )
    data.add_argument("--ping-duration", type=float, default=3.0, help="seconds in PROCESS")
    data.add_argument(
        "--answer-cases",
        action="store_true",
        help="add a shared document, a shared phone and a suspended client owing nothing",
    )
    data.add_argument(
        "--timezone", default="America/Bogota", help="account zone of ticket times (as TIMEZONE)"
    )
    data.add_argument(
        "--outage",
        type=_outage,
        action="append",
        default=[],
        metavar="ROUTER_ID[:DESCRIPTION]",
        help="start with this router's falla_general on (repeatable)",
    )
    data.add_argument(
        "--client-router",
        choices=["object", "absent"],
        default="object",
        help="client rows with router {id, nombre}, or without the key",
    )

    faults = parser.add_argument_group("simulator faults")
    faults.add_argument(
        "--latency",
        type=_latency,
        default=(0.0, 0.0),
        metavar="MIN[,MAX]",
        help="seconds every answer waits, MIN or MIN,MAX (default: 0, none)",
    )
    faults.add_argument("--error-rate", type=_rate, default=0.0, metavar="R", help="500s")
    faults.add_argument("--hang-rate", type=_rate, default=0.0, metavar="R", help="no answer")
    faults.add_argument("--garbage-rate", type=_rate, default=0.0, metavar="R", help="bad JSON")
    faults.add_argument(
        "--empty-body-rate", type=_rate, default=0.0, metavar="R", help="done, answer body dropped"
    )
    faults.add_argument("--force-403", action="store_true", help="refuse every request")
    faults.add_argument("--force-429", action="store_true", help="throttle every request")
    faults.add_argument("--retry-after", type=int, default=30, help="Retry-After of --force-429")
    faults.add_argument(
        "--rate-limit",
        type=_per_minute,
        default=None,
        metavar="N/min",
        help="answer 429 past N requests a minute (default: none, no limit)",
    )
    faults.add_argument(
        "--short-page", action="store_true", help="list pages end early with next: null"
    )
    faults.add_argument(
        "--unreadable-write", action="store_true", help="writes answer 200 unreadable, undone"
    )
    faults.add_argument(
        "--fault-method", default=None, help="faults only for this method (default: any)"
    )
    faults.add_argument(
        "--fault-path", default=None, help="faults only under this path prefix (default: any)"
    )

    variants = parser.add_argument_group("simulator variants")
    for name, text in _VARIANT_HELP.items():
        choices = list(CHOICES[name])
        flag = "--" + name.replace("_", "-")
        variants.add_argument(flag, choices=choices, default=choices[0], help=text)
    variants.add_argument("--single-phone", action="store_true", help="one number per telefono")


def config_from_args(ns: argparse.Namespace, api_key: str) -> SimulatorConfig:
    """Build the config from parsed ``add_simulator_arguments`` flags."""
    faults = Faults(
        **_flags(ns, "latency", "error_rate", "hang_rate", "force_403", "force_429"),
        **_flags(ns, "retry_after", "short_page", "unreadable_write"),
        garbage=ns.garbage_rate,
        empty_body=ns.empty_body_rate,
        rate_limit_per_minute=ns.rate_limit,
        method=ns.fault_method.upper() if ns.fault_method else None,
        path_prefix=ns.fault_path,
    )
    variants = Variants(**_flags(ns, *_VARIANT_HELP), phone_separators=not ns.single_phone)
    return SimulatorConfig(
        api_key,
        **_flags(ns, "clients", "seed", "tickets", "max_page_size", "default_page_size"),
        **_flags(ns, "ping_duration", "answer_cases", "timezone", "client_router"),
        data_file=ns.data,
        outages=dict(ns.outage),
        faults=faults,
        variants=variants,
    )


def _flags(ns: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The values of the flags named like the fields they set (--max-page-size for
    `max_page_size`)."""
    return {name: getattr(ns, name) for name in names}


def serve_simulator(
    config: SimulatorConfig,
    host: str = "127.0.0.1",
    port: int = 8001,
    *,
    log_level: str = "warning",
) -> None:
    """Run the simulator under uvicorn until interrupted."""
    import uvicorn

    from isp_gateway.simulator.app import create_simulator_app

    # Quiet by default: the demo runs this next to the gateway on one console.
    uvicorn.run(create_simulator_app(config), host=host, port=port, log_level=log_level)
