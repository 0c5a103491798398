"""The simulator's data, as the tests write it: a client as the upstream lists it, and a
data file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def client_row(
    service_id: int,
    estado: str,
    zone_id: int,
    router: dict[str, Any],
    technician: dict[str, Any],
    **fields: Any,
) -> dict[str, Any]:
    """A client as the upstream lists it, its user, name, document and phone made from its
    service id, in `zone_id` on `router`, nothing owed; `fields` add or replace."""
    return {
        "id_servicio": service_id,
        "usuario": f"cliente{service_id}@isp",
        "nombre": f"CLIENTE {service_id}",
        "cedula": str(10_000_000 + service_id),
        "telefono": f"300{service_id:07d}",
        "direccion": "B/ CENTRO",
        "estado": estado,
        "estado_facturas": "Pagadas",
        "saldo": "0.00",
        "zona": {"id": zone_id, "nombre": f"Zona {zone_id}"},
        "router": dict(router),
        "tecnico": technician,
        **fields,
    }


def write_dataset(
    path: Path,
    clients: Any,
    plans: Any,
    invoices: Any,
    payment_methods: Any,
    **sections: Any,
) -> Path:
    """A simulator's data file at `path` with these clients, plans, invoices and payment
    methods (and `sections`, e.g. tickets)."""
    document = {"clients": clients, "plans": plans, "invoices": invoices}
    return data_file_of(path, {**document, "payment_methods": payment_methods, **sections})


def data_file_of(path: Path, dataset: Any) -> Path:
    """`dataset` written at `path` as a simulator's data file (JSON, UTF-8)."""
    path.write_text(json.dumps(dataset, ensure_ascii=False), "utf-8")
    return path
