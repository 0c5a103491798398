"""Fixtures for the money routes (MONEY.md): crafted customers and invoices on the real
simulator, a warmed gateway, verification ids, real receipt files, and helpers that call the
two routes over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
import zlib
from collections.abc import Callable, Coroutine, Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import httpx
import pytest

from tests.accounts.conftest import warm_invoices
from tests.clients.conftest import PLANS, row, warm
from tests.conftest import (
    Gateway,
    Pair,
    Simulator,
    StartPair,
    _start_gateway,
    _start_simulator,
    pair_starter,
)
from tests.support import tool_call, write_dataset

T = TypeVar("T")

TODAY = datetime.now(ZoneInfo("America/Bogota")).date()
PROMISE = "/api/v1/clients/{}/payment-promise"
REPORT = "/api/v1/clients/{}/payment-reports"
VERIFICATION = "X-Verification-Id"


def day(offset: int) -> str:
    return (TODAY + timedelta(days=offset)).isoformat()


def client(service_id: int, estado: str) -> dict[str, Any]:
    return row(service_id, usuario=f"u{service_id}@isp", estado=estado)


def invoice(number: int, service_id: int, total: Any, due: int, estado: int = 1) -> dict[str, Any]:
    return {
        "id_factura": number,
        "cliente": {"usuario": f"u{service_id}@isp", "nombre": f"CLIENTE {service_id}"},
        "total": total,
        "fecha_emision": day(due - 15),
        "fecha_vencimiento": day(due),
        "estado": estado,
    }


# Suspended customers who owe, one or more per test that makes a promise or a report, so a
# module's tests can share a gateway without sharing a ledger.
DEBTORS = list(range(301, 321))
ACTIVE_DEBTOR = 330  # active, owes: a promise keeps it active
CANCELLED = 331  # cancelled, owes
OWES_NOTHING = 332  # suspended, nothing owed
CLIENTS = [
    *(client(sid, "Suspendido") for sid in DEBTORS),
    client(ACTIVE_DEBTOR, "Activo"),
    client(CANCELLED, "Cancelado"),
    client(OWES_NOTHING, "Suspendido"),
]


def oldest_invoice(service_id: int) -> int:
    return service_id * 10 + 1


def newer_invoice(service_id: int) -> int:
    return service_id * 10 + 2


INVOICES = [
    # Each owing customer: an overdue invoice of 40,000 and a newer one of 12,500.50.
    *(
        inv
        for sid in [*DEBTORS, ACTIVE_DEBTOR, CANCELLED]
        for inv in (
            invoice(oldest_invoice(sid), sid, "40000.00", -30),
            invoice(newer_invoice(sid), sid, "12500.50", 10),
        )
    ),
    invoice(oldest_invoice(OWES_NOTHING), OWES_NOTHING, "40000.00", -60, estado=2),  # paid
]
PAYMENT_METHODS = [{"id": 7, "nombre": "efectivo"}, {"id": 9, "nombre": "Nequi"}]


@pytest.fixture(scope="session")
def money_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("money") / "money.json"
    return write_dataset(path, CLIENTS, PLANS, INVOICES, PAYMENT_METHODS)


StartMoney = StartPair


def ready(gw: Gateway) -> None:
    warm(gw)
    warm_invoices(gw)


start_money = pair_starter(
    "money_data",
    ready,
    """A simulator on the crafted data and a gateway whose client and invoice lists have
    loaded; call counts reset.""",
)


# -- verification ids ---------------------------------------------------------------------------

STATEMENT = {"name": "CLIENTE {}", "address": "CALLE 1 # 2-3", "internet_plan_name": "PLAN 10MB"}


def statement_of(service_id: int) -> dict[str, str]:
    """What the crafted customer states: the REST verify's three fields."""
    return {**STATEMENT, "name": STATEMENT["name"].format(service_id)}


def verify_call(service_id: int, said: dict[str, str] | None = None) -> dict[str, Any]:
    """The MCP verify_customer call for `service_id` with what the customer `said` (the
    crafted customer's statement by default)."""
    said = said or statement_of(service_id)
    return tool_call(
        "verify_customer",
        service_id=service_id,
        name=said["name"],
        address=said["address"],
        plan_name=said["internet_plan_name"],
    )


def mcp_verify(
    gw: Gateway,
    service_id: int,
    headers: dict[str, str],
    statement: dict[str, str] | None = None,
) -> str:
    """verify_customer through /mcp (one JSON-RPC call over HTTP) with these credentials:
    its id is bound to the same caller and end user as a REST call with the same headers."""
    said = statement or statement_of(service_id)
    call = verify_call(service_id, said)
    answer = gw.client.post(
        "/mcp",
        json=call,
        headers={**headers, "Accept": "application/json, text/event-stream"},
    )
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    vid: str = result["structuredContent"]["verification_id"]
    return vid


