"""The simulator's mutable state and the upstream's rules (filters, validation, tasks).

Nothing here speaks HTTP; ``app.py`` turns requests into calls on ``SimulatorState``. Tests run
the simulator in-process, so they can read and change this object directly
(``app.state.sim``) as well as through the ``/_sim/`` control endpoints.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo

from isp_gateway.simulator.config import SimulatorConfig
from isp_gateway.simulator.dataset import (
    CLIENT_STATES,
    DEPARTMENTS,
    INVOICE_STATES,
    TICKET_PRIORITIES,
    TICKET_STATES,
    Dataset,
    Row,
    load_subjects,
    service_ref,
    staff_email,
)
from isp_gateway.simulator.faults import FaultInjector
from isp_gateway.simulator.forms import BLANK, FieldErrors, Form, as_int, not_a_choice, unknown_pk
from isp_gateway.simulator.money import (
    ACTIVE_LABEL,
    SUSPENDED_STATES,
    PaymentReport,
    Receipt,
    check_promise,
    check_report,
)
from isp_gateway.simulator.pings import PING_KINDS, PingTask, default_kind, task_result

NOT_STRING = "No es una cadena válida."
DATE_FORMAT = (
    "Fecha/hora con formato erróneo. Use uno de los siguientes formatos en su lugar: "
    "dd/mm/YYYY HH:MM."
)
_PHONE_SPLIT = re.compile(r"\s*[,/;]\s*|\s+")
_CEDULA = re.compile(r"[A-Za-z0-9]{3,20}")
_PROFILE_TEXT = ("nombre", "apellidos", "direccion", "localidad", "ciudad", "telefono")
_DEFAULT_CLIENT_KEY = ("mixed", True, "mixed", "string")


# DRF renders compact UTF-8 JSON without escaping accents. One shared encoder: json.dumps with
# options builds a new encoder per call, a third of the cost of encoding a row.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _encode(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()


def _as_number(value: Any) -> Any:
    """A decimal string as a JSON number ("" → null); anything else unchanged."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return None
    try:
        return float(value)
    except ValueError:
        return value


def _reformat_date(value: Any, style: str) -> Any:
    """A cut-off date in either stored format, rewritten as D/MM/YYYY or ISO."""
    if not isinstance(value, str):
        return value
    try:
        if "/" in value:
            day, month, year = (int(part) for part in value.split("/"))
        else:
            year, month, day = (int(part) for part in value.split("-"))
    except ValueError:
        return value
    return f"{day}/{month:02d}/{year}" if style == "dmy" else f"{year:04d}-{month:02d}-{day:02d}"


