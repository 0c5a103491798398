"""upstream/tickets.py is the seam: a 4xx to a ticket request is a `TicketRejected` with its
field errors in our words and whether they are the request's own (a 400 naming them), so the
ticket service reads no upstream status. Against a scripted backend over loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from isp_gateway.kit.errors import UpstreamRejected, UpstreamUnauthorized
from isp_gateway.store import MemoryStore
from isp_gateway.upstream import tickets as upstream
from isp_gateway.upstream.budget import RateBudget
from isp_gateway.upstream.gateway import UpstreamGateway, build_http_client
from tests.conftest import gateway_settings
from tests.support import run_server

pytestmark = pytest.mark.anyio

NEW = upstream.NewTicket(
    service_id=101,
    subject="No Tiene Internet",
    description="Sin servicio",
    technician_id=999,
    state=1,
    priority=3,
    start=datetime(2026, 2, 2, 9, 0),
    end=datetime(2026, 2, 5, 9, 0),
    department="Soporte Técnico",
)


class Script:
    """The next answer of POST/GET api/tickets/ (status, JSON body)."""

    def __init__(self) -> None:
        self.answer: tuple[int, Any] = (201, {})

    def app(self) -> Starlette:
        async def tickets(request: Request) -> Response:
            status, body = self.answer
            return JSONResponse(body, status_code=status)

        return Starlette(routes=[Route("/api/tickets/", tickets, methods=["GET", "POST"])])


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def backend(script: Script) -> Iterator[str]:
    with run_server(script.app()) as url:
        yield url


@pytest.fixture
async def gateway(backend: str, password_hash: str) -> AsyncIterator[UpstreamGateway]:
    settings = gateway_settings(backend, password_hash)
    http = build_http_client(settings)
    budget = RateBudget(MemoryStore(), 1000, 10000)
    yield UpstreamGateway(settings, http, budget)
    await http.aclose()


async def test_a_400_naming_fields_is_the_requests_fault(
    script: Script, gateway: UpstreamGateway
) -> None:
    script.answer = (400, {"tecnico": ["Clave primaria 999 inválida."], "otro": "no"})
    with pytest.raises(upstream.TicketRejected) as caught:
        await upstream.create(gateway, NEW)
    rejected = caught.value
    assert isinstance(rejected, UpstreamRejected)  # every UpstreamError handler still applies
    assert rejected.fields == [("technician_id", "Clave primaria 999 inválida."), ("request", "no")]
    assert rejected.of_request
    assert rejected.answer == "(400)"


@pytest.mark.parametrize(
    "answer",
    [
        (400, {}),  # a 400 that names nothing: the backend's failure, not the caller's
        (400, ["not", "an", "object"]),
        (422, {"tecnico": ["inválido"]}),  # not a 400: never the caller's field to fix
        (404, {"detail": "No encontrado."}),
    ],
)
async def test_other_refusals_are_not_the_requests_fault(
    script: Script, gateway: UpstreamGateway, answer: tuple[int, Any]
) -> None:
    script.answer = answer
    with pytest.raises(upstream.TicketRejected) as caught:
        await upstream.create(gateway, NEW)
    assert not caught.value.of_request
    assert caught.value.answer == f"({answer[0]})"


async def test_the_list_is_typed_too_and_credentials_stay_unauthorized(
    script: Script, gateway: UpstreamGateway
) -> None:
    script.answer = (400, {"estado": ["Elija una opción válida."]})
    with pytest.raises(upstream.TicketRejected) as caught:
        await upstream.list_in_states(gateway, [1])
    assert caught.value.fields == [("status", "Elija una opción válida.")]
    script.answer = (403, {"detail": "Token inválido."})
    with pytest.raises(UpstreamUnauthorized):
        await upstream.create(gateway, NEW)
