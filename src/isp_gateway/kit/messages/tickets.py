"""The texts of tickets: subjects, creation and its refusals, the zone cap."""

from __future__ import annotations

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages.texts import Texts, t

_NOTHING_CREATED_ES = "no se abrió ningún ticket; intente de nuevo en un momento"
_NOTHING_CREATED_EN = "nothing was created, retry shortly"

TEXTS: Texts = {
    Action.TICKET_SUBJECTS_LISTED: {
        "": t(
            "Estos son los motivos de un ticket de soporte.",
            "These are the reasons a support ticket can have.",
        ),
    },
    Action.TICKET_FOUND: {"": t("Este es el estado de su ticket.", "This is your ticket's state.")},
    Action.TICKET_NOT_FOUND: {
        "": t("No encontré ese ticket.", "I did not find that ticket."),
        "id": t("El ticket {ticket_id} no existe", "Ticket {ticket_id} not found"),
    },
    Action.TICKET_CREATED: {
        "": t("Listo: abrimos su ticket de soporte.", "Done: your support ticket is open."),
        "number": t("Se abrió el ticket número {ticket_id}.", "Ticket number {ticket_id} is open."),
        "number_due": t(
            "Se abrió el ticket número {ticket_id}; se atenderá a más tardar el {end}.",
            "Ticket number {ticket_id} is open; it will be handled by {end}.",
        ),
    },
    Action.TICKET_CREATION_FAILED: {
        "": t(
            "No se pudo abrir el ticket; intente de nuevo en un momento.",
            "The ticket could not be opened; please try again in a moment.",
        ),
        "unknown_subject": t(
            "El motivo '{subject}' no está en el catálogo de motivos de soporte",
            "The subject '{subject}' is not in the ticket subject catalogue",
        ),
        "closest": t("; el más parecido es '{hint}'", "; the closest is '{hint}'"),
        "no_zone": t(
            "El servicio no tiene zona asignada; no se puede abrir un ticket desde aquí.",
            "The service has no zone assigned; a ticket cannot be opened from here.",
        ),
        "no_technician": t(
            "El servicio no tiene técnico asignado y no hay uno por defecto configurado; no se "
            "abrió ningún ticket.",
            "The service has no technician assigned and no default one is configured; no ticket "
            "was opened.",
        ),
        "busy_zone_read": t(
            f"El sistema del proveedor está ocupado (no se pudo leer la zona del cliente); "
            f"{_NOTHING_CREATED_ES}",
            f"The ISP backend is busy (could not read the customer's zone); {_NOTHING_CREATED_EN}",
        ),
        "no_zone_read": t(
            f"El sistema del proveedor no responde (no se pudo leer la zona del cliente); "
            f"{_NOTHING_CREATED_ES}",
            f"The ISP backend is not available (could not read the customer's zone); "
            f"{_NOTHING_CREATED_EN}",
        ),
        "zone_busy": t(
            f"La zona {{zone_id}} está ocupada con otra creación de ticket; {_NOTHING_CREATED_ES}",
            "Zone {zone_id} is busy with another ticket creation; retry shortly",
        ),
        "stopping": t(
            f"Este servidor se está deteniendo; {_NOTHING_CREATED_ES}",
            "This server is stopping; nothing was created, retry (another replica answers)",
        ),
        "outcome_unknown": t(
            "El sistema del proveedor no confirmó el ticket; puede que se haya abierto. Repetir la "
            "misma solicitud es seguro: se busca ese ticket antes de abrir otro",
            "The ISP backend did not confirm the ticket; it may have been created. Repeating the "
            "same request is safe: the service looks for that ticket before creating another",
        ),
        "outcome_pending": t(
            "El sistema del proveedor aún no muestra el ticket que esta misma solicitud pudo "
            f"abrir antes; {_NOTHING_CREATED_ES}",
            "The ISP backend does not show yet the ticket this same request may have created "
            "before; nothing was created, retry shortly",
        ),
        "throttled": t(
            f"El sistema del proveedor está limitando las solicitudes; {_NOTHING_CREATED_ES}",
            "The ISP backend is rate limiting requests; retry shortly",
        ),
        "unauthorized": t(
            "El sistema del proveedor rechazó las credenciales del servicio",
            "The ISP backend refused the service's credentials",
        ),
        "field": t(
            "El sistema del proveedor rechazó el campo {field} del ticket: {detail}",
            "The ISP backend refused the ticket's {field}: {detail}",
            technical=True,
        ),
        # The step that failed: counting the zone's tickets, or posting the ticket.
        "rejected_counting": t(
            "El sistema del proveedor no dejó contar los tickets activos de la zona {detail}",
            "The ISP backend could not count the zone's active tickets {detail}",
            technical=True,
        ),
        "rejected_posting": t(
            "El sistema del proveedor rechazó el ticket {detail}",
            "The ISP backend refused the ticket {detail}",
            technical=True,
        ),
        "unavailable_counting": t(
            f"El sistema del proveedor no responde (no se pudieron contar los tickets activos de "
            f"la zona); {_NOTHING_CREATED_ES}",
            "The ISP backend is not available (could not count the zone's active tickets); "
            "nothing was created, retry shortly",
        ),
        "unavailable_posting": t(
            f"El sistema del proveedor no responde (rechazó el ticket); {_NOTHING_CREATED_ES}",
            "The ISP backend is not available (refused the ticket); nothing was created, retry "
            "shortly",
        ),
    },
    Action.TICKET_ALREADY_OPEN: {
        "": t(
            "Ya tiene un ticket abierto por ese motivo; lo estamos atendiendo.",
            "You already have an open ticket for that reason; we are working on it.",
        ),
        "number": t(
            "Ya hay un ticket abierto por ese motivo (número {ticket_id}).",
            "There is already an open ticket for that reason (number {ticket_id}).",
        ),
    },
    Action.TICKETS_LISTED: {
        "": t("Estos son sus tickets.", "These are your tickets."),
        "count": t("Hay {count} ticket(s) abierto(s).", "There are {count} open ticket(s)."),
        "none": t("No hay tickets abiertos.", "There are no open tickets."),
    },
    Action.ZONE_TICKET_LIMIT_REACHED: {
        "": t(
            "Ya estamos atendiendo varios reportes en su zona; un técnico revisará el sector.",
            "We are already handling several reports in your area; a technician will check it.",
        ),
        "counts": t(
            "La zona {zone_id} ya tiene {active} tickets activos (límite {limit}); no se "
            "abre otro hasta que se resuelva uno",
            "Zone {zone_id} already has {active} active tickets (limit {limit}); no new "
            "ticket until one is resolved",
        ),
    },
    Action.ZONE_MISMATCH: {
        "": t("La zona indicada no es la del servicio.", "That zone is not the service's zone."),
        "zones": t(
            "El servicio {service_id} está en la zona {zone_id}, no en la zona {given}",
            "Service {service_id} is in zone {zone_id}, not zone {given}",
        ),
    },
}