def _first_phone(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        return value
    return _PHONE_SPLIT.split(value.strip())[0]


class SimulatorState:
    """Dataset, counters, faults, variants and ping tasks of one simulator app."""

    def __init__(self, config: SimulatorConfig, dataset: Dataset) -> None:
        self.config = config
        self.dataset = dataset
        self.faults = config.faults
        self.variants = config.variants
        self.ping_duration = config.ping_duration
        self.tz = ZoneInfo(config.timezone)  # an unknown zone fails at start-up
        self.calls: Counter[str] = Counter()
        self.created_tickets: list[Row] = []
        self.tasks: dict[str, PingTask] = {}
        self.ping_outcomes: dict[int, str] = {}
        self.ping_outcome_default: str | None = None
        self.injector = FaultInjector(config.seed)
        self.subjects = load_subjects()
        self._subject_priority = {s: p for p, names in self.subjects.items() for s in names}
        self._client_pos = {row["id_servicio"]: i for i, row in enumerate(dataset.clients)}
        self._plans = {int(plan["id"]): plan for plan in dataset.plans}
        self._staff = {int(member["id"]): member for member in dataset.staff}
        self._tickets = {int(t["id_ticket"]): t for t in dataset.tickets}
        self._invoices = {int(i["id_factura"]): i for i in dataset.invoices}
        self._results: dict[str, tuple[str, Any]] = {}
        # The promises the upstream holds (a registered payment removes its invoice's), how
        # many it ever received, and every payment report with its receipt's bytes.
        self.promises: list[Row] = []
        self.promises_received = 0
        self.payment_reports: list[PaymentReport] = []
        self._cache_key: tuple[str, bool, str, str] | None = None
        self._rendered: list[Row | None] = []
        self._encoded: list[bytes | None] = []
        self._init_routers()

    # -- control -------------------------------------------------------------------------

    def reset_stats(self) -> None:
        self.calls.clear()

    def stats(self) -> dict[str, Any]:
        return {
            "calls": dict(sorted(self.calls.items())),
            "total": sum(self.calls.values()),
            "created_tickets": len(self.created_tickets),
            "tasks": len(self.tasks),
            "promises": len(self.promises),
            "promises_received": self.promises_received,
            "payment_reports": len(self.payment_reports),
        }

    def set_ping_outcome(self, service_id: int | None, kind: str | None) -> None:
        """Force the outcome of later pings to one service (or all, with ``None``).

        ``kind=None`` removes the override.
        """
        if kind is not None and kind not in PING_KINDS:
            raise ValueError(f"kind must be one of {list(PING_KINDS)}")
        if service_id is None:
            self.ping_outcome_default = kind
        elif kind is None:
            self.ping_outcomes.pop(service_id, None)
        else:
            self.ping_outcomes[service_id] = kind

    # -- clients -------------------------------------------------------------------------

    def _sync_cache(self) -> tuple[str, bool, str, str]:
        key = self.variants.client_key()
        if key != self._cache_key:
            size = len(self.dataset.clients)
            self._rendered = [None] * size
            self._encoded = [None] * size
            self._cache_key = key
        return key

    def client_position(self, service_id: int) -> int | None:
        return self._client_pos.get(service_id)

    def client_count(self) -> int:
        return len(self.dataset.clients)

    def rendered_client(self, position: int) -> Row:
        key = self._sync_cache()
        row = self._rendered[position]
        if row is None:
            row = self._render_client(self.dataset.clients[position], key)
            if self.client_router == "absent" and "router" in row:
                row = {k: v for k, v in row.items() if k != "router"}
            self._rendered[position] = row
        return row

    def encoded_clients(self, positions: range | list[int]) -> list[bytes]:
        """Serialized rows, each encoded once and reused until it or the variants change."""
        self._sync_cache()
        encoded = self._encoded
        out: list[bytes] = []
        for position in positions:
            blob = encoded[position]
            if blob is None:
                blob = _encode(self.rendered_client(position))
                encoded[position] = blob
            out.append(blob)
        return out

    def _render_client(self, row: Row, key: tuple[str, bool, str, str]) -> Row:
        if key == _DEFAULT_CLIENT_KEY:
            return row
        fecha, phones, precio, money = key
        out = dict(row)
        if fecha != "mixed":
            out["fecha_corte"] = _reformat_date(row.get("fecha_corte"), fecha)
        if not phones:
            out["telefono"] = _first_phone(row.get("telefono"))
        if precio == "real" and row.get("precio_plan") in ("0.00", "", None):
            plan_ref = row.get("plan_internet") or {}
            plan = self._plans.get(as_int(plan_ref.get("id")) or -1)
            if plan is not None and plan.get("precio"):
                out["precio_plan"] = plan["precio"]
        if money == "number":
            for name in ("saldo", "precio_plan"):
                out[name] = _as_number(out.get(name))
        return out

    def filter_clients(self, params: Mapping[str, str]) -> range | list[int]:
        """Positions of the clients matching the filters the upstream honours.

        Any other parameter (zona, search, saldo, estado_facturas, dates, …) is ignored, as
        upstream does. An empty value is no filter (django-filter skips it).
        """
        clients = self.dataset.clients
        checks: list[tuple[str, str]] = [
            (name, params[name])
            for name in ("id_servicio", "cedula", "telefono", "nombre", "usuario", "estado")
            if params.get(name)
        ]
        if not checks:
            return range(len(clients))
        candidates: range | list[int] = range(len(clients))
        for name, value in checks:
            if name == "id_servicio":
                number = as_int(value)
                position = None if number is None else self._client_pos.get(number)
                candidates = [p for p in (position,) if p is not None and p in candidates]
            elif name == "estado":
                number = as_int(value)
                label = CLIENT_STATES.get(number) if number is not None else None
                candidates = [p for p in candidates if label and clients[p].get("estado") == label]
            elif name == "cedula":
                candidates = [p for p in candidates if clients[p].get("cedula") == value]
            elif name == "usuario":
                candidates = [p for p in candidates if clients[p].get("usuario") == value]
            elif name == "nombre":
                # icontains: case-insensitive but not accent-insensitive, like the database.
                needle = value.casefold()
                candidates = [
                    p
                    for p in candidates
                    if needle in str(clients[p].get("nombre") or "").casefold()
                ]
            else:
                # telefono: a substring of the raw field, whatever separators it holds.
                candidates = [
                    p
                    for p in candidates
                    if value in str(self.rendered_client(p).get("telefono") or "")
                ]
        return candidates

    def client_detail(self, service_id: int) -> Row | None:
        """The network-centric shape of ``GET /api/clientes/{id}/``."""
        position = self._client_pos.get(service_id)
        if position is None:
            return None
        row = self.dataset.clients[position]
        router = row.get("router") or {}
        return {
            "id_servicio": service_id,
            # Some services have no linked user or name on this endpoint.
            "usuario": None if service_id % 11 == 5 else row.get("usuario"),
            "nombre": None if service_id % 9 == 4 else row.get("nombre"),
            "ip": row.get("ip"),
            "mac_cpe": row.get("mac_cpe"),
            "interfaz_lan": row.get("interfaz_lan"),
            "router": {"id": router.get("id"), "nombre": router.get("nombre")},
            "plan_internet": row.get("plan_internet"),
            "zona": row.get("zona"),
            "estado": row.get("estado"),
            "tecnico": row.get("tecnico"),
            "firewall": False,
            "sn_onu": "",
        }

    def update_profile(self, service_id: int, data: Mapping[str, Any]) -> FieldErrors | None:
        """Validate and apply a perfil update; field errors, or None when applied."""
        position = self._client_pos[service_id]
        errors: FieldErrors = {}
        clean: dict[str, str] = {}
        for name in (*_PROFILE_TEXT, "cedula", "saldo"):
            if name not in data:
                continue
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                errors[name] = [NOT_STRING]
                continue
            text = str(value).strip()
            if name == "cedula" and not _CEDULA.fullmatch(text):
                errors[name] = ["La cédula debe tener entre 3 y 20 letras o dígitos."]
            elif name == "saldo":
                try:
                    clean[name] = f"{Decimal(text):.2f}"
                except InvalidOperation:
                    errors[name] = ["Se requiere un número válido."]
            elif name in ("nombre", "cedula") and not text:
                errors[name] = [BLANK]
            elif len(text) > 200:
                errors[name] = ["Asegúrese de que este campo no tenga más de 200 caracteres."]
            else:
                clean[name] = text
        if errors:
            return errors
        row = self.dataset.clients[position]
        apellidos = clean.pop("apellidos", None)
        # The list shows one full name; perfil keeps first names and surnames apart.
        if "nombre" in clean and apellidos:
            clean["nombre"] = f"{clean['nombre']} {apellidos}"
        row.update(clean)
        if self._cache_key is not None:
            self._rendered[position] = None
            self._encoded[position] = None
        return None

    def set_client_fields(self, service_id: int, changes: Mapping[str, Any]) -> None:
        """Change a client row as staff would upstream (e.g. reactivate a suspended service),
        for tests; the served copies of the row are rebuilt."""
        position = self._client_pos[service_id]
        self.dataset.clients[position].update(changes)
        if self._cache_key is not None:
            self._rendered[position] = None
            self._encoded[position] = None

    def add_client(self, row: Row) -> None:
        """A new customer upstream (after the gateway cached its list), for tests."""
        self._client_pos[row["id_servicio"]] = len(self.dataset.clients)
        self.dataset.clients.append(row)
        if self._cache_key is not None:
            self._rendered.append(None)
            self._encoded.append(None)

    # -- invoices and payment methods ----------------------------------------------------

    def filter_invoices(self, params: Mapping[str, str]) -> list[Row]:
        """Invoices by the filters the upstream honours: `estado` (numeric only; a text
        value matches nothing) and `zona` (the client's zone id). Client filters and
        anything else are ignored: the whole list comes back."""
        invoices = self.dataset.invoices
        estado = params.get("estado", "")
        if estado.strip():
            number = as_int(estado)
            if number is None:
                return []
            invoices = [i for i in invoices if i["estado"] == number]
        zona = params.get("zona", "")
        if zona.strip():
            zone_id = as_int(zona)
            zones = {
                row.get("usuario"): (row.get("zona") or {}).get("id")
                for row in self.dataset.clients
            }
            invoices = [
                i for i in invoices if zones.get((i.get("cliente") or {}).get("usuario")) == zone_id
            ]
        return invoices

    def get_invoice(self, invoice_id: int) -> Row | None:
        return self._invoices.get(invoice_id)

    def render_invoice(self, invoice: Row, detail: bool = False) -> Row:
        """A list row has `estado` as a number, the detail route as a label."""
        out = dict(invoice)
        if detail:
            out["estado"] = INVOICE_STATES.get(invoice["estado"], str(invoice["estado"]))
        if self.variants.money == "number":
            out["total"] = _as_number(out.get("total"))
        return out

    def set_invoice_state(self, invoice_id: int, estado: int) -> None:
        """Mark an invoice paid (2), cancelled (3), ..., as staff would (tests, the control
        API). Paid is a registered payment: the invoice's promises disappear with it."""
        self._invoices[invoice_id]["estado"] = estado
        if estado == 2:
            self.promises = [p for p in self.promises if p["id_factura"] != invoice_id]

    def _invoice_state(self, invoice_id: int) -> int | None:
        invoice = self._invoices.get(invoice_id)
        return None if invoice is None else int(invoice["estado"])

    def invoice_client(self, invoice_id: int) -> Row | None:
        """The client row an invoice belongs to (matched by `cliente.usuario`)."""
        invoice = self._invoices.get(invoice_id)
        username = ((invoice or {}).get("cliente") or {}).get("usuario")
        if not username:
            return None
        return next((c for c in self.dataset.clients if c.get("usuario") == username), None)

    # -- payment promises and reports -----------------------------------------------------

    def create_promise(self, data: Mapping[str, Any]) -> tuple[Row | None, FieldErrors]:
        """``POST /api/promesa-pago/``: (the answer's row, {}) or (None, field errors). With
        ``accion: 1`` the invoice's suspended service is reactivated at once."""
        form, errors = check_promise(data, self._invoice_state)
        if form is None:
            return None, errors
        service_id = None
        if form.invoice_id is not None:
            client = self.invoice_client(form.invoice_id)
            if client is not None:
                service_id = client["id_servicio"]
                estado = str(client.get("estado") or "").strip().casefold()
                if form.action == 1 and estado in SUSPENDED_STATES:
                    self.set_client_fields(service_id, {"estado": ACTIVE_LABEL})
        self.promises_received += 1
        promise: Row = {
            "id": self.promises_received,
            "id_factura": form.invoice_id,
            "fecha_limite": form.deadline,
            "accion": form.action,
            "comentarios": form.comments,
            "fecha_creacion": datetime.now(self.tz).strftime("%Y-%m-%d %H:%M"),
            "id_servicio": service_id,
        }
        self.promises.append(promise)
        answer = {k: promise[k] for k in ("id_factura", "fecha_limite", "accion", "comentarios")}
        return answer, {}

    def report_payment(
        self, invoice_id: int, fields: Mapping[str, str], receipt: Receipt | None
    ) -> tuple[str | None, FieldErrors]:
        """``POST /api/facturas/reportar-pago/{id}/`` of a known invoice: (task id, {}) or
        (None, field errors). The invoice goes to 4 ("En revisión"); no money is recorded."""
        invoice = self._invoices[invoice_id]
        method_ids = {int(m["id"]) for m in self.dataset.payment_methods}
        checked, errors = check_report(fields, receipt, int(invoice["estado"]), method_ids)
        if checked is None:
            return None, errors
        assert receipt is not None
        method_id, paid_on, reference = checked
        task_id = str(uuid.uuid4())
        self.payment_reports.append(
            PaymentReport(
                invoice_id=invoice_id,
                method_id=method_id,
                paid_on=paid_on,
                reference=reference,
                filename=receipt.filename,
                content_type=receipt.content_type,
                content=receipt.content,
                task_id=task_id,
                received_at=datetime.now(self.tz).strftime("%Y-%m-%d %H:%M"),
            )
        )
        invoice["estado"] = 4
        # The report's task is done at once (the upstream only files the report).
        self._results[task_id] = ("SUCCESS", None)
        return task_id, {}

    def payments_control(self) -> dict[str, Any]:
        return {
            "promises": list(self.promises),
            "promises_received": self.promises_received,
            "reports": [report.summary() for report in self.payment_reports],
        }

    def reset_payments(self) -> None:
        """Forget the promises and reports received (invoices and clients stay as they are)."""
        self.promises.clear()
        self.promises_received = 0
        self.payment_reports.clear()

    # -- pings ---------------------------------------------------------------------------

    def create_ping(self, service_id: int, pings: int, arp: bool, interface: str | None) -> str:
        row = self.dataset.clients[self._client_pos[service_id]]
        kind = (
            self.ping_outcomes.get(service_id)
            or self.ping_outcome_default
            or default_kind(service_id)
        )
        task = PingTask(
            task_id=str(uuid.uuid4()),
            service_id=service_id,
            pings=pings,
            kind=kind,
            host=str(row.get("mac_cpe") if arp else row.get("ip")),
            interface=interface or str(row.get("interfaz_lan") or "ether1"),
            started=time.monotonic(),
        )
        self.tasks[task.task_id] = task
        return task.task_id

    def task_status(self, task_id: str) -> tuple[str, Any] | None:
        task = self.tasks.get(task_id)
        if task is None:
            return self._results.get(task_id)  # a payment report's task, or unknown
        if task_id in self._results:
            return self._results[task_id]
        if time.monotonic() - task.started < self.ping_duration:
            return "PROCESS", None
        result = task_result(task, self.config.seed)
        self._results[task_id] = result
        return result

    # -- plans ---------------------------------------------------------------------------

    def plan_rows(self) -> list[Row]:
        return [
            {"id": p["id"], "nombre": p["nombre"], "tipo": p["tipo"]} for p in self.dataset.plans
        ]

    def plan_detail(self, tipo: str, plan_id: int) -> Row | None:
        plan = self._plans.get(plan_id)
        if plan is None or plan.get("tipo") != tipo:
            return None
        precio = plan.get("precio", "0.00")
        return {
            "id": plan["id"],
            "nombre": plan["nombre"],
            "precio": _as_number(precio) if self.variants.money == "number" else precio,
            "bajada": plan.get("bajada", ""),
            "subida": plan.get("subida", ""),
        }

    # -- tickets -------------------------------------------------------------------------

    def filter_tickets(self, estados: list[str]) -> list[Row]:
        """Tickets in the given states; text states match nothing (upstream quirk)."""
        wanted: set[int] = set()
        for raw in estados:
            for part in raw.split(","):
                if not part.strip():
                    continue
                number = as_int(part)
                if number is None:
                    return []
                wanted.add(number)
        tickets = self.dataset.tickets
        if not wanted:
            return tickets
        return [t for t in tickets if t["estado"] in wanted]

    def get_ticket(self, ticket_id: int) -> Row | None:
        return self._tickets.get(ticket_id)

    def render_ticket(self, ticket: Row, detail: bool = False) -> Row:
        style = self.variants.ticket_labels
        out = {k: v for k, v in ticket.items() if k != "respuestas"}
        self._render_ticket_router(out)
        for name, labels in (("estado", TICKET_STATES), ("prioridad", TICKET_PRIORITIES)):
            number = ticket[name]
            out[name] = (
                labels[number] if style == "label" else number if style == "number" else str(number)
            )
        if detail:
            answers = list(ticket.get("respuestas") or [])
            if self.variants.answers == "list":
                out["respuestas"] = answers
            else:
                out["respuestas"] = answers[-1] if answers else None
        return out

    def create_ticket(self, form: Mapping[str, Any]) -> tuple[Row | None, FieldErrors]:
        """Validate a ticket like the upstream's serializer; (ticket, {}) or (None, errors)."""
        fields = Form(form)
        errors, text, number = fields.errors, fields.text, fields.number

        def moment(name: str) -> datetime | None:
            raw = text(name)
            if raw is None:
                return None
            try:
                return datetime.strptime(raw, "%d/%m/%Y %H:%M")
            except ValueError:
                errors[name] = [DATE_FORMAT]
                return None

        service_id = number("servicio")
        client = None
        if service_id is not None:
            position = self._client_pos.get(service_id)
            if position is None:
                errors["servicio"] = [unknown_pk(service_id)]
            else:
                client = self.dataset.clients[position]
        asunto, default_subject = text("asunto"), text("asuntos_default")
        if default_subject is not None and default_subject not in self._subject_priority:
            errors["asuntos_default"] = [not_a_choice(default_subject)]
        if asunto is not None and default_subject is not None and asunto != default_subject:
            errors.setdefault("asunto", []).append("El asunto debe coincidir con asuntos_default.")
        tecnico = number("tecnico")
        if tecnico is not None and tecnico not in self._staff:
            errors["tecnico"] = [unknown_pk(tecnico)]
        descripcion = text("descripcion")
        estado = number("estado", TICKET_STATES)
        number("prioridad", TICKET_PRIORITIES)
        start, end = moment("fecha_inicio"), moment("fecha_final")
        if start and end and end < start:
            errors["fecha_final"] = ["La fecha final debe ser posterior a la fecha de inicio."]
        department, default_department = text("departamento"), text("departamentos_default")
        if default_department is not None and default_department not in DEPARTMENTS:
            errors["departamentos_default"] = [not_a_choice(default_department)]
        if department and default_department and department != default_department:
            errors["departamento"] = ["El departamento debe coincidir con departamentos_default."]
        if errors:
            return None, errors
        assert client is not None and start and end and default_subject and estado and tecnico
        ticket_id = max(self._tickets, default=1000) + 1
        ticket: Row = {
            "id_ticket": ticket_id,
            "asunto": default_subject,
            "descripcion": descripcion,
            "estado": estado,
            # The upstream assigns the priority from the subject, whatever was sent.
            "prioridad": self._subject_priority[default_subject],
            # A local time in the account's zone, as the upstream writes it.
            "fecha_creacion": datetime.now(self.tz).strftime("%Y-%m-%d %H:%M"),
            "fecha_estimada_inicio": start.strftime("%Y-%m-%d %H:%M"),
            "fecha_estimada_fin": end.strftime("%Y-%m-%d %H:%M"),
            "tecnico": self._staff[tecnico]["nombre"],
            "email_tecnico": staff_email(str(self._staff[tecnico]["nombre"])),
            "departamento": default_department,
            "servicio": service_ref(client),
            "origen_reporte": str(form.get("origen_reporte") or ""),
            "respuestas": [],
        }
        self.dataset.tickets.append(ticket)
        self._tickets[ticket_id] = ticket
        self.created_tickets.append(ticket)
        return ticket, {}

    # -- routers and outages ---------------------------------------------------------------

    def _init_routers(self) -> None:
        self._routers = {int(r["id"]): r for r in self.dataset.routers}
        # Router id → outage description: the routers whose `falla_general` is on.
        self.outages: dict[int, str] = {}
        # "object": client rows carry `router {id, nombre}`; "absent": no `router` key, as
        # on the accounts that do not expose it (UPSTREAM.md "Zones, routers, outages").
        self.client_router = "object"
        # "name": ticket rows name `tecnico`; "email": `tecnico` null, `email_tecnico` set.
        self.ticket_technician = "name"
        # The start-up options (an unknown router or shape fails here, at start-up).
        self.set_client_router(self.config.client_router)
        for router_id, description in self.config.outages.items():
            self.set_outage(router_id, True, description)

    def set_outage(self, router_id: int, outage: bool, description: str = "") -> None:
        if router_id not in self._routers:
            raise ValueError(f"unknown router {router_id}")
        if outage:
            self.outages[router_id] = description
        else:
            self.outages.pop(router_id, None)

    def set_client_router(self, shape: str) -> None:
        if shape not in ("object", "absent"):
            raise ValueError("client_router must be 'object' or 'absent'")
        self.client_router = shape
        self._cache_key = None  # every cached client row is rendered again

    def set_ticket_technician(self, shape: str) -> None:
        if shape not in ("name", "email"):
            raise ValueError("ticket_technician must be 'name' or 'email'")
        self.ticket_technician = shape

    def routers_control(self) -> dict[str, Any]:
        return {
            "outages": {str(k): v for k, v in sorted(self.outages.items())},
            "client_router": self.client_router,
            "ticket_technician": self.ticket_technician,
        }

    def router_row(self, router: Row) -> Row:
        """A row of ``GET /api/router/``: the catalogue entry and its current outage flag."""
        router_id = int(router["id"])
        return {
            "id": router_id,
            "nombre": router.get("nombre"),
            "ip": router.get("ip"),
            "falla_general": router_id in self.outages,
            "falla_general_descripcion": self.outages.get(router_id, ""),
        }

    def router_rows(self) -> list[Row]:
        return [self.router_row(r) for r in self.dataset.routers]

    def _render_ticket_router(self, out: Row) -> None:
        """A ticket row's ``servicio.router`` shows the router's current outage flag, and
        the technician variant applies."""
        servicio = out.get("servicio")
        if isinstance(servicio, dict):
            ref = servicio.get("router")
            ref = ref if isinstance(ref, dict) else {}
            router = self._routers.get(as_int(ref.get("id")) or -1)
            if router is not None:
                out["servicio"] = {**servicio, "router": {**ref, **self.router_row(router)}}
        if self.ticket_technician == "email" and out.get("email_tecnico"):
            out["tecnico"] = None
