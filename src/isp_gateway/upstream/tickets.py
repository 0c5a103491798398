"""WispHub tickets: the list, one ticket, creation; rows mapped to our `Ticket` model.

Quirks (UPSTREAM.md "Tickets"): `estado` and `prioridad` arrive as labels ("Nuevo", "Alta")
on some accounts and as numbers or digit strings on others; the list's `estado` filter takes
numbers only and client filters are ignored, so the zone comes from `servicio.zona.id`;
`respuestas` is a list (newest last) or one object; creation is a multipart form with every
subject and department sent twice (`asunto`/`asuntos_default`, ...).

A 4xx to a ticket request is a `TicketRejected`: its field errors in our words, and whether
they are the request's own fields (a 400 naming them), so no caller reads an upstream status.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from isp_gateway.kit.errors import UpstreamRejected, UpstreamUnavailable
from isp_gateway.kit.text import fold
from isp_gateway.upstream.gateway import UpstreamGateway
from isp_gateway.upstream.records import FormRejected, as_int

log = logging.getLogger("isp_gateway.upstream")

TICKETS_PATH = "api/tickets/"

STATE_LABELS = {1: "Nuevo", 2: "En Progreso", 3: "Resuelto", 4: "Cerrado"}
PRIORITY_LABELS = {1: "Baja", 2: "Normal", 3: "Alta", 4: "Muy Alta"}

_DATE_FORMATS = (
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%dT%H:%M:%S",
    "%d/%m/%Y %H:%M",
    "%d/%m/%Y %H:%M:%S",
    "%Y-%m-%d",
    "%d/%m/%Y",
)
UPSTREAM_MOMENT = "%d/%m/%Y %H:%M"  # what POST api/tickets/ accepts
OUR_MOMENT = "%Y-%m-%d %H:%M"  # spec 2.3


class Ticket(BaseModel):
    """One upstream ticket in our words."""

    ticket_id: int
    subject: str | None = None
    description: str | None = None
    state: int | None = None  # the numeric estado when it could be read
    status_label: str | None = None
    priority: str | None = None  # "1".."4"
    created_at: str | None = None  # YYYY-MM-DD HH:MM
    end_date: str | None = None
    service_id: int | None = None
    zone_id: int | None = None
    technician_id: int | None = None
    technician_name: str | None = None
    # Some accounts leave `tecnico` null and name the assignee in `email_tecnico`.
    technician_email: str | None = None
    answer_text: str | None = None


# Creation form fields in our words, for the summary of a refused creation.
_OUR_FIELD = {
    "servicio": "service_id",
    "asunto": "subject",
    "asuntos_default": "subject",
    "tecnico": "technician_id",
    "descripcion": "description",
    "fecha_inicio": "created_at",
    "fecha_final": "end_date",
    "estado": "status",
    "prioridad": "priority",
}


class TicketRejected(FormRejected):
    """The backend refused a ticket request (4xx); `of_request` when the request's own values
    (an unknown technician) are at fault. `answer`: how the backend answered, for a message
    ("(400)")."""

    our_fields = _OUR_FIELD

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status, body)
        self.answer = f"({status})"


@dataclass(frozen=True)
class NewTicket:
    service_id: int
    subject: str
    description: str
    technician_id: int
    state: int
    priority: int
    start: datetime
    end: datetime
    department: str


_STATE_BY_LABEL = {fold(label): n for n, label in STATE_LABELS.items()}
_PRIORITY_BY_LABEL = {fold(label): n for n, label in PRIORITY_LABELS.items()}
_PRIORITY_BY_LABEL.update({"media": 2, "urgente": 4})


def _coded(value: Any, by_label: dict[str, int]) -> int | None:
    """A number, a digit string or a known label → its number."""
    number = as_int(value)
    if number is not None:
        return number
    if isinstance(value, str):
        return by_label.get(fold(value))
    return None


def state_number(value: Any) -> int | None:
    return _coded(value, _STATE_BY_LABEL)


def state_label(value: Any) -> str | None:
    """The upstream's label: as sent when it is text, else the label of the number."""
    if isinstance(value, str) and value.strip() and as_int(value) is None:
        return value.strip()
    number = as_int(value)
    if number is None:
        return None
    return STATE_LABELS.get(number, str(number))


def priority_digit(value: Any) -> str | None:
    number = _coded(value, _PRIORITY_BY_LABEL)
    return str(number) if number in PRIORITY_LABELS else None


