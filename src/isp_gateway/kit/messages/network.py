"""The texts of a customer's line: the account, pings, diagnose, plans, the audit."""

from __future__ import annotations

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages.texts import Texts, t

TEXTS: Texts = {
    Action.ACCOUNT_FOUND: {
        "": t("Este es el estado de su cuenta.", "This is your account's state."),
        "owes": t("El saldo pendiente es de {total}.", "The outstanding balance is {total}."),
        "nothing": t("No hay saldo pendiente.", "There is no outstanding balance."),
    },
    Action.PAYMENT_METHODS_LISTED: {
        "": t("Estas son las formas de pago.", "These are the ways to pay."),
        "count": t("Hay {count} formas de pago.", "There are {count} ways to pay."),
    },
    Action.PING_CREATED: {
        "": t(
            "Inicié una prueba de conexión a su equipo.",
            "I started a connection test of your device.",
        ),
    },
    Action.PING_PENDING: {
        "": t(
            "La prueba de conexión sigue en curso; vuelva a consultar en un momento.",
            "The connection test is still running; check again in a moment.",
        ),
        "ping": t(
            "Ping en curso; consulte de nuevo en unos segundos.",
            "Ping in progress; check again in a few seconds.",
        ),
    },
    Action.PING_FAILED: {
        "": t(
            "No fue posible realizar la prueba de conexión al equipo.",
            "The connection test of the device could not be run.",
        ),
        "task": t("La prueba no existe", "Task not found"),
        "ping": t(
            "No fue posible realizar el ping al equipo.", "The ping of the device could not be run."
        ),
        "rest": t(
            "El sistema del proveedor no aceptó la solicitud de ping",
            "The ISP backend did not accept the ping request",
        ),
        "refused": t(
            "El sistema del proveedor no aceptó la prueba de conexión.",
            "The provider's system did not accept the connection test.",
        ),
    },
    Action.STABLE_CONNECTION: {
        "": t("La conexión responde bien.", "The connection is answering well."),
        "ping": t("Conexión estable.", "Stable connection."),
    },
    Action.INTERMITTENT_CONNECTION: {
        "": t(
            "La conexión es intermitente; puede abrir un ticket.",
            "The connection is intermittent; a ticket can be opened.",
        ),
        "ping": t(
            "Conexión intermitente: se perdieron paquetes.",
            "Intermittent connection: packets were lost.",
        ),
    },
    Action.NO_INTERNET: {
        "": t(
            "La antena no responde; puede abrir un ticket.",
            "The antenna does not answer; a ticket can be opened.",
        ),
        "ping": t(
            "Sin conexión: el equipo no respondió a ningún ping.",
            "No connection: the device answered no ping.",
        ),
    },
    Action.SERVICE_CANCELLED: {"": t("El servicio está cancelado.", "The service is cancelled.")},
    Action.SERVICE_SUSPENDED: {
        "": t(
            "El servicio está suspendido por saldo pendiente.",
            "The service is suspended for an outstanding balance.",
        ),
        # A payment promise is allowed (MONEY.md 1): paying, or a promise that reconnects today.
        "promise": t(
            "El servicio está suspendido por saldo pendiente. Puede pagar, o acordar una fecha "
            "de pago para reactivarlo hoy.",
            "The service is suspended for an outstanding balance. You can pay, or agree a "
            "payment date to reactivate it today.",
        ),
        # Nothing owed (CALLERS.md 2): never mentions a debt.
        "reconnect": t(
            "El servicio está suspendido. Se puede solicitar la reconexión.",
            "The service is suspended. A reconnection can be requested.",
        ),
    },
    Action.ZONE_OUTAGE: {
        "": t(
            "Hay una falla general en la zona; no hace falta abrir un ticket.",
            "There is a general outage in the area; no ticket is needed.",
        ),
        "diagnosis": t(
            "Hay una falla general en la zona del cliente.",
            "There is a general outage in the customer's area.",
        ),
    },
    Action.INTERNET_PLANS_LISTED: {
        "": t("Estos son los planes de internet.", "These are the internet plans."),
        "count": t("Hay {count} planes de internet.", "There are {count} internet plans."),
    },
    Action.INTERNET_PLAN_FOUND: {
        "": t("Este es el plan de internet.", "This is the internet plan."),
        "detail": t(
            "El plan {name} cuesta {price} al mes, con {down} Mbps de bajada y {up} Mbps de "
            "subida.",
            "The {name} plan costs {price} a month, with {down} Mbps down and {up} Mbps up.",
        ),
        "no_detail": t(
            "El plan {name} no tiene precio ni velocidades registrados.",
            "The {name} plan has no price or speeds on record.",
        ),
        "basic": t(
            "El sistema del proveedor no tiene detalle de los planes PCQ; solo hay "
            "información básica.",
            "The ISP backend has no detail for PCQ plans; only basic information is available.",
        ),
    },
    Action.INTERNET_PLAN_NOT_FOUND: {
        "": t("No encontré ese plan de internet.", "I did not find that internet plan."),
        "named": t("No encontré un plan llamado '{name}'.", "I found no plan named '{name}'."),
        "none": t("No hay planes de internet", "No internet plans found"),
    },
    Action.AUDIT_LISTED: {
        "": t("Estos son los eventos de auditoría.", "These are the audit events.")
    },
}
