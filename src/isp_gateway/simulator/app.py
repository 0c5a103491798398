"""The ASGI app: a WispHub-compatible REST API over ``SimulatorState``, plus ``/_sim/`` controls.

Request order under ``/api/``: count the call → faults → trailing-slash redirect (301, before
auth, as Django's CommonMiddleware does) → route → Api-Key check (403) → handler.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from isp_gateway.simulator.config import SimulatorConfig
from isp_gateway.simulator.dataset import (
    INVOICE_STATES,
    Row,
    add_answer_cases,
    build_dataset,
    load_dataset,
)
from isp_gateway.simulator.money import Receipt
from isp_gateway.simulator.state import SimulatorState

Handler = Callable[[SimulatorState, Request, str], Awaitable[Response]]

NOT_FOUND = {"detail": "No encontrado."}
_NOT_FOUND_HTML = (
    b'<!doctype html>\n<html lang="en"><head><title>Not Found</title></head><body><h1>Not Found'
    b"</h1><p>The requested resource was not found on this server.</p></body></html>\n"
)
_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return Response(content, status, headers=headers, media_type="application/json")


class BadBody(Exception):
    """A request body the upstream's parsers refuse."""

    def __init__(self, response: Response) -> None:
        super().__init__("bad body")
        self.response = response


async def _read_body(request: Request) -> dict[str, Any]:
    """JSON, multipart or urlencoded body as a flat dict (last value wins, like QueryDict)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
        async with request.form() as form:
            return {key: value for key, value in form.multi_items() if isinstance(value, str)}
    raw = await request.body()
    if not raw.strip():
        return {}
    if content_type not in ("application/json", ""):
        raise BadBody(
            _json({"detail": f'Tipo de medio "{content_type}" no soportado en la solicitud.'}, 415)
        )
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BadBody(_json({"detail": f"JSON parse error - {exc}"}, 400)) from exc
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise BadBody(
            _json(
                {
                    "non_field_errors": [
                        f"Datos inválidos. Se esperaba un diccionario, pero se obtuvo {kind}."
                    ]
                },
                400,
            )
        )
    return data


def _page_params(request: Request, sim: SimulatorState) -> tuple[int, int]:
    """DRF LimitOffsetPagination: bad or missing limit → default; limit capped; bad offset → 0."""
    config = sim.config
    limit = config.default_page_size
    raw_limit = request.query_params.get("limit", "")
    if raw_limit.isdigit() and int(raw_limit) > 0:
        limit = min(int(raw_limit), config.max_page_size)
    raw_offset = request.query_params.get("offset", "")
    offset = int(raw_offset) if raw_offset.isdigit() else 0
    return limit, offset


def _page_url(request: Request, changes: dict[str, int | None]) -> str:
    """An absolute page link that, like the upstream behind a TLS proxy, always says http://."""
    params = dict(request.query_params.multi_items())
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = str(value)
    host = request.headers.get("host") or f"{request.url.hostname}:{request.url.port}"
    query = urlencode(sorted(params.items()))
    return f"http://{host}{request.url.path}" + (f"?{query}" if query else "")


def _page_links(
    request: Request, count: int, limit: int, offset: int
) -> tuple[str | None, str | None]:
    next_url = None
    if offset + limit < count:
        next_url = _page_url(request, {"limit": limit, "offset": offset + limit})
    previous = None
    if offset > 0:
        back = offset - limit
        previous = _page_url(request, {"limit": limit, "offset": back if back > 0 else None})
    return next_url, previous


def _paginated(
    request: Request,
    sim: SimulatorState,
    rows: list[Any],
    render: Callable[[Any], Any] | None = None,
) -> Response:
    """One page of `rows`; `render` (when given) turns each row of the page into its
    served shape, so a long list is not rendered whole for every page."""
    limit, offset = _page_params(request, sim)
    next_url, previous = _page_links(request, len(rows), limit, offset)
    page = rows[offset : offset + limit]
    return _json(
        {
            "count": len(rows),
            "next": next_url,
            "previous": previous,
            "results": page if render is None else [render(row) for row in page],
        }
    )


# -- handlers ----------------------------------------------------------------------------


