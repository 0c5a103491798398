"""Fixtures for the account tests: crafted clients and invoices, and a warmed gateway."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.clients.conftest import PLANS, row, warm
from tests.conftest import Gateway, Pair, Simulator, StartGateway, StartSimulator
from tests.support import wait_until, write_dataset

TODAY = datetime.now(ZoneInfo("America/Bogota")).date()

# Private values planted in every row: none may ever appear in an answer.
SECRETS = {
    "password_cpe": "Secret-CPE-7788",
    "password_servicio": "Secret-SVC-7788",
    "password_router_wifi": "Secret-WIFI-7788",
    "password_ssid_router_wifi": "Secret-SSID-7788",
    "coordenadas": "4.711234,-74.072199",
    "mac_cpe": "DE:AD:BE:EF:77:88",
}


def day(offset: int) -> str:
    return (TODAY + timedelta(days=offset)).isoformat()


def client(service_id: int, username: str, **fields: Any) -> dict[str, Any]:
    return row(service_id, usuario=username, **SECRETS, **fields)


CLIENTS = [
    client(201, "ana@isp", estado="Activo", estado_facturas="Pagadas", saldo="0.00"),
    client(
        202, "beto@isp", estado="Suspendido", estado_facturas="Vencidas", saldo="92500.50",
        fecha_corte="5/03/2026",
    ),
    client(203, "carla@isp", estado="Activo", estado_facturas="Pendiente de Pago"),
    client(204, "dario@isp", estado="Suspendido", estado_facturas="Vencidas"),
    client(205, "elena@isp", estado="cancelado", estado_facturas="Vencidas"),
    client(206, "fabio@isp", estado="Gratis"),
    client(207, "gina@isp", estado="Retirado"),
]  # fmt: skip


def invoice(number: int, username: str, total: Any, due: int, estado: Any = 1) -> dict[str, Any]:
    return {
        "id_factura": number,
        "cliente": {"usuario": username, "nombre": username.upper()},
        "total": total,
        "fecha_emision": day(due - 15),
        "fecha_vencimiento": day(due),
        "estado": estado,
    }


INVOICES = [
    invoice(9001, "ana@isp", "40000.00", -20, estado=2),  # paid: not owed
    invoice(9002, "beto@isp", "40000.00", -30),
    invoice(9003, "beto@isp", 40000, -60),
    invoice(9004, "beto@isp", "12500.50", 10),
    invoice(9005, "carla@isp", 55000.0, 5),
    invoice(9006, "nobody@isp", "99999.00", -5),  # matches no client: ignored
    invoice(9007, "dario@isp", "40.000,00", -10),  # unreadable total
    invoice(9008, "elena@isp", "30000.00", -40),
    invoice(9009, "beto@isp", "1.00", 0),  # due today: not overdue yet
]

PAYMENT_METHODS = [{"id": 7, "nombre": "efectivo"}, {"id": 9, "nombre": " Nequi "}]


def write_data(path: Path, **sections: Any) -> Path:
    methods = sections.pop("payment_methods", PAYMENT_METHODS)  # a test's own, or none
    return write_dataset(path, CLIENTS, PLANS, INVOICES, methods, **sections)


@pytest.fixture
def account_data(tmp_path: Path) -> Path:
    return write_data(tmp_path / "accounts.json")


def warm_invoices(gw: Gateway, loads: int = 1, timeout: float = 15) -> None:
    wait_until(
        lambda: gw.runtime.services.accounts.invoices.loads >= loads,
        timeout=timeout,
        interval=0.01,
        message="the invoice cache to load",
    )


StartAccounts = Callable[..., Pair]


@pytest.fixture
def start_accounts(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    account_data: Path,
) -> StartAccounts:
    """A simulator on the crafted data and a gateway whose client list (and, unless told
    otherwise, pending list) have loaded; call counts reset. Pages of 2 rows, so the pending
    list takes several pages."""

    def start(
        sim_overrides: dict[str, Any] | None = None,
        *,
        wait_invoices: bool = True,
        before_gateway: Callable[[Simulator], None] | None = None,
        reset_stats: bool = True,
        **gw_overrides: Any,
    ) -> Pair:
        sim = start_simulator(**{"data_file": account_data, **(sim_overrides or {})})
        if before_gateway is not None:
            before_gateway(sim)
        gw_overrides.setdefault("UPSTREAM_PAGE_SIZE", 2)
        gw = start_gateway(sim.url, **gw_overrides)
        warm(gw)
        if wait_invoices:
            warm_invoices(gw)
        if reset_stats:
            sim.state.reset_stats()
        return sim, gw

    return start