def moment(value: Any) -> str | None:
    """Any date style the upstream uses → `YYYY-MM-DD HH:MM`; None when unreadable."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    for fmt in _DATE_FORMATS:
        try:
            parsed = datetime.strptime(text, fmt)
        except ValueError:
            continue
        return parsed.strftime(OUR_MOMENT)
    try:  # ISO with seconds fractions or an offset
        return datetime.fromisoformat(text).strftime(OUR_MOMENT)
    except ValueError:
        return None


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def latest_answer(answers: Any) -> str | None:
    """The newest answer's text: a list (newest last, unless its dates say otherwise) or one
    object, as accounts differ."""
    if isinstance(answers, dict):
        answers = [answers]
    if not isinstance(answers, list):
        return None
    items = [a for a in answers if isinstance(a, dict) and _text(a.get("respuesta")) is not None]
    if not items:
        return None
    dated = [(moment(a.get("fecha")), i) for i, a in enumerate(items)]
    if all(d is not None for d, _ in dated):
        # Same-minute answers keep the list order (the later one wins).
        newest = max(dated, key=lambda pair: (pair[0] or "", pair[1]))[1]
    else:
        newest = len(items) - 1
    return _text(items[newest].get("respuesta"))


def to_ticket(row: dict[str, Any]) -> Ticket | None:
    ticket_id = as_int(row.get("id_ticket", row.get("id")))
    if ticket_id is None:
        return None
    servicio = row.get("servicio")
    service_id = zone_id = None
    if isinstance(servicio, dict):
        service_id = as_int(servicio.get("id_servicio", servicio.get("id")))
        zona = servicio.get("zona")
        if isinstance(zona, dict):
            zone_id = as_int(zona.get("id"))
    else:
        service_id = as_int(servicio)
    tecnico = row.get("tecnico")
    technician_id, technician_name = None, None
    if isinstance(tecnico, dict):
        technician_id = as_int(tecnico.get("id"))
        technician_name = _text(tecnico.get("nombre"))
    elif as_int(tecnico) is not None:
        technician_id = as_int(tecnico)
    else:
        technician_name = _text(tecnico)
    return Ticket(
        ticket_id=ticket_id,
        subject=_text(row.get("asunto")),
        description=_text(row.get("descripcion")),
        state=state_number(row.get("estado")),
        status_label=state_label(row.get("estado")),
        priority=priority_digit(row.get("prioridad")),
        created_at=moment(row.get("fecha_creacion")),
        end_date=moment(row.get("fecha_estimada_fin")),
        service_id=service_id,
        zone_id=zone_id,
        technician_id=technician_id,
        technician_name=technician_name,
        technician_email=_text(row.get("email_tecnico")) or None,
        answer_text=latest_answer(row.get("respuestas")),
    )


async def list_in_states(
    gateway: UpstreamGateway, states: list[int], *, background: bool = False
) -> list[Ticket]:
    """Every ticket in the given numeric states, all pages, one paginated read per state
    (the filter takes one number; a multi-value form is not documented)."""
    found: dict[int, Ticket] = {}
    wanted = set(states)
    for state in dict.fromkeys(states):
        try:
            rows = await gateway.get_all_pages(
                TICKETS_PATH, {"estado": state}, background=background
            )
        except UpstreamRejected as exc:
            raise TicketRejected(exc.upstream_status, exc.body) from None
        for row in rows:
            ticket = to_ticket(row)
            if ticket is None:
                continue
            # Trust the filter only when the row's own state is unreadable: an account that
            # ignored it would otherwise count closed tickets.
            if ticket.state is not None and ticket.state not in wanted:
                continue
            found[ticket.ticket_id] = ticket
    return list(found.values())


async def fetch(gateway: UpstreamGateway, ticket_id: int) -> Ticket | None:
    """One ticket with its answers; None when the upstream does not know it (404).
    Raises the gateway's errors, and `UpstreamUnavailable` for a 200 that is not a ticket."""
    try:
        body = await gateway.get_json(f"{TICKETS_PATH}{ticket_id}/")
    except UpstreamRejected as exc:
        if exc.upstream_status == 404:
            return None
        raise
    ticket = to_ticket(body) if isinstance(body, dict) else None
    if ticket is None:
        # A 200 that is not a ticket (a proxy's JSON, an empty object) says nothing about
        # whether the ticket exists: never let it read as "not found".
        log.warning("upstream %s%d/: answer is not a ticket", TICKETS_PATH, ticket_id)
        raise UpstreamUnavailable()
    return ticket


async def create(
    gateway: UpstreamGateway, new: NewTicket, *, timeout: float | None = None
) -> Ticket | None:
    """POST the ticket once (never retried: a repeat could open a second ticket).

    Returns the created ticket, or None when the upstream said 201 but its body does not
    say which ticket it made. Raises `TicketRejected` for a 4xx, the gateway's typed errors
    otherwise.
    """
    fields = {
        "servicio": str(new.service_id),
        "asunto": new.subject,
        "asuntos_default": new.subject,
        "tecnico": str(new.technician_id),
        "descripcion": new.description,
        "estado": str(new.state),
        "prioridad": str(new.priority),
        "fecha_inicio": new.start.strftime(UPSTREAM_MOMENT),
        "fecha_final": new.end.strftime(UPSTREAM_MOMENT),
        "departamento": new.department,
        "departamentos_default": new.department,
    }
    # (None, value) parts make httpx send multipart form fields without a file name.
    files = {name: (None, value) for name, value in fields.items()}
    try:
        response = await gateway.request(
            "POST", TICKETS_PATH, files=files, retry_refused=False, timeout=timeout
        )
    except UpstreamRejected as exc:
        raise TicketRejected(exc.upstream_status, exc.body) from None
    try:
        body = response.json()
    except ValueError:
        return None
    return to_ticket(body) if isinstance(body, dict) else None
