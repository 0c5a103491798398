"""Payment promises and payment reports: the upstream's validation rules, in its words.

Facts (UPSTREAM.md "Payments, promises and reports"): a promise is JSON `{"id_factura",
"fecha_limite", "accion"}` answered 201; `fecha_limite` takes dashes only and is stored as
`"YYYY-MM-DD 00:00"`; a paid invoice answers 400; the serializer does not insist on
`id_factura`. A report is a multipart upload (`forma_pago`, `fecha_pago`, `referencia`, the
file in `comprobante_pago`) answered 200 with a `task_id`.

Where the facts are silent, the simulator chooses (and the upstream client must not rely on
more than the facts):
- An unknown `id_factura` in a promise answers **400** naming the field (DRF's
  PrimaryKeyRelatedField message): the id is a body field the serializer validates. In a
  report the id is in the path, so an unknown one answers **404** `{"detail"}`.
- A paid (2), cancelled (3) or transferred (5) invoice answers 400 to both; only the paid
  one's message says "pagada". An invoice in review (4) still takes a promise or a report.
- `accion` is 0 or 1 (missing: 0, no action on the router); `fecha_limite` also takes
  `YYYY-MM-DD HH:MM`, as public integrations report; `comentarios` is optional text.
- A report's `forma_pago` must name a payment method of the account (`/api/formas-de-pago/`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from isp_gateway.simulator.forms import (
    REQUIRED,
    FieldErrors,
    Form,
    as_int,
    not_a_choice,
    unknown_pk,
)

NO_FILE = "No se envió ningún archivo."
EMPTY_FILE = "El archivo enviado está vacío."
PROMISE_DATE_FORMAT = (
    "Fecha con formato erróneo. Use uno de los siguientes formatos en su lugar: "
    "YYYY-MM-DD, YYYY-MM-DD hh:mm."
)
REPORT_DATE_FORMAT = (
    "Fecha con formato erróneo. Use uno de los siguientes formatos en su lugar: YYYY-MM-DD."
)
# Why an invoice takes no promise and no report, by its state.
CLOSED_INVOICE = {
    2: "La factura ya se encuentra pagada.",
    3: "La factura se encuentra cancelada.",
    5: "La factura fue transferida.",
}
# A service in these states (any case) is reactivated by a promise with `accion: 1`.
SUSPENDED_STATES = frozenset({"suspendido", "moroso"})
ACTIVE_LABEL = "Activo"

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_DAY_MINUTE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}")


def promise_deadline(value: Any) -> str | None:
    """`fecha_limite` as stored (`YYYY-MM-DD HH:MM`), or None when the upstream refuses it
    (slashes, no date, an impossible day)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if _DAY.fullmatch(text):
            return datetime.strptime(text, "%Y-%m-%d").strftime("%Y-%m-%d 00:00")
        if _DAY_MINUTE.fullmatch(text):
            return datetime.strptime(text, "%Y-%m-%d %H:%M").strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return None
    return None


def report_day(value: Any) -> str | None:
    """`fecha_pago` as `YYYY-MM-DD`, or None when refused."""
    if not isinstance(value, str) or not _DAY.fullmatch(value.strip()):
        return None
    try:
        return datetime.strptime(value.strip(), "%Y-%m-%d").strftime("%Y-%m-%d")
    except ValueError:
        return None


@dataclass(frozen=True)
class PromiseForm:
    """A promise the serializer accepted. `invoice_id` None: sent without `id_factura`."""

    invoice_id: int | None
    deadline: str
    action: int
    comments: str


def check_promise(
    data: Mapping[str, Any], invoice_state: Callable[[int], int | None]
) -> tuple[PromiseForm | None, FieldErrors]:
    """Validate a promise body like the upstream's serializer. `invoice_state` gives an
    invoice's numeric state, None for an unknown invoice."""
    errors: FieldErrors = {}
    invoice_id: int | None = None
    raw_invoice = data.get("id_factura")
    if raw_invoice is not None and raw_invoice != "":
        invoice_id = as_int(raw_invoice)
        if invoice_id is None:
            kind = type(raw_invoice).__name__
            errors["id_factura"] = [
                f"Tipo incorrecto. Se esperaba valor de clave primaria y se recibió {kind}."
            ]
        else:
            state = invoice_state(invoice_id)
            if state is None:
                errors["id_factura"] = [unknown_pk(invoice_id)]
            elif state in CLOSED_INVOICE:
                errors["id_factura"] = [CLOSED_INVOICE[state]]
    deadline = None
    raw_deadline = data.get("fecha_limite")
    if raw_deadline is None:
        errors["fecha_limite"] = [REQUIRED]
    else:
        deadline = promise_deadline(raw_deadline)
        if deadline is None:
            errors["fecha_limite"] = [PROMISE_DATE_FORMAT]
    action = 0
    if data.get("accion") is not None:
        number = as_int(data["accion"])
        if number not in (0, 1):
            errors["accion"] = [not_a_choice(data["accion"])]
        else:
            action = number
    comments = data.get("comentarios") or ""
    if not isinstance(comments, str):
        errors["comentarios"] = ["No es una cadena válida."]
    if errors:
        return None, errors
    assert deadline is not None
    return PromiseForm(invoice_id, deadline, action, str(comments)), {}


@dataclass(frozen=True)
class PaymentReport:
    """A payment report as received: the form fields and the receipt byte for byte."""

    invoice_id: int
    method_id: int
    paid_on: str
    reference: str
    filename: str | None
    content_type: str | None
    content: bytes
    task_id: str
    received_at: str

    def summary(self) -> dict[str, Any]:
        """What the control endpoint shows (the receipt's size, not its bytes)."""
        return {
            "id_factura": self.invoice_id,
            "forma_pago": self.method_id,
            "fecha_pago": self.paid_on,
            "referencia": self.reference,
            "filename": self.filename,
            "content_type": self.content_type,
            "size": len(self.content),
            "task_id": self.task_id,
            "received_at": self.received_at,
        }


@dataclass(frozen=True)
class Receipt:
    filename: str | None
    content_type: str | None
    content: bytes


def check_report(
    fields: Mapping[str, str],
    receipt: Receipt | None,
    invoice_state: int,
    method_ids: set[int],
) -> tuple[tuple[int, str, str] | None, FieldErrors]:
    """Validate a report's form: ((method id, paid on, reference), {}) or (None, errors)."""
    form = Form(fields)
    errors = form.errors
    method_id = form.number("forma_pago")
    if method_id is not None and method_id not in method_ids:
        errors["forma_pago"] = [unknown_pk(method_id)]
    paid_on = None
    raw_day = form.text("fecha_pago")
    if raw_day is not None:
        paid_on = report_day(raw_day)
        if paid_on is None:
            errors["fecha_pago"] = [REPORT_DATE_FORMAT]
    reference = form.text("referencia")
    if receipt is None:
        errors["comprobante_pago"] = [NO_FILE]
    elif not receipt.content:
        errors["comprobante_pago"] = [EMPTY_FILE]
    if invoice_state in CLOSED_INVOICE:
        errors["non_field_errors"] = [CLOSED_INVOICE[invoice_state]]
    if errors:
        return None, errors
    assert method_id is not None and paid_on is not None and reference is not None
    return (method_id, paid_on, reference), {}
