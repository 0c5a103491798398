"""WispHub money: payment methods (`/api/formas-de-pago/`), payment promises
(`/api/promesa-pago/`) and payment reports (`/api/facturas/reportar-pago/{id}/`).

Registering a payment moves money; the service never does it. A promise reconnects a
suspended service until a date; a report files a customer's receipt for staff review (the
invoice goes to "En revisión"); neither registers money (UPSTREAM.md "Payments, promises and
reports"). WispHub's field names for these calls live in the constants below and nowhere
else.

The two writes are sent once, never repeated, and spend the rate budget like every
interactive call. Only a readable success counts as one. What they raise, besides the
gateway's `UpstreamUnauthorized` and `UpstreamRateLimited` (refused before anything was
done):
- `InvoiceAlreadyPaid`: the 400 of an invoice paid (the backend's message says "pagada");
- `InvoiceUnknown`: an invoice the backend does not know (a promise's 400 naming
  `id_factura`, a report's 404);
- `PaymentRejected`, their base: any other 4xx, with its field errors in our words;
- `UpstreamUnreached` (the gateway's): nothing was sent (a refused connection), so nothing
  was done;
- `PaymentOutcomeUnknown`: anything else (a timeout, a dropped connection, a 5xx, a 2xx that
  is HTML, garbage or empty): the write may have been done.
"""

from __future__ import annotations

import logging
import re
import secrets
import unicodedata
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from datetime import date
from typing import Any, TypedDict

from isp_gateway.kit.errors import UpstreamRejected, UpstreamUnavailable
from isp_gateway.kit.text import fold
from isp_gateway.upstream.gateway import UpstreamGateway, UpstreamUnreached
from isp_gateway.upstream.records import FormRejected, as_int, field_errors

log = logging.getLogger("isp_gateway.upstream")

PAYMENT_METHODS_PATH = "api/formas-de-pago/"
PROMISE_PATH = "api/promesa-pago/"
REPORT_PATH = "api/facturas/reportar-pago/{invoice_id}/"

# WispHub's field names for a promise and a report (the only place they are spelled).
INVOICE = "id_factura"
UNTIL = "fecha_limite"
ACTION = "accion"
METHOD = "forma_pago"
PAID_ON = "fecha_pago"
REFERENCE = "referencia"
RECEIPT = "comprobante_pago"
TASK = "task_id"
# `accion` 1: act on the router now (a suspended service is reactivated); 0: no action.
RECONNECT, NO_ACTION = 1, 0
UPSTREAM_DAY = "%Y-%m-%d"  # dashes: a date with slashes is refused (400)

# The backend's field names in our words, for the field errors of a refusal.
_OUR_FIELD = {
    INVOICE: "invoice_id",
    UNTIL: "until",
    ACTION: "action",
    METHOD: "payment_method_id",
    PAID_ON: "paid_on",
    REFERENCE: "reference",
    RECEIPT: "receipt",
}
_PAID = "pagad"  # in "pagada"/"pagado", folded: the refusal of an invoice already paid
_MISSING = "no existe"  # DRF's unknown primary key: 'Clave primaria "9" inválida - ...'
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+")
_FILENAME_JUNK = re.compile(r"[^A-Za-z0-9._ -]+")


class PaymentMethod(TypedDict):
    id: int
    name: str


def map_payment_methods(rows: list[dict[str, Any]]) -> list[PaymentMethod]:
    methods: list[PaymentMethod] = []
    for row in rows:
        method_id = as_int(row.get("id"))
        name = row.get("nombre")
        if method_id is None or not isinstance(name, str) or not name.strip():
            continue
        methods.append({"id": method_id, "name": name.strip()})
    return methods


async def fetch_payment_methods(
    gateway: UpstreamGateway, *, background: bool
) -> list[PaymentMethod]:
    """Every payment method (paginated on some accounts, one page on others)."""
    rows = await gateway.get_all_pages(PAYMENT_METHODS_PATH, background=background)
    return map_payment_methods(rows)


# -- errors ---------------------------------------------------------------------------------


class PaymentRejected(FormRejected):
    """The backend refused a promise or a report (4xx): nothing was done."""

    our_fields = _OUR_FIELD


