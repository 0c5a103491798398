"""The texts of money (MONEY.md): payment promises and payment reports, and the refusals of
their forms. Dates (`{day}`, `{until}`) and sums (`{amount}`) come written in the language
(kit/messages' `day()` and `amount()`)."""

from __future__ import annotations

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages.texts import Texts, t

# Nothing was done (a promise of the service holding its lock, a worker stopping, too many
# receipts being read).
BUSY = t(
    "El sistema está ocupado con otra solicitud; intente de nuevo en un momento.",
    "The system is busy with another request; please try again in a moment.",
)

TEXTS: Texts = {
    Action.PAYMENT_PROMISE_CREATED: {
        "": t(
            "Listo: reactivamos su servicio hasta la fecha acordada. Recuerde pagar antes de "
            "esa fecha.",
            "Done: your service is reactivated until the agreed date. Remember to pay before "
            "that date.",
        ),
        "reactivated": t(
            "Listo: reactivamos su servicio hasta el {until}. Recuerde pagar {amount} antes de "
            "esa fecha.",
            "Done: we reactivated your service until {until}. Remember to pay {amount} before "
            "that date.",
        ),
        "kept": t(
            "Listo: su servicio seguirá activo hasta el {until}. Recuerde pagar {amount} antes "
            "de esa fecha.",
            "Done: your service stays active until {until}. Remember to pay {amount} before "
            "that date.",
        ),
    },
    Action.PROMISE_NOT_ALLOWED: {
        "": t(
            "En este momento no es posible hacer un acuerdo de pago.",
            "A payment agreement is not possible right now.",
        ),
        "cancelled": t(
            "El servicio está cancelado; no admite un acuerdo de pago.",
            "The service is cancelled; it admits no payment agreement.",
        ),
        "nothing_owed": t(
            "No tiene facturas pendientes; no hace falta un acuerdo de pago.",
            "There are no pending invoices; no payment agreement is needed.",
        ),
        "broken": t(
            "No es posible hacer un nuevo acuerdo de pago porque el anterior no se cumplió; "
            "podrá solicitarlo desde el {day}.",
            "A new payment agreement is not possible because the previous one was not kept; "
            "it can be requested from {day}.",
        ),
        "too_many": t(
            "Ya se hicieron {count} acuerdos de pago en los últimos {days} días, el máximo "
            "permitido; podrá solicitar otro desde el {day}.",
            "{count} payment agreements were made in the last {days} days, the most allowed; "
            "another can be requested from {day}.",
        ),
    },
    Action.PROMISE_ALREADY_ACTIVE: {
        "": t(
            "Ya tiene un acuerdo de pago vigente.",
            "You already have a payment agreement in force.",
        ),
        "until": t(
            "Ya tiene un acuerdo de pago vigente hasta el {day}.",
            "You already have a payment agreement in force until {day}.",
        ),
    },
    Action.INVOICE_NOT_PENDING: {
        "": t("Esa factura no está pendiente de pago.", "That invoice is not pending payment."),
        "invoice": t(
            "La factura {invoice_id} no es una factura pendiente de este servicio.",
            "Invoice {invoice_id} is not a pending invoice of this service.",
        ),
    },
    Action.PAYMENT_PROMISE_FAILED: {
        "": t(
            "No pudimos confirmar el acuerdo de pago; intente de nuevo en un momento.",
            "We could not confirm the payment agreement; please try again in a moment.",
        ),
        "unknown": t(
            "No pudimos confirmar el acuerdo de pago con el sistema del proveedor. Puede "
            "intentar de nuevo en un momento: no se hará un segundo acuerdo.",
            "We could not confirm the payment agreement with the provider's system. You can "
            "try again in a moment: no second agreement will be made.",
        ),
        "not_made": t(
            "El sistema del proveedor no registró el acuerdo de pago; intente de nuevo en "
            "un momento.",
            "The provider's system did not record the payment agreement; please try again in "
            "a moment.",
        ),
        "busy": BUSY,
    },
    Action.PAYMENT_REPORT_RECEIVED: {
        "": t(
            "Recibimos su comprobante de pago; el área de facturación lo revisará y confirmará "
            "el pago.",
            "We received your payment receipt; the billing team will review it and confirm "
            "the payment.",
        ),
        "amount": t(
            "Recibimos su reporte de pago por {amount} con su comprobante; el área de "
            "facturación lo revisará y confirmará el pago. Mientras tanto la factura sigue "
            "pendiente.",
            "We received your payment report for {amount} with its receipt; the billing team "
            "will review it and confirm the payment. Until then the invoice stays pending.",
        ),
    },
    Action.PAYMENT_REPORT_DUPLICATE: {
        "": t(
            "Ya recibimos un reporte de pago con esa referencia.",
            "We already received a payment report with that reference.",
        ),
        "review": t(
            "Ya recibimos un reporte de pago con esa referencia; está en revisión.",
            "We already received a payment report with that reference; it is under review.",
        ),
    },
    Action.PAYMENT_REPORT_NOT_ALLOWED: {
        "": t("No tiene facturas pendientes por pagar.", "There are no pending invoices to pay."),
        "nothing_owed": t(
            "No tiene facturas pendientes por pagar; no hace falta reportar un pago.",
            "There are no pending invoices to pay; no payment report is needed.",
        ),
        "too_many": t(
            "Ya recibimos varios reportes de pago de este servicio hoy; el área de "
            "facturación los está revisando. Podrá enviar otro desde el {day}.",
            "We already received several payment reports for this service today; the billing "
            "team is reviewing them. Another can be sent from {day}.",
        ),
    },
    Action.UNSUPPORTED_RECEIPT: {
        "": t(
            "El comprobante debe ser una imagen (JPG, PNG o WEBP) o un documento PDF.",
            "The receipt must be an image (JPG, PNG or WEBP) or a PDF document.",
        ),
    },
    Action.UPLOAD_TIMEOUT: {
        "": t(
            "El envío del comprobante tardó demasiado y se detuvo; intente de nuevo.",
            "The receipt's upload took too long and was stopped; please try again.",
        ),
        "seconds": t(
            "El envío del comprobante no terminó en {seconds} segundos y se detuvo; intente "
            "de nuevo con una conexión más estable o un archivo más pequeño.",
            "The receipt's upload did not finish within {seconds} seconds and was stopped; "
            "please try again on a steadier connection or with a smaller file.",
        ),
    },
    Action.PAYMENT_REPORT_FAILED: {
        "": t(
            "No pudimos enviar su comprobante de pago; intente de nuevo en un momento.",
            "We could not send your payment receipt; please try again in a moment.",
        ),
        "unknown": t(
            "No pudimos confirmar que su comprobante llegó al sistema del proveedor; puede "
            "enviarlo de nuevo en un momento.",
            "We could not confirm that your receipt reached the provider's system; you can "
            "send it again in a moment.",
        ),
        "busy": BUSY,
    },
    # The money routes' malformed requests: one field named in meta.errors, a sentence here.
    Action.VALIDATION_ERROR: {
        "promise_until": t(
            "La fecha del acuerdo de pago debe ser posterior a hoy y a más tardar el {day}.",
            "The payment agreement's date must be after today and at most {day}.",
        ),
        "promise_date": t(
            "La fecha no es válida; use AAAA-MM-DD.", "The date is not valid; use YYYY-MM-DD."
        ),
        "paid_on": t(
            "La fecha del pago no puede ser futura ni anterior al {day}.",
            "The payment date can be neither in the future nor before {day}.",
        ),
        "report_form": t(
            "El formulario del reporte de pago no es válido; revise los datos.",
            "The payment report form is not valid; please check the details.",
        ),
        "extra_field": t("El formulario tiene un campo de más.", "The form has a field too many."),
        "repeated_field": t("El formulario repite un campo.", "The form repeats a field."),
        "unreadable_field": t(
            "El formulario tiene un dato ilegible.", "The form has an unreadable value."
        ),
        "empty_receipt": t("El comprobante está vacío.", "The receipt is empty."),
        "receipt_required": t("Falta el comprobante de pago.", "The payment receipt is missing."),
        "report_missing": t(
            "Falta un dato del reporte de pago.", "A detail of the payment report is missing."
        ),
        "report_invalid": t(
            "Un dato del reporte de pago no es válido.",
            "A detail of the payment report is not valid.",
        ),
        "payment_method": t(
            "Esa forma de pago no es una de las del proveedor.",
            "That payment method is not one of the provider's.",
        ),
        "interrupted": t("El envío se interrumpió.", "The upload was interrupted."),
    },
    Action.PAYLOAD_TOO_LARGE: {
        "receipt": t("El comprobante supera {limit} bytes", "Receipt larger than {limit} bytes"),
        "report_fields": t(
            "Los campos de texto del reporte superan {limit} bytes",
            "The report's text fields are larger than {limit} bytes",
        ),
    },
}