def verification_id(
    gw: Gateway,
    service_id: int,
    end_user: str | None = None,
    statement: dict[str, str] | None = None,
) -> str:
    """A verification of `service_id` by this gateway's JWT caller (and `end_user`): the
    REST verify's `data.verification_id` when it carries one (MONEY.md 1: always, once
    every build does), else MCP verify_customer's for the same caller and end user."""
    headers = {"X-End-User-Id": end_user} if end_user else {}
    body = statement or statement_of(service_id)
    answer = gw.post(f"/api/v1/clients/{service_id}/verify", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert data["is_valid"], data
    if "verification_id" in data:
        vid: str = data["verification_id"]
        return vid
    return mcp_verify(gw, service_id, {**gw.auth, **headers}, body)


# -- the two routes ---------------------------------------------------------------------------


def money_headers(vid: str | None, key: str | None, end_user: str | None) -> dict[str, str]:
    """A money route's headers: the verification id, the Idempotency-Key and the end user,
    each when given."""
    named = {VERIFICATION: vid, "Idempotency-Key": key, "X-End-User-Id": end_user}
    return {name: value for name, value in named.items() if value is not None}


def promise(
    gw: Gateway,
    service_id: int,
    vid: str | None,
    until: str | None = None,
    *,
    key: str | None = None,
    end_user: str | None = None,
    **body: Any,
) -> httpx.Response:
    headers = money_headers(vid, key, end_user)
    return gw.post(
        PROMISE.format(service_id), json={"until": until or day(3), **body}, headers=headers
    )


def report_fields(**fields: Any) -> dict[str, str]:
    """A report's text fields: a valid default for each, replaced by `fields` (None leaves
    one out)."""
    base = {
        "reference": "TRX-1001",
        "paid_on": day(-1),
        "payment_method_id": "9",
        "amount": "40000",
    }
    for name, value in fields.items():
        if value is None:
            base.pop(name, None)
        else:
            base[name] = str(value)
    return base


def report(
    gw: Gateway,
    service_id: int,
    vid: str | None,
    receipt: tuple[str, bytes, str] | None,
    *,
    key: str | None = None,
    end_user: str | None = None,
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> httpx.Response:
    """A multipart report (the text fields as parts, and the receipt's when given); `headers`
    added (an `X-API-Key` is read before the gateway's JWT)."""
    headers = {**money_headers(vid, key, end_user), **(headers or {})}
    parts: list[tuple[str, Any]] = [
        (name, (None, value)) for name, value in report_fields(**fields).items()
    ]
    if receipt is not None:
        parts.append(("receipt", receipt))
    return gw.post(REPORT.format(service_id), files=parts, headers=headers)


# -- real receipt files -----------------------------------------------------------------------


def png_file(width: int = 4, height: int = 3) -> bytes:
    """A real PNG image (RGB, every scanline unfiltered)."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return (
            struct.pack(">I", len(payload))
            + kind
            + payload
            + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"".join(
        b"\x00" + b"".join(bytes((x * 40 % 256, y * 60 % 256, 128)) for x in range(width))
        for y in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def pdf_file() -> bytes:
    """A real one-page PDF (with its cross-reference table), binary comment included."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Contents 4 0 R >>",
    ]
    stream = b"BT /F1 12 Tf 20 50 Td (Pago 40000) Tj ET"
    objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def sim_reports(sim: Simulator) -> list[Any]:
    return list(sim.state.payment_reports)


def sim_promises(sim: Simulator) -> list[dict[str, Any]]:
    return list(sim.state.promises)


def until_true(condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def as_date(text: str) -> date:
    return date.fromisoformat(text)


def on_server(gw: Gateway, work: Coroutine[Any, Any, T]) -> T:
    """Run `work` on the gateway's own event loop (its store's connections live there)."""
    loop = gw.runtime.services.clients.cache._periodic.get_loop()
    return asyncio.run_coroutine_threadsafe(work, loop).result(10)


def audit_events(gw: Gateway, event: str) -> list[dict[str, Any]]:
    """The audit's `event` events, oldest first."""
    found = on_server(gw, gw.runtime.audit.query(event=event, limit=500))
    return list(reversed(found))


@pytest.fixture(scope="module")
def money_pair(password_hash: str, money_data: Path) -> Iterator[Pair]:
    """One simulator and gateway for a module whose tests each use their own customers."""
    with contextlib.ExitStack() as stack:
        sim = _start_simulator(stack, data_file=money_data)
        gw = _start_gateway(stack, password_hash, sim.url)
        ready(gw)
        yield sim, gw
