"""WispHub client calls and the mapping of its Spanish rows to our `Client` model.

Nothing above this module sees `cedula` or `id_servicio`. Rows also carry passwords, MACs,
GPS `coordenadas` and router credentials: the mapping copies only the fields it names (an
allow-list), so those never leave this module (not even into the cache).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from datetime import date
from typing import Any, TypedDict, TypeVar

from isp_gateway.kit.errors import UpstreamRejected, UpstreamUnavailable
from isp_gateway.kit.prices import read_price
from isp_gateway.upstream.gateway import UpstreamGateway
from isp_gateway.upstream.records import as_int

log = logging.getLogger("isp_gateway.upstream.clients")

CLIENTS_PATH = "api/clientes/"

T = TypeVar("T")

_DMY = re.compile(r"^\s*(\d{1,2})/(\d{1,2})/(\d{4})\s*$")
_ISO = re.compile(r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ].*)?$")


class Client(TypedDict):
    """ClientResponse (spec 2.2) as a plain, JSON-ready dict: cheap to cache and serialise."""

    service_id: int
    name: str | None
    document: str | None
    phone: str | None
    address: str | None
    city: str | None
    locality: str | None
    payment_status: str | None
    zone_id: int | None
    antenna_ip: str | None
    cut_off_date: str | None
    outstanding_balance: float | None
    lan_interface: str | None
    internet_plan_name: str | None
    internet_plan_price: float | None
    technician_id: int | None
    # Beyond the spec (BEYOND.md "Service state"): `estado` as one of SERVICE_STATES.
    service_state: str


class ClientRecord(TypedDict):
    """A client plus what the service keeps but never shows in a client answer: the plan id
    (for prices), the upstream `usuario` (invoices are matched by it), `estado_facturas`
    and the id of the client's router (outage checks)."""

    client: Client
    plan_id: int | None
    username: str | None
    invoice_status: str | None
    router_id: int | None


# The upstream's `estado` labels (any case) → `service_state`; anything else is "unknown".
SERVICE_STATES = {
    "activo": "active",
    "suspendido": "suspended",
    "cancelado": "cancelled",
    "gratis": "free",
}
UNKNOWN_STATE = "unknown"


def service_state(estado: Any) -> str:
    if not isinstance(estado, str):
        return UNKNOWN_STATE
    return SERVICE_STATES.get(estado.strip().casefold(), UNKNOWN_STATE)


def _text(value: Any) -> str | None:
    if type(value) is str:  # nearly every field of every row: the first test
        return value.strip() or None
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text or None


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip().replace(",", ""))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _ref_id(value: Any) -> int | None:
    """`zona`/`tecnico`/`plan_internet` are nested objects (or null); take their id."""
    if isinstance(value, dict):
        return as_int(value.get("id"))
    return None


def parse_cut_off(value: Any) -> str | None:
    """`5/03/2026` (D/MM/YYYY) or `2026-03-05` → `2026-03-05`; anything else → None."""
    if not isinstance(value, str):
        return None
    match = _DMY.match(value)
    if match:
        day, month, year = (int(part) for part in match.groups())
    else:
        match = _ISO.match(value)
        if not match:
            return None
        year, month, day = (int(part) for part in match.groups())
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def plan_price(value: Any) -> float | None:
    """`precio_plan`: `""` and `"0.00"` mean the upstream did not fill it in; read like every
    price (kit/prices.py: `"65.000"` is 65000)."""
    price = read_price(value)
    return price if price is not None and price > 0 else None


def map_client(row: dict[str, Any]) -> ClientRecord | None:
    """One upstream row → our record; None for a row without a usable service id."""
    service_id = as_int(row.get("id_servicio"))
    if service_id is None:
        return None
    plan = row.get("plan_internet")
    plan_name = _text(plan.get("nombre")) if isinstance(plan, dict) else _text(plan)
    client: Client = {
        "service_id": service_id,
        "name": _text(row.get("nombre")),
        "document": _text(row.get("cedula")),
        "phone": _text(row.get("telefono")),
        "address": _text(row.get("direccion")),
        "city": _text(row.get("ciudad")),
        "locality": _text(row.get("localidad")),
        "payment_status": _text(row.get("estado")),
        "zone_id": _ref_id(row.get("zona")),
        "antenna_ip": _text(row.get("ip")),
        "cut_off_date": parse_cut_off(row.get("fecha_corte")),
        "outstanding_balance": _float(row.get("saldo")),
        "lan_interface": _text(row.get("interfaz_lan")),
        "internet_plan_name": plan_name,
        "internet_plan_price": plan_price(row.get("precio_plan")),
        "technician_id": _ref_id(row.get("tecnico")),
        "service_state": service_state(row.get("estado")),
    }
    return {
        "client": client,
        "plan_id": _ref_id(plan),
        "username": _text(row.get("usuario")),
        "invoice_status": _text(row.get("estado_facturas")),
        # Absent on some accounts; never a zone id (the two catalogues are unrelated).
        "router_id": _ref_id(row.get("router")),
    }