class InvoiceAlreadyPaid(PaymentRejected):
    """The invoice is paid already (a 400 saying so): nothing is owed on it."""


class InvoiceUnknown(PaymentRejected):
    """The backend does not know the invoice."""


class PaymentOutcomeUnknown(UpstreamUnavailable):
    """No readable answer to a promise or a report that may have reached the backend (a
    timeout, a dropped connection, a 5xx, a 2xx that is HTML, garbage or empty): it may have
    been done. `operation` is "promise" or "report"."""

    def __init__(self, operation: str, invoice_id: int) -> None:
        super().__init__(
            f"The ISP backend did not confirm the payment {operation}; it may have been made"
        )
        self.operation = operation
        self.invoice_id = invoice_id


def _rejection(status: int, body: Any) -> PaymentRejected:
    messages = [fold(message) for _, message in field_errors(body, _OUR_FIELD)]
    invoice_messages = [
        fold(str(m)) for m in _as_list(body.get(INVOICE) if isinstance(body, dict) else None)
    ]
    if status == 400 and any(_PAID in message for message in messages):
        return InvoiceAlreadyPaid(status, body)
    if status == 404 or any(_MISSING in message for message in invoice_messages):
        return InvoiceUnknown(status, body)
    return PaymentRejected(status, body)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


async def _post(
    gateway: UpstreamGateway,
    operation: str,
    invoice_id: int,
    path: str,
    timeout: float | None,
    **body: Any,
) -> dict[str, Any]:
    """POST once; the answer's JSON object, or one of the errors of the module docstring."""
    try:
        response = await gateway.request("POST", path, retry_refused=False, timeout=timeout, **body)
    except UpstreamUnreached:
        raise
    except UpstreamRejected as exc:
        raise _rejection(exc.upstream_status, exc.body) from None
    except UpstreamUnavailable:
        log.warning("payment %s for invoice %d: outcome unknown", operation, invoice_id)
        raise PaymentOutcomeUnknown(operation, invoice_id) from None
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        log.warning(
            "payment %s for invoice %d: %d answer is not a JSON object, outcome unknown",
            operation,
            invoice_id,
            response.status_code,
        )
        raise PaymentOutcomeUnknown(operation, invoice_id)
    return answer


def _check_invoice_id(invoice_id: int) -> None:
    if isinstance(invoice_id, bool) or not isinstance(invoice_id, int) or invoice_id < 1:
        # The backend would take a promise without an invoice (its serializer does not
        # insist): never send one.
        raise ValueError(f"invoice_id must be a positive integer, not {invoice_id!r}")


# -- payment promises ---------------------------------------------------------------------


@dataclass(frozen=True)
class PromiseMade:
    invoice_id: int
    until: date


async def create_promise(
    gateway: UpstreamGateway,
    invoice_id: int,
    until: date,
    *,
    reconnect: bool = True,
    timeout: float | None = None,
) -> PromiseMade:
    """Promise payment of `invoice_id` by `until`; with `reconnect` (the default, `accion`
    1) the backend reactivates the suspended service at once. Sent once; raises as the
    module docstring says. A 2xx JSON object is the success (one that names another invoice
    is not: outcome unknown)."""
    _check_invoice_id(invoice_id)
    body = {
        INVOICE: invoice_id,
        UNTIL: until.strftime(UPSTREAM_DAY),
        ACTION: RECONNECT if reconnect else NO_ACTION,
    }
    answer = await _post(gateway, "promise", invoice_id, PROMISE_PATH, timeout, json=body)
    echoed = answer.get(INVOICE)
    if echoed is not None and as_int(echoed) != invoice_id:
        log.warning("payment promise for invoice %d: the answer names another", invoice_id)
        raise PaymentOutcomeUnknown("promise", invoice_id)
    return PromiseMade(invoice_id, until)


# -- payment reports ------------------------------------------------------------------------


class ReceiptSizeMismatch(ValueError):
    """A streamed receipt whose bytes did not match the `size` given: the request was cut
    before its end, so the backend did not take it."""


