"""The message catalogue: for every action, a sentence a bot can say to the customer.

Keyed by `Action` (kit/actions.py), so an action is written once and its sentence once. The
MCP tools answer with these sentences (mcp/); a test checks that every action the API can
answer has one and appears in the OpenAPI document. Sentences never name a tool, a field of
the API or a customer's data: they are said to the customer as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from isp_gateway.kit.actions import Action

UNAVAILABLE = "El sistema del proveedor no responde ahora; intente de nuevo en un momento."

_SENTENCES: dict[Action, str] = {
    Action.ERROR: "Ocurrió un error; intente de nuevo en un momento.",
    Action.VALIDATION_ERROR: "La solicitud no es válida.",
    Action.PAYLOAD_TOO_LARGE: "La solicitud es demasiado grande.",
    Action.RATE_LIMITED: "Demasiadas solicitudes; espere un momento e intente de nuevo.",
    Action.INSUFFICIENT_SCOPE: "Esta integración no tiene permiso para hacer eso.",
    Action.VERIFICATION_REQUIRED: (
        "Primero necesito confirmar la identidad del titular del servicio."
    ),
    Action.STORE_UNAVAILABLE: UNAVAILABLE,
    Action.LOADING: "El sistema se está preparando; intente de nuevo en un momento.",
    Action.IDEMPOTENCY_KEY_REUSED: "Esa solicitud ya se usó con otros datos.",
    Action.IDEMPOTENCY_KEY_IN_PROGRESS: (
        "Su solicitud anterior todavía se está procesando; intente de nuevo en un momento."
    ),
    Action.UPSTREAM_UNAVAILABLE: UNAVAILABLE,
    Action.UPSTREAM_UNAUTHORIZED: UNAVAILABLE,
    Action.UPSTREAM_RATE_LIMITED: UNAVAILABLE,
    Action.UPSTREAM_REFUSED_CLIENT_FETCH: UNAVAILABLE,
    Action.CLIENTS_LISTED: "Estos son los clientes encontrados.",
    Action.CLIENT_FOUND: "Encontré el servicio.",
    Action.CLIENT_NOT_FOUND: "No encontré ningún cliente con ese dato.",
    Action.INVALID_DOCUMENT: "El documento no es válido (3 a 20 letras o dígitos).",
    Action.INVALID_PHONE: "El teléfono no es válido.",
    Action.INVALID_SERVICE_ID: "El número de servicio no es válido.",
    Action.CLIENT_VERIFIED: "Identidad validada correctamente.",
    Action.CLIENT_VERIFICATION_FAILED: (
        "Los datos no coinciden con los del titular; se necesitan al menos 3 de: nombre, "
        "dirección, nombre del plan y precio del plan."
    ),
    Action.CLIENT_VERIFICATION_LOCKED: (
        "Demasiados intentos de verificación fallidos; intente más tarde."
    ),
    Action.IDENTITY_RATE_LIMITED: (
        "Se alcanzó el límite de identificaciones por ahora; intente más tarde."
    ),
    Action.CLIENT_AMBIGUOUS: (
        "Varios clientes coinciden con esos datos; necesito un dato adicional."
    ),
    Action.CLIENT_UPDATED: "Listo: actualizamos sus datos de contacto.",
    Action.CLIENT_UPDATE_FAILED: "No se pudieron actualizar los datos de contacto.",
    Action.ACCOUNT_FOUND: "Este es el estado de su cuenta.",
    Action.PAYMENT_METHODS_LISTED: "Estas son las formas de pago.",
    Action.PAYMENT_PROMISE_CREATED: (
        "Listo: reactivamos su servicio hasta la fecha acordada. Recuerde pagar antes de esa fecha."
    ),
    Action.PROMISE_NOT_ALLOWED: "En este momento no es posible hacer un acuerdo de pago.",
    Action.PROMISE_ALREADY_ACTIVE: "Ya tiene un acuerdo de pago vigente.",
    Action.INVOICE_NOT_PENDING: "Esa factura no está pendiente de pago.",
    Action.PAYMENT_PROMISE_FAILED: (
        "No pudimos confirmar el acuerdo de pago; intente de nuevo en un momento."
    ),
    Action.PAYMENT_REPORT_RECEIVED: (
        "Recibimos su comprobante de pago; el área de facturación lo revisará y confirmará el pago."
    ),
    Action.PAYMENT_REPORT_DUPLICATE: "Ya recibimos un reporte de pago con esa referencia.",
    Action.PAYMENT_REPORT_NOT_ALLOWED: "No tiene facturas pendientes por pagar.",
    Action.UNSUPPORTED_RECEIPT: (
        "El comprobante debe ser una imagen (JPG, PNG o WEBP) o un documento PDF."
    ),
    Action.PAYMENT_REPORT_FAILED: (
        "No pudimos enviar su comprobante de pago; intente de nuevo en un momento."
    ),
    Action.TICKET_SUBJECTS_LISTED: "Estos son los motivos de un ticket de soporte.",
    Action.TICKET_FOUND: "Este es el estado de su ticket.",
    Action.TICKET_NOT_FOUND: "No encontré ese ticket.",
    Action.TICKET_CREATED: "Listo: abrimos su ticket de soporte.",
    Action.TICKET_CREATION_FAILED: "No se pudo abrir el ticket; intente de nuevo en un momento.",
    Action.TICKET_ALREADY_OPEN: "Ya tiene un ticket abierto por ese motivo; lo estamos atendiendo.",
    Action.TICKETS_LISTED: "Estos son sus tickets.",
    Action.ZONE_TICKET_LIMIT_REACHED: (
        "Ya estamos atendiendo varios reportes en su zona; un técnico revisará el sector."
    ),
    Action.ZONE_MISMATCH: "La zona indicada no es la del servicio.",
    Action.PING_CREATED: "Inicié una prueba de conexión a su equipo.",
    Action.PING_PENDING: "La prueba de conexión sigue en curso; vuelva a consultar en un momento.",
    Action.PING_FAILED: "No fue posible realizar la prueba de conexión al equipo.",
    Action.STABLE_CONNECTION: "La conexión responde bien.",
    Action.INTERMITTENT_CONNECTION: "La conexión es intermitente; puede abrir un ticket.",
    Action.NO_INTERNET: "La antena no responde; puede abrir un ticket.",
    Action.SERVICE_CANCELLED: "El servicio está cancelado.",
    Action.SERVICE_SUSPENDED: "El servicio está suspendido por saldo pendiente.",
    Action.ZONE_OUTAGE: "Hay una falla general en la zona; no hace falta abrir un ticket.",
    Action.OUTAGES_LISTED: "Estas son las fallas generales en curso.",
    Action.OUTAGE_IN_PROGRESS: (
        "Hay una falla general en su sector y ya estamos trabajando en ello; no hace falta "
        "abrir un ticket."
    ),
    Action.INTERNET_PLANS_LISTED: "Estos son los planes de internet.",
    Action.INTERNET_PLAN_FOUND: "Este es el plan de internet.",
    Action.INTERNET_PLAN_NOT_FOUND: "No encontré ese plan de internet.",
    Action.AUDIT_LISTED: "Estos son los eventos de auditoría.",
}
SENTENCES: Mapping[Action, str] = MappingProxyType(_SENTENCES)


def sentence(action: str, default: str) -> str:
    """The customer sentence of `action`, or `default` for a code that is no action."""
    try:
        return SENTENCES[Action(action)]
    except ValueError:
        return default
