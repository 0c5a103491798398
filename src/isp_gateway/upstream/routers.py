"""WispHub routers: the router catalogue with its general-outage flags, and one client's router.

Facts (UPSTREAM.md "Zones, routers, outages"): `GET api/router/` pages router rows with `id`,
`nombre`, `falla_general` (a boolean; some accounts send "true"/"1") and
`falla_general_descripcion`. Router ids are their own catalogue: never a zone id. Client rows
carry `router` as `{"id", "nombre"}` on some accounts and not at all on others; the one-client
endpoint `GET api/clientes/{id}/` (network-centric shape) names the router on those.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from isp_gateway.kit.errors import UpstreamRejected, UpstreamUnavailable
from isp_gateway.upstream.gateway import UpstreamGateway
from isp_gateway.upstream.records import as_int

ROUTERS_PATH = "api/router/"

_TRUE = frozenset({"true", "1", "si", "sí", "yes"})


class Router(BaseModel):
    router_id: int
    name: str | None = None
    outage: bool = False
    outage_description: str | None = None


def flag(value: Any) -> bool:
    """`falla_general` as sent: a boolean, a number or a text ("true", "1", "Si")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str):
        return value.strip().casefold() in _TRUE
    return False


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def to_router(row: dict[str, Any]) -> Router | None:
    router_id = as_int(row.get("id", row.get("id_router")))
    if router_id is None:
        return None
    return Router(
        router_id=router_id,
        name=_text(row.get("nombre")),
        outage=flag(row.get("falla_general")),
        outage_description=_text(row.get("falla_general_descripcion")),
    )


async def fetch_routers(gateway: UpstreamGateway, *, background: bool) -> list[Router]:
    """Every router of the catalogue, all pages (the router passwords in the rows are
    dropped here: only the fields above leave this module)."""
    rows = await gateway.get_all_pages(ROUTERS_PATH, background=background)
    return [r for r in (to_router(row) for row in rows) if r is not None]


async def fetch_client_router(gateway: UpstreamGateway, service_id: int) -> int | None:
    """The router id of one service from `GET api/clientes/{id}/`; None when the upstream
    names none, or does not know the service there (its 404: the list knew the client, this
    endpoint does not, so no router). Raises the gateway's other errors."""
    try:
        body = await gateway.get_json(f"api/clientes/{service_id}/")
    except UpstreamRejected as exc:
        if exc.upstream_status != 404:
            raise
        return None
    if not isinstance(body, dict):
        raise UpstreamUnavailable()
    router = body.get("router")
    if isinstance(router, dict):
        return as_int(router.get("id"))
    return as_int(router)
