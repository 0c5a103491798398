"""The texts of finding, verifying and updating customers."""

from __future__ import annotations

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages.texts import Texts, pinned, t

TEXTS: Texts = {
    Action.CLIENTS_LISTED: {
        "": t("Estos son los clientes encontrados.", "These are the customers found."),
    },
    Action.CLIENT_FOUND: {
        "": t("Encontré el servicio.", "I found the service."),
        "service": t("Encontré el servicio {ids}.", "I found the service {ids}."),
        "services": t("Encontré {count} servicios: {ids}.", "I found {count} services: {ids}."),
        # customer_summary (MCP): the verified customer's service in one sentence.
        "summary": t("Servicio {service_id}: estado {state}.", "Service {service_id}: {state}."),
        "summary_plan": t(
            "Servicio {service_id}: estado {state}, plan {plan}.",
            "Service {service_id}: {state}, plan {plan}.",
        ),
        "state_active": t("activo", "active"),
        "state_suspended": t("suspendido", "suspended"),
        "state_cancelled": t("cancelado", "cancelled"),
        "state_free": t("gratuito", "free"),
        "state_unknown": t("desconocido", "unknown"),
    },
    Action.CLIENT_NOT_FOUND: {
        "": t("No encontré ningún cliente con ese dato.", "I found no customer with that detail."),
        "lookup": pinned("Client not found"),
        # Verify and resolve: spec 4.4 rule 6, a Spanish message.
        "verify": pinned("Cliente no encontrado"),
        "service": t("El servicio {service_id} no existe", "Client {service_id} not found"),
    },
    Action.INVALID_DOCUMENT: {
        "": t(
            "El documento no es válido (3 a 20 letras o dígitos).",
            "The document is not valid (3 to 20 letters or digits).",
        ),
        "format": pinned("Invalid document format"),
    },
    Action.INVALID_PHONE: {
        "": t("El teléfono no es válido.", "The phone number is not valid."),
        "format": t("Formato de teléfono no válido", "Invalid phone format"),
    },
    Action.INVALID_SERVICE_ID: {
        "": t("El número de servicio no es válido.", "The service number is not valid."),
    },
    Action.CLIENT_VERIFIED: {
        "": t("Identidad validada correctamente.", "Identity verified."),
        # Spec 4.4 rule 3: a Spanish message.
        "verify": pinned("Identidad validada correctamente"),
        "resolve": t("Cliente identificado y verificado", "Customer identified and verified"),
        "agent": t(
            "Identidad verificada; ya puedo consultar y gestionar el servicio.",
            "Identity verified; I can now look up and manage the service.",
        ),
    },
    Action.CLIENT_VERIFICATION_FAILED: {
        "": t(
            "Los datos no coinciden con los del titular; se necesitan al menos 3 de: nombre, "
            "dirección, nombre del plan y precio del plan.",
            "The details do not match the holder's; at least 3 of name, address, plan name "
            "and plan price are needed.",
        ),
        # Spec 4.4 rules 4 and 5: Spanish messages.
        "mismatch": pinned("Los datos proporcionados no coinciden con los del cliente"),
        "few_fields": pinned(
            "Debe proporcionar al menos 3 de los 4 campos para verificar la identidad"
        ),
        # IDENTITY_POLICY=strict (clients/policy.py): what is missing, in a person's words.
        "missing": t(
            "Para verificar la identidad se necesitan el nombre del titular, la dirección del "
            "servicio y el plan (nombre o precio); falta: {listed}",
            "To verify the identity, the holder's name, the service address and the plan "
            "(name or price) are needed; missing: {listed}",
        ),
        "fact_name": t("el nombre del titular", "the holder's name"),
        "fact_address": t("la dirección del servicio", "the service address"),
        "fact_plan": t("el nombre o el precio del plan", "the plan's name or price"),
        "fact_and": t(" y ", " and "),
        "attempts": t(
            "Los datos no coinciden con los del titular del servicio. Quedan {left} intentos.",
            "The details do not match the service holder's. {left} attempts left.",
        ),
        "no_attempts": t(
            "Los datos no coinciden con los del titular del servicio. No quedan "
            "intentos por ahora.",
            "The details do not match the service holder's. No attempts left for now.",
        ),
    },
    Action.IDENTITY_RATE_LIMITED: {
        "": t(
            "Se alcanzó el límite de identificaciones por ahora; intente más tarde.",
            "The limit of identifications has been reached for now; please try again later.",
        ),
        # CALLER_RESOLVES_PER_HOUR (CALLERS.md 6): REST's 429.
        "resolves": t(
            "Demasiadas identificaciones de clientes distintos en la última hora; intente "
            "más tarde",
            "Too many identifications of different customers in the last hour; try again later",
        ),
    },
    Action.CLIENT_VERIFICATION_LOCKED: {
        "": t(
            "Demasiados intentos de verificación fallidos; intente más tarde.",
            "Too many failed verification attempts; try again later.",
        ),
    },
    Action.CLIENT_AMBIGUOUS: {
        "": t(
            "Varios clientes coinciden con esos datos; necesito un dato adicional.",
            "Several customers match those details; I need one more detail.",
        ),
    },
    Action.CLIENT_UPDATED: {
        "": t(
            "Listo: actualizamos sus datos de contacto.", "Done: your contact details are updated."
        ),
        "rest": t("Cliente actualizado correctamente", "Client updated successfully"),
    },
    Action.CLIENT_UPDATE_FAILED: {
        "": t(
            "No se pudieron actualizar los datos de contacto.",
            "The contact details could not be updated.",
        ),
        "nothing": t(
            "Indique un documento o un teléfono para actualizar",
            "Provide a document or a phone to update",
        ),
        "failed": t(
            "El sistema del proveedor no pudo actualizar el cliente",
            "The client could not be updated upstream",
        ),
    },
}