async def list_clients(sim: SimulatorState, request: Request, _: str) -> Response:
    positions = sim.filter_clients(request.query_params)
    limit, offset = _page_params(request, sim)
    count = len(positions)
    # The heavy path (the gateway paging through every client): rows are pre-encoded and
    # only joined here, so a 500-row page costs a slice and a join.
    blobs = sim.encoded_clients(positions[offset : offset + limit])
    next_url, previous = _page_links(request, count, limit, offset)
    head = b'{"count":%d,"next":%s,"previous":%s,"results":[' % (
        count,
        json.dumps(next_url).encode(),
        json.dumps(previous).encode(),
    )
    return Response(head + b",".join(blobs) + b"]}", media_type="application/json")


def _found(row: Row | None) -> Response:
    return _json(row) if row is not None else _json(NOT_FOUND, 404)


async def _created(
    request: Request,
    create: Callable[[dict[str, Any]], tuple[Row | None, dict[str, list[str]]]],
    render: Callable[[Row], Row] | None = None,
) -> Response:
    """A create from a JSON body: 201 with the row (as `render` shows it), or 400 with the
    field errors."""
    try:
        data = await _read_body(request)
    except BadBody as bad:
        return bad.response
    row, errors = create(data)
    if row is None:
        return _json(errors, 400)
    return _json(row if render is None else render(row), 201)


async def get_client(sim: SimulatorState, request: Request, ident: str) -> Response:
    return _found(sim.client_detail(int(ident)))


async def _service_body(
    sim: SimulatorState, request: Request, ident: str
) -> tuple[int, dict[str, Any]] | Response:
    """A write about one service: its id and the JSON body, or the 404/400 answer."""
    service_id = int(ident)
    if sim.client_position(service_id) is None:
        return _json(NOT_FOUND, 404)
    try:
        return service_id, await _read_body(request)
    except BadBody as bad:
        return bad.response


async def update_profile(sim: SimulatorState, request: Request, ident: str) -> Response:
    read = await _service_body(sim, request, ident)
    if isinstance(read, Response):
        return read
    service_id, data = read
    errors = sim.update_profile(service_id, data)
    if errors:
        return _json(errors, 400)
    return _json({"status": "ok", "id_servicio": service_id})


async def create_ping(sim: SimulatorState, request: Request, ident: str) -> Response:
    read = await _service_body(sim, request, ident)
    if isinstance(read, Response):
        return read
    service_id, data = read
    raw = data.get("pings")
    pings = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    if isinstance(raw, str) and raw.strip().isdigit():
        pings = int(raw)
    if raw is None:
        return _json({"pings": ["Este campo es requerido."]}, 400)
    if pings is None:
        return _json({"pings": ["Se requiere un número entero válido."]}, 400)
    if not 1 <= pings <= 100:
        return _json({"pings": ["Asegúrese de que este valor esté entre 1 y 100."]}, 400)
    arp = data.get("arp_ping") in (True, "true", "True", "1", 1)
    interface = data.get("interfaz") if isinstance(data.get("interfaz"), str) else None
    task_id = sim.create_ping(service_id, pings, arp, interface)
    return _json({"task_id": task_id, "status": "PROCESS"}, 202)


async def get_task(sim: SimulatorState, request: Request, ident: str) -> Response:
    found = sim.task_status(ident)
    if found is None:
        return _json(NOT_FOUND, 404)
    status, result = found
    return _json({"task": {"status": status, "result": result}})


async def list_plans(sim: SimulatorState, request: Request, _: str) -> Response:
    return _paginated(request, sim, sim.plan_rows())


def _plan_detail(tipo: str) -> Handler:
    async def handler(sim: SimulatorState, request: Request, ident: str) -> Response:
        return _found(sim.plan_detail(tipo, int(ident)))

    return handler


async def list_tickets(sim: SimulatorState, request: Request, _: str) -> Response:
    tickets = sim.filter_tickets(request.query_params.getlist("estado"))
    limit, offset = _page_params(request, sim)
    next_url, previous = _page_links(request, len(tickets), limit, offset)
    rows = [sim.render_ticket(t) for t in tickets[offset : offset + limit]]
    return _json({"count": len(tickets), "next": next_url, "previous": previous, "results": rows})