def safe_filename(name: str | None) -> str:
    """A receipt's file name as sent: its last path part, in plain ASCII letters, digits,
    spaces, dots, dashes and underscores, at most 100 characters ("comprobante" if none)."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    ascii_name = unicodedata.normalize("NFKD", base).encode("ascii", "ignore").decode()
    cleaned = _FILENAME_JUNK.sub("_", ascii_name).strip(" .")[-100:]
    return cleaned or "comprobante"


def _part_head(boundary: str, name: str, filename: str | None = None, kind: str = "") -> bytes:
    disposition = f'Content-Disposition: form-data; name="{name}"'
    if filename is not None:
        disposition += f'; filename="{filename}"'
    lines = [f"--{boundary}", disposition]
    if kind:
        lines.append(f"Content-Type: {kind}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _multipart_frame(
    boundary: str, fields: list[tuple[str, str]], filename: str, content_type: str
) -> tuple[bytes, bytes]:
    """(what goes before the receipt's bytes, what goes after them)."""
    head = b"".join(
        _part_head(boundary, name) + value.encode("utf-8") + b"\r\n" for name, value in fields
    )
    head += _part_head(boundary, RECEIPT, filename, content_type)
    return head, f"\r\n--{boundary}--\r\n".encode()


async def _framed(
    head: bytes, receipt: AsyncIterable[bytes], tail: bytes, size: int | None
) -> AsyncIterator[bytes]:
    yield head
    sent = 0
    async for chunk in receipt:
        if not chunk:
            continue
        sent += len(chunk)
        if size is not None and sent > size:
            raise ReceiptSizeMismatch(f"the receipt has more than the {size} bytes announced")
        yield bytes(chunk)
    if size is not None and sent != size:
        raise ReceiptSizeMismatch(f"the receipt has {sent} bytes, not the {size} announced")
    yield tail


async def report_payment(
    gateway: UpstreamGateway,
    invoice_id: int,
    method_id: int,
    paid_on: date,
    reference: str,
    receipt: AsyncIterable[bytes] | bytes,
    filename: str | None,
    content_type: str,
    *,
    size: int | None = None,
    timeout: float | None = None,
) -> str:
    """File a customer's payment report of `invoice_id` for staff review; the backend's
    `task_id`. The invoice goes to "En revisión"; no money is registered.

    The receipt goes to the backend as the `multipart/form-data` file part, byte for byte,
    under `safe_filename(filename)` and `content_type` (application/octet-stream when that is
    not a media type). An async iterable is streamed, never held whole: with `size` (its
    length in bytes) the request has a Content-Length and a receipt of another length raises
    `ReceiptSizeMismatch`, its request cut short; without it the request is chunked, which a
    backend behind a proxy that does not buffer uploads may read as empty, so pass `size`
    when it is known. Sent once; raises as the module docstring says; a 2xx without a
    `task_id` is not a success (outcome unknown)."""
    _check_invoice_id(invoice_id)
    boundary = secrets.token_hex(16)
    kind = content_type.strip() if _MEDIA_TYPE.fullmatch(content_type.strip()) else ""
    fields = [
        (METHOD, str(method_id)),
        (PAID_ON, paid_on.strftime(UPSTREAM_DAY)),
        (REFERENCE, reference),
    ]
    head, tail = _multipart_frame(
        boundary, fields, safe_filename(filename), kind or "application/octet-stream"
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    content: bytes | AsyncIterable[bytes]
    if isinstance(receipt, bytes | bytearray | memoryview):
        content = head + bytes(receipt) + tail
    else:
        content = _framed(head, receipt, tail, size)
        if size is not None:
            headers["Content-Length"] = str(len(head) + size + len(tail))
    path = REPORT_PATH.format(invoice_id=invoice_id)
    answer = await _post(
        gateway, "report", invoice_id, path, timeout, content=content, headers=headers
    )
    task_id = answer.get(TASK)
    if not isinstance(task_id, str) or not task_id.strip():
        log.warning("payment report for invoice %d: the answer has no task_id", invoice_id)
        raise PaymentOutcomeUnknown("report", invoice_id)
    return task_id.strip()
