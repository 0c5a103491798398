"""The fault options reach the payment routes as they reach the others: a fault answered
before the route leaves no promise, no report and no state change; `empty_body` answers after
the write, which then did happen."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from isp_gateway.simulator import add_simulator_arguments, config_from_args
from tests.simulator.conftest import SIM_KEY, SimServer
from tests.simulator.test_payments import PROMISE, RECEIPT, debtor, report_form, report_path

Send = Callable[[httpx.Client], httpx.Response]


@dataclass
class Route:
    prefix: str  # the faults' scope
    send: Send
    client: dict[str, Any]  # the suspended debtor it is about (the dataset's own row)
    invoice: dict[str, Any]

    def written(self, server: SimServer) -> bool:
        """Whether the upstream carried the write out: recorded it, or changed the client
        or the invoice."""
        return bool(
            server.sim.promises
            or server.sim.payment_reports
            or self.client["estado"] != "Suspendido"
            or self.invoice["estado"] != 1
        )


def _route(server: SimServer, kind: str) -> Route:
    client, invoice_id = debtor(server)
    invoice = server.sim.get_invoice(invoice_id)
    assert invoice is not None
    if kind == "promise":
        body = {"id_factura": invoice_id, "fecha_limite": "2026-11-28", "accion": 1}
        return Route(PROMISE, lambda http: http.post(PROMISE, json=body), client, invoice)
    files = {"comprobante_pago": ("r.pdf", RECEIPT, "application/pdf")}
    return Route(
        "/api/facturas/reportar-pago/",
        lambda http: http.post(report_path(invoice_id), data=report_form(), files=files),
        client,
        invoice,
    )


def _fault(server: SimServer, prefix: str, **values: Any) -> None:
    scoped = {"path_prefix": prefix, "method": "POST", **values}
    answer = server.client.put(f"{server.url}/_sim/faults", json=scoped)
    assert answer.status_code == 200, answer.text


@pytest.fixture(params=["promise", "report"])
def route(request: pytest.FixtureRequest, server: SimServer) -> Route:
    return _route(server, request.param)


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        ({"error_rate": 1.0}, 500),
        ({"force_403": True}, 403),
        ({"force_429": True, "retry_after": 9}, 429),
        ({"garbage": 1.0}, 200),
        ({"unreadable_write": True}, 200),
    ],
)
def test_a_fault_before_the_route_answers_and_writes_nothing(
    server: SimServer, route: Route, fault: dict[str, Any], status: int
) -> None:
    _fault(server, route.prefix, **fault)
    response = route.send(server.client)
    assert response.status_code == status
    if status == 200:
        with pytest.raises(ValueError):
            json.loads(response.content)
    if status == 429:
        assert response.headers["retry-after"] == "9"
    assert not route.written(server)
    # Out of the fault's scope, the other routes answer as usual.
    assert server.client.get("/api/formas-de-pago/").status_code == 200


def test_a_hang_never_answers_and_writes_nothing(server: SimServer, route: Route) -> None:
    _fault(server, route.prefix, hang_rate=1.0)
    headers = {"Authorization": f"Api-Key {SIM_KEY}"}
    with (
        server.raw_client(timeout=0.5, headers=headers) as client,
        pytest.raises(httpx.ReadTimeout),
    ):
        route.send(client)
    assert not route.written(server)


def test_the_rate_limit_counts_the_writes(server: SimServer, route: Route) -> None:
    _fault(server, route.prefix, rate_limit_per_minute=1)
    first, second = route.send(server.client), route.send(server.client)
    assert first.status_code in (200, 201) and second.status_code == 429
    assert len(server.sim.promises) + len(server.sim.payment_reports) == 1


def test_latency_slows_the_writes(server: SimServer, route: Route) -> None:
    _fault(server, route.prefix, latency=0.3)
    started = time.monotonic()
    assert route.send(server.client).status_code in (200, 201)
    assert time.monotonic() - started >= 0.3


def test_an_empty_body_follows_a_write_that_happened(server: SimServer, route: Route) -> None:
    _fault(server, route.prefix, empty_body=1.0)
    response = route.send(server.client)
    assert response.status_code in (200, 201) and response.content == b""
    assert route.written(server)
    assert len(server.sim.promises) + len(server.sim.payment_reports) == 1


def test_the_empty_body_fault_reaches_reads_and_is_a_cli_flag(server: SimServer) -> None:
    server.sim.faults.update({"empty_body": 1.0, "path_prefix": "/api/router/"})
    response = server.client.get("/api/router/")
    assert (response.status_code, response.content) == (200, b"")
    assert server.client.get("/api/plan-internet/").json()["count"] > 0
    assert server.client.put(f"{server.url}/_sim/faults", json={"empty_body": 2}).status_code == 400
    parser = argparse.ArgumentParser()
    add_simulator_arguments(parser)
    faults = config_from_args(parser.parse_args(["--empty-body-rate", "0.25"]), "k").faults
    assert faults.empty_body == 0.25 and faults.as_dict()["empty_body"] == 0.25