async def get_ticket(sim: SimulatorState, request: Request, ident: str) -> Response:
    ticket = sim.get_ticket(int(ident))
    return _found(None if ticket is None else sim.render_ticket(ticket, detail=True))


async def create_ticket(sim: SimulatorState, request: Request, _: str) -> Response:
    return await _created(request, sim.create_ticket, sim.render_ticket)


async def list_invoices(sim: SimulatorState, request: Request, _: str) -> Response:
    return _paginated(request, sim, sim.filter_invoices(request.query_params), sim.render_invoice)


async def get_invoice(sim: SimulatorState, request: Request, ident: str) -> Response:
    invoice = sim.get_invoice(int(ident))
    return _found(None if invoice is None else sim.render_invoice(invoice, detail=True))


async def list_payment_methods(sim: SimulatorState, request: Request, _: str) -> Response:
    return _paginated(request, sim, sim.dataset.payment_methods)


async def create_promise(sim: SimulatorState, request: Request, _: str) -> Response:
    return await _created(request, sim.create_promise)


async def report_payment(sim: SimulatorState, request: Request, ident: str) -> Response:
    """A multipart upload (urlencoded parses too, and lacks the file); other bodies 415."""
    invoice_id = int(ident)
    if sim.get_invoice(invoice_id) is None:
        return _json(NOT_FOUND, 404)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in ("multipart/form-data", "application/x-www-form-urlencoded"):
        shown = content_type or "application/octet-stream"
        return _json({"detail": f'Tipo de medio "{shown}" no soportado en la solicitud.'}, 415)
    fields: dict[str, str] = {}
    receipt = None
    try:
        async with request.form() as form:
            for key, value in form.multi_items():
                if isinstance(value, str):
                    fields[key] = value  # the last value wins, like QueryDict
                elif key == "comprobante_pago" and receipt is None:
                    upload: UploadFile = value
                    receipt = Receipt(upload.filename, upload.content_type, await upload.read())
    except HTTPException as exc:  # a malformed multipart body
        return _json({"detail": f"Multipart form parse error - {exc.detail}"}, 400)
    except ClientDisconnect:  # the body was cut short: nothing is filed, nobody listens
        return Response(status_code=400)
    task_id, errors = sim.report_payment(invoice_id, fields, receipt)
    if task_id is None:
        return _json(errors, 400)
    return _json({"task_id": task_id})


async def list_routers(sim: SimulatorState, request: Request, _: str) -> Response:
    return _paginated(request, sim, sim.router_rows())


@dataclass(frozen=True)
class ApiRoute:
    pattern: re.Pattern[str]
    template: str
    handlers: dict[str, Handler]


def _route(template: str, handlers: dict[str, Handler], ident: str = r"\d+") -> ApiRoute:
    """The route of `template`, whose `{id}` (the handler's argument) is `ident`."""
    pattern = re.escape(template).replace(re.escape("{id}"), f"({ident})")
    return ApiRoute(re.compile(pattern), template, handlers)


API_ROUTES = (
    _route("/api/clientes/", {"GET": list_clients}),
    _route("/api/clientes/{id}/", {"GET": get_client}),
    _route("/api/clientes/{id}/perfil/", {"PATCH": update_profile, "PUT": update_profile}),
    _route("/api/clientes/{id}/ping/", {"POST": create_ping}),
    _route("/api/tasks/{id}/", {"GET": get_task}, ident="[^/]+"),
    _route("/api/plan-internet/", {"GET": list_plans}),
    _route("/api/plan-internet/pppoe/{id}/", {"GET": _plan_detail("PPPOE")}),
    _route("/api/plan-internet/queue/{id}/", {"GET": _plan_detail("SIMPLE QUEUE")}),
    _route("/api/tickets/", {"GET": list_tickets, "POST": create_ticket}),
    _route("/api/tickets/{id}/", {"GET": get_ticket}),
    _route("/api/router/", {"GET": list_routers}),
    _route("/api/facturas/", {"GET": list_invoices}),
    _route("/api/facturas/{id}/", {"GET": get_invoice}),
    _route("/api/facturas/reportar-pago/{id}/", {"POST": report_payment}),
    _route("/api/formas-de-pago/", {"GET": list_payment_methods}),
    # Create-only: GET answers 405 (promises are listed and deleted in the panel only).
    _route("/api/promesa-pago/", {"POST": create_promise}),
)


