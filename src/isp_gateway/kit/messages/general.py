"""The texts of the answers any endpoint may give: errors, limits, credentials, the store,
idempotency and the upstream."""

from __future__ import annotations

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages.texts import UNAVAILABLE, Texts, pinned, t

TEXTS: Texts = {
    Action.ERROR: {
        "": t(
            "Ocurrió un error; intente de nuevo en un momento.",
            "Something went wrong; please try again in a moment.",
        ),
        "internal": t("Error interno del servidor", "Internal server error"),
        "not_found": t("No encontrado", "Not found"),
        "method": t("Método no permitido", "Method not allowed"),
        "request": t("La solicitud falló", "Request failed"),
        "clients_list": pinned("Failed to retrieve clients"),
        "q_required": pinned("Query parameter 'q' is required"),
        "unknown_tool": t("Esa herramienta no existe.", "There is no such tool."),
    },
    Action.VALIDATION_ERROR: {
        "": t("La solicitud no es válida.", "The request is not valid."),
        # `detail` is the validator's own words (meta.errors), in English.
        "fields": t(
            "Solicitud no válida: {field}: {detail}",
            "Invalid request: {field}: {detail}",
            technical=True,
        ),
        "more": t(" (y {count} más)", " (and {count} more)", technical=True),
        "end_user": t(
            "X-End-User-Id debe tener de 1 a 128 caracteres ASCII imprimibles (printable ASCII)",
            "X-End-User-Id must be 1 to 128 printable ASCII characters",
            technical=True,
        ),
        "arguments": t(
            "Argumentos no válidos: {problems}", "Invalid arguments: {problems}", technical=True
        ),
        "one_lookup": t(
            "Indique exactamente uno de: teléfono, documento o número de servicio.",
            "Give exactly one of: phone, document or service number.",
        ),
        "contact": t(
            "Indique el nuevo teléfono, el nuevo documento o ambos.",
            "Give the new phone, the new document or both.",
        ),
        "plan_lookup": t(
            "Indique el número o el nombre del plan.", "Give the plan's number or its name."
        ),
    },
    Action.PAYLOAD_TOO_LARGE: {
        "": t("La solicitud es demasiado grande.", "The request is too large."),
        "limit": t(
            "El cuerpo de la solicitud supera {limit} bytes",
            "Request body larger than {limit} bytes",
        ),
    },
    Action.RATE_LIMITED: {
        "": t(
            "Demasiadas solicitudes; espere un momento e intente de nuevo.",
            "Too many requests; wait a moment and try again.",
        ),
        "service": t("Demasiadas solicitudes; más despacio", "Too many requests, slow down"),
        "key": t(
            "Demasiadas solicitudes con esta clave de API; más despacio",
            "Too many requests for this API key, slow down",
        ),
    },
    Action.INSUFFICIENT_SCOPE: {
        "": t(
            "Esta integración no tiene permiso para hacer eso.",
            "This integration is not allowed to do that.",
        ),
        "scope": t(
            "Esta credencial no tiene el permiso {scope}", "This credential lacks the scope {scope}"
        ),
    },
    Action.VERIFICATION_REQUIRED: {
        "": t(
            "Primero necesito confirmar la identidad del titular del servicio.",
            "First I need to confirm the identity of the service's holder.",
        ),
        "rest": t(
            "Se requiere verificación: verifique primero la identidad del cliente "
            "(POST /api/v1/clients/{{service_id}}/verify) y envíe el verification_id que devuelve "
            "en la cabecera X-Verification-Id.",
            "Verification required: verify the customer's identity first "
            "(POST /api/v1/clients/{{service_id}}/verify) and send the verification_id it returns "
            "in the X-Verification-Id header.",
            technical=True,
        ),
    },
    Action.STORE_UNAVAILABLE: {
        "": UNAVAILABLE,
        "store": t(
            "El almacén compartido del servicio no responde; intente de nuevo en un momento",
            "The service's shared store is not available right now, try again shortly",
        ),
    },
    Action.LOADING: {
        "": t(
            "El sistema se está preparando; intente de nuevo en un momento.",
            "The system is getting ready; please try again in a moment.",
        ),
        # A first load's 503 (kit/progress.py): one variant per list that answers it.
        "clients": t(
            "La lista de clientes todavía se está cargando del sistema del proveedor ({read} "
            "de {total}); intente de nuevo en {retry_after} s",
            "The client list is still loading from the ISP backend ({read} of {total}); try "
            "again in {retry_after} s",
        ),
    },
    Action.IDEMPOTENCY_KEY_REUSED: {
        "": t(
            "Esa solicitud ya se usó con otros datos.",
            "That request was already made with other details.",
        ),
        "rest": t(
            "Esta Idempotency-Key ya se usó con otro cuerpo de solicitud",
            "This Idempotency-Key was already used with a different request body",
            technical=True,
        ),
    },
    Action.IDEMPOTENCY_KEY_IN_PROGRESS: {
        "": t(
            "Su solicitud anterior todavía se está procesando; intente de nuevo en un momento.",
            "Your previous request is still being processed; try again in a moment.",
        ),
        "rest": t(
            "Una solicitud con esta Idempotency-Key todavía se está procesando; intente "
            "de nuevo en un momento",
            "A request with this Idempotency-Key is still being processed; retry shortly",
            technical=True,
        ),
    },
    Action.UPSTREAM_UNAVAILABLE: {
        "": UNAVAILABLE,
        "rest": t(
            "El sistema del proveedor no está disponible ahora; intente de nuevo en un momento",
            "The ISP backend is not available right now, try again shortly",
        ),
        "rejected": t(
            "El sistema del proveedor rechazó la solicitud ({status})",
            "The ISP backend refused the request ({status})",
        ),
        "balance": t(
            "No se puede confirmar el saldo ahora; intente de nuevo en un momento",
            "Cannot confirm the balance right now; please try again shortly",
        ),
    },
    Action.UPSTREAM_UNAUTHORIZED: {
        "": UNAVAILABLE,
        "rest": t(
            "El sistema del proveedor rechazó las credenciales del servicio",
            "The ISP backend refused the service's credentials",
        ),
    },
    Action.UPSTREAM_RATE_LIMITED: {
        "": UNAVAILABLE,
        "rest": t(
            "El sistema del proveedor está limitando las solicitudes; intente de nuevo en "
            "un momento",
            "The ISP backend is rate limiting requests, try again shortly",
        ),
    },
    Action.UPSTREAM_REFUSED_CLIENT_FETCH: {"": pinned("Unable to fetch client data")},
}