def complete_record(record: ClientRecord) -> ClientRecord:
    """A record cached by an older release (a shared store outlives a deploy) lacks the
    extras: fill them in place as unknown, so no reader meets a missing key before the next
    load replaces the copy. A client without a username cannot have its balance confirmed
    until then, which is the safe side."""
    client = record["client"]
    if "service_state" not in client:
        client["service_state"] = service_state(client.get("payment_status"))
    record.setdefault("username", None)
    record.setdefault("invoice_status", None)
    record.setdefault("router_id", None)
    return record


def map_clients(rows: list[dict[str, Any]]) -> list[ClientRecord]:
    records = []
    for row in rows:
        record = map_client(row)
        if record is not None:
            records.append(record)
    return records


async def fetch_all_clients_as(
    gateway: UpstreamGateway,
    transform: Callable[[list[ClientRecord]], T],
    *,
    background: bool,
) -> list[T]:
    """Every client, each page's records turned by `transform` as the page arrives (so the
    raw rows of a large list are never all held at once)."""
    return await gateway.get_all_pages_as(
        CLIENTS_PATH, lambda rows: transform(map_clients(rows)), background=background
    )


# A filtered query that announces more rows than this did not filter (an upstream that
# ignores the parameter answers with every client): it cannot be read whole in one request.
MAX_QUERY_ROWS = 200


async def query_clients(
    gateway: UpstreamGateway, field: str, value: str, *, limit: int = 50
) -> list[ClientRecord]:
    """Clients by one upstream filter (`document`, `service_id` or `phone`), read whole.

    The caller re-checks every row: `telefono` matches substrings of a multi-number field.
    A read with fewer rows than its `count` (an empty page, `next: null` too soon) is a
    failed read, UpstreamUnavailable (CALLERS.md 6 "Reads that are whole, everywhere"): it
    must never read as "no such client". A count past MAX_QUERY_ROWS is a filter the
    upstream ignored: also a failed read, as the value's rows cannot all be read.
    """
    upstream_field = {"document": "cedula", "service_id": "id_servicio", "phone": "telefono"}[field]
    params = {upstream_field: value}
    count, has_next, rows = await gateway.get_page(CLIENTS_PATH, params, limit, 0)
    if count is not None and count > len(rows):
        if count > MAX_QUERY_ROWS:
            log.warning(
                "upstream %s: %d rows for one %s: the filter was ignored",
                CLIENTS_PATH,
                count,
                field,
            )
            raise UpstreamUnavailable()
        # More rows than one page (the upstream may cap the page size below `limit`).
        step = len(rows)
        offset = step
        while has_next and step and offset < count:
            _, has_next, page = await gateway.get_page(CLIENTS_PATH, params, step, offset)
            rows = [*rows, *page]
            offset += step
            if not page:
                break
        gateway.check_whole(CLIENTS_PATH, count, len(rows))
    return map_clients(rows)


class ProfileNotFound(Exception):
    """The upstream has no service with that id."""


async def update_profile(
    gateway: UpstreamGateway, service_id: int, document: str | None, phone: str | None
) -> None:
    """PATCH the profile; raises ProfileNotFound on 404, an UpstreamError otherwise.

    Done only on a readable success answer (a JSON object): a 2xx with an HTML page,
    garbage or an empty body is no proof the backend took the change (issue 17: a proxy's
    200 page was reported as `client_updated` and patched into the cache), so it raises
    UpstreamUnavailable like a timeout."""
    body: dict[str, str] = {}
    if document is not None:
        body["cedula"] = document
    if phone is not None:
        body["telefono"] = phone
    try:
        # A write is never retried by the gateway: it may have reached the upstream.
        response = await gateway.request("PATCH", f"{CLIENTS_PATH}{service_id}/perfil/", json=body)
    except UpstreamRejected as exc:
        if exc.upstream_status == 404:
            raise ProfileNotFound(service_id) from None
        log.warning("profile update of %d refused (%d)", service_id, exc.upstream_status)
        raise
    if not isinstance(gateway.decode(response), dict):
        log.warning("profile update of %d: the answer is not an object", service_id)
        raise UpstreamUnavailable()