def _resolve(path: str) -> tuple[ApiRoute, str] | None:
    for route in API_ROUTES:
        match = route.pattern.fullmatch(path)
        if match:
            return route, (match.group(1) if match.groups() else "")
    return None


def _authorized(request: Request, api_key: str) -> bool:
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    return scheme == "Api-Key" and hmac.compare_digest(key.strip().encode(), api_key.encode())


async def api_endpoint(request: Request) -> Response:
    sim: SimulatorState = request.app.state.sim
    method, path = request.method, request.url.path
    resolved = _resolve(path)
    sim.calls[f"{method} {resolved[0].template if resolved else path}"] += 1
    if path.startswith("/api/"):
        fault = await sim.injector.apply(sim.faults, request)
        if fault is not None:
            return fault
    if resolved is None:
        if not path.endswith("/") and _resolve(path + "/"):
            return Response(
                status_code=301, headers={"Location": str(request.url.replace(path=path + "/"))}
            )
        return Response(_NOT_FOUND_HTML, 404, media_type="text/html")
    if not _authorized(request, sim.config.api_key):
        return _json({"detail": "Usted no tiene permiso para realizar esta acción."}, 403)
    route, ident = resolved
    handler = route.handlers.get(method)
    if handler is None:
        return _json({"detail": f'Método "{method}" no permitido.'}, 405)
    response = await handler(sim, request, ident)
    return sim.injector.after(sim.faults, request, response)


# -- control endpoints --------------------------------------------------------------------


async def _control_body(request: Request) -> dict[str, Any]:
    try:
        data = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise BadBody(_json({"detail": f"invalid JSON: {exc}"}, 400)) from exc
    if not isinstance(data, dict):
        raise BadBody(_json({"detail": "expected a JSON object"}, 400))
    return data


async def sim_stats(request: Request) -> Response:
    return _json(request.app.state.sim.stats())


async def sim_reset_stats(request: Request) -> Response:
    request.app.state.sim.reset_stats()
    return _json({"ok": True})


async def sim_faults(request: Request) -> Response:
    sim: SimulatorState = request.app.state.sim
    if request.method == "PUT":
        try:
            data = await _control_body(request)
            sim.faults.update(data)
        except BadBody as bad:
            return bad.response
        except (TypeError, ValueError) as exc:
            return _json({"detail": str(exc)}, 400)
        # A new limit starts with a clean window, so tests see exactly N admitted calls.
        if "rate_limit_per_minute" in data or data.get("reset"):
            sim.injector.reset_rate_window()
    return _json(sim.faults.as_dict())


async def sim_variants(request: Request) -> Response:
    sim: SimulatorState = request.app.state.sim
    if request.method == "PUT":
        try:
            sim.variants.update(await _control_body(request))
        except BadBody as bad:
            return bad.response
        except ValueError as exc:
            return _json({"detail": str(exc)}, 400)
    return _json(sim.variants.as_dict())


async def sim_ping_outcome(request: Request) -> Response:
    """Body: ``{"service_id": 101 | null, "kind": "none" | null, "duration": 0.5}``."""
    sim: SimulatorState = request.app.state.sim
    try:
        data = await _control_body(request)
        service_id = data.get("service_id")
        if service_id is not None and (
            isinstance(service_id, bool) or not isinstance(service_id, int)
        ):
            raise ValueError("service_id must be an integer or null")
        if "kind" in data:
            sim.set_ping_outcome(service_id, data["kind"])
        if "duration" in data:
            duration = data["duration"]
            if isinstance(duration, bool) or not isinstance(duration, int | float) or duration < 0:
                raise ValueError("duration must be a number of seconds >= 0")
            sim.ping_duration = float(duration)
    except BadBody as bad:
        return bad.response
    except ValueError as exc:
        return _json({"detail": str(exc)}, 400)
    return _json(
        {
            "default": sim.ping_outcome_default,
            "overrides": {str(k): v for k, v in sim.ping_outcomes.items()},
            "duration": sim.ping_duration,
        }
    )


