"""The texts of general outages (OUTAGES.md): the list, a ticket held back by one, and the
notices the webhooks carry to customers."""

from __future__ import annotations

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages.texts import Texts, t

TEXTS: Texts = {
    Action.OUTAGES_LISTED: {
        "": t(
            "Estas son las fallas generales en curso.",
            "These are the general outages in progress.",
        ),
        "none": t(
            "No hay fallas generales en este momento.", "There are no general outages right now."
        ),
        "one": t(
            "Hay una falla general en curso. Estamos trabajando en ello.",
            "There is a general outage in progress. We are working on it.",
        ),
        "one_described": t(
            "Hay una falla general en curso: {description}. Estamos trabajando en ello.",
            "There is a general outage in progress: {description}. We are working on it.",
        ),
        "many": t(
            "Hay {count} fallas generales en curso; estamos trabajando en ellas.",
            "There are {count} general outages in progress; we are working on them.",
        ),
    },
    Action.OUTAGE_IN_PROGRESS: {
        "": t(
            "Hay una falla general en su sector y ya estamos trabajando en ello; no hace falta "
            "abrir un ticket.",
            "There is a general outage in your area and we are already working on it; no "
            "ticket is needed.",
        ),
        # OUTAGE_TICKETS=hold: REST's 409.
        "held": t(
            "El servicio {service_id} está bajo la falla general {outage_id} del router "
            "{router_id}: no se abre un ticket mientras dure",
            "Service {service_id} is under the general outage {outage_id} of router "
            "{router_id}: no ticket is opened while it lasts",
        ),
        # The webhooks' notices (outage.started, outage.ended), said to customers as is.
        "started": t(
            "Hay una falla general en su sector. Estamos trabajando en ello.",
            "There is a general outage in your area. We are working on it.",
        ),
        "started_described": t(
            "Hay una falla general en su sector: {description}. Estamos trabajando en ello.",
            "There is a general outage in your area: {description}. We are working on it.",
        ),
        "ended": t(
            "Ya se solucionó la falla general en su sector. Si aún no tiene internet, reinicie "
            "su equipo y escríbanos.",
            "The general outage in your area is solved. If you still have no internet, "
            "restart your equipment and write to us.",
        ),
    },
}