async def sim_routers(request: Request) -> Response:
    """Body (any part): ``{"router_id": 3, "outage": true, "description": "..."}``,
    ``{"client_router": "object" | "absent"}``, ``{"ticket_technician": "name" | "email"}``,
    ``{"reset": true}`` (no outage, router on client rows, technicians named)."""
    sim: SimulatorState = request.app.state.sim
    if request.method == "PUT":
        try:
            data = await _control_body(request)
            if data.get("reset"):
                sim.outages.clear()
                sim.set_client_router("object")
                sim.set_ticket_technician("name")
            if "router_id" in data:
                router_id = data["router_id"]
                if isinstance(router_id, bool) or not isinstance(router_id, int):
                    raise ValueError("router_id must be an integer")
                description = data.get("description") or ""
                if not isinstance(description, str):
                    raise ValueError("description must be a string")
                sim.set_outage(router_id, bool(data.get("outage", True)), description)
            if "client_router" in data:
                sim.set_client_router(data["client_router"])
            if "ticket_technician" in data:
                sim.set_ticket_technician(data["ticket_technician"])
        except BadBody as bad:
            return bad.response
        except ValueError as exc:
            return _json({"detail": str(exc)}, 400)
    return _json(sim.routers_control())


def _invoice_change(sim: SimulatorState, data: dict[str, Any]) -> tuple[int, int] | None:
    """The (invoice id, estado) a payments control body asks for; ValueError when bad."""
    if "invoice_id" not in data and "estado" not in data:
        return None
    invoice_id, estado = data.get("invoice_id"), data.get("estado")
    if isinstance(invoice_id, bool) or not isinstance(invoice_id, int):
        raise ValueError("invoice_id must be an integer")
    if sim.get_invoice(invoice_id) is None:
        raise ValueError(f"unknown invoice {invoice_id}")
    if isinstance(estado, bool) or not isinstance(estado, int) or estado not in INVOICE_STATES:
        raise ValueError(f"estado must be one of {sorted(INVOICE_STATES)}")
    return invoice_id, estado


async def sim_payments(request: Request) -> Response:
    """Body (any part): ``{"invoice_id": 5001, "estado": 2}`` sets an invoice's state as
    staff would (2 registers its payment: its promises disappear; 1 rejects a report),
    ``{"reset": true}`` forgets the promises and reports received. The answer: the
    promises held, the count received, the reports (each receipt's size, not its bytes)."""
    sim: SimulatorState = request.app.state.sim
    if request.method == "PUT":
        try:
            data = await _control_body(request)
            change = _invoice_change(sim, data)
            if data.get("reset"):
                sim.reset_payments()
            if change is not None:
                sim.set_invoice_state(*change)
        except BadBody as bad:
            return bad.response
        except ValueError as exc:
            return _json({"detail": str(exc)}, 400)
    return _json(sim.payments_control())


def create_simulator_app(config: SimulatorConfig) -> Starlette:
    """Build a simulator app: its dataset, state (``app.state.sim``) and routes."""
    if config.data_file is not None:
        dataset = load_dataset(config.data_file)
    else:
        dataset = build_dataset(config.clients, config.seed, tickets=config.tickets)
        if config.answer_cases:
            add_answer_cases(dataset)
    app = Starlette(
        routes=[
            Route("/_sim/stats", sim_stats, methods=["GET"]),
            Route("/_sim/reset-stats", sim_reset_stats, methods=["POST"]),
            Route("/_sim/faults", sim_faults, methods=["GET", "PUT"]),
            Route("/_sim/variants", sim_variants, methods=["GET", "PUT"]),
            Route("/_sim/ping-outcome", sim_ping_outcome, methods=["GET", "PUT"]),
            Route("/_sim/routers", sim_routers, methods=["GET", "PUT"]),
            Route("/_sim/payments", sim_payments, methods=["GET", "PUT"]),
            Route("/{path:path}", api_endpoint, methods=_ALL_METHODS),
        ]
    )
    app.state.sim = SimulatorState(config, dataset)
    return app
